/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"

int ring_init(Ring *r, size_t cap, size_t max_marks) {
        *r = (Ring) { .cap = cap, .max_marks = max_marks ? max_marks : 1 };
        r->buf = malloc(cap);
        r->marks = calloc(r->max_marks, sizeof(RingMark));
        if (!r->buf || !r->marks || cap == 0) {
                ring_done(r);
                return -ENOMEM;
        }
        return 0;
}

void ring_done(Ring *r) {
        free(r->buf);
        free(r->marks);
        *r = (Ring) {};
}

static RingMark *mark_at(const Ring *r, size_t i) {
        return &r->marks[(r->first_mark + i) % r->max_marks];
}

/* Marks wholly before start describe nothing that is kept. */
static void ring_trim_marks(Ring *r) {
        while (r->n_marks > 1 && mark_at(r, 1)->seq <= r->start) {
                r->first_mark = (r->first_mark + 1) % r->max_marks;
                r->n_marks--;
        }
}

static void ring_add_mark(Ring *r, int stream) {
        if (r->n_marks > 0 && mark_at(r, r->n_marks - 1)->stream == stream)
                return;
        if (r->n_marks == r->max_marks) {
                /* Out of marks: the oldest run of bytes goes, counted as dropped like any other. */
                r->start = mark_at(r, 1)->seq;
                ring_trim_marks(r);
        }
        *mark_at(r, r->n_marks) = (RingMark) { .seq = r->end, .stream = stream };
        r->n_marks++;
}

void ring_append(Ring *r, int stream, const void *data, size_t n) {
        const char *p = data;

        if (n == 0)
                return;
        ring_add_mark(r, stream);
        if (n > r->cap) {
                /* Only the last cap bytes can be kept. */
                p += n - r->cap;
                r->end += n - r->cap;
                n = r->cap;
        }
        for (size_t done = 0; done < n;) {
                size_t pos = (size_t) (r->end % r->cap);
                size_t chunk = r->cap - pos < n - done ? r->cap - pos : n - done;
                memcpy(r->buf + pos, p + done, chunk);
                done += chunk;
                r->end += chunk;
        }
        if (r->end - r->start > r->cap)
                r->start = r->end - r->cap;
        ring_trim_marks(r);
}

size_t ring_copy(const Ring *r, uint64_t from, void *buf, size_t max, int *ret_stream) {
        uint64_t stop = r->end;
        size_t n, done = 0;
        int stream = 0;

        if (from < r->start || from >= r->end)
                return 0;
        for (size_t i = 0; i < r->n_marks; i++) {
                const RingMark *m = mark_at(r, i);
                if (m->seq <= from)
                        stream = m->stream;
                else {
                        stop = m->seq;
                        break;
                }
        }
        n = (size_t) (stop - from) < max ? (size_t) (stop - from) : max;
        while (done < n) {
                size_t pos = (size_t) ((from + done) % r->cap);
                size_t chunk = r->cap - pos < n - done ? r->cap - pos : n - done;
                memcpy((char *) buf + done, r->buf + pos, chunk);
                done += chunk;
        }
        *ret_stream = stream;
        return n;
}
