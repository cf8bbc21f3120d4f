/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "metrics.h"
#include "context.h"
#include "run.h"
#include "sandbox.h"
#include "snapshot.h"
#include "spawn.h"
#include "state.h"
#include "sweep-plan.h"
#include "sweep-walk.h"
#include "sweep.h"
#include "util.h"

#define SWEEPS_MAX 4

typedef struct Sweep {
        Context *ctx;
        Reply *reply; /* NULL for the timer */
        bool dry_run, all;
        bool timer;     /* the periodic one */
        char (*ids)[24];
        size_t n_ids;
        SweepWalk *walk;
        uint64_t start_usec;
        struct Sweep *next, *prev;
} Sweep;

/* The plan, and what the sweep carries it out on: the sandboxes of its walk (NULL: gone). */
typedef struct Plan {
        SweepPlan plan;
        Sweep *sw;
        Sandbox **sbx;
} Plan;

static const char *human(char buf[static 32], uint64_t bytes) {
        return format_size(buf, 32, bytes);
}

/* ---- Checks made by create and run ------------------------------------------------------- */

/* A byte limit's file limit when none is set: 0 (none) stays 0, a small one is at least 1. */
static uint64_t files_for_bytes(uint64_t bytes) {
        return config_files_for_bytes(bytes);
}

static uint64_t files_budget(const Config *c) {
        return c->files_budget ?: files_for_bytes(c->disk_budget);
}

static int budget_error(Context *m, const char *what, ProtoError *err) {
        char a[32];
        if (m->sweeper->files_budget_exceeded)
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "disk",
                                       "the sandboxes hold more than files_budget (%" PRIu64 " files) even without "
                                       "snapshots: %s until some are destroyed",
                                       files_budget(&m->config), what);
        return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "disk",
                               "the sandboxes use more than disk_budget (%s) even without snapshots: %s until some "
                               "are destroyed",
                               human(a, m->config.disk_budget), what);
}

int sweep_check_create(Context *m, ProtoError *err) {
        struct statvfs sv;
        char a[32], b[32];

        if ((m->config.min_free_disk || m->config.min_free_files) && fstatvfs(m->state_fd, &sv) == 0) {
                uint64_t avail = (uint64_t) sv.f_bavail * sv.f_frsize;
                if (avail < m->config.min_free_disk)
                        return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "disk",
                                               "only %s is free on the state directory's filesystem, below "
                                               "min_free_disk (%s): no new sandboxes until space is freed",
                                               human(a, avail), human(b, m->config.min_free_disk));
                /* f_files 0: a filesystem without an inode count (btrfs): nothing to run out of. */
                if (sv.f_files > 0 && (uint64_t) sv.f_favail < m->config.min_free_files)
                        return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "disk",
                                               "only %" PRIu64 " files (inodes) are free on the state directory's "
                                               "filesystem, below min_free_files (%" PRIu64 "): no new sandboxes "
                                               "until some are freed",
                                               (uint64_t) sv.f_favail, m->config.min_free_files);
        }
        if (m->sweeper->disk_budget_exceeded)
                return budget_error(m, "no new sandboxes", err);
        return 0;
}

/* A refused sandbox whose files may have been removed since: walked again now, in the background
 * as any sweep is, unless it was walked (or asked) less than SWEEP_REMEASURE_USEC ago. */
static void remeasure(Sandbox *s) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        ProtoError err;

        if (s->ctx->sweeper->stopping || now < s->disk_walked_usec + SWEEP_REMEASURE_USEC || now < s->disk_remeasure_usec + SWEEP_REMEASURE_USEC)
                return;
        s->disk_remeasure_usec = now;
        if (sweep_start(s->ctx, NULL, s, false, &err) < 0)
                log_debug("disk sweep: cannot measure %s again now: %s", s->id, err.message);
}

#define REFUSED_HOW "runs are refused until it is back under: remove files (file.remove, sandboxctl rm) and run " \
                    "again (a refused run has it measured again, at most every 5 s; sandboxctl sweep SANDBOX " \
                    "measures it now), restore a smaller snapshot, or destroy it"

int sweep_check_run(Sandbox *s, ProtoError *err) {
        char a[32], b[32];

        if (s->disk_refused)
                remeasure(s);
        if (s->disk_refused && s->limits.files && s->disk_files > s->limits.files)
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "disk",
                                       "sandbox %s holds %" PRIu64 " files, more than its file limit (%" PRIu64 ") even "
                                       "without its snapshots: " REFUSED_HOW,
                                       s->id, s->disk_files, s->limits.files);
        if (s->disk_refused)
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "disk",
                                       "sandbox %s uses %s, more than its disk limit (%s) even without its snapshots: "
                                       REFUSED_HOW,
                                       s->id, human(a, s->disk_bytes), human(b, s->limits.disk));
        if (s->ctx->sweeper->disk_budget_exceeded)
                return budget_error(s->ctx, "runs are refused", err);
        return 0;
}

/* ---- ttl, idle, limits.disk in create and replies (meta.json: state.c) -------------------------- */

static json_object *seconds_or_null(uint64_t usec) {
        return usec ? proto_seconds(usec) : NULL;
}

void sweep_sandbox_json(Sandbox *s, json_object *o) {
        json_object *l;
        char ts[UTC_TIME_MAX];

        if (json_object_object_get_ex(o, "limits", &l) && l) {
                json_object_object_add(l, "disk", s->limits.disk ? json_object_new_int64((int64_t) s->limits.disk) : NULL);
                json_object_object_add(l, "files", s->limits.files ? json_object_new_int64((int64_t) s->limits.files) : NULL);
        }
        json_object_object_add(o, "ttl_s", seconds_or_null(s->ttl_usec));
        json_object_object_add(o, "idle_s", seconds_or_null(s->idle_usec));
        json_object_object_add(o, "expires_at", s->ttl_usec ? json_object_new_string(format_utc(ts, s->created_usec +
                                                                                                      s->ttl_usec))
                                                            : NULL);
        json_object_object_add(o, "disk_bytes", s->disk_measured ? json_object_new_int64((int64_t) s->disk_bytes) : NULL);
        json_object_object_add(o, "disk_files", s->disk_measured ? json_object_new_int64((int64_t) s->disk_files) : NULL);
        json_object_object_add(o, "disk_refused", json_object_new_boolean(s->disk_refused));
}

/* ---- Reporting --------------------------------------------------------------------------- */

static json_object *usage_json(uint64_t bytes, uint64_t apparent, uint64_t files) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "bytes", json_object_new_int64((int64_t) bytes));
        json_object_object_add(o, "apparent_bytes", json_object_new_int64((int64_t) apparent));
        json_object_object_add(o, "files", json_object_new_int64((int64_t) files));
        return o;
}

static json_object *snapshots_json(const SweepPlan *p, size_t index) {
        json_object *arr = json_object_new_array();
        char ts[UTC_TIME_MAX];
        for (size_t i = 0; i < p->n_recs; i++) {
                const SweepRecord *r = &p->recs[i];
                json_object *o;
                if (r->sandbox != index || r->kind == SWEEP_WORK)
                        continue;
                o = usage_json(r->bytes, r->apparent_bytes, r->files);
                json_object_object_add(o, "id", json_object_new_string(r->snap));
                json_object_object_add(o, "label", r->label[0] ? json_object_new_string(r->label) : NULL);
                json_object_object_add(o, "created_at", json_object_new_string(format_utc(ts, r->created_usec)));
                json_object_object_add(o, "partial", json_object_new_boolean(r->kind == SWEEP_PARTIAL));
                json_object_object_add(o, "evicted", json_object_new_boolean(p->evicted[i]));
                json_object_array_add(arr, o);
        }
        return arr;
}

static json_object *sandbox_report(Plan *pl, size_t index) {
        const SweepPlan *p = &pl->plan;
        const SweepTally *t = &p->t[index];
        const SweepSubject *sj = &p->subj[index];
        Sandbox *s = pl->sbx[index];
        json_object *o = json_object_new_object();
        json_object_object_add(o, "id", json_object_new_string(pl->sw->ids[index]));
        json_object_object_add(o, "name", s && s->name ? json_object_new_string(s->name) : NULL);
        json_object_object_add(o, "workspace", usage_json(t->work_bytes, t->work_apparent, t->work_files));
        json_object_object_add(o, "snapshots", snapshots_json(p, index));
        json_object_object_add(o, "snapshot_bytes", json_object_new_int64((int64_t) (t->snap_bytes + t->partial_bytes)));
        json_object_object_add(o, "bytes", json_object_new_int64((int64_t) t->bytes));
        json_object_object_add(o, "files", json_object_new_int64((int64_t) (t->work_files + t->snap_files)));
        json_object_object_add(o, "skipped", json_object_new_int64((int64_t) t->skipped));
        json_object_object_add(o, "disk_limit", s && sj->disk_limit ? json_object_new_int64((int64_t) sj->disk_limit) : NULL);
        json_object_object_add(o, "files_limit", s && sj->files_limit ? json_object_new_int64((int64_t) sj->files_limit) : NULL);
        json_object_object_add(o, "runs_refused", json_object_new_boolean(t->refuse));
        json_object_object_add(o, "expired", t->expired ? json_object_new_string(t->expired) : NULL);
        json_object_object_add(o, "partial", json_object_new_boolean(t->partial));
        return o;
}

static json_object *sweep_reply(Plan *pl) {
        const SweepPlan *p = &pl->plan;
        Context *m = pl->sw->ctx;
        json_object *reply = json_object_new_object(), *arr = json_object_new_array(), *tot;
        uint64_t bytes = 0, apparent = 0, files = 0, wbytes = 0, sbytes = 0;
        struct statvfs sv;

        for (size_t i = 0; i < p->n; i++) {
                const SweepTally *t = &p->t[i];
                json_object_array_add(arr, sandbox_report(pl, i));
                bytes += t->bytes;
                apparent += t->work_apparent + t->snap_apparent;
                files += t->work_files + t->snap_files;
                wbytes += t->work_bytes;
                sbytes += t->snap_bytes + t->partial_bytes;
        }
        tot = usage_json(bytes, apparent, files);
        json_object_object_add(tot, "sandboxes", json_object_new_int64((int64_t) p->n));
        json_object_object_add(tot, "workspace_bytes", json_object_new_int64((int64_t) wbytes));
        json_object_object_add(tot, "snapshot_bytes", json_object_new_int64((int64_t) sbytes));
        json_object_object_add(reply, "dry_run", json_object_new_boolean(pl->sw->dry_run));
        json_object_object_add(reply, "partial", json_object_new_boolean(p->cut));
        json_object_object_add(reply, "sandboxes", arr);
        json_object_object_add(reply, "totals", tot);
        json_object_object_add(reply, "disk_budget", m->config.disk_budget ? json_object_new_int64((int64_t) m->config.disk_budget)
                                                                           : NULL);
        json_object_object_add(reply, "budget_exceeded", json_object_new_boolean(p->budget_over));
        json_object_object_add(reply, "files_budget", files_budget(&m->config) ? json_object_new_int64((int64_t) files_budget(&m->config))
                                                                               : NULL);
        if (fstatvfs(m->state_fd, &sv) < 0)
                sv = (struct statvfs) { .f_frsize = 0 };
        json_object_object_add(reply, "free_bytes", sv.f_frsize ? json_object_new_int64((int64_t) ((uint64_t) sv.f_bavail * sv.f_frsize))
                                                                : NULL);
        json_object_object_add(reply, "free_files", sv.f_files ? json_object_new_int64((int64_t) sv.f_favail) : NULL);
        json_object_object_add(reply, "actions", json_object_get(p->actions));
        json_object_object_add(reply, "duration_s",
                               proto_seconds(now_usec(CLOCK_MONOTONIC) - pl->sw->start_usec));
        return reply;
}

/* ---- Doing ------------------------------------------------------------------------------- */

static void carry_out(Plan *pl) {
        const SweepPlan *p = &pl->plan;
        Context *m = pl->sw->ctx;

        /* What was decided, in its order, in the log. */
        for (size_t i = 0; i < json_object_array_length(p->actions); i++) {
                json_object *a = json_object_array_get_idx(p->actions, i), *sbx;
                bool has = json_object_object_get_ex(a, "sandbox", &sbx);
                log_info("disk sweep: %s%s%s", json_object_get_string(json_object_object_get(a, "action")), has ? " " : "",
                         has ? json_object_get_string(sbx) : "");
        }
        for (size_t i = 0; i < p->n_recs; i++)
                if (p->evicted[i]) {
                        int r = snapshot_delete(pl->sbx[p->recs[i].sandbox], p->recs[i].snap);
                        if (r < 0 && r != -ENOENT)
                                log_warning_errno(r, "disk sweep: cannot remove snapshot %s of %s: %m", p->recs[i].snap,
                                                  pl->sw->ids[p->recs[i].sandbox]);
                        else
                                metrics.sweep_freed_bytes += p->recs[i].bytes;
                }
        for (size_t i = 0; i < p->n; i++) {
                const SweepTally *t = &p->t[i];
                Sandbox *s = pl->sbx[i];
                if (!s)
                        continue;
                /* Walked: to its end, or cut short in it (the first of those not whole). */
                if (!t->partial || (i == 0 || !p->t[i - 1].partial))
                        s->disk_walked_usec = pl->sw->start_usec;
                /* inspect's disk_bytes stays the last whole measurement. */
                if (!t->partial) {
                        s->disk_bytes = t->left;
                        s->disk_files = t->files_left;
                        s->disk_measured = true;
                }
                /* Kept in its record: a restart must not forget that its runs are refused. */
                if (s->disk_refused != t->refuse) {
                        s->disk_refused = t->refuse;
                        if (!s->ephemeral && !s->pooled && !s->transient && s->state != SANDBOX_DESTROYING)
                                (void) state_save(s);
                }
        }
        if (pl->sw->all) {
                m->sweeper->disk_budget_exceeded = p->budget_over;
                m->sweeper->files_budget_exceeded = p->budget_over && p->files_over;
        }
        /* Last: a destroyed sandbox may be freed at once. */
        for (size_t i = 0; i < p->n; i++)
                if (pl->sbx[i] && p->t[i].expired) {
                        metrics.sweep_destroyed++;
                        metrics.sweep_freed_bytes += p->t[i].bytes;
                        sandbox_destroy(pl->sbx[i], p->t[i].expired[0] == 't' ? "ttl expired" : "idle too long");
                }
}

static Sweep *sweep_free(Sweep *sw) {
        Context *m;
        if (!sw)
                return NULL;
        m = sw->ctx;
        if (sw->prev)
                sw->prev->next = sw->next;
        else
                m->sweeper->sweeps = sw->next;
        if (sw->next)
                sw->next->prev = sw->prev;
        m->sweeper->n_sweeps--;
        if (sw->timer)
                m->sweeper->timer_sweep_running = false;
        sweep_walk_free(sw->walk);
        reply_unref(sw->reply);
        free(sw->ids);
        free(sw);
        return NULL;
}

static void sweep_fail(Sweep *sw, int r) {
        ProtoError err;
        proto_error_set(&err, SBX_E_INTERNAL, NULL, "the disk walk %s",
                        r == -ETIME ? "did not finish within sweep_timeout" : "failed");
        if (sw->reply)
                reply_error(sw->reply, &err);
        else
                log_warning("disk sweep: %s", err.message);
}

static SweepSubject subject_of(const Sandbox *s, const char *id) {
        if (!s)
                return (SweepSubject) { .id = id, .gone = true };
        return (SweepSubject) {
                .id = id,
                .exempt = s->ephemeral || s->pooled || s->state == SANDBOX_CREATING,
                .ttl_deadline = s->ttl_usec ? s->ttl_deadline_usec : 0,
                .idle_deadline = s->idle_usec && !s->runs && !s->pending_runs ? s->last_active_usec + s->idle_usec : 0,
                .disk_limit = s->limits.disk,
                .files_limit = s->limits.files,
                .disk_refused = s->disk_refused,
        };
}

static void on_walk_done(SweepWalk *w, int r, void *userdata) {
        Sweep *sw = userdata;
        Context *m = sw->ctx;
        Plan pl = { .sw = sw };
        SweepPlan *p = &pl.plan;
        _cleanup_free_ SweepSubject *subj = NULL;
        json_object *reply;

        if (r < 0 && r != -ETIME) {
                sweep_fail(sw, r);
                sweep_free(sw);
                return;
        }
        *p = (SweepPlan) { .now = now_usec(CLOCK_MONOTONIC), .n = sw->n_ids, .all = sw->all,
                           .disk_budget = m->config.disk_budget, .files_budget = files_budget(&m->config),
                           .budget_exceeded = m->sweeper->disk_budget_exceeded,
                           .files_budget_exceeded = m->sweeper->files_budget_exceeded };
        p->recs = sweep_walk_records(w, &p->n_recs);
        p->cut = r == -ETIME || (p->n_recs > 0 && p->recs[p->n_recs - 1].cut_short);
        subj = calloc(sw->n_ids + 1, sizeof(SweepSubject));
        pl.sbx = calloc(sw->n_ids + 1, sizeof(Sandbox *));
        if (!subj || !pl.sbx) {
                sweep_fail(sw, -ENOMEM);
                goto out;
        }
        for (size_t i = 0; i < sw->n_ids; i++) {
                Sandbox *s = registry_find(m->registry, sw->ids[i]);
                pl.sbx[i] = s && s->state != SANDBOX_DESTROYING ? s : NULL;
                subj[i] = subject_of(pl.sbx[i], sw->ids[i]);
        }
        p->subj = subj;
        if (p->cut)
                log_warning("disk sweep: cut short by sweep_timeout with %zu of %zu sandboxes measured in full; "
                            "the others' figures are lower bounds", p->n_recs ? (size_t) p->recs[p->n_recs - 1].sandbox : 0,
                            sw->n_ids);
        if (sweep_plan_make(p) < 0) {
                sweep_fail(sw, -ENOMEM);
                goto out;
        }
        reply = sweep_reply(&pl);
        if (!sw->dry_run)
                carry_out(&pl);
        metrics.sweeps++;
        if (sw->reply)
                reply_ok(sw->reply, reply);
        else
                json_object_put(reply);
out:
        sweep_plan_free(p);
        free(pl.sbx);
        sweep_free(sw);
}

/* Sandboxes measured so far (their workspace record came: their snapshots follow it), and the
 * bytes and files counted. */
static void on_walk_progress(SweepWalk *w, void *userdata) {
        Sweep *sw = userdata;
        size_t n;
        const SweepRecord *recs = sweep_walk_records(w, &n);
        uint64_t bytes = 0, files = 0, done = 0;
        json_object *ev;

        if (!sw->reply)
                return;
        for (size_t i = 0; i < n; i++) {
                done += recs[i].kind == SWEEP_WORK;
                bytes += recs[i].bytes;
                files += recs[i].files;
        }
        ev = reply_event_new(sw->reply, "progress");
        json_object_object_add(ev, "sandboxes_done", json_object_new_int64((int64_t) done));
        json_object_object_add(ev, "sandboxes_total", json_object_new_int64((int64_t) sw->n_ids));
        json_object_object_add(ev, "bytes", json_object_new_int64((int64_t) bytes));
        json_object_object_add(ev, "files", json_object_new_int64((int64_t) files));
        reply_event(sw->reply, ev);
}

/* ---- Starting ---------------------------------------------------------------------------- */

typedef struct ListEntry {
        uint64_t walked_usec;
        size_t order;
        const char *id;
} ListEntry;

static int cmp_walked(const void *a, const void *b) {
        const ListEntry *x = a, *y = b;
        if (x->walked_usec != y->walked_usec)
                return x->walked_usec < y->walked_usec ? -1 : 1;
        return x->order < y->order ? -1 : x->order > y->order;
}

/* The sandboxes a sweep walked least recently come first (never: first of all, newest first), so
 * that sweeps cut short by sweep_timeout still get round to every sandbox in turn. */
static int sweep_list(Sweep *sw, Sandbox *only) {
        Context *m = sw->ctx;
        _cleanup_free_ ListEntry *v = calloc(registry_count(m->registry) + 1, sizeof(*v));
        size_t n = 0;

        sw->ids = calloc(registry_count(m->registry) + 1, sizeof(*sw->ids));
        if (!sw->ids || !v)
                return -ENOMEM;
        if (only) {
                memcpy(sw->ids[sw->n_ids++], only->id, sizeof(sw->ids[0]));
                return 0;
        }
        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry))
                if (s->state != SANDBOX_DESTROYING && !s->pooled && (sw->all || sandbox_visible_to(s, reply_peer(sw->reply)))) {
                        v[n] = (ListEntry) { .walked_usec = s->disk_walked_usec, .order = n, .id = s->id };
                        n++;
                }
        qsort(v, n, sizeof(*v), cmp_walked);
        for (size_t i = 0; i < n; i++)
                memcpy(sw->ids[sw->n_ids++], v[i].id, sizeof(sw->ids[0]));
        return 0;
}

int sweep_start(Context *m, Reply *reply, Sandbox *only, bool dry_run, ProtoError *err) {
        Sweep *sw;
        int r;

        if (m->sweeper->n_sweeps >= SWEEPS_MAX)
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, NULL, "%d sweeps are running already", SWEEPS_MAX);
        sw = calloc(1, sizeof(*sw));
        if (!sw)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        *sw = (Sweep) { .ctx = m, .dry_run = dry_run, .all = !only && (!reply || reply_peer(reply)->admin),
                        .timer = !reply && !only, .start_usec = now_usec(CLOCK_MONOTONIC) };
        sw->next = m->sweeper->sweeps;
        if (m->sweeper->sweeps)
                m->sweeper->sweeps->prev = sw;
        m->sweeper->sweeps = sw;
        m->sweeper->n_sweeps++;
        if (reply)
                sw->reply = reply_ref(reply);
        if (sw->timer)
                m->sweeper->timer_sweep_running = true;
        r = sweep_list(sw, only);
        if (r >= 0)
                r = sweep_walk_start(m->event, m->state_fd, m->config.sweep_timeout_usec, sw->ids, sw->n_ids, on_walk_done, sw, &sw->walk);
        if (r < 0) {
                sweep_free(sw);
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "cannot start the disk walk: %s", strerror(-r));
        }
        sw->walk->progress = on_walk_progress;
        sw->walk->progress_usec = now_usec(CLOCK_MONOTONIC);
        return 0;
}

void sweep_free_all(Context *m) {
        while (m->sweeper->sweeps)
                sweep_free(m->sweeper->sweeps);
        m->sweeper->sweep_timer = sd_event_source_disable_unref(m->sweeper->sweep_timer);
}

static int on_sweep_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        Context *m = userdata;
        ProtoError err;

        if (!m->sweeper->timer_sweep_running && registry_count(m->registry) > 0 && !m->sweeper->stopping && sweep_start(m, NULL, NULL, false, &err) < 0)
                log_warning("disk sweep: %s", err.message);
        (void) sd_event_source_set_time_relative(src, m->config.sweep_interval_usec);
        return sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
}

int sweep_setup_timer(Context *m) {
        if (!m->config.sweep_interval_usec)
                return 0;
        return sd_event_add_time_relative(m->event, &m->sweeper->sweep_timer, CLOCK_MONOTONIC, m->config.sweep_interval_usec,
                                          USEC_PER_SEC,
                                          on_sweep_timer, m);
}
