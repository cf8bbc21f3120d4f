/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests for daemon/core/ring.c: a session's output ring, its sequence numbers and its marks. */
#include "tap.h"
#include "ring.h"

static void test_fill_and_wrap(void) {
        Ring r;
        char buf[64] = "";
        int stream = -1;
        size_t n;

        is_int(ring_init(&r, 8, 16), 0, "a ring of 8 bytes");
        ring_append(&r, 0, "abcde", 5);
        is_uint64(r.start, 0, "nothing dropped yet");
        is_uint64(r.end, 5, "end counts the bytes written");
        ring_append(&r, 0, "fghij", 5);
        is_uint64(r.start, 2, "past the capacity the oldest 2 bytes go");
        n = ring_copy(&r, r.start, buf, sizeof(buf), &stream);
        buf[n] = '\0';
        is_str(buf, "cdefghij", "what is kept reads back in order across the wrap");
        is_int(stream, 0, "as stdout");
        is_uint64(ring_copy(&r, 1, buf, sizeof(buf), &stream), 0, "a dropped seq copies nothing");
        n = ring_copy(&r, 6, buf, 3, &stream);
        buf[n] = '\0';
        is_str(buf, "ghi", "a copy from the middle, bounded by max");
        ring_append(&r, 0, "0123456789ABCDEFGHIJ", 20);
        is_uint64(r.end, 30, "a write larger than the ring still counts every byte");
        is_uint64(r.start, 22, "and keeps the last 8");
        n = ring_copy(&r, r.start, buf, sizeof(buf), &stream);
        buf[n] = '\0';
        is_str(buf, "CDEFGHIJ", "which are its last 8 bytes");
        ring_done(&r);
}

static void test_streams(void) {
        Ring r;
        char buf[64] = "";
        int stream = -1;
        size_t n;

        ring_init(&r, 64, 4);
        ring_append(&r, 0, "out1", 4);
        ring_append(&r, 1, "err", 3);
        ring_append(&r, 1, "err", 3);
        ring_append(&r, 0, "out2", 4);
        n = ring_copy(&r, 0, buf, sizeof(buf), &stream);
        is_int((int) n, 4, "a copy stops where the stream changes");
        n = ring_copy(&r, 4, buf, sizeof(buf), &stream);
        buf[n] = '\0';
        is_str(buf, "errerr", "consecutive writes of one stream are one run");
        is_int(stream, 1, "of stderr");
        n = ring_copy(&r, 10, buf, sizeof(buf), &stream);
        is_int(stream, 0, "then stdout again");
        ring_append(&r, 1, "e", 1);
        ring_append(&r, 0, "o", 1);
        is_uint64(r.start, 4, "out of marks, the oldest run is dropped (and counted)");
        ring_copy(&r, r.start, buf, sizeof(buf), &stream);
        is_int(stream, 1, "the oldest kept byte has the right stream");
        ring_done(&r);
}

int main(void) {
        test_fill_and_wrap();
        test_streams();
        return done_testing();
}
