/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "macro.h"
#include "output.h"
#include "proto.h"

int output_init(Output *o, size_t cap) {
        *o = (Output) { .head_cap = cap - cap / 2, .tail_cap = cap / 2 };
        /* The head grows on demand (most runs print little); the tail is allocated once past it. */
        return 0;
}

void output_init_borrowed(Output *o, size_t cap, char *head, char *tail, size_t head_len, size_t tail_start,
                          size_t tail_len, uint64_t total) {
        output_init(o, cap);
        o->head = head;
        o->head_alloc = o->head_cap;
        o->tail = tail;
        o->head_len = head_len;
        o->tail_start = tail_start;
        o->tail_len = tail_len;
        o->total = total;
        o->borrowed = true;
}

void output_done(Output *o) {
        if (!o->borrowed) {
                free(o->head);
                free(o->tail);
        }
        *o = (Output) {};
}

static void head_append(Output *o, const char *data, size_t n) {
        if (o->head_len + n > o->head_alloc) {
                size_t na = o->head_alloc ? o->head_alloc : 4096;
                while (na < o->head_len + n)
                        na *= 2;
                if (na > o->head_cap)
                        na = o->head_cap;
                char *p = realloc(o->head, na);
                if (!p)
                        return;
                o->head = p;
                o->head_alloc = na;
        }
        memcpy(o->head + o->head_len, data, n);
        o->head_len += n;
}

static void tail_append(Output *o, const char *data, size_t n) {
        if (o->tail_cap == 0)
                return;
        if (!o->tail) {
                o->tail = malloc(o->tail_cap);
                if (!o->tail)
                        return;
        }
        if (n >= o->tail_cap) {
                memcpy(o->tail, data + n - o->tail_cap, o->tail_cap);
                o->tail_start = 0;
                o->tail_len = o->tail_cap;
                return;
        }
        for (size_t i = 0; i < n;) {
                size_t pos = (o->tail_start + o->tail_len) % o->tail_cap;
                size_t chunk = o->tail_cap - pos < n - i ? o->tail_cap - pos : n - i;
                if (o->tail_len < o->tail_cap) {
                        size_t room = o->tail_cap - o->tail_len;
                        if (chunk > room)
                                chunk = room;
                        memcpy(o->tail + pos, data + i, chunk);
                        o->tail_len += chunk;
                } else {
                        /* Full: overwrite the oldest bytes. */
                        pos = o->tail_start;
                        chunk = o->tail_cap - pos < n - i ? o->tail_cap - pos : n - i;
                        memcpy(o->tail + pos, data + i, chunk);
                        o->tail_start = (o->tail_start + chunk) % o->tail_cap;
                }
                i += chunk;
        }
}

void output_append(Output *o, const char *data, size_t n) {
        size_t h = o->head_cap - o->head_len;
        if (h > n)
                h = n;
        if (h)
                head_append(o, data, h);
        if (n > h)
                tail_append(o, data + h, n - h);
        o->total += n;
}

#define DIRECT_MIN (64u * 1024)

bool output_reads_direct(const Output *o) {
        return o->head_len >= o->head_cap && o->tail_cap >= DIRECT_MIN;
}

ssize_t output_read(Output *o, int fd) {
        size_t w = (o->tail_start + o->tail_len) % (o->tail_cap ? o->tail_cap : 1);
        struct iovec iov[2];
        ssize_t n;

        if (!o->tail && !(o->tail = malloc(o->tail_cap))) {
                errno = ENOMEM;
                return -1;
        }
        /* From the write position to the end, then from the start: when the ring is full, the
         * write position is its oldest byte, so bytes are overwritten oldest first. */
        iov[0] = (struct iovec) { o->tail + w, o->tail_cap - w };
        iov[1] = (struct iovec) { o->tail, w };
        n = readv(fd, iov, w ? 2 : 1);
        if (n <= 0)
                return n;
        if (o->tail_len + (size_t) n <= o->tail_cap)
                o->tail_len += (size_t) n;
        else {
                o->tail_start = (o->tail_start + o->tail_len + (size_t) n - o->tail_cap) % o->tail_cap;
                o->tail_len = o->tail_cap;
        }
        o->total += (uint64_t) n;
        return n;
}

int output_to_json(const Output *o, json_object *obj, const char *key) {
        uint64_t kept = o->head_len + o->tail_len;
        uint64_t dropped = o->total - kept;
        char marker[96] = "", k[64];
        size_t mlen = 0, n;
        _cleanup_free_ char *buf = NULL;

        if (dropped > 0)
                mlen = (size_t) snprintf(marker, sizeof(marker), "\n[... %" PRIu64 " bytes dropped ...]\n", dropped);
        n = o->head_len + mlen + o->tail_len;
        buf = malloc(n + 1);
        if (!buf)
                return -ENOMEM;
        memcpy(buf, o->head ? o->head : "", o->head_len);
        memcpy(buf + o->head_len, marker, mlen);
        for (size_t i = 0; i < o->tail_len; i++)
                buf[o->head_len + mlen + i] = o->tail[(o->tail_start + i) % o->tail_cap];
        if (proto_add_bytes(obj, key, buf, n) < 0)
                return -ENOMEM;
        snprintf(k, sizeof(k), "%s_bytes", key);
        json_object_object_add(obj, k, json_object_new_int64((int64_t) o->total));
        snprintf(k, sizeof(k), "%s_truncated", key);
        json_object_object_add(obj, k, json_object_new_boolean(dropped > 0));
        return 0;
}
