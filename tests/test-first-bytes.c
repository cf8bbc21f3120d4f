/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A connection's first bytes put together from segments (daemon/core/first-bytes.c), as the SNI
 * check holds them: in order, out of order, a retransmission, an overlap that agrees, and one that
 * does not (a checker shown "good.test" and a server shown "evil.test" in the same bytes: refused,
 * and nothing of it kept), bytes past the bound. Pure. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "first-bytes.h"
#include "tap.h"

static int add(FirstBytes *f, size_t off, const char *s) {
        return first_bytes_add(f, off, (const uint8_t *) s, strlen(s));
}

int main(void) {
        FirstBytes *f = calloc(1, sizeof(*f));
        const char *req = "GET / HTTP/1.1\r\nHost: good.test\r\n\r\n";

        if (!f)
                return 1;
        is_int(add(f, 0, "GET / HTTP/1.1\r\n"), 1, "a first segment: new bytes");
        is_int((long long) f->contiguous, 16, "... 16 held from the first on");
        is_int(add(f, 33, "\r\n"), 1, "a segment past a gap: new bytes");
        is_int((long long) f->contiguous, 16, "... the gap keeps them out of the contiguous bytes");
        is_int(add(f, 16, "Host: good.test\r\n"), 1, "the segment of the gap");
        is_int((long long) f->contiguous, (long long) strlen(req), "... now all of it, in order");
        ok(memcmp(f->bytes, req, strlen(req)) == 0, "... the bytes as sent");
        is_int(add(f, 0, "GET / HTTP/1.1\r\n"), 0, "a retransmission of the first: nothing new");
        is_int(add(f, 11, "1.1\r\nHost: good"), 0, "a segment inside what is held, the same bytes: nothing new");
        is_int(add(f, 30, "t\r\n\r\nX"), 1, "an overlap that agrees and goes further: new bytes");
        is_int(add(f, 22, "evil.test"), -EILSEQ, "an overlap that says evil.test where good.test is held: refused");
        ok(memcmp(f->bytes + 22, "good.test", 9) == 0, "... and none of its bytes kept");
        is_int(add(f, 16, "Host: evil.test\r\n\r\nGET"), -EILSEQ, "a longer one at the same place that differs: refused");

        FirstBytes *g = calloc(1, sizeof(*g));
        uint8_t big[100];
        if (!g)
                return 1;
        memset(big, 'x', sizeof(big));
        is_int(first_bytes_add(g, FIRST_BYTES_MAX - 50, big, sizeof(big)), 1, "a segment across the bound: its bytes before it kept");
        is_int(first_bytes_add(g, FIRST_BYTES_MAX + 10, big, sizeof(big)), 0, "a segment past the bound: nothing kept");
        is_int((long long) g->contiguous, 0, "... and nothing from the first on yet");
        for (size_t off = 0; off < FIRST_BYTES_MAX - 50; off += sizeof(big))
                first_bytes_add(g, off, big, off + sizeof(big) <= FIRST_BYTES_MAX - 50 ? sizeof(big) : FIRST_BYTES_MAX - 50 - off);
        is_int((long long) g->contiguous, FIRST_BYTES_MAX, "every byte up to the bound held: contiguous stops at it");
        free(f);
        free(g);
        return done_testing();
}
