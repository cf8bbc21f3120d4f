/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "request-fields.h"

const FieldSpec request_run_fields[] = {
        REQUEST_ENVELOPE,
        { "sandbox", FIELD_STRING },
        { "argv", FIELD_ARRAY },
        { "command", FIELD_STRING },
        { "env", FIELD_OBJECT },
        { "cwd", FIELD_STRING },
        { "stdin", FIELD_STRING },
        { "stdin_encoding", FIELD_STRING },
        { "timeout_s", FIELD_DURATION },
        { "cpu_s", FIELD_DURATION },
        { "output_bytes", FIELD_SIZE },
        { "memory", FIELD_SIZE },
        { "pids", FIELD_INT },
        { "file_size", FIELD_SIZE },
        { "open_files", FIELD_INT },
        { "stream", FIELD_BOOL },
        { "user", FIELD_STRING_OR_OBJECT },
        /* The OCI runtime's (docs/protocol.md "run"): the client's fds, a terminal handed over,
         * the process as the bundle says. */
        { "stdio", FIELD_ARRAY },
        { "extra_fds", FIELD_ARRAY },
        { "tty", FIELD_OBJECT },
        { "no_timeout", FIELD_BOOL },
        { "umask", FIELD_INT },
        { "rlimits", FIELD_OBJECT },
        { "rlimits_lower", FIELD_BOOL },
        { "capabilities", FIELD_OBJECT },
        { "env_defaults", FIELD_BOOL },
        { "pid_namespace", FIELD_STRING },
        /* For a throwaway sandbox only. */
        { "limits", FIELD_OBJECT },
        { "network", FIELD_STRING_OR_OBJECT },
        { "best_effort", FIELD_BOOL },
        { "workspace", FIELD_STRING },
        { "mounts", FIELD_ARRAY },
        { "image", FIELD_STRING },
        {},
};

const FieldSpec request_root_fields[] = {
        { "path", FIELD_STRING, true }, { "read_only", FIELD_BOOL }, { "tree_fd", FIELD_INT }, {}
};

const FieldSpec request_workspace_fields[] = { { "source", FIELD_STRING, true }, {} };

const FieldSpec request_mount_fields[] = {
        { "source", FIELD_STRING, true }, { "target", FIELD_STRING, true }, { "read_only", FIELD_BOOL },
        { "idmap", FIELD_STRING }, {},
};

const FieldSpec request_limits_fields[] = {
        { "memory", FIELD_SIZE },       { "pids", FIELD_INT },          { "cpus", FIELD_DECIMAL },
        { "timeout_s", FIELD_DURATION }, { "output_bytes", FIELD_SIZE }, { "disk", FIELD_SIZE },
        { "files", FIELD_INT },         { "file_size", FIELD_SIZE },    { "open_files", FIELD_INT },
        {},
};
