/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "pipe-peek.h"
#include "ring.h"

#define RING_MAX_MARKS (1u << 20)

static size_t ring_data_offset(size_t max_marks) {
        size_t n = sizeof(RingHeader) + max_marks * sizeof(RingMark);
        return (n + 63) & ~(size_t) 63;
}

/* Version 2 on, between the marks and the data: the read in flight, on a line of its own, then
 * its staging area. */
static size_t ring_buf_offset(uint32_t version, size_t max_marks) {
        return ring_data_offset(max_marks) + (version >= 2 ? 64 + RING_STAGING : 0);
}

static size_t ring_size_of(uint32_t version, size_t cap, size_t max_marks) {
        return ring_buf_offset(version, max_marks ? max_marks : 1) + cap;
}

size_t ring_size(size_t cap, size_t max_marks) {
        return ring_size_of(RING_VERSION, cap, max_marks);
}

_Static_assert(sizeof(RingInFlight) <= 64, "the read in flight fits its line");

static void ring_attach(Ring *r, void *mem, bool owned) {
        RingHeader *h = mem;
        char *reading = (char *) mem + ring_data_offset(h->max_marks);

        *r = (Ring) { .h = h, .buf = (char *) mem + ring_buf_offset(h->version, h->max_marks), .cap = h->cap, .owned = owned };
        if (h->version >= 2) {
                r->reading = (RingInFlight *) reading;
                r->staging = reading + 64;
        }
}

static uint64_t in_flight_check(const RingInFlight *f) {
        const unsigned char *p = (const unsigned char *) f;
        uint64_t x = UINT64_C(0xcbf29ce484222325);

        for (size_t i = 0; i < offsetof(RingInFlight, check); i++)
                x = (x ^ p[i]) * UINT64_C(0x100000001b3);
        return x;
}

int ring_format(Ring *r, void *mem, size_t size, size_t cap, size_t max_marks, uint64_t seq) {
        RingHeader *h = mem;

        max_marks = max_marks ? max_marks : 1;
        if (cap == 0 || max_marks > RING_MAX_MARKS || size < ring_size(cap, max_marks))
                return -EINVAL;
        memset(h, 0, sizeof(*h));
        /* No read in flight: a stale one would name a seq of another ring. */
        memset((char *) mem + ring_data_offset(max_marks), 0, sizeof(RingInFlight));
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

        if (size < sizeof(*h) || h->magic != RING_MAGIC || h->version < 1 || h->version > RING_VERSION ||
            h->max_marks == 0 || h->max_marks > RING_MAX_MARKS || h->cap == 0 || h->cap > size ||
            ring_size_of(h->version, h->cap, h->max_marks) != size)
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

/* A daemon killed in ring_read() after its announcement: the read took place when the staging
 * area's first byte is no longer its complement, and its bytes are not in the ring yet when the
 * announced seq is still the end (the append moves end last, by all of them at once: at most cap).
 * A read in flight that fails its check was being announced: its read had not taken place. */
static size_t ring_finish_read(Ring *r) {
        const RingInFlight *f = r->reading;
        size_t n;

        if (!f || f->check != in_flight_check(f) || f->bytes == 0 || f->bytes > RING_STAGING || f->bytes > r->cap ||
            f->stream > 1 || f->first > 0xff || f->seq != r->h->end || (unsigned char) r->staging[0] != f->first)
                return 0;
        n = (size_t) f->bytes;
        ring_append(r, (int) f->stream, r->staging, n);
        return n;
}

int ring_open(Ring *r, void *mem, size_t size) {
        if (!ring_header_valid(mem, size))
                return -EBADMSG;
        ring_attach(r, mem, false);
        return (int) ring_finish_read(r);
}

bool ring_torn_end(const void *mem, size_t size, uint64_t *ret_end) {
        const RingHeader *h = mem;
        if (size < sizeof(*h) || h->magic != RING_MAGIC || h->version < 1 || h->version > RING_VERSION)
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

/* The fields first, their check last: a daemon killed in between leaves one that fails it. */
static void ring_announce(Ring *r, const RingInFlight *f) {
        RingInFlight *to = r->reading;

        to->seq = f->seq;
        to->bytes = f->bytes;
        to->stream = f->stream;
        to->first = f->first;
        __atomic_store_n(&to->check, in_flight_check(f), __ATOMIC_RELEASE);
}

ssize_t ring_read(Ring *r, int stream, int fd, size_t max) {
        static char plain[RING_STAGING];
        unsigned char first = 0;
        int avail = 0, k = -1;
        ssize_t n;

        max = max < RING_STAGING ? max : RING_STAGING;
        max = max < r->cap ? max : r->cap;
        if (r->reading) {
                k = pipe_peek_byte(fd, &first);
                if (k == 0 || (k < 0 && errno == EAGAIN))
                        return k;
        }
        if (k < 0 || ioctl(fd, FIONREAD, &avail) < 0 || avail <= 0) {
                /* No pipe (a terminal), or a version 1 ring: a plain read. */
                n = read(fd, plain, max);
                if (n > 0)
                        ring_append(r, stream, plain, (size_t) n);
                return n;
        }
        /* The pipe holds avail bytes and is ours alone to read: a read of them returns them all. */
        RingInFlight f = {
                .seq = r->h->end,
                .bytes = (size_t) avail < max ? (uint64_t) avail : max,
                .stream = (uint32_t) stream,
                .first = first,
        };
        r->staging[0] = (char) ~first;
        ring_announce(r, &f);
        n = read(fd, r->staging, (size_t) f.bytes);
        if (n > 0 && (uint64_t) n != f.bytes) {
                f.bytes = (uint64_t) n;
                ring_announce(r, &f);
        }
        if (n > 0)
                ring_append(r, stream, r->staging, (size_t) n);
        return n;
}

int ring_stage_new(void) {
        int fds[2], fd, k;
        char path[64];

        if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[0]);
        fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
        k = -errno;
        close(fds[0]);
        close(fds[1]);
        return fd < 0 ? k : fd;
}

ssize_t ring_read_terminal(Ring *r, int master, int stage, size_t max) {
        int queued = 0;
        ssize_t n;

        if (stage < 0)
                return ring_read(r, 0, master, max);
        max = max < RING_STAGING ? max : RING_STAGING;
        max = max < r->cap ? max : r->cap; /* all of it is read at once, none waits in stage */
        if (ioctl(stage, FIONREAD, &queued) < 0 || queued <= 0) {
                n = splice(master, NULL, stage, NULL, max, SPLICE_F_NONBLOCK);
                if (n < 0 && errno == EINVAL) /* a kernel that cannot splice from a terminal */
                        return ring_read(r, 0, master, max);
                if (n <= 0)
                        return n;
        }
        return ring_read(r, 0, stage, max);
}

void ring_read_staged(Ring *r, int stage) {
        int queued = 0;

        while (stage >= 0 && ioctl(stage, FIONREAD, &queued) >= 0 && queued > 0)
                if (ring_read(r, 0, stage, RING_STAGING) <= 0)
                        break;
}
