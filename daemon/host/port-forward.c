/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "port-forward.h"

/* One wakeup moves at most this many pipe loads per direction, so that one fast stream does not
 * hold the loop from the others (epoll is level-triggered: what is left is seen again). */
#define RELAY_ROUNDS 16
/* A connect inside that is neither accepted nor refused by then (a listener that stopped
 * accepting, its backlog full) ends its client's connection. */
#define RELAY_CONNECT_TIMEOUT_USEC (10 * UINT64_C(1000000))

int port_listen_unix(int dir_fd, const char *path, const char *name, uid_t uid, int *ret_fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path));
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        (void) unlinkat(dir_fd, name, 0);
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        /* Not listening yet: a connect fails (ECONNREFUSED) until the file is the caller's alone. */
        if (fchownat(dir_fd, name, uid, (gid_t) -1, AT_SYMLINK_NOFOLLOW) < 0 || fchmodat(dir_fd, name, 0600, 0) < 0 ||
            listen(fd, SOMAXCONN) < 0) {
                int r = -errno;
                (void) unlinkat(dir_fd, name, 0);
                return r;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int port_listen_tcp(uint16_t port, int *ret_fd, uint16_t *ret_port) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(sa);
        _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int one = 1;

        if (fd < 0)
                return -errno;
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(fd, SOMAXCONN) < 0 ||
            getsockname(fd, (struct sockaddr *) &sa, &len) < 0)
                return -errno;
        *ret_port = ntohs(sa.sin_port);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* A socket belongs to the network namespace it was made in, whatever namespace the process is in
 * later: made after setns() into the sandbox's, it connects to the sandbox's loopback. */
int port_connect_in(int netns_fd, int home_fd, uint16_t port, int *ret_fd) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        _cleanup_close_ int fd = -EBADF;
        int one = 1, r = 0;

        if (setns(netns_fd, CLONE_NEWNET) < 0)
                return -errno;
        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                r = -errno;
        if (setns(home_fd, CLONE_NEWNET) < 0) {
                /* Every socket made from here on would be the sandbox's: no going on. */
                log_error("cannot return to the daemon's network namespace: %m");
                abort();
        }
        if (r < 0)
                return r;
        /* The relay passes on what it gets at once; Nagle's wait would only add latency. */
        (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                if (errno != EINPROGRESS)
                        return -errno;
                r = 1;
        }
        *ret_fd = TAKE_FD(fd);
        return r;
}

/* ---- The relay ---------------------------------------------------------------------------- */

/* One direction: bytes go from -> pipe -> to, by splice(). */
typedef struct RelayDir {
        int from, to;  /* the relay's fds, borrowed */
        int pipe[2];
        size_t in_pipe, pipe_size;
        bool eof;      /* from has ended */
        bool shut;     /* ... and to was told (SHUT_WR) once the pipe was empty */
        uint64_t bytes;
} RelayDir;

struct PortRelay {
        int fd[2];                /* 0: the client's connection, 1: the one inside */
        sd_event_source *src[2];
        sd_event_source *connect_timer;
        RelayDir dir[2];          /* 0: client to inside, 1: inside to client */
        bool connecting;
        bool ended;
        PortRelayDone done;
        void *userdata;
};

static int dir_init(RelayDir *d, int from, int to) {
        int sz;

        *d = (RelayDir) { .from = from, .to = to, .pipe = { -EBADF, -EBADF } };
        if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) < 0)
                return -errno;
        sz = fcntl(d->pipe[1], F_GETPIPE_SZ);
        d->pipe_size = sz > 0 ? (size_t) sz : 65536;
        return 0;
}

/* 0, or < 0 when a side failed (reset, or closed for writing while bytes were to go to it). */
static int dir_pump(RelayDir *d) {
        for (int round = 0; round < RELAY_ROUNDS; round++) {
                bool progress = false;
                ssize_t n;

                if (!d->eof && d->in_pipe < d->pipe_size) {
                        n = splice(d->from, NULL, d->pipe[1], NULL, d->pipe_size - d->in_pipe,
                                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (n > 0)
                                d->in_pipe += (size_t) n;
                        else if (n == 0)
                                d->eof = true;
                        else if (errno != EAGAIN && errno != EINTR)
                                return -errno;
                        progress = n >= 0;
                }
                if (d->in_pipe > 0) {
                        n = splice(d->pipe[0], NULL, d->to, NULL, d->in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (n > 0) {
                                d->in_pipe -= (size_t) n;
                                d->bytes += (uint64_t) n;
                                progress = true;
                        } else if (n < 0 && errno != EAGAIN && errno != EINTR)
                                return -errno;
                }
                if (d->eof && d->in_pipe == 0 && !d->shut) {
                        (void) shutdown(d->to, SHUT_WR);
                        d->shut = true;
                }
                if (!progress)
                        break;
        }
        return 0;
}

/* Reading is wanted only into an empty pipe: with bytes in it, EAGAIN cannot tell an empty
 * socket from a pipe whose slots are full, and waiting for EPOLLIN then would spin. Those bytes
 * wait for EPOLLOUT of the other side, which drains them and reads again: backpressure. */
static bool dir_wants_read(const RelayDir *d) {
        return !d->eof && d->in_pipe == 0;
}

static bool dir_wants_write(const RelayDir *d) {
        return d->in_pipe > 0;
}

static void relay_watch(PortRelay *r, int k, uint32_t events) {
        if (events == 0) {
                (void) sd_event_source_set_enabled(r->src[k], SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_io_events(r->src[k], events);
        (void) sd_event_source_set_enabled(r->src[k], SD_EVENT_ON);
}

static void relay_end(PortRelay *r, int error) {
        r->ended = true;
        relay_watch(r, 0, 0);
        relay_watch(r, 1, 0);
        r->done(r, error, r->userdata); /* may free r */
}

static void relay_pump(PortRelay *r) {
        int k;

        for (int i = 0; i < 2; i++)
                if ((k = dir_pump(&r->dir[i])) < 0)
                        return relay_end(r, k);
        if (r->dir[0].shut && r->dir[1].shut)
                return relay_end(r, 0);
        relay_watch(r, 0, (dir_wants_read(&r->dir[0]) ? EPOLLIN : 0) | (dir_wants_write(&r->dir[1]) ? EPOLLOUT : 0));
        relay_watch(r, 1, (dir_wants_read(&r->dir[1]) ? EPOLLIN : 0) | (dir_wants_write(&r->dir[0]) ? EPOLLOUT : 0));
}

static int relay_connected(PortRelay *r) {
        int error = 0;
        socklen_t len = sizeof(error);

        if (getsockopt(r->fd[1], SOL_SOCKET, SO_ERROR, &error, &len) < 0)
                return -errno;
        return error > 0 ? -error : 0;
}

static int on_relay_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        PortRelay *r = userdata;
        int k;

        if (r->ended)
                return 0;
        if (r->connecting) {
                if ((k = relay_connected(r)) < 0) {
                        relay_end(r, k);
                        return 0;
                }
                r->connecting = false;
                r->connect_timer = sd_event_source_disable_unref(r->connect_timer);
        }
        relay_pump(r);
        return 0;
}

static int on_connect_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        PortRelay *r = userdata;

        if (r->connecting && !r->ended)
                relay_end(r, -ETIMEDOUT);
        return 0;
}

int port_relay_new(sd_event *e, int client, int inside, PortRelayDone done, void *userdata, PortRelay **ret) {
        PortRelay *r = calloc(1, sizeof(*r));
        int k;

        if (!r) {
                safe_close(client);
                safe_close(inside);
                return -ENOMEM;
        }
        /* Connected or not, the first EPOLLOUT of the inside socket says so (SO_ERROR). */
        *r = (PortRelay) { .fd = { client, inside }, .connecting = true, .done = done, .userdata = userdata };
        r->dir[0].pipe[0] = r->dir[0].pipe[1] = r->dir[1].pipe[0] = r->dir[1].pipe[1] = -EBADF;
        if ((k = dir_init(&r->dir[0], client, inside)) < 0 || (k = dir_init(&r->dir[1], inside, client)) < 0 ||
            (k = sd_event_add_io(e, &r->src[0], client, EPOLLIN, on_relay_io, r)) < 0 ||
            (k = sd_event_add_io(e, &r->src[1], inside, EPOLLOUT, on_relay_io, r)) < 0 ||
            (k = sd_event_add_time_relative(e, &r->connect_timer, CLOCK_MONOTONIC, RELAY_CONNECT_TIMEOUT_USEC, 0,
                                            on_connect_timeout, r)) < 0) {
                port_relay_free(r);
                return k;
        }
        /* Nothing is read from the client before the inside has answered the connect. */
        relay_watch(r, 0, 0);
        *ret = r;
        return 0;
}

PortRelay *port_relay_free(PortRelay *r) {
        if (!r)
                return NULL;
        sd_event_source_disable_unref(r->connect_timer);
        for (int i = 0; i < 2; i++) {
                sd_event_source_disable_unref(r->src[i]);
                safe_close(r->dir[i].pipe[0]);
                safe_close(r->dir[i].pipe[1]);
                safe_close(r->fd[i]);
        }
        free(r);
        return NULL;
}

void port_relay_bytes(const PortRelay *r, uint64_t *ret_in, uint64_t *ret_out) {
        *ret_in = r->dir[0].bytes;
        *ret_out = r->dir[1].bytes;
}
