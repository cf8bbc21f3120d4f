/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "pipe-peek.h"
#include "run-capture.h"

#define CAPTURE_MAGIC 0x3170614378625353ULL /* "SSbxCap1", little-endian */
#define CAPTURE_VERSION 2 /* 1: no staging area, no read in flight (an earlier daemon's, still opened) */
#define CAPTURE_HEADER_SIZE 4096u
#define CAPTURE_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

typedef struct CaptureCounts {
        uint64_t head_len, tail_start, tail_len, total;
} CaptureCounts;

typedef struct CaptureState {
        uint64_t gen;
        CaptureCounts stream[2];
        uint64_t seq, deadline_ns;
        uint32_t open, paused;
        uint64_t check;
} CaptureState;

/* A read in flight (capture_read()): bytes of stream are being read into the staging area, whose
 * first byte holds the complement of first until the read has taken place. */
typedef struct CaptureInFlight {
        uint64_t gen;   /* that of the state it goes with */
        uint64_t bytes; /* 0: none */
        uint32_t stream, first;
        uint64_t check;
} CaptureInFlight;

struct CaptureHeader {
        uint64_t magic;
        uint32_t version, header_size;
        uint64_t size;
        uint64_t cap, start_usec, cpu_usec, pids_max_events, stdin_len;
        uint32_t stream, pad;
        uint64_t fixed_check;
        uint64_t current;
        CaptureState state[2];
        CaptureInFlight reading[2]; /* version 2 on: reading[k] goes with state[k] */
};

_Static_assert(sizeof(CaptureHeader) <= CAPTURE_HEADER_SIZE, "the header fits its page");

static uint64_t fnv1a(const void *p, size_t n) {
        const unsigned char *b = p;
        uint64_t h = 0xcbf29ce484222325ULL;
        for (size_t i = 0; i < n; i++)
                h = (h ^ b[i]) * 0x100000001b3ULL;
        return h;
}

static uint64_t fixed_check(const CaptureHeader *h) {
        return fnv1a(h, offsetof(CaptureHeader, fixed_check));
}

static uint64_t state_check(const CaptureState *s) {
        return fnv1a(s, offsetof(CaptureState, check));
}

static uint64_t in_flight_check(const CaptureInFlight *f) {
        return fnv1a(f, offsetof(CaptureInFlight, check));
}

static size_t staging_size(uint32_t version) {
        return version >= 2 ? CAPTURE_STAGING : 0;
}

/* The layout: the header's page, then stdout's head and tail, then stderr's. */
static char *stream_head(const Capture *c, int i) {
        uint64_t cap = c->h->cap;
        return (char *) c->h + CAPTURE_HEADER_SIZE + (size_t) i * cap;
}

static char *stream_tail(const Capture *c, int i) {
        uint64_t cap = c->h->cap;
        return stream_head(c, i) + (cap - cap / 2);
}

/* After both streams (version 2 on). */
static char *staging(const Capture *c) {
        return c->h->version >= 2 ? stream_head(c, 2) : NULL;
}

static int capture_map(Capture *c, int fd, size_t size) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
                return -errno;
        *c = (Capture) { .fd = fd, .h = p, .size = size };
        return 0;
}

int capture_new(Capture *c, const CaptureFixed *f, Output out[2]) {
        _cleanup_close_ int fd = -EBADF;
        size_t size;
        int k;

        if (f->cap > (SIZE_MAX - CAPTURE_HEADER_SIZE - CAPTURE_STAGING) / 2)
                return -EFBIG;
        size = CAPTURE_HEADER_SIZE + 2 * (size_t) f->cap + CAPTURE_STAGING;
        fd = memfd_create("sandboxd-capture", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        /* Pages are only taken as they are written: a quiet run costs its header's page. */
        if (ftruncate(fd, (off_t) size) < 0 || fcntl(fd, F_ADD_SEALS, CAPTURE_SEALS) < 0)
                return -errno;
        if ((k = capture_map(c, fd, size)) < 0)
                return k;
        TAKE_FD(fd);
        *c->h = (CaptureHeader) {
                .magic = CAPTURE_MAGIC,
                .version = CAPTURE_VERSION,
                .header_size = CAPTURE_HEADER_SIZE,
                .size = size,
                .cap = f->cap,
                .start_usec = f->start_usec,
                .cpu_usec = f->cpu_usec,
                .pids_max_events = f->pids_max_events,
                .stdin_len = f->stdin_len,
                .stream = f->stream,
        };
        c->h->fixed_check = fixed_check(c->h);
        for (int i = 0; i < 2; i++)
                output_init_borrowed(&out[i], f->cap, stream_head(c, i), stream_tail(c, i), 0, 0, 0, 0);
        capture_publish(c, out, &(CaptureAccount) {});
        return 0;
}

/* The counts of out[] and a, and the read in flight (or none), into the copy not in use; then the
 * flip. */
static void publish(Capture *c, const Output out[2], const CaptureAccount *a, const CaptureInFlight *reading) {
        uint64_t cur;
        CaptureState *next;

        if (!c->h)
                return;
        cur = __atomic_load_n(&c->h->current, __ATOMIC_RELAXED) & 1;
        next = &c->h->state[!cur];
        *next = (CaptureState) {
                .gen = c->h->state[cur].gen + 1,
                .seq = a->seq,
                .deadline_ns = a->deadline_ns,
                .open = a->open,
                .paused = a->paused,
        };
        for (int i = 0; i < 2; i++)
                next->stream[i] = (CaptureCounts) { out[i].head_len, out[i].tail_start, out[i].tail_len, out[i].total };
        next->check = state_check(next);
        if (c->h->version >= 2) {
                CaptureInFlight *f = &c->h->reading[!cur];
                *f = reading ? *reading : (CaptureInFlight) {};
                f->gen = next->gen;
                f->check = in_flight_check(f);
        }
        __atomic_store_n(&c->h->current, !cur, __ATOMIC_RELEASE);
}

void capture_publish(Capture *c, const Output out[2], const CaptureAccount *a) {
        publish(c, out, a, NULL);
}

ssize_t capture_read(Capture *c, Output out[2], const CaptureAccount *a, int i, int fd, const char **ret_data) {
        static char plain[CAPTURE_STAGING];
        char *st = c->h ? staging(c) : NULL;
        unsigned char first;
        int avail = 0, k;
        ssize_t n;

        if (st) {
                k = pipe_peek_byte(fd, &first);
                if (k == 0 || (k < 0 && errno == EAGAIN))
                        return k;
        } else
                k = -1;
        if (k < 0 || ioctl(fd, FIONREAD, &avail) < 0 || avail <= 0) {
                /* No pipe, or an earlier daemon's capture without a staging area: a plain read, and a
                 * daemon killed before its publish loses what it read. */
                *ret_data = plain;
                n = read(fd, plain, sizeof(plain));
                if (n > 0) {
                        output_append(&out[i], plain, (size_t) n);
                        capture_publish(c, out, a);
                }
                return n;
        }
        /* The pipe holds avail bytes and is ours alone to read: a read of them returns them all.
         * Announced first, with evidence that tells afterwards whether it took place. */
        CaptureInFlight f = {
                .bytes = (uint64_t) avail < CAPTURE_STAGING ? (uint64_t) avail : CAPTURE_STAGING,
                .stream = (uint32_t) i,
                .first = first,
        };
        st[0] = (char) ~first;
        publish(c, out, a, &f);
        n = read(fd, st, f.bytes);
        if (n > 0 && (uint64_t) n != f.bytes) {
                f.bytes = (uint64_t) n;
                publish(c, out, a, &f);
        }
        if (n > 0)
                output_append(&out[i], st, (size_t) n);
        capture_publish(c, out, a);
        *ret_data = st;
        return n;
}

static const char *in_flight_torn(const CaptureHeader *h) {
        const CaptureInFlight *f = &h->reading[h->current];

        if (f->check != in_flight_check(f) || f->gen != h->state[h->current].gen)
                return "its header's read in flight fails its check";
        if (f->bytes > CAPTURE_STAGING || f->stream > 1 || f->first > 0xff)
                return "its header's read in flight passes the staging area";
        return NULL;
}

static const char *counts_torn(const CaptureCounts *n, uint64_t cap) {
        uint64_t head_cap = cap - cap / 2, tail_cap = cap / 2;

        if (n->head_len > head_cap || n->tail_len > tail_cap || (tail_cap && n->tail_start >= tail_cap) ||
            (!tail_cap && n->tail_start))
                return "a stream's counts pass its cap";
        if (n->total < n->head_len + n->tail_len || (n->tail_len && n->head_len < head_cap) ||
            (n->total > n->head_len && n->head_len < head_cap))
                return "a stream's byte count disagrees with what it holds";
        return NULL;
}

/* The header checked against the memfd it is in; NULL, or what is torn. */
static const char *header_torn(const Capture *c, const struct stat *st) {
        const CaptureHeader *h = c->h;
        const CaptureState *s;
        const char *why;

        if (h->magic != CAPTURE_MAGIC || h->version < 1 || h->version > CAPTURE_VERSION ||
            h->header_size != CAPTURE_HEADER_SIZE)
                return "its header has no capture's magic and version";
        if (h->fixed_check != fixed_check(h))
                return "its header's fixed part fails its check";
        if (h->cap < 2 || h->cap > ((uint64_t) st->st_size - CAPTURE_HEADER_SIZE) / 2 ||
            h->size != (uint64_t) st->st_size || h->size != CAPTURE_HEADER_SIZE + 2 * h->cap + staging_size(h->version))
                return "its header's sizes disagree with the memfd's";
        if (h->current > 1)
                return "its header's current copy is neither of the two";
        s = &h->state[h->current];
        if (s->check != state_check(s))
                return "its header's current counts fail their check";
        for (int i = 0; i < 2; i++)
                if ((why = counts_torn(&s->stream[i], h->cap)))
                        return why;
        if (h->version >= 2 && (why = in_flight_torn(h)))
                return why;
        return NULL;
}

static int capture_check_fd(int fd, struct stat *st) {
        char path[64], link[64];
        ssize_t n;
        int seals;

        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        n = readlink(path, link, sizeof(link) - 1);
        if (n < 0)
                return -errno;
        link[n] = '\0';
        if (strncmp(link, "/memfd:sandboxd-capture", strlen("/memfd:sandboxd-capture")) != 0)
                return -EBADFD;
        seals = fcntl(fd, F_GET_SEALS);
        if (seals < 0 || (seals & CAPTURE_SEALS) != CAPTURE_SEALS)
                return -EBADFD;
        if (fstat(fd, st) < 0)
                return -errno;
        if (!S_ISREG(st->st_mode) || st->st_size < (off_t) CAPTURE_HEADER_SIZE)
                return -EBADFD;
        return 0;
}

int capture_open(Capture *c, int fd, CaptureFixed *ret_fixed, CaptureAccount *ret_acct, Output out[2], const char **ret_why) {
        struct stat st;
        const CaptureState *s;
        int k;

        *ret_why = "it is no capture memfd of ours (name, seals or size)";
        if ((k = capture_check_fd(fd, &st)) < 0)
                return k;
        *ret_why = "it cannot be mapped";
        if ((k = capture_map(c, fd, (size_t) st.st_size)) < 0)
                return k;
        if ((*ret_why = header_torn(c, &st))) {
                munmap(c->h, c->size);
                *c = CAPTURE_NONE;
                return -EBADMSG;
        }
        s = &c->h->state[c->h->current];
        *ret_fixed = (CaptureFixed) {
                .cap = c->h->cap,
                .start_usec = c->h->start_usec,
                .cpu_usec = c->h->cpu_usec,
                .pids_max_events = c->h->pids_max_events,
                .stdin_len = c->h->stdin_len,
                .stream = c->h->stream,
        };
        *ret_acct = (CaptureAccount) { .seq = s->seq, .deadline_ns = s->deadline_ns, .open = s->open, .paused = s->paused };
        for (int i = 0; i < 2; i++)
                output_init_borrowed(&out[i], c->h->cap, stream_head(c, i), stream_tail(c, i), s->stream[i].head_len,
                                     s->stream[i].tail_start, s->stream[i].tail_len, s->stream[i].total);
        /* A daemon killed in capture_read(): the bytes it read are in the staging area, or still in
         * the pipe. Appended again on the same counts, they land where they may already be. */
        if (c->h->version >= 2 && c->h->reading[c->h->current].bytes) {
                const CaptureInFlight *f = &c->h->reading[c->h->current];
                const char *data = staging(c);
                if ((unsigned char) data[0] == f->first)
                        output_append(&out[f->stream], data, f->bytes);
                capture_publish(c, out, ret_acct);
        }
        return 0;
}

void capture_done(Capture *c) {
        if (c->h)
                munmap(c->h, c->size);
        safe_close(c->fd);
        *c = CAPTURE_NONE;
}
