/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests for daemon/core/ring.c: a session's output ring, its sequence numbers and its marks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "ring.h"

static void test_fill_and_wrap(void) {
        Ring r;
        char buf[64] = "";
        int stream = -1;
        size_t n;

        is_int(ring_init(&r, 8, 16), 0, "a ring of 8 bytes");
        ring_append(&r, 0, "abcde", 5);
        is_uint64(ring_start(&r), 0, "nothing dropped yet");
        is_uint64(ring_end(&r), 5, "end counts the bytes written");
        ring_append(&r, 0, "fghij", 5);
        is_uint64(ring_start(&r), 2, "past the capacity the oldest 2 bytes go");
        n = ring_copy(&r, ring_start(&r), buf, sizeof(buf), &stream);
        buf[n] = '\0';
        is_str(buf, "cdefghij", "what is kept reads back in order across the wrap");
        is_int(stream, 0, "as stdout");
        is_uint64(ring_copy(&r, 1, buf, sizeof(buf), &stream), 0, "a dropped seq copies nothing");
        n = ring_copy(&r, 6, buf, 3, &stream);
        buf[n] = '\0';
        is_str(buf, "ghi", "a copy from the middle, bounded by max");
        ring_append(&r, 0, "0123456789ABCDEFGHIJ", 20);
        is_uint64(ring_end(&r), 30, "a write larger than the ring still counts every byte");
        is_uint64(ring_start(&r), 22, "and keeps the last 8");
        n = ring_copy(&r, ring_start(&r), buf, sizeof(buf), &stream);
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
        is_uint64(ring_start(&r), 4, "out of marks, the oldest run is dropped (and counted)");
        ring_copy(&r, ring_start(&r), buf, sizeof(buf), &stream);
        is_int(stream, 1, "the oldest kept byte has the right stream");
        ring_done(&r);
}

/* A ring on memory of the caller's (the session's memfd) is read back by the next daemon as it
 * was; a header that no append can have left is refused, and its end still said where it can. */
static void test_reopen(void) {
        size_t size = ring_size(16, 4);
        char *mem = calloc(1, size), buf[64] = "";
        Ring r, again;
        int stream = -1;
        uint64_t end = 0;
        size_t n;

        is_int(ring_format(&r, mem, size, 16, 4, 100), 0, "a ring on the caller's memory, from seq 100");
        is_uint64(ring_start(&r), 100, "it starts at the seq given");
        ring_append(&r, 0, "hello ", 6);
        ring_append(&r, 1, "oops ", 5);
        ring_append(&r, 0, "world!!", 7);
        is_int(ring_open(&again, mem, size), 0, "the next daemon opens what the last one left");
        is_uint64(ring_start(&again), 102, "with the same start");
        is_uint64(ring_end(&again), 118, "and the same end");
        n = ring_copy(&again, 102, buf, sizeof(buf), &stream);
        buf[n] = '\0';
        is_str(buf, "llo ", "the same bytes");
        n = ring_copy(&again, 106, buf, sizeof(buf), &stream);
        is_int(stream, 1, "and the same marks");
        ring_append(&again, 0, "x", 1);
        is_uint64(ring_end(&again), 119, "appends go on from there");
        is_int(ring_open(&again, mem, size - 1), -EBADMSG, "a block of another size is refused");
        again.h->start = again.h->end + 1;
        is_int(ring_open(&again, mem, size), -EBADMSG, "start past end is refused");
        ok(ring_torn_end(mem, size, &end) && end == 119, "the end of a torn header is still read when its magic stands");
        ring_format(&r, mem, size, 16, 4, 0);
        ring_append(&r, 0, "abc", 3);
        ring_append(&r, 1, "def", 3);
        r.h->marks[1].seq = 0;
        is_int(ring_open(&again, mem, size), -EBADMSG, "marks out of order are refused");
        ring_format(&r, mem, size, 16, 4, 0);
        ring_append(&r, 0, "abc", 3);
        r.h->cap = 8;
        is_int(ring_open(&again, mem, size), -EBADMSG, "a cap that is not the block's is refused");
        memset(mem, 0xff, 16);
        ok(!ring_torn_end(mem, size, &end), "a header whose magic is gone says nothing of its end");
        is_int(ring_open(&again, mem, size), -EBADMSG, "and is refused");
        free(mem);
}

/* The header is true after every store of an append: simulated by checking it after each append
 * of every size, across wraps and out of marks. */
static void test_always_valid(void) {
        size_t size = ring_size(32, 3);
        char *mem = calloc(1, size), data[100];
        Ring r, again;
        bool all = true;

        memset(data, 'x', sizeof(data));
        ring_format(&r, mem, size, 32, 3, 0);
        for (int i = 0; i < 400; i++) {
                ring_append(&r, i % 3 == 0, data, (size_t) (i * 7) % 90 + 1);
                all = all && ring_open(&again, mem, size) == 0;
        }
        ok(all, "after each of 400 appends of 1 to 90 bytes, two streams, the header checks");
        free(mem);
}

int main(void) {
        test_fill_and_wrap();
        test_streams();
        test_reopen();
        test_always_valid();
        return done_testing();
}
