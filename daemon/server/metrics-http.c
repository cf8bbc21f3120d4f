/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The metrics endpoint: HTTP/1.x, one short request per connection, on the loop like everything
 * else. Whoever connects is not trusted to be a Prometheus: the request is capped at
 * METRICS_REQUEST_MAX bytes, a connection lives METRICS_TIMEOUT_USEC at most (a client that sends
 * nothing, or reads nothing, is closed then), and METRICS_MAX_CONNECTIONS at once; a connection
 * past that is closed at once. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "metrics-http.h"
#include "metrics-text.h"
#include "util.h"

typedef struct MetricsConn MetricsConn;
struct MetricsConn {
        MetricsServer *server;
        int fd;
        sd_event_source *io, *timer;
        char req[METRICS_REQUEST_MAX];
        size_t n;
        size_t scanned;         /* of req, for its end (metrics_http_route()) */
        char *out;              /* the whole answer, headers and body */
        size_t out_size, out_off;
        bool draining;          /* answered and shut down for writing: reading what is left until EOF */
        size_t drained;         /* ... at most METRICS_REQUEST_MAX bytes of it */
        MetricsConn *next, *prev;
};

struct MetricsServer {
        Manager *manager;
        int fds[METRICS_MAX_LISTEN];
        char *paths[METRICS_MAX_LISTEN];
        sd_event_source *sources[METRICS_MAX_LISTEN];
        unsigned n_listen;
        MetricsConn *conns;
        unsigned n_conns;
        sd_event_source *resume;   /* the listeners again after running out of fds */
};

static MetricsConn *conn_free(MetricsConn *c) {
        if (!c)
                return NULL;
        if (c->prev)
                c->prev->next = c->next;
        else
                c->server->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->server->n_conns--;
        sd_event_source_disable_unref(c->io);
        sd_event_source_disable_unref(c->timer);
        safe_close(c->fd);
        free(c->out);
        free(c);
        return NULL;
}

/* ---- The answer ---------------------------------------------------------------------------- */

/* The whole answer into c->out; body (taken) follows the headers unless head. */
static int conn_answer(MetricsConn *c, int status, const char *reason, const char *extra, const char *type,
                       char *body, size_t size, bool head) {
        _cleanup_free_ char *taken = body;
        char *out = NULL, *all;
        int n = asprintf(&out,
                         "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
                         status, reason, type, size, extra ?: "");

        if (n < 0)
                return -ENOMEM;
        c->out_size = (size_t) n;
        if (!head && size > 0) {
                all = realloc(out, c->out_size + size);
                if (!all) {
                        free(out);
                        return -ENOMEM;
                }
                memcpy(all + c->out_size, taken, size);
                out = all;
                c->out_size += size;
        }
        c->out = out;
        return 0;
}

static int conn_error(MetricsConn *c, int status, const char *reason, const char *extra) {
        char *body = NULL;
        int n = asprintf(&body, "%d %s\n", status, reason);
        if (n < 0)
                return -ENOMEM;
        return conn_answer(c, status, reason, extra, "text/plain; charset=utf-8", body, (size_t) n, false);
}

static bool is_version(const char *v, size_t len) {
        return len == 8 && (memcmp(v, "HTTP/1.0", 8) == 0 || memcmp(v, "HTTP/1.1", 8) == 0);
}

/* "METHOD TARGET HTTP/1.x", the request's first line (len bytes, without its end). */
static MetricsRoute route_line(const char *line, size_t len) {
        const char *sp1 = memchr(line, ' ', len), *sp2, *q;
        size_t method_len, path_len;

        sp2 = sp1 ? memchr(sp1 + 1, ' ', len - (size_t) (sp1 + 1 - line)) : NULL;
        if (!sp1 || sp1 == line || !sp2 || sp1[1] != '/' || !is_version(sp2 + 1, len - (size_t) (sp2 + 1 - line)))
                return METRICS_BAD_REQUEST;
        method_len = (size_t) (sp1 - line);
        for (size_t i = 0; i < method_len; i++)
                if (line[i] < 'A' || line[i] > 'Z')
                        return METRICS_BAD_REQUEST;
        q = memchr(sp1 + 1, '?', (size_t) (sp2 - sp1 - 1));
        path_len = (size_t) ((q ?: sp2) - (sp1 + 1));
        if (!(method_len == 3 && memcmp(line, "GET", 3) == 0) && !(method_len == 4 && memcmp(line, "HEAD", 4) == 0))
                return METRICS_BAD_METHOD;
        if (path_len != strlen("/metrics") || memcmp(sp1 + 1, "/metrics", path_len) != 0)
                return METRICS_NOT_FOUND;
        return line[0] == 'G' ? METRICS_GET : METRICS_HEAD;
}

/* The request ends at its first empty line ("\n\n" or "\n\r\n"); each byte is looked at about
 * once (*scanned), however the request is cut into reads. */
MetricsRoute metrics_http_route(const char *buf, size_t n, size_t cap, size_t *scanned) {
        const char *eol;
        size_t i = *scanned > 2 ? *scanned - 2 : 0; /* an end may have begun in the last read */

        for (; i + 1 < n; i++)
                if (buf[i] == '\n' && (buf[i + 1] == '\n' || (buf[i + 1] == '\r' && i + 2 < n && buf[i + 2] == '\n')))
                        break;
        *scanned = n;
        if (i + 1 >= n)
                return n >= cap ? METRICS_BAD_REQUEST : METRICS_INCOMPLETE;
        eol = memchr(buf, '\n', n); /* the first line's end: at i or before */
        return route_line(buf, (size_t) (eol - buf) - (eol > buf && eol[-1] == '\r'));
}

static int conn_route(MetricsConn *c, MetricsRoute route) {
        char *body = NULL;
        size_t size = 0;
        int r;

        switch (route) {
        case METRICS_INCOMPLETE:
                return 0;
        case METRICS_BAD_REQUEST:
                return conn_error(c, 400, "Bad Request", NULL);
        case METRICS_BAD_METHOD:
                return conn_error(c, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n");
        case METRICS_NOT_FOUND:
                return conn_error(c, 404, "Not Found", NULL);
        case METRICS_GET:
        case METRICS_HEAD:
                break;
        }
        r = metrics_render(c->server->manager, &body, &size);
        if (r < 0)
                return conn_error(c, 500, "Internal Server Error", NULL);
        return conn_answer(c, 200, "OK", NULL, "text/plain; version=0.0.4; charset=utf-8", body, size, route == METRICS_HEAD);
}

/* ---- The connection's events ------------------------------------------------------------------ */

static int conn_write(MetricsConn *c) {
        while (c->out_off < c->out_size) {
                ssize_t k = send(c->fd, c->out + c->out_off, c->out_size - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (k < 0)
                        return errno == EAGAIN || errno == EINTR ? 0 : -errno;
                c->out_off += (size_t) k;
        }
        /* All sent: what the client may still send is read and dropped until it closes, so that
         * the close does not reset the connection under the answer it has not read yet. */
        (void) shutdown(c->fd, SHUT_WR);
        c->draining = true;
        return sd_event_source_set_io_events(c->io, EPOLLIN);
}

static int conn_read(MetricsConn *c) {
        char drop[4096];
        ssize_t k;
        int r;

        k = c->draining ? read(c->fd, drop, sizeof(drop)) : read(c->fd, c->req + c->n, sizeof(c->req) - c->n);
        if (k < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        if (k == 0)
                return -ECONNRESET; /* closed: done (or gone before asking) */
        if (c->draining) /* a client that sends on and on is cut off */
                return (c->drained += (size_t) k) > METRICS_REQUEST_MAX ? -E2BIG : 0;
        c->n += (size_t) k;
        r = conn_route(c, metrics_http_route(c->req, c->n, sizeof(c->req), &c->scanned));
        if (r < 0)
                return r;
        if (!c->out)
                return 0;
        r = sd_event_source_set_io_events(c->io, EPOLLOUT);
        return r < 0 ? r : conn_write(c);
}

static int on_conn_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        MetricsConn *c = userdata;
        int r = 0;

        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))
                r = c->out && !c->draining ? 0 : conn_read(c);
        if (r >= 0 && (revents & EPOLLOUT) && c->out && !c->draining)
                r = conn_write(c);
        if (r >= 0 && (revents & (EPOLLHUP | EPOLLERR)) && !(revents & EPOLLIN))
                r = -ECONNRESET;
        if (r < 0)
                conn_free(c);
        return 0;
}

static int on_conn_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        conn_free(userdata);
        return 0;
}

static int conn_new(MetricsServer *srv, int fd) {
        sd_event *e = srv->manager->ctx->event;
        MetricsConn *c = calloc(1, sizeof(*c));
        int r;

        if (!c) {
                close(fd);
                return -ENOMEM;
        }
        c->server = srv;
        c->fd = fd;
        c->next = srv->conns;
        if (c->next)
                c->next->prev = c;
        srv->conns = c;
        srv->n_conns++;
        r = sd_event_add_io(e, &c->io, fd, EPOLLIN, on_conn_io, c);
        if (r >= 0)
                r = sd_event_add_time_relative(e, &c->timer, CLOCK_MONOTONIC, METRICS_TIMEOUT_USEC, 10 * USEC_PER_MSEC,
                                               on_conn_timeout, c);
        if (r < 0)
                conn_free(c);
        return r;
}

/* ---- Listening --------------------------------------------------------------------------------- */

#define ACCEPT_PAUSE_USEC (100 * USEC_PER_MSEC)

static void set_listening(MetricsServer *srv, bool on) {
        for (unsigned i = 0; i < srv->n_listen; i++)
                (void) sd_event_source_set_enabled(srv->sources[i], on ? SD_EVENT_ON : SD_EVENT_OFF);
}

static int on_resume(sd_event_source *s, uint64_t usec, void *userdata) {
        set_listening(userdata, true);
        return 0;
}

/* Out of fds (or memory): a listener left on would wake the loop at once, again and again, so
 * they rest a moment; the control socket's pause is its own (manager.c). */
static void pause_listening(MetricsServer *srv) {
        int r;

        set_listening(srv, false);
        if (!srv->resume)
                r = sd_event_add_time_relative(srv->manager->ctx->event, &srv->resume, CLOCK_MONOTONIC, ACCEPT_PAUSE_USEC,
                                               10 * USEC_PER_MSEC, on_resume, srv);
        else if ((r = sd_event_source_set_time_relative(srv->resume, ACCEPT_PAUSE_USEC)) >= 0)
                r = sd_event_source_set_enabled(srv->resume, SD_EVENT_ONESHOT);
        if (r < 0) /* no timer: listen again rather than never */
                set_listening(srv, true);
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        MetricsServer *srv = userdata;

        for (int i = 0; i < 16; i++) {
                int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (cfd < 0) {
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                                log_warning("metrics: accept: %m; not accepting for %d ms",
                                            (int) (ACCEPT_PAUSE_USEC / USEC_PER_MSEC));
                                pause_listening(srv);
                        }
                        break;
                }
                if (srv->n_conns >= METRICS_MAX_CONNECTIONS) {
                        close(cfd); /* scrapes are short: the next one comes soon */
                        continue;
                }
                (void) conn_new(srv, cfd);
        }
        return 0;
}

int metrics_server_new(MetricsServer **ret, Manager *m) {
        MetricsServer *srv = calloc(1, sizeof(*srv));

        if (!srv)
                return -ENOMEM;
        srv->manager = m;
        *ret = srv;
        return 0;
}

static char *unix_path(int fd) {
        struct sockaddr_un sa = {};
        socklen_t len = sizeof(sa);
        if (getsockname(fd, (struct sockaddr *) &sa, &len) < 0 || sa.sun_family != AF_UNIX || sa.sun_path[0] != '/')
                return NULL;
        return strndup(sa.sun_path, sizeof(sa.sun_path));
}

int metrics_server_add_listener(MetricsServer *srv, int fd) {
        int r;

        if (srv->n_listen >= METRICS_MAX_LISTEN)
                return -E2BIG;
        if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
                return -errno;
        r = sd_event_add_io(srv->manager->ctx->event, &srv->sources[srv->n_listen], fd, EPOLLIN, on_accept, srv);
        if (r < 0)
                return r;
        srv->paths[srv->n_listen] = unix_path(fd);
        srv->fds[srv->n_listen++] = fd;
        return 0;
}

void metrics_server_setup(MetricsServer *srv) {
        Context *ctx = srv->manager->ctx;

        for (unsigned i = 0; i < srv->n_listen; i++)
                if (srv->paths[i] && ctx->n_masked < CONTEXT_MAX_MASKED)
                        ctx->masked_paths[ctx->n_masked++] = srv->paths[i];
}

unsigned metrics_server_listeners(const MetricsServer *srv) {
        return srv ? srv->n_listen : 0;
}

MetricsServer *metrics_server_free(MetricsServer *srv) {
        if (!srv)
                return NULL;
        while (srv->conns)
                conn_free(srv->conns);
        sd_event_source_disable_unref(srv->resume);
        for (unsigned i = 0; i < srv->n_listen; i++) {
                sd_event_source_disable_unref(srv->sources[i]);
                safe_close(srv->fds[i]);
                free(srv->paths[i]);
        }
        free(srv);
        return NULL;
}
