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
 * checks it (ring_open()) and says "output lost" only when the check fails. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct RingMark {
        uint64_t seq; /* the first byte of a run of one stream */
        uint32_t stream;
        uint32_t pad;
} RingMark;

#define RING_MAGIC UINT64_C(0x31676e6972786273) /* "sbxring1" */
#define RING_VERSION 1

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
        bool owned;          /* malloc'ed by ring_init() */
} Ring;

/* Bytes a ring of cap bytes with max_marks marks takes (header, marks, data). */
size_t ring_size(size_t cap, size_t max_marks);
/* A new, empty ring in memory of its own. */
int ring_init(Ring *r, size_t cap, size_t max_marks);
/* A new, empty ring on the caller's memory (size from ring_size()); it starts at seq. */
int ring_format(Ring *r, void *mem, size_t size, size_t cap, size_t max_marks, uint64_t seq);
/* The ring an earlier daemon left on mem: 0, or -EBADMSG when its header is not one
 * ring_append() can have left (torn, overwritten, of another size). */
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
/* Copies bytes of one stream from seq from (start <= from < end) into buf, at most max; returns
 * how many, and their stream. */
size_t ring_copy(const Ring *r, uint64_t from, void *buf, size_t max, int *ret_stream);
