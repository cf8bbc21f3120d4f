/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "metrics.h"
#include "context.h"
#include "image.h"
#include "pool.h"
#include "sandbox.h"
#include "state.h"
#include "util.h"

#define POOL_RETRY_USEC (1 * USEC_PER_SEC)
#define POOL_TAKEN_REFILL_USEC (50 * USEC_PER_MSEC)

static int on_pool_refill(sd_event_source *src, void *userdata);

/* What a pooled sandbox is made as: one kind per pool. Kind 0 serves throwaway runs (pool_size),
 * kind 1 create with the host's root (pool_create), kind 2 + i create from image i of
 * pool_images. */
typedef struct PoolKind {
        bool ephemeral;
        const char *image;
        uint64_t size;
} PoolKind;

static unsigned pool_n_kinds(Context *m) {
        return 2 + m->config.n_pool_images;
}

static PoolKind pool_kind(Context *m, unsigned k) {
        if (k == 0)
                return (PoolKind) { .ephemeral = true, .size = m->config.pool_size };
        if (k == 1)
                return (PoolKind) { .size = m->config.pool_create };
        return (PoolKind) { .image = m->config.pool_image_name[k - 2], .size = m->config.pool_image_count[k - 2] };
}

static bool pool_is_kind(const Sandbox *s, const PoolKind *k) {
        return s->pooled && s->ephemeral == k->ephemeral &&
               (k->image ? s->image && strcmp(s->image, k->image) == 0 : !s->image);
}

/* Those ready or being made (one being destroyed is on its way out). */
static unsigned pool_count_kind(Context *m, const PoolKind *k) {
        unsigned n = 0;
        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry))
                n += pool_is_kind(s, k) && (s->state == SANDBOX_CREATING || s->state == SANDBOX_READY);
        return n;
}

/* An image's pool fills once the image is there (imported after the start, say), and never
 * where a sandbox could not see it (image.h: an idmapped store). */
static bool pool_kind_wants_more(Context *m, const PoolKind *k) {
        if (k->size == 0)
                return false;
        if (k->image && (!m->features.mount_idmap || !m->images || !m->images->idmap || !image_find(m->images, k->image)))
                return false;
        return pool_count_kind(m, k) < k->size;
}

/* The first kind that has room, or -1. */
static int pool_next_kind(Context *m) {
        for (unsigned i = 0; i < pool_n_kinds(m); i++) {
                PoolKind k = pool_kind(m, i);
                if (pool_kind_wants_more(m, &k))
                        return (int) i;
        }
        return -1;
}

static bool pool_wants_more(Context *m) {
        return m->pool && !m->pool->stopping &&
               registry_count(m->registry) < m->config.max_sandboxes + config_pool_total(&m->config) &&
               pool_next_kind(m) >= 0;
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

static int pool_add_one(Context *m, const PoolKind *k) {
        _cleanup_json_ json_object *req = json_object_new_object();
        ProtoError err;
        Sandbox *s;
        int r;

        /* best_effort only lets it be made on a host that enforces less; whether a request
         * may have it is checked when it is taken (pool_take, sandbox_hand_out). */
        json_object_object_add(req, "best_effort", json_object_new_boolean(true));
        if (k->image)
                json_object_object_add(req, "image", json_object_new_string(k->image));
        r = sandbox_create_pooled(m, req, k->ephemeral, &s, &err);
        if (r < 0) {
                log_warning("pool: cannot make a sandbox%s%s: %s", k->image ? " of image " : "", k->image ?: "", err.message);
                return r;
        }
        return 0;
}

static int on_pool_refill(sd_event_source *src, void *userdata) {
        Context *m = userdata;

        PoolKind k;

        if (!pool_wants_more(m))
                return 0;
        k = pool_kind(m, (unsigned) pool_next_kind(m));
        if (pool_add_one(m, &k) < 0) {
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

/* A ready one of kind k; else the one made first of those still being made (the list is newest
 * first): it is ready sooner than a new one would be, and the caller waits for it as for any
 * sandbox. */
static Sandbox *pool_find_ready(Context *m, const PoolKind *k) {
        Sandbox *oldest = NULL;
        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry)) {
                if (!pool_is_kind(s, k))
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
        PoolKind k = pool_kind(m, 0);
        Sandbox *s = registry_count_pooled(m->registry) ? pool_find_ready(m, &k) : NULL;
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
        if (pool_count_kind(m, &k) == 0)
                pool_schedule_refill(m);
        else
                pool_schedule_refill_after_take(m);
        *ret = s;
        return 1;
}

/* The records of the sandboxes created or handed out since the last time, written at once
 * (state_save_many()) once every request already read is handled: a burst of creates costs a few
 * journal commits in all instead of three fsyncs each, which the event loop waited for one after
 * the other. The creates are answered then (a fresh one once its init is ready, too). */
static int on_pool_records(sd_event_source *src, void *userdata) {
        Context *m = userdata;
        Sandbox *v[256];
        int res[256];
        size_t n = 0;

        for (Sandbox *s = registry_first(m->registry); s && n < ELEMENTSOF(v); s = registry_next(&s->entry)) {
                if (!s->record_pending)
                        continue;
                if (s->state == SANDBOX_DESTROYING || s->state == SANDBOX_FAILED)
                        s->record_pending = false; /* its create was answered with why */
                else
                        v[n++] = s;
        }
        state_save_many(v, n, res);
        for (size_t i = 0; i < n; i++)
                sandbox_record_done(v[i], res[i]);
        /* More than one batch's worth: the rest on the next turn. */
        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry))
                if (s->record_pending) {
                        pool_schedule_records(m);
                        break;
                }
        return 0;
}

int pool_schedule_records(Context *m) {
        int r;

        if (!m->pool->records) {
                r = sd_event_add_defer(m->event, &m->pool->records, on_pool_records, m);
                if (r < 0)
                        return r;
                /* After every request already read (SD_EVENT_PRIORITY_NORMAL), before the refill. */
                (void) sd_event_source_set_priority(m->pool->records, SD_EVENT_PRIORITY_NORMAL + 1);
        }
        return sd_event_source_set_enabled(m->pool->records, SD_EVENT_ONESHOT);
}

/* The create pool for req's image ("image" absent or null: the host's root), if one is set. */
static bool pool_create_kind(Context *m, json_object *req, PoolKind *ret) {
        json_object *v = NULL;
        const char *image = NULL;

        if (json_object_object_get_ex(req, "image", &v) && !json_object_is_type(v, json_type_null)) {
                if (!json_object_is_type(v, json_type_string))
                        return false;
                image = json_object_get_string(v);
        }
        for (unsigned i = 1; i < pool_n_kinds(m); i++) {
                PoolKind k = pool_kind(m, i);
                if (k.size > 0 && (image ? k.image && strcmp(k.image, image) == 0 : !k.image)) {
                        *ret = k;
                        return true;
                }
        }
        return false;
}

int pool_take_create(Context *m, json_object *req, const SandboxCaller *caller, Sandbox **ret, ProtoError *err) {
        const SandboxHooks *h = m->sandbox_hooks;
        ProtoError ignored;
        PoolKind k;
        Sandbox *s;
        int r;

        if (!m->pool || !pool_create_kind(m, req, &k))
                return 0;
        /* An owner-only image's sandboxes are made for their caller, never handed out. */
        if (k.image && m->images && image_find(m->images, k.image) && image_find(m->images, k.image)->owner_only)
                return 0;
        s = pool_find_ready(m, &k);
        if (!s) {
                metrics.pool_create_misses++;
                return 0;
        }
        /* The caps and the disk checks of a fresh create: refused there, with the usual error. */
        if (registry_count(m->registry) - registry_count_pooled(m->registry) >= m->config.max_sandboxes ||
            (caller->uid != 0 && sandbox_count_owned(m, caller->uid) >= m->config.max_sandboxes_per_uid) ||
            (h && h->check_create && h->check_create(m, &ignored) < 0))
                return 0;
        r = sandbox_hand_out(s, req, caller, err);
        if (r <= 0)
                return r;
        if (pool_schedule_records(m) < 0) {
                /* Written now, then, alone. */
                s->record_pending = false;
                r = registry_changed(&s->entry); /* state.c saves it */
                if (r < 0) {
                        r = sandbox_disk_error(err, "cannot record the sandbox in the state directory", r);
                        sandbox_destroy(s, "create failed");
                        return r;
                }
        }
        metrics.pool_create_hits++;
        /* Refilled after the last of a burst of creates: the burst is answered first. */
        pool_schedule_refill_after_take(m);
        *ret = s;
        return 1;
}

void pool_drop_image(Context *m, const char *image) {
        Sandbox *next;

        for (Sandbox *s = registry_first(m->registry); s; s = next) {
                next = registry_next(&s->entry);
                if (!s->pooled || !s->image || strcmp(s->image, image) != 0 || s->state == SANDBOX_DESTROYING)
                        continue;
                /* It lets go of the image now: no one will ever run in it, and the removal waits
                 * for no teardown. */
                image_release(m->images, s->image);
                free(s->image);
                s->image = NULL;
                sandbox_destroy(s, "its image is removed");
        }
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
        m->pool->records = sd_event_source_disable_unref(m->pool->records);
}
