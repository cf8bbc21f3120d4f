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

/* One sandbox's figures from the walk, and what the sweep decided for it. */
typedef struct Tally {
        Sandbox *s; /* NULL when it went away during the walk */
        uint64_t work_bytes, work_apparent, work_files;
        uint64_t snap_bytes, snap_apparent, snap_files, partial_bytes;
        uint64_t bytes, skipped, files;
        uint64_t left;       /* bytes once the evictions are done */
        uint64_t files_left; /* files (inodes) once the evictions are done */
        const char *expired; /* "ttl", "idle" or NULL */
        bool refuse;
        bool partial;        /* the walk was cut short before it was done with this sandbox */
} Tally;

typedef struct Plan {
        Sweep *sw;
        const SweepRecord *recs;
        size_t n_recs;
        Tally *t;
        bool *evicted; /* per record */
        json_object *actions;
        uint64_t now_mono;
        bool cut;            /* the walk stopped at sweep_timeout: some figures are lower bounds */
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

/* ---- Deciding ---------------------------------------------------------------------------- */

static void tally(Plan *p) {
        for (size_t i = 0; i < p->n_recs; i++) {
                const SweepRecord *r = &p->recs[i];
                Tally *t = &p->t[r->sandbox];
                if (r->kind == SWEEP_WORK) {
                        t->work_bytes += r->bytes;
                        t->work_apparent += r->apparent_bytes;
                        t->work_files += r->files;
                } else if (r->kind == SWEEP_SNAPSHOT) {
                        t->snap_bytes += r->bytes;
                        t->snap_apparent += r->apparent_bytes;
                        t->snap_files += r->files;
                } else
                        t->partial_bytes += r->bytes;
                t->bytes += r->bytes;
                t->files += r->files;
                t->skipped += r->skipped;
        }
        for (size_t i = 0; i < p->sw->n_ids; i++) {
                p->t[i].left = p->t[i].bytes;
                p->t[i].files_left = p->t[i].files;
        }
}

static void add_action(Plan *p, const char *action, Sandbox *s, json_object *extra) {
        json_object *a = extra ?: json_object_new_object();
        json_object_object_add(a, "action", json_object_new_string(action));
        if (s)
                json_object_object_add(a, "sandbox", json_object_new_string(s->id));
        if (!p->sw->dry_run)
                log_info("disk sweep: %s%s%s", action, s ? " " : "", s ? s->id : "");
        json_object_array_add(p->actions, a);
}

static void expire(Plan *p) {
        for (size_t i = 0; i < p->sw->n_ids; i++) {
                Tally *t = &p->t[i];
                Sandbox *s = t->s;
                json_object *a;
                if (!s || s->ephemeral || s->pooled || s->state == SANDBOX_CREATING)
                        continue;
                if (s->ttl_usec && p->now_mono >= s->ttl_deadline_usec)
                        t->expired = "ttl";
                else if (s->idle_usec && !s->runs && !s->pending_runs && p->now_mono >= s->last_active_usec + s->idle_usec)
                        t->expired = "idle";
                if (!t->expired)
                        continue;
                a = json_object_new_object();
                json_object_object_add(a, "reason", json_object_new_string(t->expired));
                json_object_object_add(a, "bytes", json_object_new_int64((int64_t) t->bytes));
                add_action(p, "destroy", s, a);
                t->left = t->files_left = 0;
        }
}

static int cmp_created(const void *a, const void *b, void *userdata) {
        const SweepRecord *recs = userdata;
        const SweepRecord *x = &recs[*(const size_t *) a], *y = &recs[*(const size_t *) b];
        if (x->created_usec != y->created_usec)
                return x->created_usec < y->created_usec ? -1 : 1;
        return strcmp(x->snap, y->snap);
}

/* Indices of the snapshots (of one sandbox, or of all when index is SIZE_MAX), oldest first. */
static size_t *oldest_first(Plan *p, size_t index, size_t *ret_n) {
        size_t *v = calloc(p->n_recs + 1, sizeof(size_t)), n = 0;
        if (!v)
                return NULL;
        for (size_t i = 0; i < p->n_recs; i++) {
                const SweepRecord *r = &p->recs[i];
                if (r->kind == SWEEP_SNAPSHOT && !p->evicted[i] && (index == SIZE_MAX || r->sandbox == index) &&
                    p->t[r->sandbox].s && !p->t[r->sandbox].expired)
                        v[n++] = i;
        }
        qsort_r(v, n, sizeof(size_t), cmp_created, (void *) p->recs);
        *ret_n = n;
        return v;
}

static void evict(Plan *p, size_t i, const char *why) {
        const SweepRecord *r = &p->recs[i];
        Tally *t = &p->t[r->sandbox];
        json_object *a = json_object_new_object();
        char ts[UTC_TIME_MAX];

        p->evicted[i] = true;
        t->left -= r->bytes < t->left ? r->bytes : t->left;
        t->files_left -= r->files < t->files_left ? r->files : t->files_left;
        json_object_object_add(a, "snapshot", json_object_new_string(r->snap));
        json_object_object_add(a, "created_at", json_object_new_string(format_utc(ts, r->created_usec)));
        json_object_object_add(a, "bytes", json_object_new_int64((int64_t) r->bytes));
        json_object_object_add(a, "reason", json_object_new_string(why));
        add_action(p, "evict_snapshot", t->s, a);
}

static bool over_sandbox_limit(const Tally *t) {
        const SandboxLimits *l = &t->s->limits;
        return (l->disk && t->left > l->disk) || (l->files && t->files_left > l->files);
}

static void enforce_sandbox_limit(Plan *p, size_t index) {
        Tally *t = &p->t[index];
        _cleanup_free_ size_t *v = NULL;
        size_t n = 0;

        if (!t->s || t->expired || (!t->s->limits.disk && !t->s->limits.files))
                return;
        if (over_sandbox_limit(t) && (v = oldest_first(p, index, &n)))
                for (size_t k = 0; k < n && over_sandbox_limit(t); k++)
                        evict(p, v[k], t->s->limits.files && t->files_left > t->s->limits.files ? "limits.files"
                                                                                                 : "limits.disk");
        t->refuse = over_sandbox_limit(t);
        /* A lower bound under the limit proves nothing: as it was. Over it, it is over. */
        if (t->partial && !t->refuse)
                t->refuse = t->s->disk_refused;
        if (t->refuse != t->s->disk_refused) {
                json_object *a = json_object_new_object();
                json_object_object_add(a, "bytes", json_object_new_int64((int64_t) t->left));
                json_object_object_add(a, "limit", json_object_new_int64((int64_t) t->s->limits.disk));
                json_object_object_add(a, "files", json_object_new_int64((int64_t) t->files_left));
                json_object_object_add(a, "files_limit", t->s->limits.files ? json_object_new_int64((int64_t) t->s->limits.files)
                                                                            : NULL);
                add_action(p, t->refuse ? "refuse_runs" : "accept_runs", t->s, a);
        }
}

static uint64_t total_left(Plan *p) {
        uint64_t sum = 0;
        for (size_t i = 0; i < p->sw->n_ids; i++)
                sum += p->t[i].left;
        return sum;
}

static uint64_t total_files_left(Plan *p) {
        uint64_t sum = 0;
        for (size_t i = 0; i < p->sw->n_ids; i++)
                sum += p->t[i].files_left;
        return sum;
}

/* Over disk_budget in bytes (1) or over files_budget (2), or neither (0). */
static int over_budget(const Config *c, uint64_t bytes, uint64_t files) {
        uint64_t fb = files_budget(c);
        if (c->disk_budget && bytes > c->disk_budget)
                return 1;
        return fb && files > fb ? 2 : 0;
}

/* Over the global budget: the oldest snapshots of all sandboxes go first; if that is not
 * enough, new sandboxes and runs are refused until the next sweep finds room. */
static bool enforce_budget(Plan *p, bool *ret_files_over) {
        Context *m = p->sw->ctx;
        _cleanup_free_ size_t *v = NULL;
        uint64_t budget = m->config.disk_budget, fbudget = files_budget(&m->config);
        uint64_t sum = total_left(p), fsum = total_files_left(p);
        size_t n = 0;
        int why;
        bool over;

        *ret_files_over = false;
        if (!budget && !fbudget)
                return false;
        if (over_budget(&m->config, sum, fsum) && (v = oldest_first(p, SIZE_MAX, &n)))
                for (size_t k = 0; k < n && (why = over_budget(&m->config, sum, fsum)); k++) {
                        const SweepRecord *r = &p->recs[v[k]];
                        sum -= r->bytes < sum ? r->bytes : sum;
                        fsum -= r->files < fsum ? r->files : fsum;
                        evict(p, v[k], why == 2 ? "files_budget" : "disk_budget");
                }
        why = over_budget(&m->config, total_left(p), total_files_left(p));
        over = why != 0;
        *ret_files_over = why == 2;
        if (p->cut && !over) {
                over = m->sweeper->disk_budget_exceeded;
                *ret_files_over = m->sweeper->files_budget_exceeded;
        }
        if (over != m->sweeper->disk_budget_exceeded) {
                json_object *a = json_object_new_object();
                json_object_object_add(a, "bytes", json_object_new_int64((int64_t) total_left(p)));
                json_object_object_add(a, "budget", budget ? json_object_new_int64((int64_t) budget) : NULL);
                json_object_object_add(a, "files", json_object_new_int64((int64_t) total_files_left(p)));
                json_object_object_add(a, "files_budget", fbudget ? json_object_new_int64((int64_t) fbudget) : NULL);
                add_action(p, over ? "refuse_new" : "accept_new", NULL, a);
        }
        return over;
}

/* ---- Reporting --------------------------------------------------------------------------- */

static json_object *usage_json(uint64_t bytes, uint64_t apparent, uint64_t files) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "bytes", json_object_new_int64((int64_t) bytes));
        json_object_object_add(o, "apparent_bytes", json_object_new_int64((int64_t) apparent));
        json_object_object_add(o, "files", json_object_new_int64((int64_t) files));
        return o;
}

static json_object *snapshots_json(Plan *p, size_t index) {
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

static json_object *sandbox_report(Plan *p, size_t index) {
        Tally *t = &p->t[index];
        json_object *o = json_object_new_object();
        json_object_object_add(o, "id", json_object_new_string(p->sw->ids[index]));
        json_object_object_add(o, "name", t->s && t->s->name ? json_object_new_string(t->s->name) : NULL);
        json_object_object_add(o, "workspace", usage_json(t->work_bytes, t->work_apparent, t->work_files));
        json_object_object_add(o, "snapshots", snapshots_json(p, index));
        json_object_object_add(o, "snapshot_bytes", json_object_new_int64((int64_t) (t->snap_bytes + t->partial_bytes)));
        json_object_object_add(o, "bytes", json_object_new_int64((int64_t) t->bytes));
        json_object_object_add(o, "files", json_object_new_int64((int64_t) (t->work_files + t->snap_files)));
        json_object_object_add(o, "skipped", json_object_new_int64((int64_t) t->skipped));
        json_object_object_add(o, "disk_limit", t->s && t->s->limits.disk ? json_object_new_int64((int64_t) t->s->limits.disk)
                                                                           : NULL);
        json_object_object_add(o, "files_limit", t->s && t->s->limits.files ? json_object_new_int64((int64_t) t->s->limits.files)
                                                                             : NULL);
        json_object_object_add(o, "runs_refused", json_object_new_boolean(t->refuse));
        json_object_object_add(o, "expired", t->expired ? json_object_new_string(t->expired) : NULL);
        json_object_object_add(o, "partial", json_object_new_boolean(t->partial));
        return o;
}

static json_object *sweep_reply(Plan *p, bool budget_over) {
        Context *m = p->sw->ctx;
        json_object *reply = json_object_new_object(), *arr = json_object_new_array(), *tot;
        uint64_t bytes = 0, apparent = 0, files = 0, wbytes = 0, sbytes = 0;
        struct statvfs sv;

        for (size_t i = 0; i < p->sw->n_ids; i++) {
                Tally *t = &p->t[i];
                json_object_array_add(arr, sandbox_report(p, i));
                bytes += t->bytes;
                apparent += t->work_apparent + t->snap_apparent;
                files += t->work_files + t->snap_files;
                wbytes += t->work_bytes;
                sbytes += t->snap_bytes + t->partial_bytes;
        }
        tot = usage_json(bytes, apparent, files);
        json_object_object_add(tot, "sandboxes", json_object_new_int64((int64_t) p->sw->n_ids));
        json_object_object_add(tot, "workspace_bytes", json_object_new_int64((int64_t) wbytes));
        json_object_object_add(tot, "snapshot_bytes", json_object_new_int64((int64_t) sbytes));
        json_object_object_add(reply, "dry_run", json_object_new_boolean(p->sw->dry_run));
        json_object_object_add(reply, "partial", json_object_new_boolean(p->cut));
        json_object_object_add(reply, "sandboxes", arr);
        json_object_object_add(reply, "totals", tot);
        json_object_object_add(reply, "disk_budget", m->config.disk_budget ? json_object_new_int64((int64_t) m->config.disk_budget)
                                                                           : NULL);
        json_object_object_add(reply, "budget_exceeded", json_object_new_boolean(budget_over));
        json_object_object_add(reply, "files_budget", files_budget(&m->config) ? json_object_new_int64((int64_t) files_budget(&m->config))
                                                                               : NULL);
        if (fstatvfs(m->state_fd, &sv) < 0)
                sv = (struct statvfs) { .f_frsize = 0 };
        json_object_object_add(reply, "free_bytes", sv.f_frsize ? json_object_new_int64((int64_t) ((uint64_t) sv.f_bavail * sv.f_frsize))
                                                                : NULL);
        json_object_object_add(reply, "free_files", sv.f_files ? json_object_new_int64((int64_t) sv.f_favail) : NULL);
        json_object_object_add(reply, "actions", json_object_get(p->actions));
        json_object_object_add(reply, "duration_s",
                               proto_seconds(now_usec(CLOCK_MONOTONIC) - p->sw->start_usec));
        return reply;
}

/* ---- Doing ------------------------------------------------------------------------------- */

static void carry_out(Plan *p, bool budget_over, bool files_over) {
        Context *m = p->sw->ctx;

        for (size_t i = 0; i < p->n_recs; i++)
                if (p->evicted[i]) {
                        int r = snapshot_delete(p->t[p->recs[i].sandbox].s, p->recs[i].snap);
                        if (r < 0 && r != -ENOENT)
                                log_warning_errno(r, "disk sweep: cannot remove snapshot %s of %s: %m", p->recs[i].snap,
                                                  p->sw->ids[p->recs[i].sandbox]);
                        else
                                metrics.sweep_freed_bytes += p->recs[i].bytes;
                }
        for (size_t i = 0; i < p->sw->n_ids; i++) {
                Tally *t = &p->t[i];
                if (!t->s)
                        continue;
                /* Walked: to its end, or cut short in it (the first of those not whole). */
                if (!t->partial || (i == 0 || !p->t[i - 1].partial))
                        t->s->disk_walked_usec = p->sw->start_usec;
                /* inspect's disk_bytes stays the last whole measurement. */
                if (!t->partial) {
                        t->s->disk_bytes = t->left;
                        t->s->disk_files = t->files_left;
                        t->s->disk_measured = true;
                }
                /* Kept in its record: a restart must not forget that its runs are refused. */
                if (t->s->disk_refused != t->refuse) {
                        t->s->disk_refused = t->refuse;
                        if (!t->s->ephemeral && !t->s->pooled && !t->s->transient && t->s->state != SANDBOX_DESTROYING)
                                (void) state_save(t->s);
                }
        }
        if (p->sw->all) {
                m->sweeper->disk_budget_exceeded = budget_over;
                m->sweeper->files_budget_exceeded = budget_over && files_over;
        }
        /* Last: a destroyed sandbox may be freed at once. */
        for (size_t i = 0; i < p->sw->n_ids; i++)
                if (p->t[i].s && p->t[i].expired) {
                        metrics.sweep_destroyed++;
                        metrics.sweep_freed_bytes += p->t[i].bytes;
                        sandbox_destroy(p->t[i].s, p->t[i].expired[0] == 't' ? "ttl expired" : "idle too long");
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

static void on_walk_done(SweepWalk *w, int r, void *userdata) {
        Sweep *sw = userdata;
        Context *m = sw->ctx;
        Plan p = { .sw = sw, .now_mono = now_usec(CLOCK_MONOTONIC) };
        json_object *reply;
        bool over, files_over;

        if (r < 0 && r != -ETIME) {
                sweep_fail(sw, r);
                sweep_free(sw);
                return;
        }
        p.recs = sweep_walk_records(w, &p.n_recs);
        p.cut = r == -ETIME || (p.n_recs > 0 && p.recs[p.n_recs - 1].cut_short);
        p.t = calloc(sw->n_ids + 1, sizeof(Tally));
        p.evicted = calloc(p.n_recs + 1, sizeof(bool));
        p.actions = json_object_new_array();
        if (!p.t || !p.evicted) {
                sweep_fail(sw, -ENOMEM);
                goto out;
        }
        for (size_t i = 0; i < sw->n_ids; i++) {
                Sandbox *s = registry_find(m->registry, sw->ids[i]);
                p.t[i].s = s && s->state != SANDBOX_DESTROYING ? s : NULL;
        }
        /* The walk goes through the sandboxes in order, each one's trees together: those before
         * the one of its last record are whole. */
        for (size_t i = 0; p.cut && i < sw->n_ids; i++)
                p.t[i].partial = p.n_recs == 0 || i >= p.recs[p.n_recs - 1].sandbox;
        if (p.cut)
                log_warning("disk sweep: cut short by sweep_timeout with %zu of %zu sandboxes measured in full; "
                            "the others' figures are lower bounds", p.n_recs ? (size_t) p.recs[p.n_recs - 1].sandbox : 0,
                            sw->n_ids);
        tally(&p);
        expire(&p);
        for (size_t i = 0; i < sw->n_ids; i++)
                enforce_sandbox_limit(&p, i);
        files_over = m->sweeper->files_budget_exceeded;
        over = sw->all ? enforce_budget(&p, &files_over) : m->sweeper->disk_budget_exceeded;
        reply = sweep_reply(&p, over);
        if (!sw->dry_run)
                carry_out(&p, over, files_over);
        metrics.sweeps++;
        if (sw->reply)
                reply_ok(sw->reply, reply);
        else
                json_object_put(reply);
out:
        json_object_put(p.actions);
        free(p.t);
        free(p.evicted);
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
