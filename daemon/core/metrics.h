/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's event counters for the metrics endpoint (docs/metrics.md): bumped where each event
 * happens (runs, the pool, the sweep, sessions, error replies), read by the one file that renders
 * the Prometheus text (server/metrics-text.c). One process-wide struct, as the log's level is:
 * counting an event must not need a Context (reply.c has none), and nothing here can fail. */
#pragma once

#include <stdint.h>

#include "proto.h"

/* A run's end, as its reply says it ("reason"), or "error" when it is answered with an error
 * instead (spawn_failed, teardown_stuck: the command never started, or its end was not waited
 * for). */
#define METRICS_RUN_REASONS 8
extern const char *const metrics_run_reasons[METRICS_RUN_REASONS];

/* The run duration histogram's upper bounds, in seconds (fixed: they are part of the series). */
#define METRICS_RUN_BUCKETS 14
extern const double metrics_run_buckets[METRICS_RUN_BUCKETS];

typedef struct Metrics {
        uint64_t runs_started;
        uint64_t runs_ended[METRICS_RUN_REASONS];
        uint64_t run_duration_buckets[METRICS_RUN_BUCKETS]; /* not cumulative: one per bound */
        uint64_t run_duration_count;
        double run_duration_sum;
        uint64_t pool_hits;         /* throwaway runs given a pooled sandbox */
        uint64_t pool_create_hits;  /* creates given one (pool_create, pool_images) */
        uint64_t pool_create_misses; /* creates with such a pool that found it empty */
        uint64_t pool_misses;       /* ... that found the pool empty (with pool_size > 0) */
        uint64_t sweeps;            /* sweeps that ran to their end (dry runs included) */
        uint64_t sweep_freed_bytes; /* snapshots evicted and sandboxes expired, as measured */
        uint64_t sweep_destroyed;   /* sandboxes destroyed for their ttl or idle time */
        uint64_t sessions_opened;
        uint64_t errors[_SBX_E_MAX]; /* error replies sent, by code */
} Metrics;

extern Metrics metrics;

/* reason: one of metrics_run_reasons (anything else counts as "error"); usec: how long it ran. */
void metrics_run_ended(const char *reason, uint64_t usec);
void metrics_error(SbxErrorCode code);
