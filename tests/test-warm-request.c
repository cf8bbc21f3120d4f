/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A run's request to a warm helper (daemon/exec/spawn.h): what the daemon sends is what the
 * helper gets, strings, fds and the rest of the params; a request too long for one message or
 * without its stdio is not sent; what is not one request (too short, no fds, counts that do not
 * add up, the daemon's end closed) is refused, and the fds that came with it are closed. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spawn.h"
#include "tap.h"

static bool same_file(int a, int b) {
        struct stat x, y;
        return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_ino == y.st_ino && x.st_dev == y.st_dev;
}

static int open_fds(void) {
        int n = 0;
        for (int fd = 0; fd < 1024; fd++)
                n += fcntl(fd, F_GETFD) >= 0;
        return n;
}

static bool nothing_waiting(int sock) {
        struct pollfd p = { .fd = sock, .events = POLLIN };
        return poll(&p, 1, 0) == 0;
}

static void raw_send(int sock, const void *data, size_t len, const int *fds, size_t nfds) {
        union {
                char buf[CMSG_SPACE(sizeof(int) * 16)];
                struct cmsghdr align;
        } control = {};
        struct iovec iov = { (void *) data, len };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (nfds) {
                mh.msg_control = control.buf;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
                memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
        }
        (void) sendmsg(sock, &mh, 0);
}

int main(void) {
        static WarmRequest req;
        int sp[2], pin[2], pout[2], perr[2], extra[2];
        char *argv[] = { (char *) "sh", (char *) "-c", (char *) "echo hi", (char *) "", NULL };
        char *envp[] = { (char *) "A=1", (char *) "PATH=/usr/bin:/bin", NULL };
        RunParams p = { .cwd = "/work/d", .argv = argv, .envp = envp, .user = SANDBOX_USER_ROOT, .umask_set = true,
                        .umask = 027, .rl_mask = 1u << 7, .n_extra = 2, .outlive_daemon = true };
        int before;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0 || pipe(pin) < 0 || pipe(pout) < 0 || pipe(perr) < 0 ||
            pipe(extra) < 0)
                skip_all("no socketpair or pipes");
        p.rl[7] = (struct rlimit) { 64, 128 };
        p.stdio[0] = pin[0];
        p.stdio[1] = pout[1];
        p.stdio[2] = perr[1];
        p.extra_fds[0] = extra[0];
        p.extra_fds[1] = extra[1];

        /* A whole request, both ways. */
        is_int(warm_request_send(sp[0], &p), 0, "a run's request is sent");
        before = open_fds();
        is_int(warm_request_recv(sp[1], &req), 0, "and received");
        is_int(open_fds(), before + 5, "with its five fds (stdio and two extra)");
        ok(strcmp(req.params.cwd, "/work/d") == 0, "its cwd");
        ok(req.params.argv[0] && strcmp(req.params.argv[0], "sh") == 0 && strcmp(req.params.argv[2], "echo hi") == 0 &&
                   strcmp(req.params.argv[3], "") == 0 && req.params.argv[4] == NULL,
           "its argv, an empty string kept, NULL-terminated");
        ok(req.params.envp[0] && strcmp(req.params.envp[1], "PATH=/usr/bin:/bin") == 0 && req.params.envp[2] == NULL,
           "its envp, NULL-terminated");
        ok(same_file(req.params.stdio[0], pin[0]) && same_file(req.params.stdio[1], pout[1]) && same_file(req.params.stdio[2], perr[1]),
           "its stdio are the daemon's ends");
        ok(same_file(req.params.extra_fds[0], extra[0]) && same_file(req.params.extra_fds[1], extra[1]) && req.params.n_extra == 2,
           "its extra fds, in order");
        ok((fcntl(req.params.stdio[0], F_GETFD) & FD_CLOEXEC) != 0, "received close-on-exec (the command gets only its own)");
        ok(req.params.user == SANDBOX_USER_ROOT && req.params.umask_set && req.params.umask == 027 && req.params.outlive_daemon,
           "its user, umask and whether it outlives the daemon");
        ok(req.params.rl_mask == 1u << 7 && req.params.rl[7].rlim_cur == 64 && req.params.rl[7].rlim_max == 128, "its rlimits");
        ok(req.params.init_pidfd == -1 && req.params.cgroup_fd == -1 && req.params.report_fd == -1 && req.params.filter == NULL,
           "no fd or pointer of the daemon's own is taken for one of ours");
        for (int i = 0; i < 3; i++)
                close(req.params.stdio[i]);
        for (int i = 0; i < 2; i++)
                close(req.params.extra_fds[i]);

        /* No environment at all. */
        p.envp = NULL;
        p.n_extra = 0;
        is_int(warm_request_send(sp[0], &p), 0, "a request without an environment is sent");
        is_int(warm_request_recv(sp[1], &req), 0, "and received");
        ok(req.params.envp[0] == NULL && req.params.argv[4] == NULL, "an empty envp");
        for (int i = 0; i < 3; i++)
                close(req.params.stdio[i]);

        /* What is not sent. */
        {
                char *big = malloc(WARM_STRINGS_MAX);
                char *bargv[] = { (char *) "x", big, NULL };
                RunParams b = p;
                memset(big, 'y', WARM_STRINGS_MAX - 1);
                big[WARM_STRINGS_MAX - 1] = '\0';
                b.argv = bargv;
                is_int(warm_request_send(sp[0], &b), -E2BIG, "strings over 64 KiB: -E2BIG (the cold way)");
                free(big);
        }
        ok(nothing_waiting(sp[1]), "and nothing was sent");
        p.stdio[1] = -1;
        is_int(warm_request_send(sp[0], &p), -EBADF, "a missing stdio fd: -EBADF");
        p.stdio[1] = pout[1];
        p.argv = (char *[]) { NULL };
        is_int(warm_request_send(sp[0], &p), -EINVAL, "an empty argv: -EINVAL");
        ok(nothing_waiting(sp[1]), "and nothing was sent");

        /* What is not one request: refused, its fds closed. */
        before = open_fds();
        raw_send(sp[0], "short", 5, (int[]) { pin[0], pout[1], perr[1] }, 3);
        is_int(warm_request_recv(sp[1], &req), -1, "a message shorter than a request: refused");
        is_int(open_fds(), before, "the fds that came with it are closed");
        {
                static char m[sizeof(WarmHeader) + 8];
                WarmHeader h = { .argc = 1, .envc = 0, .len = 4 }; /* 4, but 8 bytes of strings follow */
                memcpy(m, &h, sizeof(h));
                memcpy(m + sizeof(h), "/w\0sh\0\0\0", 8);
                raw_send(sp[0], m, sizeof(m), (int[]) { pin[0], pout[1], perr[1] }, 3);
                is_int(warm_request_recv(sp[1], &req), -1, "a length that is not the strings': refused");
                h.len = 8;
                h.argc = 0;
                memcpy(m, &h, sizeof(h));
                raw_send(sp[0], m, sizeof(m), (int[]) { pin[0], pout[1], perr[1] }, 3);
                is_int(warm_request_recv(sp[1], &req), -1, "no argv: refused");
                h.argc = 4; /* "sh" and two empty strings are there, not four */
                memcpy(m, &h, sizeof(h));
                raw_send(sp[0], m, sizeof(m), (int[]) { pin[0], pout[1], perr[1] }, 3);
                is_int(warm_request_recv(sp[1], &req), -1, "more strings counted than sent: refused");
                h.argc = 1;
                memcpy(m, &h, sizeof(h));
                raw_send(sp[0], m, sizeof(m), (int[]) { pin[0] }, 1);
                is_int(warm_request_recv(sp[1], &req), -1, "one fd where stdio's three must come: refused");
                is_int(open_fds(), before, "no fd of those is left open");
                raw_send(sp[0], m, sizeof(m), (int[]) { pin[0], pout[1], perr[1] }, 3);
                is_int(warm_request_recv(sp[1], &req), 0, "the same, well formed, is a request");
                ok(strcmp(req.params.cwd, "/w") == 0 && strcmp(req.params.argv[0], "sh") == 0 && !req.params.argv[1] &&
                           !req.params.envp[0], "cwd /w, argv [sh], no env");
                for (int i = 0; i < 3; i++)
                        close(req.params.stdio[i]);
        }
        close(sp[0]);
        is_int(warm_request_recv(sp[1], &req), -1, "the daemon's end closed: -1 (the helper ends)");
        return done_testing();
}
