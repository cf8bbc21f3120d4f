/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The pool of ready sandboxes (daemon/sandbox/pool.c) on a Context and a Registry, with no
 * daemon and no socket (tests/daemon-fixture.h): it fills to pool_size, a take leaves one fewer
 * and is refilled, and a pooled sandbox's end, which the pool only learns by observing the
 * registry, is refilled too. */
#include "daemon-fixture.h"
#include "pool.h"

#define POOL_SIZE 2

typedef struct Seen {
        unsigned freed;
        void *freed_data;
} Seen;

static int observe(Registry *reg, RegistryEvent ev, RegistryEntry *e, void *userdata) {
        Seen *seen = userdata;
        if (ev == REGISTRY_FREED) {
                seen->freed++;
                seen->freed_data = e->data;
        }
        return 0;
}

static unsigned ready_pooled(Fixture *f) {
        unsigned n = 0;
        for (Sandbox *s = registry_first(&f->registry); s; s = registry_next(&s->entry))
                n += s->pooled && s->state == SANDBOX_READY;
        return n;
}

static bool pool_full(void *userdata) {
        Fixture *f = userdata;
        return ready_pooled(f) == POOL_SIZE;
}

static bool gone(void *userdata) {
        Seen *seen = userdata;
        return seen->freed > 0;
}

static Sandbox *any_pooled(Fixture *f) {
        for (Sandbox *s = registry_first(&f->registry); s; s = registry_next(&s->entry))
                if (s->pooled)
                        return s;
        return NULL;
}

int main(void) {
        _cleanup_json_ json_object *req = json_object_new_object();
        ProtoError err = {};
        Fixture f;
        Seen seen = {};
        Sandbox *s = NULL, *p;
        int r;

        fixture_setup(&f, "unit-pool", POOL_SIZE);
        ok(pool_init(&f.pool, &f.ctx) == 0, "pool_init observes the registry");
        f.ctx.pool = &f.pool;
        ok(registry_observe(&f.registry, observe, &seen) == 0, "an observer of our own");

        pool_schedule_refill(&f.ctx);
        ok(fixture_run_until(&f, pool_full, &f, 60), "the pool fills");
        is_int(registry_count_pooled(&f.registry), POOL_SIZE, "to pool_size pooled sandboxes");
        is_int(registry_count(&f.registry), POOL_SIZE, "and no more sandboxes than that");
        /* A while more of the loop: a full pool makes no more. */
        for (int i = 0; i < 10; i++)
                (void) sd_event_run(f.ctx.event, 20 * USEC_PER_MSEC);
        is_int(registry_count(&f.registry), POOL_SIZE, "a full pool makes no more");
        is_int(registry_count_owned(&f.registry, 0), 0, "pooled sandboxes are no one's");

        json_object_object_add(req, "best_effort", json_object_new_boolean(true));
        r = pool_take(&f.ctx, req, 1000, &s, &err);
        is_int(r, 1, "a throwaway run's request takes one");
        ok(s && !s->pooled && s->from_pool && s->owner_uid == 1000 && s->state == SANDBOX_READY,
           "it is ready, out of the pool, and the run's owner's");
        is_int(registry_count_pooled(&f.registry), POOL_SIZE - 1, "one fewer pooled");
        is_int(registry_count_owned(&f.registry, 1000), 1, "counted as its owner's");
        ok(fixture_run_until(&f, pool_full, &f, 60), "the pool is refilled after the take");
        is_int(registry_count(&f.registry), POOL_SIZE + 1, "the taken one and a full pool");

        json_object_object_add(req, "name", json_object_new_string("mine"));
        p = NULL;
        is_int(pool_take(&f.ctx, req, 1000, &p, &err), 0, "a request with a name takes none");
        ok(p == NULL, "... and gives none");

        if (s) {
                sandbox_destroy(s, "its run ended");
                ok(fixture_run_until(&f, gone, &seen, 30), "the taken sandbox goes");
                ok(seen.freed == 1 && seen.freed_data == s, "freed: told once");
                is_int(registry_count_pooled(&f.registry), POOL_SIZE, "the pool is still full");
        }

        /* A pooled sandbox that dies (its init killed, say) is freed; the pool refills only
         * because it observes the registry's "freed". */
        seen = (Seen) {};
        p = any_pooled(&f);
        ok(p != NULL, "a pooled sandbox");
        if (p) {
                sandbox_destroy(p, "unit test");
                ok(fixture_run_until(&f, gone, &seen, 30), "it goes");
                ok(seen.freed_data == p, "freed: that one");
                ok(fixture_run_until(&f, pool_full, &f, 60), "its place is refilled");
                is_int(registry_count(&f.registry), POOL_SIZE, "pool_size sandboxes again");
        }

        fixture_done(&f);
        return done_testing();
}
