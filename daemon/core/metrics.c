/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <string.h>

#include "macro.h"
#include "metrics.h"

Metrics metrics;

const char *const metrics_run_reasons[METRICS_RUN_REASONS] = {
        "exited", "signaled", "timeout", "cpu_limit", "oom", "killed", "destroyed", "error",
};

const double metrics_run_buckets[METRICS_RUN_BUCKETS] = {
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
};

void metrics_run_ended(const char *reason, uint64_t usec) {
        double s = (double) usec / 1e6;
        unsigned i = 0;

        while (i < METRICS_RUN_REASONS - 1 && strcmp(metrics_run_reasons[i], reason) != 0)
                i++;
        metrics.runs_ended[i]++;
        for (unsigned b = 0; b < METRICS_RUN_BUCKETS; b++)
                if (s <= metrics_run_buckets[b]) {
                        metrics.run_duration_buckets[b]++;
                        break;
                }
        metrics.run_duration_count++;
        metrics.run_duration_sum += s;
}

void metrics_error(SbxErrorCode code) {
        if ((unsigned) code < ELEMENTSOF(metrics.errors))
                metrics.errors[code]++;
}
