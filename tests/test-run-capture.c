/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests for daemon/sandbox/run-capture.c: a run's capture in a memfd, taken back as a next
 * daemon takes it (capture_open() on a second fd of it), and each torn header said precisely. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run-capture.h"
#include "tap.h"

#define CAP 64

/* What a next daemon sees: the memfd by a new fd (as systemd's store gives it back). */
static int reopen(const Capture *c, Capture *again, Output out[2], CaptureFixed *f, CaptureAccount *a, const char **why) {
        int fd = fcntl(c->fd, F_DUPFD_CLOEXEC, 3);
        int k = capture_open(again, fd, f, a, out, why);
        if (k < 0)
                close(fd);
        return k;
}

static void test_round_trip(void) {
        CaptureFixed f = { .cap = CAP, .start_usec = 123, .cpu_usec = 5000000, .stdin_len = 7, .stream = true }, g;
        CaptureAccount a = { .seq = 9, .deadline_ns = 42, .open = CAPTURE_OPEN_OUT | CAPTURE_STARTED }, b;
        Capture c = CAPTURE_NONE, again = CAPTURE_NONE;
        Output out[2], back[2];
        const char *why = NULL;
        char data[200];

        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (char) ('a' + i % 26);
        is_int(capture_new(&c, &f, out), 0, "a capture of 64 bytes a stream");
        output_append(&out[0], data, sizeof(data));
        output_append(&out[1], "err", 3);
        capture_publish(&c, out, &a);
        is_int(reopen(&c, &again, back, &g, &b, &why), 0, "taken back by a second fd");
        is_uint64(back[0].total, 200, "stdout's byte count");
        is_uint64(back[0].head_len, 32, "its head is full");
        is_uint64(back[0].tail_len, 32, "and so is its tail");
        ok(memcmp(back[0].head, data, 32) == 0, "the head holds the first 32 bytes");
        ok(memcmp(back[0].tail + back[0].tail_start, data + 200 - 32, 32 - back[0].tail_start) == 0,
           "the tail holds the last ones, from its start");
        is_uint64(back[1].total, 3, "stderr's count");
        ok(g.cap == CAP && g.start_usec == 123 && g.cpu_usec == 5000000 && g.stdin_len == 7 && g.stream,
           "the fixed part comes back");
        ok(b.seq == 9 && b.deadline_ns == 42 && b.open == (CAPTURE_OPEN_OUT | CAPTURE_STARTED) && !b.paused,
           "and the account");
        /* Appending through the taken-back Outputs goes to the same memfd. */
        output_append(&back[1], "more", 4);
        capture_publish(&again, back, &b);
        capture_done(&again);
        is_int(reopen(&c, &again, back, &g, &b, &why), 0, "taken back again");
        is_uint64(back[1].total, 7, "with what the second daemon appended");
        capture_done(&again);
        output_done(&out[0]);
        output_done(&out[1]);
        capture_done(&c);
}

/* One byte of the header changed at off: capture_open() refuses it, saying expect. */
static void torn_at(size_t off, const char *expect, const char *what) {
        CaptureFixed f = { .cap = CAP }, g;
        CaptureAccount a = { 0 }, b;
        Capture c = CAPTURE_NONE, again = CAPTURE_NONE;
        Output out[2], back[2];
        const char *why = NULL;
        unsigned char x;

        if (capture_new(&c, &f, out) < 0) {
                ok(false, "a capture for %s", what);
                return;
        }
        output_append(&out[0], "hello", 5);
        capture_publish(&c, out, &a);
        (void) pread(c.fd, &x, 1, (off_t) off);
        x ^= 0xff;
        (void) pwrite(c.fd, &x, 1, (off_t) off);
        is_int(reopen(&c, &again, back, &g, &b, &why), -EBADMSG, "%s: refused as torn", what);
        is_str(why ? why : "", expect, "%s: the reason says which check failed", what);
        capture_done(&c);
}

static void test_torn(void) {
        torn_at(0, "its header has no capture's magic and version", "its magic");
        torn_at(24, "its header's fixed part fails its check", "its cap");
        /* CaptureHeader's layout: the index of the current copy at 80, the first copy at 88 (the
         * current one after capture_new()'s publish and ours), its stdout head_len at 96. */
        torn_at(80, "its header's current copy is neither of the two", "the index of the current copy");
        torn_at(96, "its header's current counts fail their check", "the current counts");
}

static void test_not_ours(void) {
        CaptureFixed g;
        CaptureAccount b;
        Capture again = CAPTURE_NONE;
        Output back[2];
        const char *why = NULL;
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

        ok(capture_open(&again, fd, &g, &b, back, &why) < 0 && why && strstr(why, "no capture memfd of ours"),
           "/dev/null is no capture of ours");
        close(fd);
}

int main(void) {
        test_round_trip();
        test_torn();
        test_not_ours();
        return done_testing();
}
