/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "stats.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int samples_add(Samples *s, double ms) {
        if (s->n == s->cap) {
                size_t cap = s->cap ? s->cap * 2 : 256;
                double *v = realloc(s->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                s->v = v;
                s->cap = cap;
        }
        s->v[s->n++] = ms;
        s->sorted = 0;
        return 0;
}

int samples_merge(Samples *dst, const Samples *src) {
        for (size_t i = 0; i < src->n; i++) {
                int r = samples_add(dst, src->v[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return (x > y) - (x < y);
}

double samples_quantile(Samples *s, double q) {
        size_t rank;

        if (s->n == 0)
                return 0;
        if (!s->sorted) {
                qsort(s->v, s->n, sizeof(*s->v), cmp_double);
                s->sorted = 1;
        }
        /* Nearest rank: the smallest sample with at least q of the samples at or below it. */
        rank = (size_t) ceil(q * (double) s->n);
        if (rank < 1)
                rank = 1;
        return s->v[rank - 1];
}

void samples_done(Samples *s) {
        free(s->v);
        *s = (Samples) {};
}
