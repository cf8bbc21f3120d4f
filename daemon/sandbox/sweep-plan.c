/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a disk sweep decides from its walk (sweep-plan.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "sweep-plan.h"
#include "util.h"

static void tally(SweepPlan *p) {
        for (size_t i = 0; i < p->n_recs; i++) {
                const SweepRecord *r = &p->recs[i];
                SweepTally *t = &p->t[r->sandbox];
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
        for (size_t i = 0; i < p->n; i++) {
                p->t[i].left = p->t[i].bytes;
                p->t[i].files_left = p->t[i].files;
        }
}

static void add_action(SweepPlan *p, const char *action, const SweepSubject *s, json_object *extra) {
        json_object *a = extra ?: json_object_new_object();
        json_object_object_add(a, "action", json_object_new_string(action));
        if (s)
                json_object_object_add(a, "sandbox", json_object_new_string(s->id));
        json_object_array_add(p->actions, a);
}

static void expire(SweepPlan *p) {
        for (size_t i = 0; i < p->n; i++) {
                const SweepSubject *s = &p->subj[i];
                SweepTally *t = &p->t[i];
                json_object *a;
                if (s->gone || s->exempt)
                        continue;
                if (s->ttl_deadline && p->now >= s->ttl_deadline)
                        t->expired = "ttl";
                else if (s->idle_deadline && p->now >= s->idle_deadline)
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

/* Indices of the snapshots (of one sandbox, or of all when index is SIZE_MAX) that may go, oldest
 * first. */
static size_t *oldest_first(SweepPlan *p, size_t index, size_t *ret_n) {
        size_t *v = calloc(p->n_recs + 1, sizeof(size_t)), n = 0;
        if (!v)
                return NULL;
        for (size_t i = 0; i < p->n_recs; i++) {
                const SweepRecord *r = &p->recs[i];
                if (r->kind == SWEEP_SNAPSHOT && !p->evicted[i] && (index == SIZE_MAX || r->sandbox == index) &&
                    !p->subj[r->sandbox].gone && !p->t[r->sandbox].expired)
                        v[n++] = i;
        }
        qsort_r(v, n, sizeof(size_t), cmp_created, (void *) p->recs);
        *ret_n = n;
        return v;
}

static void evict(SweepPlan *p, size_t i, const char *why) {
        const SweepRecord *r = &p->recs[i];
        SweepTally *t = &p->t[r->sandbox];
        json_object *a = json_object_new_object();
        char ts[UTC_TIME_MAX];

        p->evicted[i] = true;
        t->left -= r->bytes < t->left ? r->bytes : t->left;
        t->files_left -= r->files < t->files_left ? r->files : t->files_left;
        json_object_object_add(a, "snapshot", json_object_new_string(r->snap));
        json_object_object_add(a, "created_at", json_object_new_string(format_utc(ts, r->created_usec)));
        json_object_object_add(a, "bytes", json_object_new_int64((int64_t) r->bytes));
        json_object_object_add(a, "reason", json_object_new_string(why));
        add_action(p, "evict_snapshot", &p->subj[r->sandbox], a);
}

static bool over_sandbox_limit(const SweepSubject *s, const SweepTally *t) {
        return (s->disk_limit && t->left > s->disk_limit) || (s->files_limit && t->files_left > s->files_limit);
}

static void enforce_sandbox_limit(SweepPlan *p, size_t index) {
        const SweepSubject *s = &p->subj[index];
        SweepTally *t = &p->t[index];
        _cleanup_free_ size_t *v = NULL;
        size_t n = 0;

        if (s->gone || t->expired || (!s->disk_limit && !s->files_limit))
                return;
        if (over_sandbox_limit(s, t) && (v = oldest_first(p, index, &n)))
                for (size_t k = 0; k < n && over_sandbox_limit(s, t); k++)
                        evict(p, v[k], s->files_limit && t->files_left > s->files_limit ? "limits.files" : "limits.disk");
        t->refuse = over_sandbox_limit(s, t);
        /* A lower bound under the limit proves nothing: as it was. Over it, it is over. */
        if (t->partial && !t->refuse)
                t->refuse = s->disk_refused;
        if (t->refuse != s->disk_refused) {
                json_object *a = json_object_new_object();
                json_object_object_add(a, "bytes", json_object_new_int64((int64_t) t->left));
                json_object_object_add(a, "limit", json_object_new_int64((int64_t) s->disk_limit));
                json_object_object_add(a, "files", json_object_new_int64((int64_t) t->files_left));
                json_object_object_add(a, "files_limit", s->files_limit ? json_object_new_int64((int64_t) s->files_limit) : NULL);
                add_action(p, t->refuse ? "refuse_runs" : "accept_runs", s, a);
        }
}

static uint64_t total_left(const SweepPlan *p) {
        uint64_t sum = 0;
        for (size_t i = 0; i < p->n; i++)
                sum += p->t[i].left;
        return sum;
}

static uint64_t total_files_left(const SweepPlan *p) {
        uint64_t sum = 0;
        for (size_t i = 0; i < p->n; i++)
                sum += p->t[i].files_left;
        return sum;
}

/* Over disk_budget in bytes (1) or over files_budget (2), or neither (0). */
static int over_budget(const SweepPlan *p, uint64_t bytes, uint64_t files) {
        if (p->disk_budget && bytes > p->disk_budget)
                return 1;
        return p->files_budget && files > p->files_budget ? 2 : 0;
}

/* Over the global budget: the oldest snapshots of all sandboxes go first; if that is not
 * enough, new sandboxes and runs are refused until the next sweep finds room. */
static void enforce_budget(SweepPlan *p) {
        _cleanup_free_ size_t *v = NULL;
        uint64_t sum = total_left(p), fsum = total_files_left(p);
        size_t n = 0;
        int why;
        bool over;

        p->budget_over = p->budget_exceeded;
        p->files_over = p->files_budget_exceeded;
        if (!p->all)
                return;
        p->files_over = false;
        if (!p->disk_budget && !p->files_budget) {
                p->budget_over = false;
                return;
        }
        if (over_budget(p, sum, fsum) && (v = oldest_first(p, SIZE_MAX, &n)))
                for (size_t k = 0; k < n && (why = over_budget(p, sum, fsum)); k++) {
                        const SweepRecord *r = &p->recs[v[k]];
                        sum -= r->bytes < sum ? r->bytes : sum;
                        fsum -= r->files < fsum ? r->files : fsum;
                        evict(p, v[k], why == 2 ? "files_budget" : "disk_budget");
                }
        why = over_budget(p, total_left(p), total_files_left(p));
        over = why != 0;
        p->files_over = why == 2;
        if (p->cut && !over) {
                over = p->budget_exceeded;
                p->files_over = p->files_budget_exceeded;
        }
        if (over != p->budget_exceeded) {
                json_object *a = json_object_new_object();
                json_object_object_add(a, "bytes", json_object_new_int64((int64_t) total_left(p)));
                json_object_object_add(a, "budget", p->disk_budget ? json_object_new_int64((int64_t) p->disk_budget) : NULL);
                json_object_object_add(a, "files", json_object_new_int64((int64_t) total_files_left(p)));
                json_object_object_add(a, "files_budget", p->files_budget ? json_object_new_int64((int64_t) p->files_budget) : NULL);
                add_action(p, over ? "refuse_new" : "accept_new", NULL, a);
        }
        p->budget_over = over;
}

int sweep_plan_make(SweepPlan *p) {
        p->t = calloc(p->n + 1, sizeof(SweepTally));
        p->evicted = calloc(p->n_recs + 1, sizeof(bool));
        p->actions = json_object_new_array();
        if (!p->t || !p->evicted || !p->actions)
                return -ENOMEM;
        /* The walk goes through the sandboxes in order, each one's trees together: those before
         * the one of its last record are whole. */
        for (size_t i = 0; p->cut && i < p->n; i++)
                p->t[i].partial = p->n_recs == 0 || i >= p->recs[p->n_recs - 1].sandbox;
        tally(p);
        expire(p);
        for (size_t i = 0; i < p->n; i++)
                enforce_sandbox_limit(p, i);
        enforce_budget(p);
        return 0;
}

void sweep_plan_free(SweepPlan *p) {
        free(p->t);
        free(p->evicted);
        json_object_put(p->actions);
        p->t = NULL;
        p->evicted = NULL;
        p->actions = NULL;
}
