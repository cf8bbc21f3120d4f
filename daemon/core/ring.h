/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A session's output ring: a fixed number of bytes, addressed by sequence number (the offset of
 * a byte in everything the session ever wrote, both streams together), so that a client that
 * comes back with the last number it saw learns exactly what is still here and how many bytes
 * are gone. Marks record where the stream (stdout, stderr) changes.
 *
 * The ring lives in one block of memory, a header and then the data: the session's memfd, which
 * outlives the daemon in systemd's fd store (docs/design/restarts.md, section 4), or malloc'ed.
 * ring_append() keeps the header true at every store: what is about to be overwritten leaves
 * [start, end) first, the bytes are written, then their mark, and end moves last. A daemon
 * killed at any point leaves a header that describes only bytes that are there; the next one
 * checks it (ring_open()) and says "output lost" only when the check fails.
 *
 * A read from a pipe takes the bytes out of it: a daemon killed after its read and before the
 * append of what it read would lose them. ring_read() announces each read first, between the marks
 * and the data (version 2 on): the seq it goes to, how many bytes, and the first of them, peeked with tee(2);
 * the staging area it reads into holds that byte's complement until the read has taken place.
 * The next daemon's ring_open() appends them when the announced seq is still the end and the
 * staging area's first byte says the read took place; otherwise they are still in the pipe, or
 * already in the ring (docs/design/restarts.md, section 4). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct RingMark {
        uint64_t seq; /* the first byte of a run of one stream */
        uint32_t stream;
        uint32_t pad;
} RingMark;

#define RING_MAGIC UINT64_C(0x31676e6972786273) /* "sbxring1" */
#define RING_VERSION 2 /* 1: no read in flight, no staging area (an earlier daemon's, still opened) */
#define RING_STAGING (64u * 1024) /* the most one ring_read() takes */

/* A read in flight (ring_read()), after the marks: bytes of stream are being read into the
 * staging area that follows it, to be appended at seq. */
typedef struct RingInFlight {
        uint64_t seq;
        uint64_t bytes;  /* 0: none */
        uint32_t stream;
        uint32_t first;  /* the first byte; the staging area's first byte is ~first until the read */
        uint64_t check;  /* over the fields above, stored last */
} RingInFlight;

/* The block's first bytes: fixed size and layout (it is read back by the next daemon). */
typedef struct RingHeader {
        uint64_t magic;
        uint32_t version;
        uint32_t max_marks;
        uint64_t cap;
        uint64_t start;      /* seq of the oldest byte kept */
        uint64_t end;        /* seq of the next byte to come */
        /* marks[] is a ring of max_marks: (oldest << 32) | count, one word, so that a daemon killed
         * between two stores never leaves a count that names a stale slot */
        uint64_t mark_span;
        RingMark marks[];
} RingHeader;

typedef struct Ring {
        RingHeader *h;
        char *buf;
        size_t cap;
        RingInFlight *reading; /* NULL: a version 1 ring */
        char *staging;
        bool owned;          /* malloc'ed by ring_init() */
} Ring;

/* Bytes a ring of cap bytes with max_marks marks takes (header, marks, the read in flight and its
 * staging area, data). */
size_t ring_size(size_t cap, size_t max_marks);
/* A new, empty ring in memory of its own. */
int ring_init(Ring *r, size_t cap, size_t max_marks);
/* A new, empty ring on the caller's memory (size from ring_size()); it starts at seq. */
int ring_format(Ring *r, void *mem, size_t size, size_t cap, size_t max_marks, uint64_t seq);
/* The ring an earlier daemon left on mem (version 1 or 2): >= 0, the bytes of a read in flight
 * that it appended (see above), or -EBADMSG when its header is not one ring_append() can have
 * left (torn, overwritten, of another size). */
int ring_open(Ring *r, void *mem, size_t size);
/* Of a header ring_open() refused: its end where the rest of it still says what a ring is
 * (magic, version): true and *ret_end; false when even that is gone. */
bool ring_torn_end(const void *mem, size_t size, uint64_t *ret_end);
void ring_done(Ring *r);

static inline uint64_t ring_start(const Ring *r) {
        return r->h->start;
}
static inline uint64_t ring_end(const Ring *r) {
        return r->h->end;
}

/* Appends n bytes of stream; the oldest bytes are overwritten when the ring is full. */
void ring_append(Ring *r, int stream, const void *data, size_t n);
/* One read of fd, a non-blocking pipe that nobody else reads, of at most max bytes into the ring
 * as stream, announced as above. Returns the bytes read, 0 at the pipe's end, -1 with errno
 * (EAGAIN: nothing yet). A daemon killed anywhere in it loses none of them. fd not a pipe, or a
 * version 1 ring: a plain read, and a daemon killed between it and the append loses what it read. */
ssize_t ring_read(Ring *r, int stream, int fd, size_t max);
/* A terminal is no pipe: tee(2) cannot look into it. Its bytes go through a staging pipe, kept
 * in the fd store with the ring: splice(2) moves them from the master into it, which the kernel
 * does whole (each byte is in the master or in the pipe, whenever the daemon dies), and
 * ring_read() takes them from there. The staging pipe is one fd, both of its ends (opened again
 * read-write through /proc/self/fd): >= 0, or -errno. */
int ring_stage_new(void);
/* One read of a terminal's master (non-blocking) into the ring as stream 0, through stage (no
 * stage, < 0, or a kernel that cannot splice from a terminal: a plain read, as above), at most
 * max bytes; what stage still holds goes first. Returns as ring_read(). */
ssize_t ring_read_terminal(Ring *r, int master, int stage, size_t max);
/* What stage holds (an earlier daemon spliced it and was killed before its read) into the ring,
 * before anything more of the terminal. */
void ring_read_staged(Ring *r, int stage);
/* Copies bytes of one stream from seq from (start <= from < end) into buf, at most max; returns
 * how many, and their stream. */
size_t ring_copy(const Ring *r, uint64_t from, void *buf, size_t max, int *ret_stream);
