/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The operations of the protocol, dispatched from one table (ops.c); one handler file per
 * group: op-hello.c, op-sandbox.c, op-run.c. */
#pragma once

#include <json-c/json.h>

#include "connection.h"
#include "proto.h"

typedef struct Sandbox Sandbox;

/* A handler either answers (now or later) and returns >= 0, or returns < 0 with err set and the
 * dispatcher answers with it. */
typedef int (*OpHandler)(Connection *c, json_object *id, json_object *req, ProtoError *err);

typedef struct Op {
        const char *name;
        OpHandler handler;
        const FieldSpec *fields; /* besides "id" and "op" */
} Op;

void ops_dispatch(Connection *c, json_object *id, const char *op, json_object *req);

int op_hello(Connection *c, json_object *id, json_object *req, ProtoError *err);
int op_health(Connection *c, json_object *id, json_object *req, ProtoError *err);
int op_create(Connection *c, json_object *id, json_object *req, ProtoError *err);
int op_list(Connection *c, json_object *id, json_object *req, ProtoError *err);
int op_inspect(Connection *c, json_object *id, json_object *req, ProtoError *err);
int op_destroy(Connection *c, json_object *id, json_object *req, ProtoError *err);
int op_run(Connection *c, json_object *id, json_object *req, ProtoError *err);
int op_kill(Connection *c, json_object *id, json_object *req, ProtoError *err);
int op_snapshot(Connection *c, json_object *id, json_object *req, ProtoError *err);
int op_snapshot_list(Connection *c, json_object *id, json_object *req, ProtoError *err);
int op_snapshot_restore(Connection *c, json_object *id, json_object *req, ProtoError *err);
int op_snapshot_delete(Connection *c, json_object *id, json_object *req, ProtoError *err);
/* create with from_snapshot (op-snapshot.c). */
int op_create_from_snapshot(Connection *c, json_object *id, json_object *req, ProtoError *err);
int op_sweep(Connection *c, json_object *id, json_object *req, ProtoError *err);
int op_pty_open(Connection *c, json_object *id, json_object *req, ProtoError *err);
int op_pty_write(Connection *c, json_object *id, json_object *req, ProtoError *err);
int op_pty_resize(Connection *c, json_object *id, json_object *req, ProtoError *err);
int op_pty_signal(Connection *c, json_object *id, json_object *req, ProtoError *err);
int op_pty_close(Connection *c, json_object *id, json_object *req, ProtoError *err);
int op_pty_attach(Connection *c, json_object *id, json_object *req, ProtoError *err);
int op_pty_detach(Connection *c, json_object *id, json_object *req, ProtoError *err);

/* The caller's sandbox by id, name or "UID/NAME" (ops.c); not_found for others' (no oracle). */
Sandbox *ops_resolve_sandbox(Connection *c, const char *key);
int ops_lookup_sandbox(Connection *c, json_object *req, Sandbox **ret, ProtoError *err);
int ops_sandbox_not_found(const char *key, ProtoError *err);
