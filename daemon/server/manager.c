/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <malloc.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "connection.h"
#include "log.h"
#include "macro.h"
#include "manager.h"
#include "metrics.h"
#include "util.h"

int manager_new(Manager **ret, Context *ctx, const ConnectionHooks *hooks) {
        Manager *m = calloc(1, sizeof(*m));

        if (!m)
                return -ENOMEM;
        m->ctx = ctx;
        m->conns = (ConnectionSet) { .event = ctx->event, .config = &ctx->config, .hooks = hooks, .hooks_userdata = m };
        m->registry = ctx->registry;
        *ret = m;
        return 0;
}

void manager_close_connections(Manager *m) {
        m->stopping = true;
        while (m->conns.head)
                connection_close_now(m->conns.head);
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        manager_close_connections(m);
        m->accept_timer = sd_event_source_disable_unref(m->accept_timer);
        m->trim_timer = sd_event_source_disable_unref(m->trim_timer);
        for (unsigned i = 0; i < m->n_listen; i++) {
                m->listen_sources[i] = sd_event_source_disable_unref(m->listen_sources[i]);
                safe_close(m->listen_fds[i]);
                free(m->listen_paths[i]);
        }
        free(m);
        return NULL;
}

/* ---- Listening --------------------------------------------------------------------------- */

#define ACCEPT_PAUSE_USEC (100 * USEC_PER_MSEC)

static int on_accept_resume(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        for (unsigned i = 0; i < m->n_listen; i++)
                (void) sd_event_source_set_enabled(m->listen_sources[i], SD_EVENT_ON);
        return 0;
}

/* Out of fds: the pending connection stays in the backlog and the listening socket stays
 * readable, so a level-triggered loop would call us again at once, forever. Stop listening for
 * a moment instead; closing connections and finishing runs give fds back meanwhile. */
static void manager_pause_accept(Manager *m) {
        int r;

        if (m->accept_paused_count++ % 100 == 0)
                log_warning("accept: out of file descriptors; not accepting for %d ms (%u times so far)",
                            (int) (ACCEPT_PAUSE_USEC / USEC_PER_MSEC), m->accept_paused_count);
        for (unsigned i = 0; i < m->n_listen; i++)
                (void) sd_event_source_set_enabled(m->listen_sources[i], SD_EVENT_OFF);
        /* Made at start (manager_setup): making it now could need an fd itself. */
        r = sd_event_source_set_time_relative(m->accept_timer, ACCEPT_PAUSE_USEC);
        if (r >= 0)
                r = sd_event_source_set_enabled(m->accept_timer, SD_EVENT_ONESHOT);
        if (r < 0) /* no timer: listen again rather than never */
                on_accept_resume(NULL, 0, m);
}

/* One line, resource_exhausted, to a connection we do not take; then it is closed. */
static void refuse(int cfd, const ProtoError *err) {
        _cleanup_json_ json_object *reply = proto_reply_error(NULL, err);
        _cleanup_free_ char *line = NULL;
        size_t n;

        metrics_error(err->code);
        line = proto_serialize(reply, &n);
        if (line)
                (void) !send(cfd, line, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        close(cfd);
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Manager *m = userdata;
        Connection *c;
        ProtoError err;

        for (int i = 0; i < 64; i++) {
                int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (cfd < 0) {
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                                manager_pause_accept(m);
                        else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                                log_warning("accept: %m");
                        return 0;
                }
                struct ucred peer;
                socklen_t len = sizeof(peer);

                if (m->conns.n >= m->ctx->config.max_connections || m->stopping) {
                        proto_error_set(&err, SBX_E_RESOURCE_EXHAUSTED, NULL, "too many connections");
                        refuse(cfd, &err);
                        continue;
                }
                if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &peer, &len) < 0) {
                        close(cfd);
                        continue;
                }
                /* One uid may not take every connection: the others could not even ask (THREATS
                 * PRO-07). */
                if (peer.uid != 0 && connection_uid_usage(&m->conns, peer.uid).connections >= m->ctx->config.max_connections_per_uid) {
                        proto_error_set(&err, SBX_E_RESOURCE_EXHAUSTED, NULL,
                                        "uid %u has its maximum of %" PRIu64 " connections (max_connections_per_uid)",
                                        (unsigned) peer.uid, m->ctx->config.max_connections_per_uid);
                        refuse(cfd, &err);
                        continue;
                }
                if (connection_new(&m->conns, cfd, &peer, &c) < 0)
                        close(cfd);
        }
        return 0;
}

static char *socket_path(int fd) {
        struct sockaddr_un sa = {};
        socklen_t len = sizeof(sa);
        if (getsockname(fd, (struct sockaddr *) &sa, &len) < 0 || sa.sun_family != AF_UNIX || sa.sun_path[0] != '/')
                return NULL;
        return strndup(sa.sun_path, sizeof(sa.sun_path));
}

int manager_add_listener(Manager *m, int fd) {
        int r;

        if (m->n_listen >= MANAGER_MAX_LISTEN)
                return -E2BIG;
        r = fcntl(fd, F_SETFL, O_NONBLOCK);
        if (r < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
                return -errno;
        /* Referenced, to be paused when we run out of fds; unref'd by manager_free(). */
        r = sd_event_add_io(m->ctx->event, &m->listen_sources[m->n_listen], fd, EPOLLIN, on_accept, m);
        if (r < 0)
                return r;
        m->listen_paths[m->n_listen] = socket_path(fd);
        m->listen_fds[m->n_listen++] = fd;
        return 0;
}

/* ---- Memory ----------------------------------------------------------------------------- */

#define TRIM_DELAY_USEC (1 * USEC_PER_SEC)

static int on_trim(sd_event_source *s, uint64_t usec, void *userdata) {
        /* Freed memory in the middle of the heap (a burst of connections, big replies) would
         * stay counted in our RSS; give whole free pages back. */
        (void) malloc_trim(0);
        return 0;
}

void manager_schedule_trim(Manager *m) {
        if (m->stopping || !m->ctx->event)
                return;
        if (!m->trim_timer) {
                if (sd_event_add_time_relative(m->ctx->event, &m->trim_timer, CLOCK_MONOTONIC, TRIM_DELAY_USEC,
                                               100 * USEC_PER_MSEC, on_trim, m) < 0)
                        return;
                (void) sd_event_source_set_priority(m->trim_timer, SD_EVENT_PRIORITY_IDLE);
                return;
        }
        if (sd_event_source_get_enabled(m->trim_timer, NULL) > 0)
                return; /* one trim a second at most */
        (void) sd_event_source_set_time_relative(m->trim_timer, TRIM_DELAY_USEC);
        (void) sd_event_source_set_enabled(m->trim_timer, SD_EVENT_ONESHOT);
}

/* ---- Setup ------------------------------------------------------------------------------- */

int manager_setup(Manager *m) {
        int r;

        m->conns.admin_gid = m->ctx->admin_gid; /* known once the context is set up */
        m->conns.have_admin_gid = m->ctx->have_admin_gid;
        for (unsigned i = 0; i < m->n_listen && i < CONTEXT_MAX_MASKED; i++)
                m->ctx->masked_paths[m->ctx->n_masked++] = m->listen_paths[i];
        r = sd_event_add_time_relative(m->ctx->event, &m->accept_timer, CLOCK_MONOTONIC, ACCEPT_PAUSE_USEC,
                                       10 * USEC_PER_MSEC, on_accept_resume, m);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(m->accept_timer, SD_EVENT_OFF);
        return 0;
}
