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
} Output;

int output_init(Output *o, size_t cap);
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
