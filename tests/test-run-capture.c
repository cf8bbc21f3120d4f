/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests for daemon/sandbox/run-capture.c: a run's capture in a memfd, taken back as a next
 * daemon takes it (capture_open() on a second fd of it), and each torn header said precisely. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "die-in-read.h"
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

static void test_read_through(void) {
        CaptureFixed f = { .cap = CAP }, g;
        CaptureAccount a = { .seq = 3 }, b;
        Capture c = CAPTURE_NONE, again = CAPTURE_NONE;
        Output out[2], back[2];
        const char *why = NULL, *data = NULL;
        int p[2];

        if (capture_new(&c, &f, out) < 0 || pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
                ok(false, "a capture and a pipe");
                return;
        }
        errno = 0;
        ok(capture_read(&c, out, &a, 0, p[0], &data) == -1 && errno == EAGAIN, "capture_read of an empty pipe: EAGAIN");
        (void) write(p[1], "0123456789", 10);
        is_int((int) capture_read(&c, out, &a, 0, p[0], &data), 10, "capture_read takes what the pipe holds");
        ok(data && memcmp(data, "0123456789", 10) == 0, "and gives those bytes");
        is_int(fd_holds(p[0]), 0, "the pipe is empty");
        is_int(reopen(&c, &again, back, &g, &b, &why), 0, "taken back");
        is_uint64(back[0].total, 10, "the bytes read are published");
        ok(memcmp(back[0].head, "0123456789", 10) == 0, "in its head");
        is_uint64(b.seq, 3, "with the account given");
        capture_done(&again);
        close(p[1]);
        is_int((int) capture_read(&c, out, &a, 0, p[0], &data), 0, "at the pipe's end: 0");
        close(p[0]);
        capture_done(&c);
}

/* A daemon killed in capture_read(), before or after its read: the next one loses no byte and
 * counts none twice, whichever it was, with the tail's ring full and turning. */
static void killed_in_read(int when, const char *what) {
        CaptureFixed f = { .cap = CAP }, g;
        CaptureAccount a = { 0 }, b;
        Capture c = CAPTURE_NONE, again = CAPTURE_NONE;
        Output out[2], back[2];
        const char *why = NULL, *data;
        char first[100], next[48], all[148];
        int p[2], status = -1;
        pid_t pid;

        for (size_t i = 0; i < sizeof(all); i++)
                all[i] = (char) ('A' + i % 53);
        memcpy(first, all, sizeof(first));
        memcpy(next, all + sizeof(first), sizeof(next));
        if (capture_new(&c, &f, out) < 0 || pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
                ok(false, "%s: a capture and a pipe", what);
                return;
        }
        (void) write(p[1], first, sizeof(first));
        (void) capture_read(&c, out, &a, 1, p[0], &data);
        (void) write(p[1], next, sizeof(next));
        pid = fork();
        if (pid == 0) {
                die_fd = p[0];
                die_when = when;
                (void) capture_read(&c, out, &a, 1, p[0], &data);
                _exit(1);
        }
        ok(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "%s: the daemon died in its read", what);
        is_int(reopen(&c, &again, back, &g, &b, &why), 0, "%s: its capture is taken back, not torn (%s)", what, why ? why : "");
        if (when == DIE_BEFORE_READ) {
                is_uint64(back[1].total, 100, "%s: the bytes not read are not counted", what);
                is_int(fd_holds(p[0]), 48, "%s: they are still in the pipe", what);
                (void) capture_read(&again, back, &b, 1, p[0], &data);
        } else {
                is_uint64(back[1].total, 148, "%s: the bytes read are counted", what);
                is_int(fd_holds(p[0]), 0, "%s: and are no longer in the pipe", what);
        }
        is_uint64(back[1].total, 148, "%s: in the end every byte is counted once", what);
        ok(memcmp(back[1].head, all, 32) == 0, "%s: the head holds the first bytes", what);
        ok(back[1].tail_len == 32 && memcmp(back[1].tail + back[1].tail_start, all + 148 - 32, 32 - back[1].tail_start) == 0 &&
                   memcmp(back[1].tail, all + 148 - back[1].tail_start, back[1].tail_start) == 0,
           "%s: the tail holds the last ones, in order", what);
        capture_done(&again);
        is_int(reopen(&c, &again, back, &g, &b, &why), 0, "%s: taken back a second time", what);
        is_uint64(back[1].total, 148, "%s: nothing is appended twice", what);
        capture_done(&again);
        close(p[0]);
        close(p[1]);
        capture_done(&c);
}

int main(void) {
        test_round_trip();
        test_torn();
        test_not_ours();
        test_read_through();
        killed_in_read(DIE_BEFORE_READ, "killed before its read");
        killed_in_read(DIE_AFTER_READ, "killed after its read");
        return done_testing();
}
