/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests for daemon/core/ring.c: a session's output ring, its sequence numbers and its marks. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "die-in-read.h"
#include "ring.h"
#include "tap.h"

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

/* The ring on memory that a child's stores reach, as the memfd's do. */
static void *shared_block(size_t size) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
}

/* Everything from seq from to the end, of one stream or not, into buf. */
static size_t ring_all(const Ring *r, uint64_t from, char *buf, size_t max) {
        size_t done = 0, n;
        int stream;

        while (from + done < ring_end(r) && done < max &&
               (n = ring_copy(r, from + done, buf + done, max - done, &stream)) > 0)
                done += n;
        return done;
}

static void test_read_pipe(void) {
        size_t size = ring_size(64, 8), v1_size = size - 64 - RING_STAGING;
        char *mem = shared_block(size), buf[128];
        Ring r, again;
        int p[2], stream = -1;

        if (!mem || ring_format(&r, mem, size, 64, 8, 0) < 0 || pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
                ok(false, "a ring and a pipe");
                return;
        }
        errno = 0;
        ok(ring_read(&r, 0, p[0], 64) == -1 && errno == EAGAIN, "ring_read of an empty pipe: EAGAIN");
        (void) write(p[1], "0123456789", 10);
        is_int((int) ring_read(&r, 1, p[0], 64), 10, "ring_read takes what the pipe holds");
        is_int(fd_holds(p[0]), 0, "the pipe is empty");
        is_int((int) ring_copy(&r, 0, buf, sizeof(buf), &stream), 10, "the ring holds them");
        ok(memcmp(buf, "0123456789", 10) == 0 && stream == 1, "as the stream given");
        (void) write(p[1], "abcdefgh", 8);
        is_int((int) ring_read(&r, 0, p[0], 3), 3, "at most max bytes");
        is_int(fd_holds(p[0]), 5, "the rest stays in the pipe");
        is_int(ring_open(&again, mem, size), 0, "a read that was appended is not appended again");
        is_uint64(ring_end(&again), 13, "the end is the same");
        is_int((int) ring_read(&r, 0, p[0], 64), 5, "the rest");
        close(p[1]);
        is_int((int) ring_read(&r, 0, p[0], 64), 0, "at the pipe's end: 0");
        close(p[0]);

        /* An earlier daemon's ring (version 1: no staging area) is opened and read plainly. */
        ring_format(&r, mem, size, 64, 8, 7);
        r.h->version = 1;
        is_int(ring_open(&again, mem, v1_size), 0, "a version 1 ring is still opened");
        ok(!again.reading, "it has no read in flight");
        is_int(ring_open(&again, mem, size), -EBADMSG, "not at version 2's size");
        (void) ring_open(&again, mem, v1_size);
        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0) {
                (void) write(p[1], "xyz", 3);
                is_int((int) ring_read(&again, 0, p[0], 64), 3, "ring_read on it: a plain read");
                ok(ring_copy(&again, 7, buf, sizeof(buf), &stream) == 3 && memcmp(buf, "xyz", 3) == 0, "into it");
                close(p[0]);
                close(p[1]);
        }

        /* A read in flight that fails its check was being announced: its read had not begun. */
        ring_format(&r, mem, size, 64, 8, 0);
        *r.reading = (RingInFlight) { .seq = 0, .bytes = 3, .stream = 0, .first = 'a', .check = 1 };
        memcpy(r.staging, "abc", 3);
        is_int(ring_open(&again, mem, size), 0, "a read in flight torn in its announcement appends nothing");
        is_uint64(ring_end(&again), 0, "the end stays");
        munmap(mem, size);
}

/* A daemon killed in ring_read(), before or after its read: the next one loses no byte and
 * appends none twice, whichever it was, with the ring full and turning. */
static void killed_in_read(int when, const char *what) {
        size_t size = ring_size(64, 8);
        char *mem = shared_block(size), all[88], back[64];
        Ring r, again;
        int p[2], status = -1;
        pid_t pid;

        for (size_t i = 0; i < sizeof(all); i++)
                all[i] = (char) ('A' + i % 53);
        if (!mem || ring_format(&r, mem, size, 64, 8, 0) < 0 || pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
                ok(false, "%s: a ring and a pipe", what);
                return;
        }
        (void) write(p[1], all, 40);
        (void) ring_read(&r, 1, p[0], 64);
        (void) write(p[1], all + 40, 48);
        pid = fork();
        if (pid == 0) {
                die_fd = p[0];
                die_when = when;
                (void) ring_read(&r, 1, p[0], 64);
                _exit(1);
        }
        ok(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "%s: the daemon died in its read", what);
        is_int(ring_open(&again, mem, size), when == DIE_AFTER_READ ? 48 : 0,
               "%s: the next daemon appends what was read, if it was", what);
        is_int(fd_holds(p[0]), when == DIE_AFTER_READ ? 0 : 48, "%s: what was not read is still in the pipe", what);
        if (when != DIE_AFTER_READ)
                is_int((int) ring_read(&again, 1, p[0], 64), 48, "%s: and is read now", what);
        is_uint64(ring_end(&again), 88, "%s: in the end every byte is counted once", what);
        ok(ring_all(&again, ring_start(&again), back, sizeof(back)) == 64 && memcmp(back, all + 24, 64) == 0,
           "%s: the ring holds the last 64 in order", what);
        is_int(ring_open(&again, mem, size), 0, "%s: taken back a second time, nothing is appended twice", what);
        is_uint64(ring_end(&again), 88, "%s: the same end", what);
        close(p[0]);
        close(p[1]);
        munmap(mem, size);
}

static int open_terminal(int *ret_slave) {
        int m = posix_openpt(O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC), s;
        struct termios t;

        if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0 || (s = open(ptsname(m), O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
                if (m >= 0)
                        close(m);
                return -1;
        }
        if (tcgetattr(s, &t) == 0) {
                cfmakeraw(&t);
                (void) tcsetattr(s, TCSANOW, &t);
        }
        *ret_slave = s;
        return m;
}

/* The terminal's line discipline passes bytes on to the master later: until it holds n. */
static bool master_holds(int m, int n) {
        for (int i = 0; i < 200; i++) {
                if (fd_holds(m) >= n)
                        return true;
                nanosleep(&(struct timespec) { .tv_nsec = 10 * 1000 * 1000 }, NULL);
        }
        return false;
}

static void test_read_terminal(void) {
        size_t size = ring_size(64, 8);
        char *mem = shared_block(size), buf[64];
        int m, s = -1, stage = ring_stage_new(), stream;
        Ring r;

        ok(stage >= 0 && (fcntl(stage, F_GETFL) & O_ACCMODE) == O_RDWR, "a staging pipe is one fd, read-write");
        if (!mem || ring_format(&r, mem, size, 64, 8, 0) < 0 || (m = open_terminal(&s)) < 0 || stage < 0) {
                ok(false, "a ring, a terminal and a staging pipe");
                return;
        }
        errno = 0;
        ok(ring_read_terminal(&r, m, stage, 64) == -1 && errno == EAGAIN, "nothing on the terminal: EAGAIN");
        (void) write(s, "hello", 5);
        ok(master_holds(m, 5), "the master holds 5 bytes");
        is_int((int) ring_read_terminal(&r, m, stage, 64), 5, "ring_read_terminal takes them, through the staging pipe");
        is_int(fd_holds(stage), 0, "which is empty again");
        ok(ring_copy(&r, 0, buf, sizeof(buf), &stream) == 5 && memcmp(buf, "hello", 5) == 0, "into the ring");
        (void) write(s, "plain", 5);
        ok(master_holds(m, 5), "5 more");
        is_int((int) ring_read_terminal(&r, m, -EBADF, 64), 5, "without a staging pipe: a plain read of the master");
        ok(ring_copy(&r, 5, buf, sizeof(buf), &stream) == 5 && memcmp(buf, "plain", 5) == 0, "into the ring too");
        close(s);
        errno = 0;
        ok(ring_read_terminal(&r, m, stage, 64) == -1 && errno == EIO, "the terminal's other end closed: EIO");
        close(m);
        close(stage);
        munmap(mem, size);
}

/* A daemon killed in ring_read_terminal(): after its splice (the bytes are in the staging pipe,
 * which the fd store keeps), before or after its read of the staging pipe. */
static void killed_in_terminal_read(int when, const char *what) {
        size_t size = ring_size(64, 8);
        char *mem = shared_block(size), all[88], back[64];
        int m, s = -1, stage = ring_stage_new(), status = -1;
        Ring r, again;
        pid_t pid;

        for (size_t i = 0; i < sizeof(all); i++)
                all[i] = (char) ('a' + i % 26);
        if (!mem || ring_format(&r, mem, size, 64, 8, 0) < 0 || stage < 0 || (m = open_terminal(&s)) < 0) {
                ok(false, "%s: a ring, a terminal and a staging pipe", what);
                return;
        }
        (void) write(s, all, 40);
        if (master_holds(m, 40))
                (void) ring_read_terminal(&r, m, stage, 64);
        (void) write(s, all + 40, 48);
        ok(master_holds(m, 48), "%s: 48 more bytes on the terminal", what);
        pid = fork();
        if (pid == 0) {
                die_fd = stage;
                die_when = when;
                (void) ring_read_terminal(&r, m, stage, 64);
                _exit(1);
        }
        ok(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "%s: the daemon died in its read", what);
        is_int(fd_holds(m), 0, "%s: the master no longer holds them", what);
        is_int(ring_open(&again, mem, size), when == DIE_AFTER_READ ? 48 : 0,
               "%s: the next daemon appends what was read from the staging pipe, if it was", what);
        is_int(fd_holds(stage), when == DIE_AFTER_READ ? 0 : 48, "%s: the rest is in the staging pipe", what);
        ring_read_staged(&again, stage);
        is_int(fd_holds(stage), 0, "%s: and is taken from there", what);
        is_uint64(ring_end(&again), 88, "%s: in the end every byte is counted once", what);
        ok(ring_all(&again, ring_start(&again), back, sizeof(back)) == 64 && memcmp(back, all + 24, 64) == 0,
           "%s: the ring holds the last 64 in order", what);
        is_int(ring_open(&again, mem, size), 0, "%s: taken back a second time, nothing is appended twice", what);
        close(s);
        close(m);
        close(stage);
        munmap(mem, size);
}

int main(void) {
        test_fill_and_wrap();
        test_streams();
        test_reopen();
        test_always_valid();
        test_read_pipe();
        killed_in_read(DIE_BEFORE_READ, "killed before its read");
        killed_in_read(DIE_AFTER_READ, "killed after its read");
        test_read_terminal();
        killed_in_terminal_read(DIE_AFTER_SPLICE, "terminal, killed after its splice");
        killed_in_terminal_read(DIE_BEFORE_READ, "terminal, killed before its read");
        killed_in_terminal_read(DIE_AFTER_READ, "terminal, killed after its read");
        return done_testing();
}
