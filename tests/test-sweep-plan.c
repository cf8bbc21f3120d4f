/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a disk sweep decides (daemon/sandbox/sweep-plan.c), from records as the walk gives them:
 * ttl and idle expiry (never for one exempt or gone), a sandbox's oldest snapshots evicted until
 * it is within limits.disk or limits.files and its runs refused when that is not enough, then
 * everyone's oldest until disk_budget or files_budget holds and new sandboxes refused when that
 * is not enough, a verdict changed only when it changes (one action each), and a figure cut short
 * by sweep_timeout never lifting a refusal. t-sweep shows the daemon carrying plans out. */
#include <string.h>

#include "sweep-plan.h"
#include "tap.h"

#define MAX_RECS 16

typedef struct Case {
        SweepRecord recs[MAX_RECS];
        size_t n_recs;
        SweepSubject subj[4];
        SweepPlan p;
} Case;

static void work(Case *c, uint32_t sandbox, uint64_t bytes, uint64_t files) {
        c->recs[c->n_recs++] = (SweepRecord) { .sandbox = sandbox, .kind = SWEEP_WORK, .bytes = bytes, .files = files };
}

static void snap(Case *c, uint32_t sandbox, const char *name, uint64_t created, uint64_t bytes, uint64_t files) {
        SweepRecord *r = &c->recs[c->n_recs++];
        *r = (SweepRecord) { .sandbox = sandbox, .kind = SWEEP_SNAPSHOT, .created_usec = created, .bytes = bytes, .files = files };
        snprintf(r->snap, sizeof(r->snap), "%s", name);
}

static int plan(Case *c, size_t n) {
        c->p.recs = c->recs;
        c->p.n_recs = c->n_recs;
        c->p.subj = c->subj;
        c->p.n = n;
        if (!c->p.now)
                c->p.now = 1000;
        return sweep_plan_make(&c->p);
}

/* The actions, as "action sandbox [snapshot] [reason]; ..." */
static const char *actions(Case *c) {
        static char buf[1024];
        size_t k = 0;

        buf[0] = '\0';
        for (size_t i = 0; i < json_object_array_length(c->p.actions); i++) {
                json_object *a = json_object_array_get_idx(c->p.actions, i), *v;
                k += (size_t) snprintf(buf + k, sizeof(buf) - k, "%s%s", i ? "; " : "",
                                       json_object_get_string(json_object_object_get(a, "action")));
                if (json_object_object_get_ex(a, "sandbox", &v))
                        k += (size_t) snprintf(buf + k, sizeof(buf) - k, " %s", json_object_get_string(v));
                if (json_object_object_get_ex(a, "snapshot", &v))
                        k += (size_t) snprintf(buf + k, sizeof(buf) - k, " %s", json_object_get_string(v));
                if (json_object_object_get_ex(a, "reason", &v))
                        k += (size_t) snprintf(buf + k, sizeof(buf) - k, " %s", json_object_get_string(v));
        }
        return buf;
}

int main(void) {
        /* Expiry. */
        {
                Case c = {};
                work(&c, 0, 10, 1);
                work(&c, 1, 20, 1);
                work(&c, 2, 30, 1);
                work(&c, 3, 40, 1);
                c.subj[0] = (SweepSubject) { .id = "a", .ttl_deadline = 900 };
                c.subj[1] = (SweepSubject) { .id = "b", .idle_deadline = 1000 };
                c.subj[2] = (SweepSubject) { .id = "c", .exempt = true, .ttl_deadline = 1 };
                c.subj[3] = (SweepSubject) { .id = "d", .ttl_deadline = 1001, .idle_deadline = 5000 };
                is_int(plan(&c, 4), 0, "a plan of four sandboxes");
                is_str(actions(&c), "destroy a ttl; destroy b idle",
                       "past its ttl, destroyed; idle past its limit, destroyed; exempt or not yet due, kept");
                ok(c.p.t[0].left == 0 && c.p.t[1].left == 0 && c.p.t[3].left == 40, "... the destroyed count nothing after");
                sweep_plan_free(&c.p);
        }
        /* A sandbox's limits.disk: its oldest snapshots first, until it is within. */
        {
                Case c = {};
                work(&c, 0, 100, 10);
                snap(&c, 0, "s2", 200, 60, 1);
                snap(&c, 0, "s1", 100, 50, 1);
                snap(&c, 0, "s3", 300, 10, 1);
                c.subj[0] = (SweepSubject) { .id = "a", .disk_limit = 150 };
                plan(&c, 1);
                is_str(actions(&c), "evict_snapshot a s1 limits.disk; evict_snapshot a s2 limits.disk",
                       "over limits.disk: the oldest snapshots go, oldest first, until it is within");
                ok(!c.p.evicted[3], "... the newest is kept");
                is_uint64(c.p.t[0].left, 110, "... 110 bytes left of 220");
                ok(!c.p.t[0].refuse, "... its runs go on");
                sweep_plan_free(&c.p);
        }
        /* Its workspace alone over it: runs refused, once; then accepted again, once. */
        {
                Case c = {};
                work(&c, 0, 200, 1);
                snap(&c, 0, "s1", 100, 10, 1);
                c.subj[0] = (SweepSubject) { .id = "a", .disk_limit = 150 };
                plan(&c, 1);
                is_str(actions(&c), "evict_snapshot a s1 limits.disk; refuse_runs a",
                       "its workspace alone over limits.disk: every snapshot goes and its runs are refused");
                ok(c.p.t[0].refuse, "... refused");
                sweep_plan_free(&c.p);
                c = (Case) {};
                work(&c, 0, 200, 1);
                c.subj[0] = (SweepSubject) { .id = "a", .disk_limit = 150, .disk_refused = true };
                plan(&c, 1);
                is_str(actions(&c), "", "refused already: no action again");
                sweep_plan_free(&c.p);
                c = (Case) {};
                work(&c, 0, 100, 1);
                c.subj[0] = (SweepSubject) { .id = "a", .disk_limit = 150, .disk_refused = true };
                plan(&c, 1);
                is_str(actions(&c), "accept_runs a", "within it again: its runs are accepted");
                sweep_plan_free(&c.p);
        }
        /* limits.files. */
        {
                Case c = {};
                work(&c, 0, 10, 100);
                snap(&c, 0, "s1", 100, 1, 50);
                c.subj[0] = (SweepSubject) { .id = "a", .files_limit = 120 };
                plan(&c, 1);
                is_str(actions(&c), "evict_snapshot a s1 limits.files", "over limits.files: evicted for its files");
                is_uint64(c.p.t[0].files_left, 100, "... 100 files left");
                sweep_plan_free(&c.p);
        }
        /* Cut short: a lower bound under the limit lifts no refusal; over it, it is over. */
        {
                Case c = {};
                work(&c, 0, 10, 1);
                work(&c, 1, 100, 1);
                c.recs[1].cut_short = 1;
                c.subj[0] = (SweepSubject) { .id = "a", .disk_limit = 150, .disk_refused = true };
                c.subj[1] = (SweepSubject) { .id = "b", .disk_limit = 150, .disk_refused = true };
                c.p.cut = true;
                plan(&c, 2);
                ok(!c.p.t[0].partial && c.p.t[1].partial, "cut short in the second: the first is whole, the second a lower bound");
                is_str(actions(&c), "accept_runs a", "... the whole one under its limit is accepted, the cut one stays refused");
                sweep_plan_free(&c.p);
        }
        /* disk_budget: everyone's oldest snapshots, across sandboxes. */
        {
                Case c = {};
                work(&c, 0, 100, 1);
                snap(&c, 0, "a-new", 500, 100, 1);
                work(&c, 1, 50, 1);
                snap(&c, 1, "b-old", 100, 100, 1);
                c.subj[0] = (SweepSubject) { .id = "a" };
                c.subj[1] = (SweepSubject) { .id = "b" };
                c.p.all = true;
                c.p.disk_budget = 250;
                plan(&c, 2);
                is_str(actions(&c), "evict_snapshot b b-old disk_budget",
                       "over disk_budget: the oldest snapshot of all goes first, whichever sandbox has it");
                ok(!c.p.budget_over, "... within it after: new sandboxes accepted");
                sweep_plan_free(&c.p);
        }
        /* Not enough: new sandboxes refused (once), and accepted again later. */
        {
                Case c = {};
                work(&c, 0, 300, 1);
                snap(&c, 0, "s1", 100, 10, 1);
                c.subj[0] = (SweepSubject) { .id = "a" };
                c.p.all = true;
                c.p.disk_budget = 250;
                plan(&c, 1);
                is_str(actions(&c), "evict_snapshot a s1 disk_budget; refuse_new",
                       "workspaces alone over disk_budget: every snapshot goes, new sandboxes are refused");
                ok(c.p.budget_over && !c.p.files_over, "... over in bytes");
                sweep_plan_free(&c.p);
                c = (Case) {};
                work(&c, 0, 100, 1);
                c.subj[0] = (SweepSubject) { .id = "a" };
                c.p.all = true;
                c.p.disk_budget = 250;
                c.p.budget_exceeded = true;
                plan(&c, 1);
                is_str(actions(&c), "accept_new", "within it again: accepted");
                sweep_plan_free(&c.p);
                c = (Case) {};
                work(&c, 0, 100, 1);
                c.subj[0] = (SweepSubject) { .id = "a" };
                c.p.disk_budget = 50;
                c.p.budget_exceeded = true;
                plan(&c, 1);
                is_str(actions(&c), "", "a sweep of one sandbox decides no budget");
                ok(c.p.budget_over, "... the verdict stays as it was");
                sweep_plan_free(&c.p);
        }
        /* files_budget. */
        {
                Case c = {};
                work(&c, 0, 1, 500);
                c.subj[0] = (SweepSubject) { .id = "a" };
                c.p.all = true;
                c.p.files_budget = 100;
                plan(&c, 1);
                is_str(actions(&c), "refuse_new", "over files_budget: refused");
                ok(c.p.budget_over && c.p.files_over, "... for its files");
                sweep_plan_free(&c.p);
        }
        /* A destroyed sandbox's snapshots are not evicted one by one, and its bytes count nothing. */
        {
                Case c = {};
                work(&c, 0, 100, 1);
                snap(&c, 0, "old", 1, 100, 1);
                work(&c, 1, 100, 1);
                snap(&c, 1, "newer", 2, 100, 1);
                c.subj[0] = (SweepSubject) { .id = "a", .ttl_deadline = 10 };
                c.subj[1] = (SweepSubject) { .id = "b" };
                c.p.all = true;
                c.p.disk_budget = 250;
                plan(&c, 2);
                is_str(actions(&c), "destroy a ttl", "an expired sandbox frees its bytes: no snapshot of another goes");
                ok(!c.p.evicted[1], "... and its own are not evicted one by one");
                sweep_plan_free(&c.p);
        }
        /* A sandbox gone during the walk: nothing decided for it. */
        {
                Case c = {};
                work(&c, 0, 500, 1);
                snap(&c, 0, "s1", 1, 100, 1);
                c.subj[0] = (SweepSubject) { .id = "a", .gone = true, .disk_limit = 10, .ttl_deadline = 1 };
                plan(&c, 1);
                is_str(actions(&c), "", "gone during the walk: neither destroyed nor evicted nor refused");
                sweep_plan_free(&c.p);
        }
        return done_testing();
}
