/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"

#define RING_MAX_MARKS (1u << 20)

static size_t ring_data_offset(size_t max_marks) {
        size_t n = sizeof(RingHeader) + max_marks * sizeof(RingMark);
        return (n + 63) & ~(size_t) 63;
}

size_t ring_size(size_t cap, size_t max_marks) {
        return ring_data_offset(max_marks ? max_marks : 1) + cap;
}

static void ring_attach(Ring *r, void *mem, bool owned) {
        RingHeader *h = mem;
        *r = (Ring) { .h = h, .buf = (char *) mem + ring_data_offset(h->max_marks), .cap = h->cap, .owned = owned };
}

int ring_format(Ring *r, void *mem, size_t size, size_t cap, size_t max_marks, uint64_t seq) {
        RingHeader *h = mem;

        max_marks = max_marks ? max_marks : 1;
        if (cap == 0 || max_marks > RING_MAX_MARKS || size < ring_size(cap, max_marks))
                return -EINVAL;
        memset(h, 0, sizeof(*h));
        *h = (RingHeader) {
                .version = RING_VERSION,
                .max_marks = (uint32_t) max_marks,
                .cap = cap,
                .start = seq,
                .end = seq,
        };
        /* The magic last: a header half made is not one. */
        __atomic_store_n(&h->magic, RING_MAGIC, __ATOMIC_RELEASE);
        ring_attach(r, mem, false);
        return 0;
}

int ring_init(Ring *r, size_t cap, size_t max_marks) {
        size_t size = ring_size(cap, max_marks);
        void *mem = cap ? calloc(1, size) : NULL;

        *r = (Ring) {};
        if (!mem || ring_format(r, mem, size, cap, max_marks, 0) < 0) {
                free(mem);
                return -ENOMEM;
        }
        r->owned = true;
        return 0;
}

void ring_done(Ring *r) {
        if (r->owned)
                free(r->h);
        *r = (Ring) {};
}

static uint32_t span_first(const RingHeader *h) {
        return (uint32_t) (h->mark_span >> 32);
}

static uint32_t span_n(const RingHeader *h) {
        return (uint32_t) h->mark_span;
}

static void span_set(RingHeader *h, uint32_t first, uint32_t n) {
        __atomic_store_n(&h->mark_span, (uint64_t) first << 32 | n, __ATOMIC_RELEASE);
}

static RingMark *mark_at(const Ring *r, size_t i) {
        return &r->h->marks[(span_first(r->h) + i) % r->h->max_marks];
}

/* What ring_append() leaves at every point: see ring.h. */
static bool ring_header_valid(const RingHeader *h, size_t size) {
        uint64_t prev = 0;

        if (size < sizeof(*h) || h->magic != RING_MAGIC || h->version != RING_VERSION || h->max_marks == 0 ||
            h->max_marks > RING_MAX_MARKS || h->cap == 0 || h->cap > size || ring_size(h->cap, h->max_marks) != size)
                return false;
        if (h->start > h->end || h->end - h->start > h->cap || span_first(h) >= h->max_marks || span_n(h) > h->max_marks)
                return false;
        if (h->start < h->end && span_n(h) == 0)
                return false;
        for (uint64_t i = 0; i < span_n(h); i++) {
                const RingMark *m = &h->marks[(span_first(h) + i) % h->max_marks];
                if (m->stream > 1 || m->seq > h->end || (i > 0 && m->seq <= prev) || (i == 0 && h->start < h->end && m->seq > h->start))
                        return false;
                prev = m->seq;
        }
        return true;
}

int ring_open(Ring *r, void *mem, size_t size) {
        if (!ring_header_valid(mem, size))
                return -EBADMSG;
        ring_attach(r, mem, false);
        return 0;
}

bool ring_torn_end(const void *mem, size_t size, uint64_t *ret_end) {
        const RingHeader *h = mem;
        if (size < sizeof(*h) || h->magic != RING_MAGIC || h->version != RING_VERSION)
                return false;
        *ret_end = h->end;
        return true;
}

/* start moves forward only, and before the bytes it gives up are overwritten. */
static void ring_set_start(Ring *r, uint64_t start) {
        if (start > r->h->start)
                __atomic_store_n(&r->h->start, start, __ATOMIC_RELEASE);
}

/* Marks wholly before start describe nothing that is kept. */
static void ring_trim_marks(Ring *r) {
        RingHeader *h = r->h;
        while (span_n(h) > 1 && mark_at(r, 1)->seq <= h->start)
                span_set(h, (span_first(h) + 1) % h->max_marks, span_n(h) - 1);
}

static void ring_add_mark(Ring *r, int stream) {
        RingHeader *h = r->h;

        if (span_n(h) > 0 && mark_at(r, span_n(h) - 1)->stream == (uint32_t) stream)
                return;
        if (span_n(h) == h->max_marks) {
                /* Out of marks: the oldest run of bytes goes, counted as dropped like any other. */
                ring_set_start(r, h->max_marks > 1 ? mark_at(r, 1)->seq : h->end);
                ring_trim_marks(r);
                if (span_n(h) == h->max_marks) /* one mark only: it is replaced */
                        span_set(h, span_first(h), 0);
        }
        /* The slot first, then the count: a mark at end describes no byte until end moves. */
        *mark_at(r, span_n(h)) = (RingMark) { .seq = h->end, .stream = (uint32_t) stream };
        span_set(h, span_first(h), span_n(h) + 1);
}

/* At most cap bytes: the bytes they overwrite leave the ring first, end moves last. */
static void ring_append_some(Ring *r, int stream, const char *p, size_t n) {
        RingHeader *h = r->h;
        uint64_t end = h->end;

        if (end + n - h->start > r->cap)
                ring_set_start(r, end + n - r->cap);
        ring_trim_marks(r);
        for (size_t done = 0; done < n;) {
                size_t pos = (size_t) ((end + done) % r->cap);
                size_t chunk = r->cap - pos < n - done ? r->cap - pos : n - done;
                memcpy(r->buf + pos, p + done, chunk);
                done += chunk;
        }
        ring_add_mark(r, stream);
        __atomic_store_n(&h->end, end + n, __ATOMIC_RELEASE);
        ring_trim_marks(r);
}

void ring_append(Ring *r, int stream, const void *data, size_t n) {
        const char *p = data;

        /* More than the ring holds goes in slices of it; only the last slice stays. */
        while (n > 0) {
                size_t chunk = n < r->cap ? n : r->cap;
                ring_append_some(r, stream, p, chunk);
                p += chunk;
                n -= chunk;
        }
}

size_t ring_copy(const Ring *r, uint64_t from, void *buf, size_t max, int *ret_stream) {
        const RingHeader *h = r->h;
        uint64_t stop = h->end;
        size_t n, done = 0;
        int stream = 0;

        if (from < h->start || from >= h->end)
                return 0;
        for (size_t i = 0; i < span_n(h); i++) {
                const RingMark *m = mark_at(r, i);
                if (m->seq <= from)
                        stream = (int) m->stream;
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
