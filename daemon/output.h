/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Bounded capture of one output stream: the first half of the cap is kept as the head, the last
 * half as a ring-buffered tail; everything in between is counted and dropped. */
#pragma once

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

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
/* Adds KEY, KEY_encoding, KEY_bytes and KEY_truncated to obj. */
int output_to_json(const Output *o, json_object *obj, const char *key);
