/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests for lib/fdpass.c: a line and its fds over a socketpair, CLOEXEC on arrival, the
 * truncated control message closed whole, the per-connection queue, and the type check of every
 * kind of fd a client could send (docs/design/files.md, section 4). */

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fdpass.h"
#include "macro.h"
#include "proto.h"
#include "tap.h"

/* How many fds this process has open (by /proc/self/fd): a leak shows as a difference. */
static int count_open_fds(void) {
        int n = 0;
        for (int fd = 0; fd < 1024; fd++)
                if (fcntl(fd, F_GETFD) >= 0)
                        n++;
        return n;
}

static void test_send_recv(void) {
        int sp[2], p[2], fds[SBX_FDS_PER_MESSAGE];
        char buf[64];
        size_t n = 99;

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0 || pipe2(p, O_CLOEXEC) < 0) {
                ok(false, "socketpair/pipe: %m");
                return;
        }
        const char line[] = "{\"id\":1,\"op\":\"file.write\",\"fds\":1,\"fd\":0}\n";
        is_int(sbx_fds_send(sp[0], line, strlen(line), &p[0], 1), 0, "sbx_fds_send of a line with one fd");
        ssize_t k = sbx_fds_recv(sp[1], buf, sizeof(buf), 0, fds, SBX_FDS_PER_MESSAGE, &n);
        ok(k == (ssize_t) strlen(line) && memcmp(buf, line, (size_t) k) == 0, "the line arrives whole");
        is_int((long long) n, 1, "with one fd");
        ok(n == 1 && fcntl(fds[0], F_GETFD) == FD_CLOEXEC, "the received fd is O_CLOEXEC from birth (MSG_CMSG_CLOEXEC)");
        if (n == 1) {
                /* It is the pipe's read end: what goes into the write end comes out of it. */
                ok(write(p[1], "x", 1) == 1 && read(fds[0], buf, 1) == 1 && buf[0] == 'x',
                   "the received fd is the pipe's read end");
                safe_close(fds[0]);
        }

        const char plain[] = "{\"id\":2,\"op\":\"hello\"}\n";
        n = 99;
        ok(sbx_fds_send(sp[0], plain, strlen(plain), NULL, 0) == 0 &&
           sbx_fds_recv(sp[1], buf, sizeof(buf), 0, fds, SBX_FDS_PER_MESSAGE, &n) == (ssize_t) strlen(plain) && n == 0,
           "a line sent without fds arrives with none");
        is_int(sbx_fds_send(sp[0], plain, strlen(plain), p, SBX_FDS_PER_MESSAGE + 1), -EINVAL,
               "sbx_fds_send refuses more than %d fds", SBX_FDS_PER_MESSAGE);
        is_int(sbx_fds_send(sp[0], "", 0, p, 1), -EINVAL, "sbx_fds_send refuses fds without a byte to carry them");
        safe_close(p[0]);
        safe_close(p[1]);
        safe_close(sp[0]);
        safe_close(sp[1]);
}

/* More fds than the receiver's buffer: the kernel sets MSG_CTRUNC and drops the rest; what did
 * arrive must be closed, not handed out (their pairing with lines is lost). */
static void test_truncated(void) {
        int sp[2], many[SBX_FDS_PER_MESSAGE], got[SBX_FDS_PER_MESSAGE];
        char buf[16];
        size_t n = 99;

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
                ok(false, "socketpair: %m");
                return;
        }
        for (int i = 0; i < SBX_FDS_PER_MESSAGE; i++)
                many[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        int before = count_open_fds();
        ok(sbx_fds_send(sp[0], "x\n", 2, many, SBX_FDS_PER_MESSAGE) == 0, "8 fds sent with a line");
        is_int(sbx_fds_recv(sp[1], buf, sizeof(buf), 0, got, 2, &n), -EMSGSIZE,
               "received with room for 2: -EMSGSIZE (more fds than the receiver takes)");
        is_int(count_open_fds(), before, "every fd that arrived was closed (the fd count is as before)");
        is_int((long long) n, 99, "and no count is handed out");

        /* A real MSG_CTRUNC: a control buffer of the kernel's own sizing is bypassed by sending
         * more fds than SBX_FDS_PER_MESSAGE by hand. */
        int fds16[16];
        for (int i = 0; i < 16; i++)
                fds16[i] = many[i % SBX_FDS_PER_MESSAGE];
        union {
                struct cmsghdr align;
                char b[CMSG_SPACE(sizeof(fds16))];
        } control = {};
        struct iovec iov = { .iov_base = (void *) "y\n", .iov_len = 2 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.b,
                             .msg_controllen = sizeof(control.b) };
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(fds16));
        memcpy(CMSG_DATA(c), fds16, sizeof(fds16));
        ok(sendmsg(sp[0], &mh, MSG_NOSIGNAL) == 2, "16 fds sent in one message by hand");
        before = count_open_fds();
        is_int(sbx_fds_recv(sp[1], buf, sizeof(buf), 0, got, SBX_FDS_PER_MESSAGE, &n), -EMSGSIZE,
               "16 fds into a buffer of 8: MSG_CTRUNC is -EMSGSIZE");
        is_int(count_open_fds(), before, "the 8 that arrived were closed");

        sbx_fds_close(many, SBX_FDS_PER_MESSAGE);
        ok(many[0] == -EBADF && many[7] == -EBADF, "sbx_fds_close sets each fd to -EBADF");
        safe_close(sp[0]);
        safe_close(sp[1]);
}

static void test_queue(void) {
        SbxFdQueue q;
        int a[3], got[SBX_FDS_PER_MESSAGE];
        size_t n = 99;

        sbx_fd_queue_init(&q);
        int before = count_open_fds();
        for (int i = 0; i < 3; i++)
                a[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        ok(sbx_fd_queue_push(&q, a, 2, 40) == 0 && sbx_fd_queue_push(&q, a + 2, 1, 90) == 0 && q.n == 3,
           "two fds that came with byte 40, one with byte 90");
        ok(sbx_fd_queue_take_line(&q, 10, got, SBX_FDS_PER_MESSAGE, &n) == 0 && n == 0 && q.n == 3,
           "a line ending at 10 owns none of them");
        ok(sbx_fd_queue_take_line(&q, 50, got, SBX_FDS_PER_MESSAGE, &n) == 0 && n == 2 && got[0] == a[0] &&
           got[1] == a[1] && q.n == 1, "the line ending at 50 (holding byte 40) owns the first two");
        sbx_fds_close(got, n);
        ok(sbx_fd_queue_take_line(&q, 90, got, SBX_FDS_PER_MESSAGE, &n) == 0 && n == 1 && got[0] == a[2] && q.n == 0,
           "a line ending at 90 owns the one that came with byte 90");
        sbx_fds_close(got, n);

        for (int i = 0; i < 3; i++)
                a[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        (void) sbx_fd_queue_push(&q, a, 1, 5);
        (void) sbx_fd_queue_push(&q, a + 1, 2, 8);
        is_int(sbx_fd_queue_take_line(&q, 20, got, SBX_FDS_PER_MESSAGE, &n), -EPROTO,
               "a line whose fds came in two messages is -EPROTO");
        ok(q.n == 0 && count_open_fds() == before, "... and all three are closed");
        for (int i = 0; i < 3; i++)
                a[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        (void) sbx_fd_queue_push(&q, a, 3, 5);
        is_int(sbx_fd_queue_take_line(&q, 20, got, 2, &n), -EMSGSIZE, "3 fds for a line that may take 2: -EMSGSIZE");
        ok(q.n == 0 && count_open_fds() == before, "... all closed");

        int many[SBX_FDS_PER_CONNECTION + 1];
        for (int i = 0; i < SBX_FDS_PER_CONNECTION + 1; i++)
                many[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        ok(sbx_fd_queue_push(&q, many, SBX_FDS_PER_CONNECTION, 1) == 0, "%d fds fit the queue", SBX_FDS_PER_CONNECTION);
        is_int(sbx_fd_queue_push(&q, many + SBX_FDS_PER_CONNECTION, 1, 2), -EMFILE, "one more is -EMFILE");
        ok(q.n == 0 && count_open_fds() == before, "... and the queue and the extra fd are all closed");

        for (int i = 0; i < 3; i++)
                a[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        (void) sbx_fd_queue_push(&q, a, 2, 30);
        (void) sbx_fd_queue_push(&q, a + 2, 1, 70);
        is_int((long long) sbx_fd_queue_drop_until(&q, 60), 2, "an over-long line skipped up to 60: its 2 fds are closed");
        is_int((long long) sbx_fd_queue_clear(&q), 1, "clear closes the rest");
        is_int(count_open_fds(), before, "... none left open");
}

/* What the kernel really does with lines sent one sendmsg each, some with fds, read by one
 * connection as the daemon reads it (a LineBuffer, recvmsg into it): each line gets exactly the
 * fds of its own sendmsg, although a recvmsg returns the fds together with earlier lines' bytes. */
static void test_lines_and_fds(void) {
        static const char *const lines[] = { "{\"a\":1}\n", "{\"b\":2,\"fds\":1}\n", "{\"c\":3}\n",
                                             "{\"d\":4}\n", "{\"e\":5,\"fds\":2}\n", "{\"f\":6}\n" };
        static const size_t want[] = { 0, 1, 0, 0, 2, 0 };
        int sp[2], p[2], got[SBX_FDS_PER_MESSAGE];
        SbxFdQueue q;
        LineBuffer b;
        size_t seen = 0;
        bool all = true;

        int before = count_open_fds();
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0 || pipe2(p, O_CLOEXEC) < 0) {
                ok(false, "socketpair: %m");
                return;
        }
        for (size_t i = 0; i < ELEMENTSOF(lines); i++)
                (void) sbx_fds_send(sp[0], lines[i], strlen(lines[i]), p, want[i]);
        safe_close(sp[0]);
        sbx_fd_queue_init(&q);
        line_buffer_init(&b, 1024);
        for (;;) {
                char *ptr, *line;
                size_t avail, len, n_fds = 0, n = 0;
                int fds[SBX_FDS_PER_MESSAGE];
                if (line_buffer_reserve(&b, 4096, &ptr, &avail) < 0)
                        break;
                ssize_t k = sbx_fds_recv(sp[1], ptr, avail, 0, fds, SBX_FDS_PER_MESSAGE, &n_fds);
                if (k <= 0)
                        break;
                line_buffer_commit(&b, (size_t) k);
                if (n_fds > 0 && sbx_fd_queue_push(&q, fds, n_fds, b.committed - 1) < 0)
                        all = false;
                while (line_buffer_next(&b, &line, &len) > 0) {
                        if (seen >= ELEMENTSOF(lines) ||
                            sbx_fd_queue_take_line(&q, b.line_end, got, SBX_FDS_PER_MESSAGE, &n) < 0 || n != want[seen]) {
                                diag("line %zu '%s': %zu fds, want %zu", seen, line, n, seen < ELEMENTSOF(want) ? want[seen] : 0);
                                all = false;
                        }
                        sbx_fds_close(got, n);
                        seen++;
                }
        }
        ok(all && seen == ELEMENTSOF(lines), "6 lines, each with exactly the fds its own sendmsg carried (0 1 0 0 2 0)");
        ok(q.n == 0, "none left in the queue");
        safe_close(sp[1]);
        line_buffer_done(&b);
        safe_close(p[0]);
        safe_close(p[1]);
        is_int(count_open_fds(), before, "no fd leaked");
}

static void check_refused(int fd, unsigned allow, const char *want, const char *what) {
        const char *reason = NULL;
        int r = sbx_fd_check(fd, allow, &reason);
        ok(r < 0 && reason && strcmp(reason, want) == 0, "%s is refused: %s", what, want);
        if (r >= 0 || !reason || strcmp(reason, want) != 0)
                diag("got %d, '%s'", r, reason ? reason : "(null)");
}

static void test_check(void) {
        char tmpl[] = "/tmp/test-fdpass.XXXXXX";
        int p[2], sp[2];
        const char *reason = NULL;

        int file = mkstemp(tmpl);
        if (file < 0 || pipe2(p, O_CLOEXEC) < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
                ok(false, "setup: %m");
                return;
        }
        int wronly = open(tmpl, O_WRONLY | O_CLOEXEC);
        int rdonly = open(tmpl, O_RDONLY | O_CLOEXEC);
        int opath = open(tmpl, O_PATH | O_CLOEXEC);
        int dir = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int dir_path = open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        int ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        int memfd = (int) syscall(SYS_memfd_create, "test-fdpass", MFD_CLOEXEC);
        unlink(tmpl);

        is_int(sbx_fd_check(file, SBX_FD_FILE_SOURCE, &reason), SBX_FD_REGULAR, "a regular file opened O_RDWR is a source");
        is_int(sbx_fd_check(file, SBX_FD_FILE_SINK, &reason), SBX_FD_REGULAR, "... and a sink");
        is_int(sbx_fd_check(rdonly, SBX_FD_FILE_SOURCE, &reason), SBX_FD_REGULAR, "O_RDONLY is a source");
        check_refused(rdonly, SBX_FD_FILE_SINK, "is not open for writing", "O_RDONLY as a sink");
        is_int(sbx_fd_check(wronly, SBX_FD_FILE_SINK, &reason), SBX_FD_REGULAR, "O_WRONLY is a sink");
        check_refused(wronly, SBX_FD_FILE_SOURCE, "is not open for reading", "O_WRONLY as a source");
        is_int(sbx_fd_check(p[0], SBX_FD_FILE_SOURCE, &reason), SBX_FD_PIPE, "a pipe's read end is a source");
        is_int(sbx_fd_check(p[1], SBX_FD_FILE_SINK, &reason), SBX_FD_PIPE, "a pipe's write end is a sink");
        check_refused(p[0], SBX_FD_FILE_SINK, "is not open for writing", "a pipe's read end as a sink");
        if (memfd >= 0)
                is_int(sbx_fd_check(memfd, SBX_FD_FILE_SOURCE, &reason), SBX_FD_REGULAR, "a memfd is a regular file");
        check_refused(opath, SBX_FD_FILE_SOURCE | SBX_FD_SOCKET | SBX_FD_CHAR, "is opened O_PATH", "an O_PATH file");
        check_refused(dir_path, SBX_FD_FILE_SOURCE, "is opened O_PATH", "an O_PATH directory");
        check_refused(dir, SBX_FD_FILE_SOURCE | SBX_FD_SOCKET | SBX_FD_CHAR, "is a directory",
                      "a directory, whatever is allowed");
        check_refused(sp[0], SBX_FD_FILE_SOURCE, "is a socket", "a socket where none is asked for");
        is_int(sbx_fd_check(sp[0], SBX_FD_SOCKET | SBX_FD_READ, &reason), SBX_FD_SOCKET,
               "a socket where the field asks for one (OCI stdio)");
        check_refused(null, SBX_FD_FILE_SOURCE, "is a character device", "/dev/null for a file op");
        is_int(sbx_fd_check(null, SBX_FD_CHAR | SBX_FD_WRITE, &reason), SBX_FD_CHAR, "a character device where asked");
        if (ns >= 0)
                check_refused(ns, SBX_FD_FILE_SOURCE, "is a namespace, pidfd or other kernel object, not a file",
                              "a network namespace fd (nsfs, S_IFREG to fstat)");
        else
                ok(true, "# SKIP /proc/self/ns/net cannot be opened here");
        int pidfd = (int) syscall(SYS_pidfd_open, getpid(), 0);
        if (pidfd >= 0)
                check_refused(pidfd, SBX_FD_FILE_SOURCE, "is a namespace, pidfd or other kernel object, not a file",
                              "a pidfd");
        else
                ok(true, "# SKIP pidfd_open: %s", strerror(errno));
        int ev = eventfd(0, EFD_CLOEXEC);
        if (ev >= 0)
                check_refused(ev, SBX_FD_FILE_SOURCE | SBX_FD_SOCKET | SBX_FD_CHAR,
                              "is a namespace, pidfd or other kernel object, not a file",
                              "an eventfd (an anon inode without a file type), whatever is allowed");
        safe_close(ev);
        char fifo[] = "/tmp/test-fdpass-fifo.XXXXXX";
        int tmpfd = mkstemp(fifo);
        safe_close(tmpfd);
        unlink(fifo);
        if (mkfifo(fifo, 0600) == 0) {
                int f = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
                is_int(sbx_fd_check(f, SBX_FD_FILE_SOURCE, &reason), SBX_FD_PIPE, "a FIFO opened by path is a pipe");
                check_refused(f, SBX_FD_REGULAR | SBX_FD_READ, "is a pipe", "a FIFO where only a regular file is allowed");
                safe_close(f);
                unlink(fifo);
        } else
                ok(true, "# SKIP mkfifo: %s", strerror(errno));
        /* A run's "stdio" and "extra_fds" (SBX_FD_STDIO): the engine's fds of any kind but these. */
        is_int(sbx_fd_check(sp[0], SBX_FD_STDIO, &reason), SBX_FD_SOCKET, "stdio: a socket");
        is_int(sbx_fd_check(p[1], SBX_FD_STDIO, &reason), SBX_FD_PIPE, "stdio: a pipe's write end");
        is_int(sbx_fd_check(p[0], SBX_FD_STDIO, &reason), SBX_FD_PIPE, "stdio: a pipe's read end");
        is_int(sbx_fd_check(null, SBX_FD_STDIO, &reason), SBX_FD_CHAR, "stdio: /dev/null");
        is_int(sbx_fd_check(rdonly, SBX_FD_STDIO, &reason), SBX_FD_REGULAR, "stdio: a regular file");
        check_refused(dir, SBX_FD_STDIO, "is a directory", "stdio: a directory");
        check_refused(opath, SBX_FD_STDIO, "is opened O_PATH", "stdio: an O_PATH file");
        if (ns >= 0)
                check_refused(ns, SBX_FD_STDIO, "is a namespace, pidfd or other kernel object, not a file",
                              "stdio: a namespace fd");
        else
                ok(true, "# SKIP /proc/self/ns/net cannot be opened here");
        int closed = dup(null);
        safe_close(closed);
        check_refused(closed, SBX_FD_FILE_SOURCE, "is not open", "a closed fd");

        int fds[] = { file, wronly, rdonly, opath, dir, dir_path, null, ns, memfd, pidfd, p[0], p[1], sp[0], sp[1] };
        sbx_fds_close(fds, ELEMENTSOF(fds));
}

int main(void) {
        test_send_recv();
        test_truncated();
        test_queue();
        test_lines_and_fds();
        test_check();
        return done_testing();
}
