/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What `nft list set` prints, read back: pure code over text, no I/O (tests/test-nft-listing.c).
 * The egress code lists a name's set to carry its learned addresses over, to a next daemon's
 * table (a restart) or to the set of the same name in a changed allow list (sandbox.update). */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct NftElement {
        uint32_t addr;      /* IPv4, host order */
        int64_t expires_ms; /* time left, > 0 */
} NftElement;

/* Milliseconds of a duration as nft prints it ("29s996ms", "59m58s", "1d2h"), -1 if none. */
int64_t nft_duration_ms(const char *s);

/* The elements of one IPv4 set with timeouts in listing ("... elements = { 192.0.2.1 timeout 30s
 * expires 29s990ms, ... }"), at most max into out[]: how many. An element without an expiry left,
 * or whose address does not parse, is skipped; no "elements = {" is 0. */
size_t nft_set_elements_parse(const char *listing, NftElement *out, size_t max);
