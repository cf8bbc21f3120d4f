/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Bounded capture of one output stream: the first half of the cap is kept as the head, the last
 * half as a ring-buffered tail; everything in between is counted and dropped. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct Output {
        char *head;
        size_t head_len, head_alloc, head_cap;
        char *tail; /* ring */
        size_t tail_start, tail_len, tail_cap;
        uint64_t total;
        bool borrowed;  /* head and tail are the caller's (a run's capture memfd): never freed */
} Output;

int output_init(Output *o, size_t cap);
/* The same on the caller's buffers: head of cap - cap / 2 bytes, tail of cap / 2 (run-capture.h),
 * holding head_len, and tail_len from tail_start, of total bytes seen (0 for a new capture). */
void output_init_borrowed(Output *o, size_t cap, char *head, char *tail, size_t head_len, size_t tail_start,
                          size_t tail_len, uint64_t total);
void output_done(Output *o);
void output_append(Output *o, const char *data, size_t n);
/* Whether output_read() can read straight into the tail: the head is full and the ring is large
 * enough for reads of a useful size. */
bool output_reads_direct(const Output *o);
/* One read(2) from fd straight into the tail ring, its oldest bytes overwritten: the middle of
 * a flood is never copied. Returns what read() returned (-1 with errno set). */
ssize_t output_read(Output *o, int fd);
/* Adds KEY, KEY_encoding, KEY_bytes and KEY_truncated to obj. */
int output_to_json(const Output *o, json_object *obj, const char *key);
