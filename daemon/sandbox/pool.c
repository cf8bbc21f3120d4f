/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "metrics.h"
#include "context.h"
#include "pool.h"
#include "sandbox.h"
#include "util.h"

#define POOL_RETRY_USEC (1 * USEC_PER_SEC)
#define POOL_TAKEN_REFILL_USEC (50 * USEC_PER_MSEC)

static int on_pool_refill(sd_event_source *src, void *userdata);

static bool pool_wants_more(Context *m) {
        return m->pool && !m->pool->stopping && registry_count_pooled(m->registry) < m->config.pool_size &&
               registry_count(m->registry) < m->config.max_sandboxes + m->config.pool_size;
}

/* One sandbox per loop iteration, and only when nothing else is pending (idle priority): a
 * burst of requests is answered first, the pool catches up afterwards. */
void pool_schedule_refill(Context *m) {
        if (!pool_wants_more(m) || m->pool->retry)
                return;
        if (!m->pool->refill) {
                if (sd_event_add_defer(m->event, &m->pool->refill, on_pool_refill, m) < 0)
                        return;
                (void) sd_event_source_set_priority(m->pool->refill, SD_EVENT_PRIORITY_IDLE);
        }
        (void) sd_event_source_set_enabled(m->pool->refill, SD_EVENT_ONESHOT);
}

static int on_pool_retry(sd_event_source *src, uint64_t usec, void *userdata) {
        Context *m = userdata;
        m->pool->retry = sd_event_source_disable_unref(m->pool->retry);
        pool_schedule_refill(m);
        return 0;
}

static int on_pool_taken(sd_event_source *src, uint64_t usec, void *userdata) {
        pool_taken_done(userdata);
        return 0;
}

void pool_taken_done(Context *m) {
        m->pool->taken = sd_event_source_disable_unref(m->pool->taken);
        pool_schedule_refill(m);
}

/* The refill after a take waits for the taken sandbox's end, or POOL_TAKEN_REFILL_USEC. */
static void pool_schedule_refill_after_take(Context *m) {
        if (m->pool->taken) {
                (void) sd_event_source_set_time_relative(m->pool->taken, POOL_TAKEN_REFILL_USEC);
                (void) sd_event_source_set_enabled(m->pool->taken, SD_EVENT_ONESHOT);
        } else if (sd_event_add_time_relative(m->event, &m->pool->taken, CLOCK_MONOTONIC, POOL_TAKEN_REFILL_USEC,
                                              USEC_PER_MSEC, on_pool_taken, m) < 0)
                pool_schedule_refill(m);
}

static int pool_add_one(Context *m) {
        _cleanup_json_ json_object *req = json_object_new_object();
        ProtoError err;
        Sandbox *s;
        int r;

        /* best_effort only lets it be made on a host that enforces less; whether a request
         * may have it is checked when it is taken (pool_take). */
        json_object_object_add(req, "best_effort", json_object_new_boolean(true));
        r = sandbox_create(m, req, 0, true, &s, &err);
        if (r < 0) {
                log_warning("pool: cannot make a sandbox: %s", err.message);
                return r;
        }
        s->pooled = true;
        registry_set_pooled(&s->entry, true);
        return 0;
}

static int on_pool_refill(sd_event_source *src, void *userdata) {
        Context *m = userdata;

        if (!pool_wants_more(m))
                return 0;
        if (pool_add_one(m) < 0) {
                /* Failing again at once would spin: try later. */
                (void) sd_event_add_time_relative(m->event, &m->pool->retry, CLOCK_MONOTONIC, POOL_RETRY_USEC,
                                                  100 * USEC_PER_MSEC, on_pool_retry, m);
                return 0;
        }
        pool_schedule_refill(m);
        return 0;
}

static bool limits_equal(const SandboxLimits *a, const SandboxLimits *b) {
        return a->memory == b->memory && a->pids == b->pids && a->millicpus == b->millicpus &&
               a->timeout_usec == b->timeout_usec && a->output_bytes == b->output_bytes &&
               a->file_size == b->file_size && a->open_files == b->open_files;
}

/* A ready one; else the one made first of those still being made (the list is newest first):
 * it is ready sooner than a new one would be, and the run waits for it like for any sandbox. */
static Sandbox *pool_find_ready(Context *m) {
        Sandbox *oldest = NULL;
        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry)) {
                if (!s->pooled)
                        continue;
                if (s->state == SANDBOX_READY)
                        return s;
                if (s->state == SANDBOX_CREATING)
                        oldest = s;
        }
        return oldest;
}

int pool_take(Context *m, json_object *req, uid_t owner, Sandbox **ret, ProtoError *err) {
        SandboxRequest want;
        Sandbox *s = registry_count_pooled(m->registry) ? pool_find_ready(m) : NULL;
        int r;

        if (!s) {
                metrics.pool_misses += m->config.pool_size > 0;
                return 0;
        }
        r = sandbox_parse_request(m, req, &want, err);
        if (r < 0)
                return r;
        if (want.name || want.disk_workspace || want.root || want.mounts || want.image || want.egress || !limits_equal(&want.limits, &s->limits) || registry_count(m->registry) - registry_count_pooled(m->registry) >= m->config.max_sandboxes ||
            (owner != 0 && sandbox_count_owned(m, owner) >= m->config.max_sandboxes_per_uid)) {
                /* Made fresh instead (and refused there, for the caps, with the usual error). */
                sandbox_request_done(&want);
                return 0;
        }
        metrics.pool_hits++;
        s->pooled = false;
        s->from_pool = true;
        registry_set_pooled(&s->entry, false);
        s->owner_uid = owner;
        s->entry.owner = owner;
        s->best_effort = want.best_effort;
        s->env = TAKE_PTR(want.env);
        sandbox_request_done(&want);
        /* With none left, the next throwaway would wait for a new one: make it now. */
        if (registry_count_pooled(m->registry) == 0)
                pool_schedule_refill(m);
        else
                pool_schedule_refill_after_take(m);
        *ret = s;
        return 1;
}

/* A pooled sandbox is freed: its place is refilled; a taken one is gone: see pool_taken_done(). */
static int on_registry(Registry *reg, RegistryEvent ev, RegistryEntry *e, void *userdata) {
        Pool *p = userdata;
        Sandbox *s = e->data;

        if (ev != REGISTRY_FREED)
                return 0;
        if (s->pooled)
                pool_schedule_refill(p->ctx);
        /* Refilled once the taken one is gone: its teardown is the kernel's busiest moment. */
        if (s->from_pool)
                pool_taken_done(p->ctx);
        return 0;
}

int pool_init(Pool *p, Context *ctx) {
        *p = (Pool) { .ctx = ctx };
        return registry_observe(ctx->registry, on_registry, p);
}

void pool_done(Context *m) {
        if (!m->pool)
                return;
        m->pool->stopping = true; /* nothing refills the pool from here */
        m->pool->refill = sd_event_source_disable_unref(m->pool->refill);
        m->pool->retry = sd_event_source_disable_unref(m->pool->retry);
        m->pool->taken = sd_event_source_disable_unref(m->pool->taken);
}
