/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Latency samples (milliseconds) and their order statistics. */
#pragma once

#include <stddef.h>
#include <time.h>

typedef struct Samples {
        double *v;
        size_t n, cap;
        int sorted;
} Samples;

int samples_add(Samples *s, double ms);
/* Appends every sample of src to dst. */
int samples_merge(Samples *dst, const Samples *src);
/* Nearest-rank quantile, q in [0, 1]; 0 when there are no samples. */
double samples_quantile(Samples *s, double q);
void samples_done(Samples *s);

static inline double ts_ms(const struct timespec *a, const struct timespec *b) {
        return (double) (b->tv_sec - a->tv_sec) * 1e3 + (double) (b->tv_nsec - a->tv_nsec) / 1e6;
}

static inline struct timespec now_mono(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return t;
}
