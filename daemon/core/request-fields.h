/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The field tables of the largest requests, shared by the daemon (ops.c, sandbox.c) and the
 * request fuzz target (tests/fuzz/fuzz-request.c), so that what is fuzzed is what is served. */
#pragma once

#include "proto.h"

/* Every request's envelope; "fds" is checked by the connection against the fds that came with
 * the line, and an op without a field that names one refuses any (ops.c). */
#define REQUEST_ENVELOPE { "id", FIELD_ID, true }, { "op", FIELD_STRING, true }, { "fds", FIELD_INT }

/* "run" (docs/protocol.md). */
extern const FieldSpec request_run_fields[];
/* "limits" of create and of a throwaway run; messages name them "limits.X". */
extern const FieldSpec request_limits_fields[];
extern const FieldSpec request_mount_fields[];
extern const FieldSpec request_root_fields[]; /* create's "root": {"path", "read_only"} */
extern const FieldSpec request_workspace_fields[]; /* create's "workspace": {"source"} */ /* an entry of create's and run's "mounts" */
