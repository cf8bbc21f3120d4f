/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "manager.h"
#include "pool.h"
#include "sandbox.h"
#include "util.h"

#define POOL_RETRY_USEC (1 * USEC_PER_SEC)
#define POOL_TAKEN_REFILL_USEC (50 * USEC_PER_MSEC)

static int on_pool_refill(sd_event_source *src, void *userdata);

static bool pool_wants_more(Manager *m) {
        return !m->stopping && m->n_pooled < m->config.pool_size &&
               m->n_sandboxes < m->config.max_sandboxes + m->config.pool_size;
}

/* One sandbox per loop iteration, and only when nothing else is pending (idle priority): a
 * burst of requests is answered first, the pool catches up afterwards. */
void pool_schedule_refill(Manager *m) {
        if (!pool_wants_more(m) || m->pool_retry)
                return;
        if (!m->pool_refill) {
                if (sd_event_add_defer(m->event, &m->pool_refill, on_pool_refill, m) < 0)
                        return;
                (void) sd_event_source_set_priority(m->pool_refill, SD_EVENT_PRIORITY_IDLE);
        }
        (void) sd_event_source_set_enabled(m->pool_refill, SD_EVENT_ONESHOT);
}

static int on_pool_retry(sd_event_source *src, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        m->pool_retry = sd_event_source_disable_unref(m->pool_retry);
        pool_schedule_refill(m);
        return 0;
}

static int on_pool_taken(sd_event_source *src, uint64_t usec, void *userdata) {
        pool_taken_done(userdata);
        return 0;
}

void pool_taken_done(Manager *m) {
        m->pool_taken = sd_event_source_disable_unref(m->pool_taken);
        pool_schedule_refill(m);
}

/* The refill after a take waits for the taken sandbox's end, or POOL_TAKEN_REFILL_USEC. */
static void pool_schedule_refill_after_take(Manager *m) {
        if (m->pool_taken) {
                (void) sd_event_source_set_time_relative(m->pool_taken, POOL_TAKEN_REFILL_USEC);
                (void) sd_event_source_set_enabled(m->pool_taken, SD_EVENT_ONESHOT);
        } else if (sd_event_add_time_relative(m->event, &m->pool_taken, CLOCK_MONOTONIC, POOL_TAKEN_REFILL_USEC,
                                              USEC_PER_MSEC, on_pool_taken, m) < 0)
                pool_schedule_refill(m);
}

static int pool_add_one(Manager *m) {
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
        m->n_pooled++;
        return 0;
}

static int on_pool_refill(sd_event_source *src, void *userdata) {
        Manager *m = userdata;

        if (!pool_wants_more(m))
                return 0;
        if (pool_add_one(m) < 0) {
                /* Failing again at once would spin: try later. */
                (void) sd_event_add_time_relative(m->event, &m->pool_retry, CLOCK_MONOTONIC, POOL_RETRY_USEC,
                                                  100 * USEC_PER_MSEC, on_pool_retry, m);
                return 0;
        }
        pool_schedule_refill(m);
        return 0;
}

static bool limits_equal(const SandboxLimits *a, const SandboxLimits *b) {
        return a->memory == b->memory && a->pids == b->pids && a->millicpus == b->millicpus &&
               a->timeout_usec == b->timeout_usec && a->output_bytes == b->output_bytes;
}

/* A ready one; else the one made first of those still being made (the list is newest first):
 * it is ready sooner than a new one would be, and the run waits for it like for any sandbox. */
static Sandbox *pool_find_ready(Manager *m) {
        Sandbox *oldest = NULL;
        for (Sandbox *s = m->sandboxes; s; s = s->next) {
                if (!s->pooled)
                        continue;
                if (s->state == SANDBOX_READY)
                        return s;
                if (s->state == SANDBOX_CREATING)
                        oldest = s;
        }
        return oldest;
}

int pool_take(Manager *m, json_object *req, uid_t owner, Sandbox **ret, ProtoError *err) {
        SandboxRequest want;
        Sandbox *s = m->n_pooled ? pool_find_ready(m) : NULL;
        int r;

        if (!s)
                return 0;
        r = sandbox_parse_request(m, req, &want, err);
        if (r < 0)
                return r;
        if (want.name || want.disk_workspace || want.root || !limits_equal(&want.limits, &s->limits) || m->n_sandboxes - m->n_pooled >= m->config.max_sandboxes ||
            (owner != 0 && sandbox_count_owned(m, owner) >= m->config.max_sandboxes_per_uid)) {
                /* Made fresh instead (and refused there, for the caps, with the usual error). */
                sandbox_request_done(&want);
                return 0;
        }
        s->pooled = false;
        s->from_pool = true;
        m->n_pooled--;
        s->owner_uid = owner;
        s->best_effort = want.best_effort;
        s->env = TAKE_PTR(want.env);
        sandbox_request_done(&want);
        /* With none left, the next throwaway would wait for a new one: make it now. */
        if (m->n_pooled == 0)
                pool_schedule_refill(m);
        else
                pool_schedule_refill_after_take(m);
        *ret = s;
        return 1;
}

void pool_done(Manager *m) {
        m->pool_refill = sd_event_source_disable_unref(m->pool_refill);
        m->pool_retry = sd_event_source_disable_unref(m->pool_retry);
        m->pool_taken = sd_event_source_disable_unref(m->pool_taken);
}
