/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A TCP connection's first bytes put together from its segments as they come, in any order, the
 * way the SNI check holds them (sandbox/egress-sni.c): each segment at its offset past the first
 * byte. What the check reads must be what the destination will read, so a segment that says
 * something else for bytes already held (an overlap that differs: the classic way to show a
 * checker one name and the server another) is refused, not merged. Pure. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FIRST_BYTES_MAX 16384   /* TLS_HELLO_PEEK_MAX: what the check reads at most */

typedef struct FirstBytes {
        uint8_t bytes[FIRST_BYTES_MAX];
        uint8_t have[FIRST_BYTES_MAX / 8];  /* a bit a byte: held */
        size_t contiguous;                  /* bytes held from the first on, without a gap */
} FirstBytes;

/* The segment's bytes at off (those at FIRST_BYTES_MAX and past it are not kept: the name must
 * come before). 1: some were new; 0: every one was held already, the same (a retransmission);
 * -EILSEQ: one differs from what was held (nothing of it is kept). */
int first_bytes_add(FirstBytes *f, size_t off, const uint8_t *data, size_t len);
