/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "hold.h"
#include "log.h"
#include "macro.h"
#include "scope.h"
#include "util.h"

#define HOLD_MAGIC 0x53425848u /* "SBXH" */
#define HOLD_END 1u
#define HOLD_CGROUP "hold"
#define HOLD_ACK_MS 10000

typedef struct HoldHeader {
        uint32_t magic;
        uint32_t count;
        uint32_t flags;
        uint32_t names_len;
} HoldHeader;

#define HOLD_MSG_MAX (sizeof(HoldHeader) + HOLD_FDS_PER_MESSAGE * FDSTORE_NAME_MAX)

struct Holder {
        pid_t pid;
        int sock;          /* our end of the socketpair */
        ScopeJob *job;
        void (*ready)(void *userdata);
        void *userdata;
        char unit[SCOPE_UNIT_MAX];
};

/* ---- The wire ----------------------------------------------------------------------------- */

static int send_one(int sock, const HoldHeader *h, const char *names, const int *fds) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * HOLD_FDS_PER_MESSAGE)];
        } control = {};
        struct iovec iov[2] = { { (void *) h, sizeof(*h) }, { (void *) names, h->names_len } };
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = h->names_len ? 2 : 1 };

        if (h->count > 0) {
                mh.msg_control = control.buf;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * h->count);
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * h->count);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * h->count);
        }
        for (;;) {
                if (sendmsg(sock, &mh, MSG_NOSIGNAL) >= 0)
                        return 0;
                if (errno != EINTR)
                        return -errno;
        }
}

int hold_send(int sock, const FdStoreEntry *entries, size_t n) {
        _cleanup_free_ char *names = malloc(HOLD_FDS_PER_MESSAGE * FDSTORE_NAME_MAX);
        int fds[HOLD_FDS_PER_MESSAGE];
        HoldHeader h = { .magic = HOLD_MAGIC };
        int r;

        if (!names)
                return -ENOMEM;
        for (size_t i = 0; i <= n; i++) {
                if (i < n && entries[i].fd >= 0) {
                        size_t len = strlen(entries[i].name) + 1;
                        if (len > FDSTORE_NAME_MAX)
                                continue;
                        memcpy(names + h.names_len, entries[i].name, len);
                        h.names_len += len;
                        fds[h.count++] = entries[i].fd;
                }
                if ((h.count == HOLD_FDS_PER_MESSAGE || i == n) && h.count > 0) {
                        if ((r = send_one(sock, &h, names, fds)) < 0)
                                return r;
                        h.count = h.names_len = 0;
                }
        }
        h.flags = HOLD_END;
        return send_one(sock, &h, names, fds);
}

static void close_fds(const int *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                safe_close(fds[i]);
}

int hold_recv(int sock, FdStore *into, size_t max, bool *ret_complete) {
        _cleanup_free_ char *buf = malloc(HOLD_MSG_MAX + 1);
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * HOLD_FDS_PER_MESSAGE) + CMSG_SPACE(sizeof(int) * 16)];
        } control;
        size_t total = 0;

        *ret_complete = false;
        if (!buf)
                return -ENOMEM;
        for (;;) {
                struct iovec iov = { buf, HOLD_MSG_MAX + 1 };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                                     .msg_controllen = sizeof(control.buf) };
                int fds[HOLD_FDS_PER_MESSAGE + 16];
                size_t nfds = 0;
                HoldHeader h;
                ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return errno == EAGAIN ? -ETIMEDOUT : -errno;
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                                for (size_t i = 0; i < k; i++) {
                                        int fd;
                                        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                                        if (nfds < ELEMENTSOF(fds))
                                                fds[nfds++] = fd;
                                        else
                                                safe_close(fd);
                                }
                        }
                if (n == 0) { /* the sender went before its end */
                        close_fds(fds, nfds);
                        return (int) total;
                }
                if ((size_t) n < sizeof(h) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
                        close_fds(fds, nfds);
                        return -EBADMSG;
                }
                memcpy(&h, buf, sizeof(h));
                if (h.magic != HOLD_MAGIC || h.count > HOLD_FDS_PER_MESSAGE || h.count != nfds ||
                    h.names_len != (size_t) n - sizeof(h) || (h.flags & ~HOLD_END) || ((h.flags & HOLD_END) && h.count)) {
                        close_fds(fds, nfds);
                        return -EBADMSG;
                }
                if (h.flags & HOLD_END) {
                        *ret_complete = true;
                        return (int) total;
                }
                if (total + h.count > max) {
                        close_fds(fds, nfds);
                        return -E2BIG;
                }
                const char *p = buf + sizeof(h), *end = buf + n;
                for (size_t i = 0; i < h.count; i++) {
                        size_t len = p < end ? strnlen(p, (size_t) (end - p)) : 0;
                        if (p >= end || len == (size_t) (end - p)) { /* no NUL: not one of our names */
                                close_fds(fds + i, h.count - i);
                                return -EBADMSG;
                        }
                        if (len >= FDSTORE_NAME_MAX || !fdstore_name_is_ours(p)) {
                                log_debug("the holder's wire: a name that is not ours, its fd closed");
                                safe_close(fds[i]);
                        } else if (fdstore_add(into, p, fds[i]) >= 0)
                                total++;
                        p += len + 1;
                }
        }
}

/* ---- The holder: `sandboxd --hold PATH TIMEOUT_USEC` ---------------------------------------- */

static bool socket_is_ours(const char *path, const struct stat *bound) {
        struct stat st;
        return lstat(path, &st) == 0 && st.st_ino == bound->st_ino && st.st_dev == bound->st_dev;
}

/* What a client gets: everything, then its 'K'. 0, or -errno (the client went: wait for another). */
static int serve(int conn, const FdStore *held) {
        struct pollfd p = { .fd = conn, .events = POLLIN };
        char ack = 0;
        int r = hold_send(conn, held->entries, held->n);

        if (r < 0)
                return r;
        r = poll(&p, 1, HOLD_ACK_MS);
        if (r <= 0)
                return r < 0 ? -errno : -ETIMEDOUT;
        if (recv(conn, &ack, 1, 0) != 1 || ack != 'K')
                return -ECONNRESET;
        return 0;
}

int hold_main(int argc, char **argv) {
        _cleanup_close_ int lfd = -EBADF;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        FdStore held = {};
        struct stat bound;
        sigset_t all;
        uint64_t timeout, deadline;
        char *end = NULL;
        bool complete;
        int r;

        if (argc != 4 || strlen(argv[2]) >= sizeof(sa.sun_path) || argv[2][0] != '/') {
                log_error("usage: sandboxd --hold PATH TIMEOUT_USEC (started by sandboxd at its stop)");
                return 2;
        }
        /* Exec'd as /proc/self/exe, our comm would be "exe": ps and pgrep name us as what we are. */
        (void) prctl(PR_SET_NAME, "sandboxd-hold");
        errno = 0;
        timeout = strtoull(argv[3], &end, 10);
        if (errno || !end || *end || timeout == 0) {
                log_error("--hold: '%s' is not a timeout in microseconds", argv[3]);
                return 2;
        }
        sigemptyset(&all);
        (void) sigprocmask(SIG_SETMASK, &all, NULL);
        (void) signal(SIGPIPE, SIG_IGN);
        (void) signal(SIGHUP, SIG_IGN);
        (void) setsid();
        if (fcntl(3, F_GETFD) < 0) {
                log_error("--hold: no socket on fd 3");
                return 2;
        }

        r = hold_recv(3, &held, HOLD_MAX_FDS, &complete);
        if (r < 0 && held.n == 0) {
                log_error_errno(r, "holder: nothing came from the daemon: %m");
                return 1;
        }
        if (!complete)
                log_warning("holder: the daemon went before it handed everything over; holding the %zu fd(s) that came", held.n);

        strcpy(sa.sun_path, argv[2]);
        lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (lfd < 0)
                return log_error_errno(-errno, "holder: socket: %m"), 1;
        /* A socket left by an earlier holder (or one killed): nobody listens there any more, or
         * its daemon did not come back for it (then it closes its own on its timeout). */
        (void) unlink(sa.sun_path);
        mode_t old = umask(0177); /* 0600 */
        r = bind(lfd, (struct sockaddr *) &sa, sizeof(sa));
        umask(old);
        if (r < 0 || listen(lfd, 8) < 0 || lstat(sa.sun_path, &bound) < 0) {
                log_error_errno(-errno, "holder: cannot listen on %s: %m", sa.sun_path);
                fdstore_done(&held);
                return 1;
        }
        (void) write(3, "L", 1); /* the daemon may go now */
        close(3);
        log_info("holder: %zu fd(s) kept on %s for %" PRIu64 " s", held.n, sa.sun_path, timeout / 1000000);

        deadline = now_usec(CLOCK_BOOTTIME);
        deadline = timeout > UINT64_MAX - deadline ? UINT64_MAX : deadline + timeout;
        for (;;) {
                uint64_t now = now_usec(CLOCK_BOOTTIME);
                struct pollfd p = { .fd = lfd, .events = POLLIN };
                struct ucred cred;
                socklen_t len = sizeof(cred);

                if (now >= deadline) {
                        log_warning("holder: no daemon came for the %zu fd(s) within hold_timeout; closing them "
                                    "(their sessions and runs end)", held.n);
                        break;
                }
                uint64_t left_ms = (deadline - now + 999) / 1000;
                r = poll(&p, 1, left_ms > INT32_MAX ? INT32_MAX : (int) left_ms);
                if (r <= 0)
                        continue;
                _cleanup_close_ int conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                if (conn < 0)
                        continue;
                if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != geteuid()) {
                        log_warning("holder: a client of uid %d refused (not uid %u)", len == sizeof(cred) ? (int) cred.uid : -1,
                                    (unsigned) geteuid());
                        continue;
                }
                r = serve(conn, &held);
                if (r < 0) {
                        log_warning_errno(r, "holder: pid %d did not take the fds (%m); waiting for another", (int) cred.pid);
                        continue;
                }
                log_info("holder: %zu fd(s) given to pid %d", held.n, (int) cred.pid);
                break;
        }
        if (socket_is_ours(sa.sun_path, &bound))
                (void) unlink(sa.sun_path);
        fdstore_done(&held);
        return 0;
}

/* ---- The daemon's side at the stop --------------------------------------------------------- */

static void on_scope(int error, void *userdata) {
        Holder *h = userdata;

        h->job = NULL;
        if (error < 0)
                log_warning_errno(error, "the holder's scope %s did not start (%m): the stop may kill it", h->unit);
        h->ready(h->userdata);
}

int hold_spawn(Context *ctx, const char *dir, void (*ready)(void *userdata), void *userdata, Holder **ret) {
        _cleanup_free_ char *path = NULL;
        char timeout[32];
        int sp[2], r;
        Holder *h;

        if (!dir)
                return -ENOENT;
        if (asprintf(&path, "%s/" HOLD_SOCKET_NAME, dir) < 0)
                return -ENOMEM;
        if (strlen(path) >= sizeof(((struct sockaddr_un) {}).sun_path))
                return -ENAMETOOLONG;
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->sock = -EBADF;
        h->ready = ready;
        h->userdata = userdata;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
                free(h);
                return -errno;
        }
        snprintf(timeout, sizeof(timeout), "%" PRIu64, ctx->config.hold_timeout_usec);
        h->pid = fork();
        if (h->pid < 0) {
                r = -errno;
                close(sp[0]);
                close(sp[1]);
                free(h);
                return r;
        }
        if (h->pid == 0) {
                sigset_t all;
                sigemptyset(&all);
                (void) sigprocmask(SIG_SETMASK, &all, NULL);
                /* dup2() onto itself would keep its close-on-exec flag. */
                if (sp[1] == 3 ? fcntl(3, F_SETFD, 0) < 0 : dup2(sp[1], 3) < 0)
                        _exit(127);
                (void) syscall(SYS_close_range, 4U, ~0U, 0U);
                execl("/proc/self/exe", "sandboxd", "--hold", path, timeout, (char *) NULL);
                _exit(127);
        }
        close(sp[1]);
        h->sock = sp[0];
        /* Out of the service's cgroup, or the stop kills it; standalone, a leaf of our subtree. */
        if (ctx->scopes) {
                snprintf(h->unit, sizeof(h->unit), "sandboxd-hold-%d.scope", (int) h->pid);
                r = scope_start(ctx->scopes, h->unit, "sandboxd's fd holder (a stop's sessions and runs)", h->pid,
                                on_scope, h, &h->job);
                if (r >= 0) {
                        *ret = h;
                        return 0;
                }
                log_warning_errno(r, "cannot start the holder's scope (%m): the stop may kill it");
        } else if (ctx->cg.base_fd >= 0) {
                _cleanup_close_ int fd = -EBADF;
                r = cg_create(ctx->cg.base_fd, HOLD_CGROUP, &fd);
                if (r >= 0)
                        r = cg_move_pid(fd, h->pid);
                if (r < 0)
                        log_warning_errno(r, "cannot move the holder into %s/" HOLD_CGROUP ": %m", ctx->cg.base);
        }
        *ret = h;
        ready(userdata);
        return 0;
}

int hold_hand_over(Holder *h) {
        const FdStore *kept = fdstore_kept();
        struct pollfd p = { .fd = h->sock, .events = POLLIN };
        char c = 0;
        int r;

        if (h->job)
                log_warning("the holder's scope %s is not there yet: the stop may kill it", h->unit);
        r = hold_send(h->sock, kept->entries, kept->n);
        if (r < 0)
                return log_warning_errno(r, "cannot hand the fds to the holder (pid %d): %m; sessions and runs end with the daemon",
                                         (int) h->pid);
        r = poll(&p, 1, HOLD_ACK_MS);
        if (r <= 0 || read(h->sock, &c, 1) != 1 || c != 'L')
                return log_warning_errno(-EPROTO, "the holder (pid %d) does not listen: sessions and runs end with the daemon",
                                         (int) h->pid);
        log_info("handed %zu fd(s) to the holder (pid %d)%s%s", kept->n, (int) h->pid, h->unit[0] ? " in " : "", h->unit);
        return 0;
}

Holder *hold_free(Holder *h) {
        if (!h)
                return NULL;
        scope_job_cancel(h->job);
        safe_close(h->sock);
        free(h);
        return NULL;
}

/* ---- The daemon's side at the start -------------------------------------------------------- */

/* Standalone, the holder's leaf: gone with its last holder (one killed, one that gave up, or
 * the one that just gave us its fds and is exiting: wait then). */
static void remove_hold_cgroup(Context *ctx, bool wait) {
        if (ctx->cg.base_fd < 0)
                return;
        for (int i = 0; i < (wait ? 100 : 1); i++) {
                if (unlinkat(ctx->cg.base_fd, HOLD_CGROUP, AT_REMOVEDIR) == 0 || errno == ENOENT)
                        return;
                if (errno != EBUSY)
                        break;
                usleep(10000);
        }
        log_debug("cannot remove %s/" HOLD_CGROUP ": %m", ctx->cg.base);
}

int hold_take_back(Context *ctx, const char *dir) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct timeval tv = { .tv_sec = HOLD_ACK_MS / 1000 };
        struct ucred cred;
        socklen_t len = sizeof(cred);
        FdStore got = {};
        size_t taken = 0, dups = 0;
        bool complete;
        struct stat st;
        int r;

        remove_hold_cgroup(ctx, false);
        if (!dir)
                return 0;
        if (asprintf(&path, "%s/" HOLD_SOCKET_NAME, dir) < 0)
                return -ENOMEM;
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
                log_warning("%s is not a socket of uid %u: no holder asked, the file left alone", path, (unsigned) geteuid());
                return 0;
        }
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                if (errno == ECONNREFUSED) {
                        log_info("%s: no holder listens there (it was killed, or gave up): removed", path);
                        (void) unlink(path);
                        return 0;
                }
                log_warning_errno(-errno, "cannot reach the holder at %s: %m", path);
                return 0;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return -errno;
        if (cred.uid != geteuid()) {
                log_warning("the holder at %s runs as uid %u, not %u: nothing taken from it", path, (unsigned) cred.uid,
                            (unsigned) geteuid());
                return 0;
        }
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        r = hold_recv(fd, &got, HOLD_MAX_FDS, &complete);
        if (!complete && got.n == 0 && (r >= 0 || r == -ECONNRESET)) {
                /* Two daemons: the holder served the other one and went. */
                log_warning("the holder at %s (pid %d) gave nothing: another daemon took its fds?", path, (int) cred.pid);
                return 0;
        }
        if (r < 0)
                log_warning_errno(r, "the holder (pid %d) sent what is not its wire (%m): keeping the %zu fd(s) that came",
                                  (int) cred.pid, got.n);
        else if (!complete)
                log_warning("the holder (pid %d) went before it sent everything: keeping the %zu fd(s) that came", (int) cred.pid,
                            got.n);
        else
                (void) write(fd, "K", 1);
        for (size_t i = 0; i < got.n; i++) {
                FdStoreEntry *e = &got.entries[i];
                if (e->fd < 0)
                        continue;
                /* A restart kept systemd's store too: the same fd, once. */
                if (fdstore_has(&ctx->fdstore, e->name)) {
                        e->fd = safe_close(e->fd);
                        dups++;
                        continue;
                }
                /* Not in systemd's store any more (the unit was stopped): back into it. */
                int k = fdstore_resend(e->name, e->fd);
                if (k < 0)
                        log_warning_errno(k, "cannot put %s back into the fd store: %m", e->name);
                if (fdstore_add(&ctx->fdstore, e->name, TAKE_FD(e->fd)) >= 0)
                        taken++;
        }
        fdstore_done(&got);
        log_info("took %zu fd(s) back from the holder (pid %d); %zu more were in the fd store already", taken,
                 (int) cred.pid, dups);
        if (complete) {
                /* It exits once it has our 'K': then its leaf can go. */
                struct pollfd p = { .fd = fd, .events = POLLIN };
                (void) poll(&p, 1, 2000);
                remove_hold_cgroup(ctx, true);
        }
        return 0;
}
