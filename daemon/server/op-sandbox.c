/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* create, list, inspect, destroy. */
#include <string.h>

#include "manager.h"
#include "ops.h"
#include "session.h"
#include "sandbox.h"
#include "sandbox-control.h"
#include "snapshot.h"
#include "util.h"

int op_create(Request *c, json_object *id, json_object *req, ProtoError *err) {
        SandboxCaller caller;
        Sandbox *s;
        int r;

        if (json_object_object_get_ex(req, "from_snapshot", NULL))
                return op_create_from_snapshot(c, id, req, err);
        ops_caller(c, &caller);
        r = sandbox_create_as(c->ctx, req, &caller, false, &s, err);
        if (r < 0)
                return r;
        /* Answered when the sandbox's init reports ready (or failed). */
        sandbox_add_waiter(&s->create_waiters, c->reply);
        return 0;
}

int op_list(Request *c, json_object *id, json_object *req, ProtoError *err) {
        json_object *reply = json_object_new_object(), *arr = json_object_new_array(), *v;
        /* usage reads three small cgroup files per sandbox: only for those who ask (top). */
        bool usage = json_object_object_get_ex(req, "usage", &v) && json_object_get_boolean(v);

        for (Sandbox *s = registry_first(c->ctx->registry); s; s = registry_next(&s->entry))
                if (!s->ephemeral && sandbox_visible_to(s, reply_peer(c->reply)) && s->state != SANDBOX_DESTROYING)
                        json_object_array_add(arr, sandbox_to_json(s, usage));
        json_object_object_add(reply, "sandboxes", arr);
        reply_ok(c->reply, reply);
        return 0;
}

int op_inspect(Request *c, json_object *id, json_object *req, ProtoError *err) {
        Sandbox *s;
        json_object *reply, *sj, *v;
        int r = ops_lookup_sandbox(c, req, &s, err);
        if (r < 0)
                return r;
        reply = json_object_new_object();
        sj = sandbox_to_json(s, true);
        json_object_object_add(sj, "snapshots", snapshot_list_json(s));
        json_object_object_add(sj, "sessions", session_sessions_json(s));
        if (json_object_object_get_ex(req, "pids", &v) && json_object_get_boolean(v))
                json_object_object_add(sj, "pids", sandbox_pids_json(s));
        json_object_object_add(reply, "sandbox", sj);
        reply_ok(c->reply, reply);
        return 0;
}

/* A sandbox destroyed before, by id: ok with already_gone for its owner and for admins (who see
 * every sandbox anyway); for anyone else it is an id that never existed (THREATS PRO-09). */
static bool destroyed_before(Request *c, const char *key) {
        uid_t owner;

        return registry_find_tombstone(c->ctx->registry, key, &owner) && (c->admin || owner == c->peer.uid);
}

/* Idempotent: a sandbox destroyed before answers ok with already_gone. */
int op_destroy(Request *c, json_object *id, json_object *req, ProtoError *err) {
        const char *key = NULL;
        Sandbox *s;
        json_object *reply;
        int r = ops_lookup_sandbox(c, req, &s, err);

        if (r < 0) {
                /* not_found: the field is a string (ops_lookup_sandbox checked it). */
                if (err->code != SBX_E_NOT_FOUND || proto_get_string(req, "sandbox", 128, &key, err) <= 0 ||
                    !destroyed_before(c, key))
                        return r;
                reply = json_object_new_object();
                json_object_object_add(reply, "destroyed", json_object_new_boolean(0));
                json_object_object_add(reply, "already_gone", json_object_new_boolean(1));
                reply_ok(c->reply, reply);
                return 0;
        }
        /* Its teardown is known to be stuck: said at once rather than some day. */
        if (s->teardown_stuck)
                return sandbox_teardown_error(s, err);
        sandbox_add_waiter(&s->destroy_waiters, c->reply);
        sandbox_destroy(s, "requested");
        return 0;
}

/* sandbox.signal: every process of the sandbox's runs and sessions (not its init). */
int op_sandbox_signal(Request *c, json_object *id, json_object *req, ProtoError *err) {
        json_object *reply, *v;
        unsigned n = 0;
        Sandbox *s;
        int sig, r = ops_lookup_sandbox(c, req, &s, err);

        if (r < 0)
                return r;
        v = json_object_object_get(req, "signal");
        sig = signal_from_string(json_object_get_string(v));
        if (sig <= 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "signal", "unknown signal '%.32s'", json_object_get_string(v));
        if (s->state != SANDBOX_READY)
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox", "the sandbox is not ready");
        r = sandbox_signal_all(s, sig, &n);
        if (r < 0)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "cannot signal the sandbox's processes: %s", strerror(-r));
        reply = json_object_new_object();
        json_object_object_add(reply, "signalled", json_object_new_int64(n));
        reply_ok(c->reply, reply);
        return 0;
}

static int freeze_op(Request *c, json_object *req, bool freeze, ProtoError *err) {
        Sandbox *s;
        int r = ops_lookup_sandbox(c, req, &s, err);

        return r < 0 ? r : sandbox_freeze(s, freeze, c->reply, err);
}

int op_sandbox_freeze(Request *c, json_object *id, json_object *req, ProtoError *err) {
        return freeze_op(c, req, true, err);
}

int op_sandbox_thaw(Request *c, json_object *id, json_object *req, ProtoError *err) {
        return freeze_op(c, req, false, err);
}

/* sandbox.update: new memory, pids and cpu limits; the reply is the SANDBOX. */
int op_sandbox_update(Request *c, json_object *id, json_object *req, ProtoError *err) {
        json_object *reply, *limits;
        Sandbox *s;
        bool best_effort;
        int r = ops_lookup_sandbox(c, req, &s, err);

        if (r < 0)
                return r;
        best_effort = s->best_effort;
        if ((r = proto_get_bool(req, "best_effort", &best_effort, err)) < 0)
                return r;
        limits = json_object_object_get(req, "limits");
        if ((r = sandbox_update_limits(s, limits, best_effort, err)) < 0)
                return r;
        reply = json_object_new_object();
        json_object_object_add(reply, "sandbox", sandbox_to_json(s, true));
        reply_ok(c->reply, reply);
        return 0;
}
