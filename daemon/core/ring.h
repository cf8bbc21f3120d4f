/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A session's output ring: a fixed number of bytes, addressed by sequence number (the offset of
 * a byte in everything the session ever wrote, both streams together), so that a client that
 * comes back with the last number it saw learns exactly what is still here and how many bytes
 * are gone. Marks record where the stream (stdout, stderr) changes. */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct RingMark {
        uint64_t seq; /* the first byte of a run of one stream */
        int stream;
} RingMark;

typedef struct Ring {
        char *buf;
        size_t cap;
        uint64_t start;    /* seq of the oldest byte kept */
        uint64_t end;      /* seq of the next byte to come */
        RingMark *marks;   /* a ring of max_marks, oldest at first_mark */
        size_t n_marks, first_mark, max_marks;
} Ring;

int ring_init(Ring *r, size_t cap, size_t max_marks);
void ring_done(Ring *r);
/* Appends n bytes of stream; the oldest bytes are overwritten when the ring is full. */
void ring_append(Ring *r, int stream, const void *data, size_t n);
/* Copies bytes of one stream from seq from (start <= from < end) into buf, at most max; returns
 * how many, and their stream. */
size_t ring_copy(const Ring *r, uint64_t from, void *buf, size_t max, int *ret_stream);
