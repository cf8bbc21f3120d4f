/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A sandbox's state machine and a run's lifecycle on a Context and a Registry, with no daemon
 * and no listening socket (tests/daemon-fixture.h): a sandbox is created below a temporary
 * cgroup, becomes ready, runs `true` and `sh -c 'exit 3'`, and is destroyed; the registry's
 * observers see it come, change and go, once each. */
#include "daemon-fixture.h"
#include "run.h"

typedef struct Seen {
        unsigned added, changed, freed;
        void *added_data, *freed_data;
} Seen;

static int observe(Registry *reg, RegistryEvent ev, RegistryEntry *e, void *userdata) {
        Seen *seen = userdata;
        if (ev == REGISTRY_ADDED) {
                seen->added++;
                seen->added_data = e->data;
        } else if (ev == REGISTRY_CHANGED)
                seen->changed++;
        else if (ev == REGISTRY_FREED) {
                seen->freed++;
                seen->freed_data = e->data;
        }
        return 0;
}

static bool sandbox_settled(void *userdata) {
        Sandbox *s = userdata;
        return s->state != SANDBOX_CREATING;
}

static bool sandbox_idle(void *userdata) {
        Sandbox *s = userdata;
        return s->n_runs == 0 && !s->runs;
}

/* One run of argv in s, answered on the fixture's connection: its final reply, or NULL. */
static json_object *run_in(Fixture *f, Sandbox *s, const char *id, const char *argv_json) {
        _cleanup_json_ json_object *req = json_tokener_parse(argv_json);
        _cleanup_json_ json_object *jid = json_object_new_string(id);
        ProtoError err = {};
        RunSpec spec;
        Reply *reply = NULL;
        Run *r;

        if (!req || run_spec_parse(req, f->ctx.config.max_stdin_bytes, &spec, &err) < 0) {
                diag("run_spec_parse: %s", err.message);
                return NULL;
        }
        if (reply_new(&f->conn->sink, jid, &reply) < 0 || run_spec_resolve(&spec, s, &err) < 0 ||
            run_new(s, reply, &spec, &r) < 0) {
                diag("reply_new/run_spec_resolve/run_new: %s", err.message);
                reply_unref(reply);
                run_spec_done(&spec);
                return NULL;
        }
        reply_unref(reply); /* the run holds its own */
        ok(s->n_runs == 1 && s->runs == r, "%s: the run is the sandbox's, in flight", id);
        run_start(r);
        return fixture_reply(f, id, 30);
}

static void check_exit(json_object *reply, const char *what, int code) {
        json_object *v;
        ok(reply != NULL, "%s: answered", what);
        if (!reply)
                return;
        diag("%s", json_object_to_json_string(reply));
        is_str(json_object_object_get_ex(reply, "reason", &v) ? json_object_get_string(v) : NULL, "exited",
               "%s: reason exited", what);
        is_int(json_object_object_get_ex(reply, "exit_code", &v) ? json_object_get_int(v) : -1, code,
               "%s: exit code %d", what, code);
}

int main(void) {
        _cleanup_json_ json_object *req = json_object_new_object();
        ProtoError err = {};
        Fixture f;
        Seen seen = {};
        Sandbox *s = NULL;
        char id[24];
        uid_t owner = 0;
        json_object *reply;
        int r;

        fixture_setup(&f, "unit-sandbox", 0);
        ok(registry_observe(&f.registry, observe, &seen) == 0, "an observer of the registry");
        fixture_connect(&f);

        json_object_object_add(req, "name", json_object_new_string("unit"));
        json_object_object_add(req, "best_effort", json_object_new_boolean(true));
        r = sandbox_create(&f.ctx, req, 0, false, &s, &err);
        if (!ok(r >= 0 && s, "sandbox_create")) {
                diag("%s", err.message);
                fixture_done(&f);
                return done_testing();
        }
        snprintf(id, sizeof(id), "%s", s->id);
        is_int(s->state, SANDBOX_CREATING, "a new sandbox is CREATING");
        ok(registry_find(&f.registry, id) == s, "found by id");
        ok(registry_find_named(&f.registry, 0, "unit") == s, "found by its owner and name");
        ok(seen.added == 1 && seen.added_data == s, "added: told once, with the sandbox");
        is_int(seen.changed, 1, "changed: told once (state.c records a new sandbox there)");
        r = sandbox_create(&f.ctx, req, 0, false, &(Sandbox *) { NULL }, &err);
        ok(r < 0 && err.code == SBX_E_CONFLICT, "a second sandbox of that name and owner is refused");

        ok(fixture_run_until(&f, sandbox_settled, s, 60), "the sandbox settles");
        is_int(s->state, SANDBOX_READY, "... READY");
        if (s->state != SANDBOX_READY)
                diag("failure: %s", s->failure.message);

        if (s->state == SANDBOX_READY) {
                reply = run_in(&f, s, "r1", "{\"argv\":[\"true\"]}");
                check_exit(reply, "true", 0);
                json_object_put(reply);
                ok(fixture_run_until(&f, sandbox_idle, s, 10), "true: the run is gone from the sandbox");
                reply = run_in(&f, s, "r2", "{\"argv\":[\"sh\",\"-c\",\"exit 3\"]}");
                check_exit(reply, "sh -c 'exit 3'", 3);
                json_object_put(reply);
                ok(fixture_run_until(&f, sandbox_idle, s, 10), "exit 3: the run is gone from the sandbox");
                is_int(s->state, SANDBOX_READY, "still READY after its runs");
        }

        sandbox_destroy(s, "unit test");
        ok(s->state == SANDBOX_DESTROYING || seen.freed == 1, "destroy: DESTROYING (or gone already)");
        ok(seen.freed == 1 || registry_find(&f.registry, id) == s,
           "destroy: still in the registry while being destroyed (or gone for good)");
        ok(fixture_run_until(&f, fixture_registry_empty, &f, 30), "destroy: the sandbox leaves the registry");
        ok(seen.freed == 1 && seen.freed_data == s, "freed: told once, with the sandbox");
        ok(registry_find(&f.registry, id) == NULL, "no longer found by id");
        ok(registry_find_tombstone(&f.registry, id, &owner) && owner == 0, "a tombstone with its owner");
        is_int(seen.added, 1, "added: still once");

        fixture_done(&f);
        return done_testing();
}
