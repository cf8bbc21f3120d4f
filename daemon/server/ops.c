/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <string.h>

#include "manager.h"
#include "ops.h"
#include "request-fields.h"
#include "sandbox.h"

#define ENVELOPE REQUEST_ENVELOPE

static const FieldSpec no_fields[] = { ENVELOPE, {} };
static const FieldSpec list_fields[] = { ENVELOPE, { "usage", FIELD_BOOL }, {} };
static const FieldSpec sandbox_fields[] = { ENVELOPE, { "sandbox", FIELD_STRING, true }, {} };
static const FieldSpec create_fields[] = {
        ENVELOPE,
        { "name", FIELD_STRING },
        { "limits", FIELD_OBJECT },
        { "network", FIELD_STRING_OR_OBJECT },
        { "env", FIELD_OBJECT },
        { "best_effort", FIELD_BOOL },
        { "ttl", FIELD_DURATION },
        { "idle", FIELD_DURATION },
        { "user", FIELD_STRING },
        { "from_snapshot", FIELD_STRING },
        { "mounts", FIELD_ARRAY },
        { "workspace", FIELD_OBJECT },
        { "image", FIELD_STRING },
        { "root", FIELD_STRING_OR_OBJECT },
        { "hostname", FIELD_STRING },
        { "sysctls", FIELD_OBJECT },
        { "masked_paths", FIELD_ARRAY },
        { "readonly_paths", FIELD_ARRAY },
        { "ephemeral", FIELD_BOOL },
        { "with_connection", FIELD_BOOL },
        {},
};
static const FieldSpec inspect_fields[] = { ENVELOPE, { "sandbox", FIELD_STRING, true }, { "pids", FIELD_BOOL }, {} };
static const FieldSpec sandbox_signal_fields[] = {
        ENVELOPE, { "sandbox", FIELD_STRING, true }, { "signal", FIELD_ID, true }, {},
};
static const FieldSpec sandbox_update_fields[] = {
        ENVELOPE, { "sandbox", FIELD_STRING, true }, { "limits", FIELD_OBJECT }, { "network", FIELD_STRING_OR_OBJECT },
        { "best_effort", FIELD_BOOL }, {},
};
static const FieldSpec sweep_fields[] = { ENVELOPE, { "dry_run", FIELD_BOOL }, { "sandbox", FIELD_STRING }, {} };
static const FieldSpec run_attach_fields[] = {
        ENVELOPE,
        { "run_id", FIELD_STRING, true },
        { "from", FIELD_OBJECT },
        {},
};
static const FieldSpec kill_fields[] = {
        ENVELOPE,
        { "run_id", FIELD_STRING, true },
        { "signal", FIELD_ID },
        {},
};

static const FieldSpec session_fields[] = { ENVELOPE, { "session", FIELD_STRING, true }, {} };
static const FieldSpec pty_open_fields[] = {
        ENVELOPE,
        { "sandbox", FIELD_STRING, true },
        { "argv", FIELD_ARRAY },
        { "command", FIELD_STRING },
        { "env", FIELD_OBJECT },
        { "cwd", FIELD_STRING },
        { "pty", FIELD_BOOL },
        { "rows", FIELD_INT },
        { "cols", FIELD_INT },
        { "term", FIELD_STRING },
        {},
};
static const FieldSpec pty_write_fields[] = {
        ENVELOPE,
        { "session", FIELD_STRING, true },
        { "data", FIELD_STRING },
        { "encoding", FIELD_STRING },
        { "eof", FIELD_BOOL },
        {},
};
static const FieldSpec pty_resize_fields[] = {
        ENVELOPE,
        { "session", FIELD_STRING, true },
        { "rows", FIELD_INT, true },
        { "cols", FIELD_INT, true },
        {},
};
static const FieldSpec pty_signal_fields[] = {
        ENVELOPE,
        { "session", FIELD_STRING, true },
        { "signal", FIELD_ID, true },
        {},
};
static const FieldSpec pty_attach_fields[] = {
        ENVELOPE,
        { "session", FIELD_STRING, true },
        { "from_seq", FIELD_INT },
        {},
};
static const FieldSpec snapshot_fields[] = {
        ENVELOPE,
        { "sandbox", FIELD_STRING, true },
        { "label", FIELD_STRING },
        {},
};
static const FieldSpec snapshot_one_fields[] = {
        ENVELOPE,
        { "sandbox", FIELD_STRING, true },
        { "snapshot", FIELD_STRING, true },
        {},
};

/* The file operations (op-file.c). */
#define FILE_FIELDS { "sandbox", FIELD_STRING, true }, { "path", FIELD_STRING, true }, { "path_encoding", FIELD_STRING }, \
                    { "user", FIELD_STRING }
static const FieldSpec file_stat_fields[] = { ENVELOPE, FILE_FIELDS, { "follow", FIELD_BOOL }, {} };
static const FieldSpec file_list_fields[] = {
        ENVELOPE, FILE_FIELDS, { "recursive", FIELD_BOOL }, { "max_entries", FIELD_INT }, { "max_depth", FIELD_INT }, {},
};
static const FieldSpec file_mkdir_fields[] = { ENVELOPE, FILE_FIELDS, { "mode", FIELD_ID }, { "parents", FIELD_BOOL }, {} };
static const FieldSpec file_read_fields[] = {
        ENVELOPE, FILE_FIELDS, { "offset", FIELD_SIZE }, { "length", FIELD_SIZE }, { "nofollow", FIELD_BOOL },
        { "fd", FIELD_INT }, {},
};
static const FieldSpec file_write_fields[] = {
        ENVELOPE, FILE_FIELDS, { "mode", FIELD_ID }, { "parents", FIELD_BOOL }, { "exclusive", FIELD_BOOL },
        { "atomic", FIELD_BOOL }, { "offset", FIELD_SIZE }, { "size", FIELD_SIZE }, { "data", FIELD_STRING },
        { "encoding", FIELD_STRING }, { "fd", FIELD_INT }, { "sync", FIELD_BOOL }, {},
};
static const FieldSpec file_put_fields[] = {
        ENVELOPE, FILE_FIELDS, { "parents", FIELD_BOOL }, { "overwrite", FIELD_BOOL }, { "data", FIELD_STRING },
        { "encoding", FIELD_STRING }, { "fd", FIELD_INT }, {},
};
static const FieldSpec file_get_fields[] = { ENVELOPE, FILE_FIELDS, { "follow", FIELD_BOOL }, { "fd", FIELD_INT }, {} };
static const FieldSpec file_remove_fields[] = {
        ENVELOPE, FILE_FIELDS, { "recursive", FIELD_BOOL }, { "missing_ok", FIELD_BOOL }, {},
};

static const FieldSpec port_fields[] = {
        ENVELOPE, { "sandbox", FIELD_STRING, true }, { "port", FIELD_INT, true }, { "listen", FIELD_STRING }, {},
};
static const FieldSpec port_close_fields[] = { ENVELOPE, { "sandbox", FIELD_STRING, true }, { "port", FIELD_INT, true }, {} };

static const FieldSpec image_import_fields[] = {
        ENVELOPE, { "name", FIELD_STRING, true }, { "source", FIELD_STRING, true }, { "tag", FIELD_STRING },
        { "owner_only", FIELD_BOOL }, {},
};
static const FieldSpec image_fields[] = { ENVELOPE, { "image", FIELD_STRING, true }, {} };

static const Op ops[] = {
        { "hello", op_hello, no_fields },
        { "health", op_health, no_fields },
        { "create", op_create, create_fields, .takes_fds = true }, /* network.netns_fd */
        { "list", op_list, list_fields },
        { "inspect", op_inspect, inspect_fields },
        { "destroy", op_destroy, sandbox_fields },
        { "sandbox.signal", op_sandbox_signal, sandbox_signal_fields },
        { "sandbox.freeze", op_sandbox_freeze, sandbox_fields },
        { "sandbox.thaw", op_sandbox_thaw, sandbox_fields },
        { "sandbox.update", op_sandbox_update, sandbox_update_fields },
        { "run", op_run, request_run_fields, .takes_fds = true },
        { "kill", op_kill, kill_fields },
        { "run.attach", op_run_attach, run_attach_fields },
        { "sweep", op_sweep, sweep_fields },
        { "pty.open", op_pty_open, pty_open_fields },
        { "pty.write", op_pty_write, pty_write_fields },
        { "pty.resize", op_pty_resize, pty_resize_fields },
        { "pty.signal", op_pty_signal, pty_signal_fields },
        { "pty.close", op_pty_close, session_fields },
        { "pty.attach", op_pty_attach, pty_attach_fields },
        { "pty.detach", op_pty_detach, session_fields },
        { "snapshot", op_snapshot, snapshot_fields },
        { "snapshot.list", op_snapshot_list, sandbox_fields },
        { "snapshot.restore", op_snapshot_restore, snapshot_one_fields },
        { "snapshot.delete", op_snapshot_delete, snapshot_one_fields },
        { "file.stat", op_file_stat, file_stat_fields },
        { "file.list", op_file_list, file_list_fields },
        { "file.mkdir", op_file_mkdir, file_mkdir_fields },
        { "file.remove", op_file_remove, file_remove_fields },
        { "file.read", op_file_read, file_read_fields, .takes_fds = true },
        { "file.write", op_file_write, file_write_fields, .takes_fds = true },
        { "file.put", op_file_put, file_put_fields, .takes_fds = true },
        { "file.get", op_file_get, file_get_fields, .takes_fds = true },
        /* Its fields and fds are checked against its transfer, which they end when wrong. */
        { "file.chunk", op_file_chunk, NULL, .takes_fds = true },
        { "port.open", op_port_open, port_fields },
        { "port.close", op_port_close, port_close_fields },
        { "image.import", op_image_import, image_import_fields },
        { "image.list", op_image_list, no_fields },
        { "image.inspect", op_image_inspect, image_fields },
        { "image.remove", op_image_remove, image_fields },
};

void ops_dispatch(Reply *reply, const char *name, json_object *req, int *fds, size_t n_fds, void *userdata) {
        const ReplyPeer *peer = reply_peer(reply);
        Manager *m = userdata;
        Request rq = { .manager = m, .ctx = m->ctx, .conns = &m->conns, .reply = reply, .peer = peer->cred, .admin = peer->admin,
                       .fds = fds, .n_fds = n_fds, .who = peer };
        json_object *id = json_object_object_get(req, "id");
        ProtoError err = {};

        for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
                if (strcmp(ops[i].name, name) != 0)
                        continue;
                if (n_fds > 0 && !ops[i].takes_fds)
                        proto_error_set(&err, SBX_E_INVALID_REQUEST, "fds",
                                        "%zu file descriptors came with this request, which takes none", n_fds);
                if (err.code || (ops[i].fields && proto_check_fields(req, ops[i].fields, NULL, &err) < 0) ||
                    ops[i].handler(&rq, id, req, &err) < 0)
                        reply_error(reply, &err);
                return;
        }
        proto_error_set(&err, SBX_E_UNKNOWN_OP, "op", "unknown operation '%.64s'", name);
        reply_error(reply, &err);
}

/* "UID/NAME": the uid in decimal, as the daemon has no business asking NSS (which may block
 * on a directory server) for a user name in its event loop; sandboxctl turns "user/name" into
 * it. *ret_name points into key. */
static bool parse_owner_name(const char *key, uid_t *ret_owner, const char **ret_name) {
        const char *slash = strchr(key, '/');
        uint64_t v = 0;

        if (!slash || slash == key || slash - key > 10 || (key[0] == '0' && slash - key > 1))
                return false;
        for (const char *p = key; p < slash; p++) {
                if (*p < '0' || *p > '9')
                        return false;
                v = v * 10 + (uint64_t) (*p - '0');
        }
        if (v >= (uid_t) -1)
                return false;
        *ret_owner = (uid_t) v;
        *ret_name = slash + 1;
        return true;
}

/* The sandbox key names for this caller: an id; a name among the caller's own; "UID/NAME"
 * among that uid's, which only root and admins may give for another uid. NULL when there is
 * none that the caller may see, whether or not the sandbox exists (no oracle). */
void ops_caller(const Request *c, SandboxCaller *ret) {
        *ret = (SandboxCaller) { .uid = c->peer.uid, .gid = c->peer.gid };
        /* Unknown groups: none, which can only narrow what the client reaches. */
        for (int i = 0; i < c->who->n_groups && i < SANDBOX_GROUPS_MAX; i++)
                ret->groups[ret->n_groups++] = c->who->groups[i];
}

Sandbox *ops_resolve_sandbox(Request *c, const char *key) {
        const char *name = key;
        uid_t owner = c->peer.uid;
        Sandbox *s;

        if (strncmp(key, "sbx-", 4) == 0)
                s = registry_find(c->ctx->registry, key);
        else if (strchr(key, '/') && !parse_owner_name(key, &owner, &name))
                s = NULL;
        else
                s = registry_find_named(c->ctx->registry, owner, name);
        return s && sandbox_visible_to(s, reply_peer(c->reply)) ? s : NULL;
}

int ops_lookup_sandbox(Request *c, json_object *req, Sandbox **ret, ProtoError *err) {
        const char *key = NULL;
        Sandbox *s;
        int r = proto_get_string(req, "sandbox", 128, &key, err);

        if (r < 0)
                return r;
        if (!key || !*key)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "sandbox", "missing field 'sandbox'");
        s = ops_resolve_sandbox(c, key);
        if (!s)
                return ops_sandbox_not_found(key, err);
        *ret = s;
        return 0;
}

/* The one wording for a sandbox the caller may not see, whether it exists, existed or never did. */
int ops_sandbox_not_found(const char *key, ProtoError *err) {
        return proto_error_set(err, SBX_E_NOT_FOUND, "sandbox", "no sandbox '%.64s'", key);
}
