/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests for daemon/server/hold.c's wire: fds and their names across a SOCK_SEQPACKET
 * socketpair, more than one message's 253, and what a hostile or broken sender gets (every fd
 * it sent closed, never kept under a name that is not ours). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hold.h"
#include "tap.h"

static int open_fds(void) {
        int n = 0;
        char path[64];
        for (int fd = 0; fd < 4096; fd++) {
                snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
                n += access(path, F_OK) == 0;
        }
        return n;
}

static void pair(int sp[2]) {
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                abort();
        /* 600 fds in 3 messages and the end: more than the default buffer may take at once. */
        int big = 1 << 20;
        (void) setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
}

static void test_many(size_t n) {
        FdStoreEntry *e = calloc(n, sizeof(*e));
        FdStore got = {};
        bool complete = false;
        int sp[2], before = open_fds();
        struct stat a, b;
        size_t same = 0;

        pair(sp);
        for (size_t i = 0; i < n; i++) {
                e[i].name = malloc(FDSTORE_NAME_MAX);
                snprintf(e[i].name, FDSTORE_NAME_MAX, "r.run-%zu.out", i);
                e[i].fd = i % 7 == 3 ? -1 : open("/dev/null", O_RDONLY | O_CLOEXEC); /* some skipped */
        }
        /* A child sends, as the daemon does; the parent receives, as the holder does. */
        pid_t pid = fork();
        if (pid == 0) {
                close(sp[1]);
                _exit(hold_send(sp[0], e, n) < 0 ? 1 : 0);
        }
        close(sp[0]);
        int r = hold_recv(sp[1], &got, HOLD_MAX_FDS, &complete);
        size_t want = 0;
        for (size_t i = 0; i < n; i++)
                want += e[i].fd >= 0;
        is_int(r, (long long) want, "%zu entries (%zu with an fd): every fd came", n, want);
        ok(complete, "the end came");
        for (size_t i = 0, j = 0; i < n && j < got.n; i++) {
                if (e[i].fd < 0)
                        continue;
                if (strcmp(got.entries[j].name, e[i].name) == 0 && fstat(got.entries[j].fd, &a) == 0 &&
                    fstat(e[i].fd, &b) == 0 && a.st_rdev == b.st_rdev && (fcntl(got.entries[j].fd, F_GETFD) & FD_CLOEXEC))
                        same++;
                j++;
        }
        is_int((long long) same, (long long) want, "each under its name, in order, close-on-exec");
        close(sp[1]);
        fdstore_done(&got);
        for (size_t i = 0; i < n; i++) {
                if (e[i].fd >= 0)
                        close(e[i].fd);
                free(e[i].name);
        }
        free(e);
        waitpid(pid, NULL, 0);
        is_int(open_fds(), before, "no fd left over");
}

/* A raw message of ours with count fds of /dev/null. */
static void send_raw(int sock, const void *data, size_t len, int count) {
        int fds[300];
        char control[CMSG_SPACE(sizeof(fds))] = {};
        struct iovec iov = { (void *) data, len };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        for (int i = 0; i < count; i++)
                fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (count > 0) {
                mh.msg_control = control;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * count);
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * count);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * count);
        }
        if (sendmsg(sock, &mh, 0) < 0)
                abort();
        for (int i = 0; i < count; i++)
                close(fds[i]);
}

typedef struct {
        uint32_t magic, count, flags, names_len;
        char names[256];
} Raw;

static void hostile(const char *what, const Raw *m, size_t names_len, int fds, int want_r, size_t want_kept) {
        FdStore got = {};
        bool complete = true;
        int sp[2], before = open_fds();

        pair(sp);
        send_raw(sp[0], m, 16 + names_len, fds);
        close(sp[0]);
        int r = hold_recv(sp[1], &got, HOLD_MAX_FDS, &complete);
        is_int(r, want_r, "%s: hold_recv returns %d", what, want_r);
        is_int((long long) got.n, (long long) want_kept, "%s: %zu kept", what, want_kept);
        ok(!complete, "%s: not complete", what);
        fdstore_done(&got);
        close(sp[1]);
        is_int(open_fds(), before, "%s: every fd it sent is closed", what);
}

int main(void) {
        test_many(5);
        test_many(253);
        test_many(600);

        Raw m = { .magic = 0x53425848u, .count = 2 };
        memcpy(m.names, "r.a.out\0r.b.err", 16);
        m.names_len = 16;
        hostile("two fds, the sender gone before its end", &m, 16, 2, 2, 2);
        hostile("a count that is not the number of fds", &m, 16, 1, -EBADMSG, 0);
        Raw bad = m;
        bad.magic = 1;
        hostile("not our magic", &bad, 16, 2, -EBADMSG, 0);
        Raw nonul = m;
        memcpy(nonul.names, "r.a.out\0r.b.errX", 16);
        hostile("a name without its NUL", &nonul, 16, 2, -EBADMSG, 1);
        Raw theirs = m;
        memcpy(theirs.names, "metrics\0r.b.err", 16);
        hostile("a name that is not ours (closed, not kept)", &theirs, 16, 2, 1, 1);
        Raw len = m;
        len.names_len = 15;
        hostile("names_len not the message's", &len, 16, 2, -EBADMSG, 0);
        Raw end = { .magic = 0x53425848u, .count = 1, .flags = 1, .names_len = 8 };
        memcpy(end.names, "r.a.out", 8);
        hostile("an end with an fd", &end, 8, 1, -EBADMSG, 0);
        /* More than 253 fds a message: the kernel refuses to send it (SCM_MAX_FD). */

        /* The cap: 300 fds offered, at most 256 taken. */
        {
                FdStoreEntry e[300];
                FdStore got = {};
                bool complete;
                int sp[2], before = open_fds();
                pair(sp);
                for (int i = 0; i < 300; i++) {
                        e[i].name = (char *) "s.x.init";
                        e[i].fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                }
                is_int(hold_send(sp[0], e, 300), 0, "300 fds sent");
                for (int i = 0; i < 300; i++)
                        close(e[i].fd);
                int r = hold_recv(sp[1], &got, 256, &complete);
                is_int(r, -E2BIG, "beyond the cap: -E2BIG");
                is_int((long long) got.n, 253, "what came before the cap is kept (one message)");
                fdstore_done(&got);
                close(sp[0]);
                close(sp[1]);
                is_int(open_fds(), before, "the message over the cap closed, nothing left over");
        }
        return done_testing();
}
