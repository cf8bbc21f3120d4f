/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a disk sweep decides from its walk (docs/protocol.md, "sweep"): which sandboxes expired
 * (ttl, idle), which snapshots go (oldest first, a sandbox's own over its limits.disk or
 * limits.files, then everyone's over disk_budget or files_budget), whose runs are refused, and
 * whether new sandboxes are. Pure: records and figures in, a plan and its actions out, no I/O and
 * no Sandbox, so that test-sweep-plan holds each rule without root, a daemon or a disk. sweep.c
 * walks, reports and carries the plan out. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sweep-walk.h"

/* A sandbox of the walk, as the plan needs it. */
typedef struct SweepSubject {
        const char *id;
        bool gone;                  /* went away during the walk, or is being destroyed */
        bool exempt;                /* ephemeral, pooled or still being created: never expired */
        uint64_t ttl_deadline;      /* CLOCK_MONOTONIC µs; 0: no ttl */
        uint64_t idle_deadline;     /* when it is idle too long; 0: no idle limit, or runs in flight */
        uint64_t disk_limit, files_limit; /* limits.disk, limits.files; 0: none */
        bool disk_refused;          /* its runs are refused now (the last sweep's verdict) */
} SweepSubject;

/* One sandbox's figures from the walk, and what the plan decided for it. */
typedef struct SweepTally {
        uint64_t work_bytes, work_apparent, work_files;
        uint64_t snap_bytes, snap_apparent, snap_files, partial_bytes;
        uint64_t bytes, skipped, files;
        uint64_t left;              /* bytes once the evictions are done */
        uint64_t files_left;        /* files (inodes) once the evictions are done */
        const char *expired;        /* "ttl", "idle" or NULL */
        bool refuse;                /* its runs are refused */
        bool partial;               /* the walk was cut short before it was done with this sandbox */
} SweepTally;

typedef struct SweepPlan {
        /* In. */
        const SweepRecord *recs;    /* the walk's, in its order: each sandbox's trees together */
        size_t n_recs;
        const SweepSubject *subj;   /* indexed as the records' sandbox */
        size_t n;
        uint64_t now;               /* CLOCK_MONOTONIC µs */
        bool cut;                   /* the walk stopped at sweep_timeout: the figures from its last
                                     * sandbox on are lower bounds */
        bool all;                   /* every sandbox was walked: the budget is decided */
        uint64_t disk_budget, files_budget; /* 0: none */
        bool budget_exceeded, files_budget_exceeded; /* the last verdict */
        /* Out. */
        SweepTally *t;              /* n of them */
        bool *evicted;              /* per record */
        json_object *actions;       /* [{action, sandbox, ...}] in the order decided */
        bool budget_over, files_over;
} SweepPlan;

/* Decides: 0, or -ENOMEM. A figure under a limit that is only a lower bound (cut) proves nothing:
 * such a verdict stays as it was. */
int sweep_plan_make(SweepPlan *p);
void sweep_plan_free(SweepPlan *p);
