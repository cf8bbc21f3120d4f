/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The operations of the protocol, dispatched from one table (ops.c); one handler file per
 * group: op-hello.c, op-sandbox.c, op-run.c. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "proto.h"
#include "reply.h"

typedef struct ConnectionSet ConnectionSet;
typedef struct Context Context;
typedef struct Manager Manager;
typedef struct Sandbox Sandbox;

/* One request as its handler sees it: who asked (peer, admin), the daemon, and the reply that
 * answers it (a handler keeps its own reference, reply_ref(), to answer later). */
typedef struct Request {
        Manager *manager;
        Context *ctx;      /* manager->ctx */
        const ConnectionSet *conns; /* manager->conns: the uid's share of them (connection_uid_usage) */
        Reply *reply;
        struct ucred peer;
        bool admin;        /* root, or a member of the configured admin group */
        int *fds;          /* the fds that came with the line (n_fds); a handler takes one by setting it to -1 */
        size_t n_fds;
        const ReplyPeer *who; /* the same, with the peer's groups */
} Request;

/* The client's credentials for what is opened with its rights (create's "mounts"). */
typedef struct SandboxCaller SandboxCaller;
void ops_caller(const Request *c, SandboxCaller *ret);

/* A handler either answers (now or later, through c->reply) and returns >= 0, or returns < 0
 * with err set and the dispatcher answers with it. c keeps the name the Connection had here, so
 * that c->manager, c->peer and c->admin read as before. */
typedef int (*OpHandler)(Request *c, json_object *id, json_object *req, ProtoError *err);

typedef struct Op {
        const char *name;
        OpHandler handler;
        const FieldSpec *fields; /* besides "id" and "op" */
        bool takes_fds;          /* a field names fds of the line ("fd"); else a line with fds is refused */
} Op;

/* The connections' dispatch hook (ConnectionHooks.dispatch); userdata is the Manager. */
void ops_dispatch(Reply *reply, const char *op, json_object *req, int *fds, size_t n_fds, void *userdata);

int op_hello(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_health(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_create(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_list(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_inspect(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_destroy(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_sandbox_signal(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_sandbox_freeze(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_sandbox_thaw(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_sandbox_update(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_run(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_kill(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_run_attach(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_snapshot(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_snapshot_list(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_snapshot_restore(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_snapshot_delete(Request *c, json_object *id, json_object *req, ProtoError *err);
/* create with from_snapshot (op-snapshot.c). */
int op_create_from_snapshot(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_sweep(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_pty_open(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_pty_write(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_pty_resize(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_pty_signal(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_pty_close(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_pty_attach(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_pty_detach(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_file_stat(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_file_list(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_file_mkdir(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_file_remove(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_file_read(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_file_write(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_file_put(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_file_get(Request *c, json_object *id, json_object *req, ProtoError *err);
/* file.chunk: no request, the bytes of a file.write in flight (op-file-chunk.c); ops_route() is
 * the connections' route hook that takes the canonical ones before they are parsed. */
int op_file_chunk(Request *c, json_object *id, json_object *req, ProtoError *err);
bool ops_route(ReplySink *sink, const char *line, size_t len, void *userdata);
int op_port_open(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_port_close(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_image_import(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_image_list(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_image_inspect(Request *c, json_object *id, json_object *req, ProtoError *err);
int op_image_remove(Request *c, json_object *id, json_object *req, ProtoError *err);

/* The caller's sandbox by id, name or "UID/NAME" (ops.c); not_found for others' (no oracle). */
Sandbox *ops_resolve_sandbox(Request *c, const char *key);
int ops_lookup_sandbox(Request *c, json_object *req, Sandbox **ret, ProtoError *err);
int ops_sandbox_not_found(const char *key, ProtoError *err);
