/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* run (in a sandbox, or in a throwaway one made for it) and kill. */
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "connection.h"
#include "macro.h"
#include "ops.h"
#include "pool.h"
#include "run-result.h"
#include "run.h"
#include "sandbox.h"
#include "util.h"

/* The sandbox named, or a throwaway one made (or taken from the pool) for this run: *ret_made. */
static int run_sandbox(Request *c, json_object *req, Sandbox **ret, bool *ret_made, ProtoError *err) {
        json_object *v;
        const char *extra[] = { "limits", "network", "best_effort", "workspace", "mounts", "image" };

        *ret_made = false;
        if (!json_object_object_get_ex(req, "sandbox", &v) || json_object_is_type(v, json_type_null)) {
                SandboxCaller caller;
                int k;

                *ret_made = true;
                k = pool_take(c->ctx, req, c->peer.uid, ret, err);
                if (k != 0)
                        return k < 0 ? k : 0;
                ops_caller(c, &caller);
                return sandbox_create_as(c->ctx, req, &caller, true, ret, err);
        }
        for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++)
                if (json_object_object_get_ex(req, extra[i], &v) && !json_object_is_type(v, json_type_null))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, extra[i],
                                               "'%s' is only for a throwaway sandbox (a run without 'sandbox')", extra[i]);
        return ops_lookup_sandbox(c, req, ret, err);
}

/* A uid's runs in flight and unread replies may not hold more than max_buffered_per_uid of the
 * daemon's memory (THREATS RES-06, PRO-02): one user cannot take it all. */
static int check_buffered(Request *c, const UidUsage *u, const RunSpec *spec, ProtoError *err) {
        Context *m = c->ctx;
        uint64_t held = u->reserved + u->unread, need = run_spec_held(spec);
        char a[32], b[32], d[32];

        if (c->peer.uid == 0 || held + need <= m->config.max_buffered_per_uid)
                return 0;
        return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "output_bytes",
                               "uid %u holds %s of run output and unread replies; this run's %s more would pass "
                               "max_buffered_per_uid (%s)",
                               (unsigned) c->peer.uid, format_size(a, sizeof(a), held), format_size(b, sizeof(b), need),
                               format_size(d, sizeof(d), m->config.max_buffered_per_uid));
}

int op_run(Request *c, json_object *id, json_object *req, ProtoError *err) {
        RunSpec spec;
        Sandbox *s = NULL;
        bool made;
        Run *r;
        /* Root's runs are not counted against the per-uid caps. */
        UidUsage u = c->peer.uid != 0 ? connection_uid_usage(c->conns, c->peer.uid) : (UidUsage) {};
        int k;

        if (reply_runs(c->reply) >= c->ctx->config.max_runs_per_connection)
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, NULL, "too many runs in flight on this connection");
        if (c->peer.uid != 0 && u.runs >= c->ctx->config.max_runs_per_uid)
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, NULL,
                                       "uid %u has its maximum of %llu runs in flight (max_runs_per_uid)",
                                       (unsigned) c->peer.uid, (unsigned long long) c->ctx->config.max_runs_per_uid);
        k = run_spec_parse(req, c->ctx->config.max_stdin_bytes, &spec, err);
        if (k >= 0)
                k = run_spec_take_fds(req, c->fds, c->n_fds, &spec, err);
        if (k < 0)
                goto fail;
        k = run_sandbox(c, req, &s, &made, err);
        if (k < 0)
                goto fail;
        if (s->state == SANDBOX_DESTROYING || s->state == SANDBOX_FAILED) {
                k = proto_error_set(err, SBX_E_CONFLICT, "sandbox", "sandbox %s is %s", s->id,
                                    s->state == SANDBOX_FAILED ? "broken (its init died)" : "being destroyed");
                goto fail;
        }
        if ((k = sandbox_check_run(s, err)) < 0)
                goto fail_sandbox;
        k = run_spec_resolve(&spec, s, err);
        if (k >= 0 && (k = check_buffered(c, &u, &spec, err)) < 0)
                goto fail_sandbox;
        if (k < 0 || (k = run_new(s, c->reply, &spec, &r)) < 0) {
                if (k != -EINVAL)
                        proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
                goto fail_sandbox;
        }
        if (s->state == SANDBOX_READY)
                run_start(r);
        return 0;
fail_sandbox:
        /* Only the one made for this run: a refused run in someone's in-flight throwaway sandbox
         * (by its id) leaves it alone. */
        if (made)
                sandbox_destroy(s, "run refused");
fail:
        run_spec_done(&spec);
        return k < 0 ? k : -EINVAL;
}

int op_kill(Request *c, json_object *id, json_object *req, ProtoError *err) {
        const char *run_id = NULL;
        json_object *sig_obj;
        int sig = SIGKILL, k;
        Run *r;

        (void) proto_get_string(req, "run_id", 64, &run_id, err);
        if (json_object_object_get_ex(req, "signal", &sig_obj) && !json_object_is_type(sig_obj, json_type_null)) {
                sig = signal_from_string(json_object_get_string(sig_obj));
                if (sig < 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "signal", "unknown signal '%.32s'",
                                               json_object_get_string(sig_obj));
        }
        r = run_id ? manager_find_run(c->ctx, run_id) : NULL;
        if (!r || !sandbox_visible_to(r->sandbox, reply_peer(c->reply)))
                return proto_error_set(err, SBX_E_NOT_FOUND, "run_id", "no run '%.64s' in flight", run_id ? run_id : "");
        k = run_kill(r, sig, REASON_KILLED);
        if (k < 0)
                return proto_error_set(err, SBX_E_CONFLICT, "run_id", "cannot signal run %s: %s", r->id, strerror(-k));
        reply_ok(c->reply, NULL);
        return 0;
}

/* run.attach: a client back for a run it lost with its daemon (docs/protocol.md "Restarts"). */
static int attach_from(json_object *req, uint64_t from[2], ProtoError *err) {
        static const char *const keys[] = { "stdout", "stderr" };
        json_object *f;
        int k;

        from[0] = from[1] = 0;
        if (!json_object_object_get_ex(req, "from", &f) || json_object_is_type(f, json_type_null))
                return 0;
        json_object_object_foreach(f, key, val) {
                (void) val;
                if (strcmp(key, "stdout") != 0 && strcmp(key, "stderr") != 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "from", "'from' takes only stdout and stderr");
        }
        for (int i = 0; i < 2; i++)
                if ((k = proto_get_uint(f, keys[i], 0, INT64_MAX, &from[i], err)) < 0)
                        return k;
        return 0;
}

int op_run_attach(Request *c, json_object *id, json_object *req, ProtoError *err) {
        const char *run_id = NULL;
        uint64_t from[2];
        _cleanup_free_ char *line = NULL;
        json_object *kept;
        size_t len;
        Run *r;
        int k;

        if ((k = proto_get_string(req, "run_id", 64, &run_id, err)) < 0 || (k = attach_from(req, from, err)) < 0)
                return k;
        r = manager_find_run(c->ctx, run_id);
        if (r && sandbox_visible_to(r->sandbox, reply_peer(c->reply)))
                return run_attach(r, c->reply, from, err);
        kept = run_result_take(c->ctx, run_id, reply_peer(c->reply));
        if (!kept)
                return run_gone(c->ctx, reply_peer(c->reply), run_id, err);
        /* The reply as the run's first client would have had it, but for the id: this request's. */
        json_object_object_add(kept, "id", id ? json_object_get(id) : NULL);
        line = proto_serialize(kept, &len);
        json_object_put(kept);
        if (!line)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        reply_send_line(c->reply, line, len);
        return 0;
}
