/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* create, list, inspect, destroy. */
#include <string.h>

#include "manager.h"
#include "ops.h"
#include "pool.h"
#include "session.h"
#include "sandbox.h"
#include "snapshot.h"

int op_create(Request *c, json_object *id, json_object *req, ProtoError *err) {
        SandboxCaller caller;
        Sandbox *s;
        int r;

        if (json_object_object_get_ex(req, "from_snapshot", NULL))
                return op_create_from_snapshot(c, id, req, err);
        ops_caller(c, &caller);
        r = pool_take_create(c->ctx, req, &caller, &s, err);
        if (r == 0)
                r = sandbox_create_as(c->ctx, req, &caller, false, &s, err);
        if (r < 0)
                return r;
        /* Answered when the sandbox's init reports ready (or failed), and a pooled one once its
         * record is written. */
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
        json_object *reply, *sj;
        int r = ops_lookup_sandbox(c, req, &s, err);
        if (r < 0)
                return r;
        reply = json_object_new_object();
        sj = sandbox_to_json(s, true);
        json_object_object_add(sj, "snapshots", snapshot_list_json(s));
        json_object_object_add(sj, "sessions", session_sessions_json(s));
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
