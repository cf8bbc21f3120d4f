/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "connection.h"
#include "fdpass.h"
#include "log.h"
#include "macro.h"
#include "metrics.h"
#include "util.h"

/* Replies waiting beyond this make us stop reading the client's requests until it catches up. */
#define OUT_PAUSE_READING (1u << 20)
#define READ_CHUNK 65536

static void connection_update_events(Connection *c);

static void out_fds_clear(Connection *c) {
        for (size_t i = 0; i < c->n_out_fds; i++)
                sbx_fds_close(c->out_fds[i].fd, c->out_fds[i].n);
        c->n_out_fds = 0;
}

static void conn_link(ConnectionSet *m, Connection *c) {
        c->next = m->head;
        if (m->head)
                m->head->prev = c;
        m->head = c;
        m->n++;
}

static void conn_unlink(Connection *c) {
        ConnectionSet *m = c->set;
        if (c->prev)
                c->prev->next = c->next;
        else if (m->head == c)
                m->head = c->next;
        else
                return;
        if (c->next)
                c->next->prev = c->prev;
        c->next = c->prev = NULL;
}

Connection *connection_ref(Connection *c) {
        if (c)
                c->n_ref++;
        return c;
}

Connection *connection_unref(Connection *c) {
        if (!c)
                return NULL;
        if (--c->n_ref > 0) {
                /* Only the manager's reference is left: nothing the client asked for is pending. */
                if (c->n_ref == 1 && c->finish && !c->dead)
                        (void) sd_event_source_set_enabled(c->finish, SD_EVENT_ONESHOT);
                return NULL;
        }
        sd_event_source_disable_unref(c->finish);
        sd_event_source_disable_unref(c->close_source);
        sd_event_source_disable_unref(c->io);
        sd_event_source_disable_unref(c->partial_timer);
        safe_close(c->fd);
        (void) sbx_fd_queue_clear(&c->fds);
        out_fds_clear(c);
        line_buffer_done(&c->in);
        free(c->out);
        free(c);
        return NULL;
}

/* The deferred part of a close: the close hooks of its replies (one-shot runs die with the
 * connection that asked for them, docs/protocol.md; sessions outlive it), then the manager's. */
static void connection_finish_close(Connection *c) {
        if (!c->close_source)
                return;
        c->close_source = sd_event_source_disable_unref(c->close_source);
        reply_sink_closed(&c->sink);
        conn_unlink(c);
        if (c->hooks->closed)
                c->hooks->closed(c, c->hooks_userdata);
        connection_unref(c);
}

static int on_close(sd_event_source *s, void *userdata) {
        connection_finish_close(userdata);
        return 0;
}

void connection_close(Connection *c) {
        if (c->dead)
                return;
        c->dead = true;
        c->set->n--; /* a closed one only waits for its close hooks: not counted */
        reply_sink_gone(&c->sink);
        c->io = sd_event_source_disable_unref(c->io);
        c->partial_timer = sd_event_source_disable_unref(c->partial_timer);
        c->finish = sd_event_source_disable_unref(c->finish);
        c->fd = safe_close(c->fd);
        (void) sbx_fd_queue_clear(&c->fds);
        out_fds_clear(c);
        line_buffer_done(&c->in);
        free(c->out);
        c->out = NULL;
        c->out_len = c->out_off = c->out_alloc = 0;
        /* Made with the connection: a close never fails for want of memory. */
        (void) sd_event_source_set_enabled(c->close_source, SD_EVENT_ONESHOT);
}

void connection_close_now(Connection *c) {
        connection_close(c);
        connection_finish_close(c);
}

/* An idle connection holds no buffer: a thousand of them would otherwise keep 64 KiB of input
 * and whatever their largest reply was, each. */
static void connection_shrink(Connection *c) {
        if (!line_buffer_has_partial(&c->in) && c->in.data) {
                /* The stream offsets the fd queue is keyed by go on counting. */
                uint64_t committed = c->in.committed, line_end = c->in.line_end, discarded_end = c->in.discarded_end;
                line_buffer_done(&c->in);
                c->in.committed = committed;
                c->in.line_end = line_end;
                c->in.discarded_end = discarded_end;
        }
        if (c->out_off == c->out_len && c->out_alloc > 4096) {
                free(c->out);
                c->out = NULL;
                c->out_len = c->out_off = c->out_alloc = 0;
        }
}

/* One sendmsg() of at most len bytes of out with the fds of the first line that has them (the
 * kernel attaches them to these bytes: the client's recvmsg() gets them with a byte of that
 * line, lib/fdpass.h). Returns the byte count or -errno. */
static ssize_t send_with_fds(Connection *c, size_t len) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * SBX_FDS_PER_MESSAGE)];
        } control = {};
        struct iovec iov = { .iov_base = c->out + c->out_off, .iov_len = len };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf };
        size_t n_fds = c->out_fds[0].n;
        struct cmsghdr *cm;
        ssize_t n;

        mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
        cm = CMSG_FIRSTHDR(&mh);
        if (!cm)
                return -EINVAL;
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
        memcpy(CMSG_DATA(cm), c->out_fds[0].fd, sizeof(int) * n_fds);
        n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0)
                return -errno;
        /* The kernel holds its own references now: ours go, and the line's entry with them. */
        sbx_fds_close(c->out_fds[0].fd, n_fds);
        memmove(c->out_fds, c->out_fds + 1, (c->n_out_fds - 1) * sizeof(c->out_fds[0]));
        c->n_out_fds--;
        return n;
}

/* What goes in the next send: up to the next line with fds, or that line with them. */
static ssize_t connection_send_some(Connection *c) {
        size_t len = c->out_len - c->out_off;
        ssize_t n;

        if (c->n_out_fds > 0 && c->out_fds[0].at == c->out_sent)
                return send_with_fds(c, len < c->out_fds[0].len ? len : c->out_fds[0].len);
        if (c->n_out_fds > 0 && c->out_fds[0].at - c->out_sent < len)
                len = (size_t) (c->out_fds[0].at - c->out_sent);
        n = send(c->fd, c->out + c->out_off, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        return n < 0 ? -errno : n;
}

static int connection_flush(Connection *c) {
        while (c->out_off < c->out_len) {
                ssize_t n = connection_send_some(c);
                if (n < 0) {
                        if (n == -EAGAIN || n == -EINTR)
                                return 0;
                        return (int) n;
                }
                c->out_off += (size_t) n;
                c->out_sent += (uint64_t) n;
        }
        c->out_off = c->out_len = 0;
        return 0;
}

static int out_append(Connection *c, const char *data, size_t n) {
        if (c->out_off > 0 && c->out_off == c->out_len)
                c->out_off = c->out_len = 0;
        if (c->out_len + n > c->out_alloc) {
                /* Compact before growing. */
                if (c->out_off > 0) {
                        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
                        c->out_len -= c->out_off;
                        c->out_off = 0;
                }
                if (c->out_len + n > c->out_alloc) {
                        size_t na = c->out_alloc ? c->out_alloc : 4096;
                        while (na < c->out_len + n)
                                na *= 2;
                        char *p = realloc(c->out, na);
                        if (!p)
                                return -ENOMEM;
                        c->out = p;
                        c->out_alloc = na;
                }
        }
        memcpy(c->out + c->out_len, data, n);
        c->out_len += n;
        c->out_queued += n;
        return 0;
}

static size_t partial_bytes(const Connection *c) {
        return c->in.len - c->in.start;
}

UidUsage connection_uid_usage(const ConnectionSet *m, uid_t uid) {
        UidUsage u = {};
        for (Connection *c = m->head; c; c = c->next)
                if (c->peer.uid == uid && !c->dead) { /* as in n_connections */
                        u.connections++;
                        u.runs += c->sink.n_runs;
                        u.transfers += c->sink.n_transfers;
                        u.reserved += c->sink.run_reserved;
                        u.unread += connection_backlog(c) + partial_bytes(c);
                }
        return u;
}

/* A backlog or a partial request below this never makes us count the uid's whole (a client
 * reading and writing normally): at most 1 MiB, and no more than the uid's share per
 * connection, so that its connections together stay within the budget all the same. */
static size_t uid_check_threshold(const ConnectionSet *m) {
        uint64_t share = m->config->max_buffered_per_uid / m->config->max_connections_per_uid;
        return share < (1u << 20) ? (size_t) share : (1u << 20);
}

/* Whether c's uid has more than max_buffered_per_uid of replies its connections have not read
 * and requests they have not ended: bytes the daemon holds now, not the reservations of runs in
 * flight (which admission counts: op-run.c), so that a client that reads is never closed for
 * what its runs may still write. Counted only once c itself holds more than the threshold in the
 * buffer at hand; logs which and closes nothing. */
static bool uid_over_budget(Connection *c, size_t here, const char *what) {
        if (c->peer.uid == 0 || here <= uid_check_threshold(c->set) ||
            connection_uid_usage(c->set, c->peer.uid).unread <= c->set->config->max_buffered_per_uid)
                return false;
        log_notice("connection from pid %d: uid %u holds more than max_buffered_per_uid with this one's %zu bytes of %s, "
                   "closing it",
                   (int) c->peer.pid, (unsigned) c->peer.uid, here, what);
        return true;
}

/* Queues a line (with its '\n'), flushes what the client takes, and closes a connection whose
 * unread replies pass the caps. */
static void connection_queue_line(Connection *c, const char *line, size_t n) {
        if (c->dead)
                return;
        if (!line || out_append(c, line, n) < 0) {
                log_warning("connection from pid %d: out of memory for a reply, closing", (int) c->peer.pid);
                connection_close(c);
                return;
        }
        if (c->out_len - c->out_off > c->set->config->max_connection_output) {
                log_notice("connection from pid %d: %zu bytes of unread replies, closing", (int) c->peer.pid,
                           c->out_len - c->out_off);
                connection_close(c);
                return;
        }
        if (connection_flush(c) < 0) {
                connection_close(c);
                return;
        }
        /* What the client could not take at once, after the flush. */
        if (uid_over_budget(c, connection_backlog(c), "unread replies")) {
                connection_close(c);
                return;
        }
        connection_update_events(c);
}

/* Queues a serialized line; with take, msg is put first: a big reply (a run's output) is then
 * held twice at most (line and queue), not four times (and its JSON strings). */
static void connection_send_line(Connection *c, json_object *msg, bool take) {
        _cleanup_free_ char *line = NULL;
        size_t n = 0;

        if (c->dead) {
                if (take)
                        json_object_put(msg);
                return;
        }
        line = proto_serialize(msg, &n);
        if (take)
                json_object_put(msg);
        connection_queue_line(c, line, n);
}

/* The line of msg (taken) with fds (taken) on its first byte. */
static void connection_send_fds(Connection *c, json_object *msg, int *fds, size_t n_fds) {
        _cleanup_free_ char *line = NULL;
        size_t n = 0;

        if (c->dead || n_fds > SBX_FDS_PER_MESSAGE) {
                sbx_fds_close(fds, n_fds);
                json_object_put(msg);
                return;
        }
        if (c->n_out_fds >= CONNECTION_OUT_FDS_MAX) {
                log_notice("connection from pid %d: %d lines with fds unread, closing", (int) c->peer.pid,
                           CONNECTION_OUT_FDS_MAX);
                sbx_fds_close(fds, n_fds);
                json_object_put(msg);
                connection_close(c);
                return;
        }
        line = proto_serialize(msg, &n);
        json_object_put(msg);
        if (line && n_fds > 0) {
                size_t k = c->n_out_fds++;
                memcpy(c->out_fds[k].fd, fds, n_fds * sizeof(int));
                c->out_fds[k].n = n_fds;
                c->out_fds[k].len = n;
                c->out_fds[k].at = c->out_queued;
                for (size_t i = 0; i < n_fds; i++)
                        fds[i] = -EBADF; /* the connection's now */
        } else
                sbx_fds_close(fds, n_fds);
        connection_queue_line(c, line, n);
}

static void connection_reply_error(Connection *c, json_object *id, const ProtoError *err) {
        metrics_error(err->code);
        connection_send_line(c, proto_reply_error(id, err), true);
}

/* ---- The sink behind its replies ---------------------------------------------------------- */

static Connection *sink_connection(const ReplySink *sink) {
        return (Connection *) ((char *) sink - offsetof(Connection, sink));
}

static void sink_send(ReplySink *sink, json_object *msg) {
        connection_send_line(sink_connection(sink), msg, true);
}

static void sink_send_fds(ReplySink *sink, json_object *msg, int *fds, size_t n_fds) {
        connection_send_fds(sink_connection(sink), msg, fds, n_fds);
}

static void sink_send_line(ReplySink *sink, const char *line, size_t len) {
        connection_queue_line(sink_connection(sink), line, len);
}

static size_t sink_backlog(const ReplySink *sink) {
        return connection_backlog(sink_connection(sink));
}

static bool sink_input_ended(const ReplySink *sink) {
        return connection_input_ended(sink_connection(sink));
}

static void sink_ref(ReplySink *sink) {
        connection_ref(sink_connection(sink));
}

static void sink_unref(ReplySink *sink) {
        connection_unref(sink_connection(sink));
}

static const ReplySinkOps connection_sink_ops = {
        .send = sink_send,
        .send_line = sink_send_line,
        .send_fds = sink_send_fds,
        .backlog = sink_backlog,
        .input_ended = sink_input_ended,
        .ref = sink_ref,
        .unref = sink_unref,
};

/* The client has room again (or asks for nothing more): streams it paused go on. */
static void connection_writable(Connection *c) {
        reply_sink_writable(&c->sink);
        if (!c->dead && c->hooks->writable)
                c->hooks->writable(c, c->hooks_userdata);
}

/* The fds a line owns against the "fds" it claims (docs/protocol.md, "File descriptors"). */
static int line_fds_check(json_object *req, size_t n_got, ProtoError *err) {
        json_object *v;
        int64_t want = 0;

        if (json_object_object_get_ex(req, "fds", &v) &&
            (!json_object_is_type(v, json_type_int) || (want = json_object_get_int64(v)) < 0 ||
             want > SBX_FDS_PER_MESSAGE))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "fds", "must be an integer from 0 to %d",
                                       SBX_FDS_PER_MESSAGE);
        if ((uint64_t) want == n_got)
                return 0;
        if (want == 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "fds",
                                       "%zu file descriptors came with this request, which takes none", n_got);
        return proto_error_set(err, SBX_E_INVALID_REQUEST, "fds", "%zu of %" PRId64 " file descriptors arrived", n_got,
                               want);
}

/* fds (n of them) are the line's own: given to the dispatcher, or closed here when the line is
 * refused before it. */
static void connection_handle_line(Connection *c, const char *line, size_t len, int *fds, size_t n_fds) {
        _cleanup_json_ json_object *req = NULL;
        json_object *id = NULL;
        const char *op = NULL;
        ProtoError err = {};
        Reply *reply;

        if (len == 0 && n_fds == 0)
                return; /* blank lines are keep-alives */
        if (n_fds == 0 && c->hooks->route && c->hooks->route(&c->sink, line, len, c->hooks_userdata))
                return;
        if (proto_parse_line(line, len, SBX_MAX_DEPTH, &req, &err) < 0 ||
            proto_request_envelope(req, &id, &op, &err) < 0 || line_fds_check(req, n_fds, &err) < 0) {
                sbx_fds_close(fds, n_fds);
                /* An id we could read is echoed even when the rest is wrong. */
                connection_reply_error(c, err.code == SBX_E_INVALID_JSON ? NULL : id, &err);
                return;
        }
        if (reply_new(&c->sink, id, &reply) < 0) {
                sbx_fds_close(fds, n_fds);
                proto_error_set(&err, SBX_E_INTERNAL, NULL, "out of memory");
                connection_reply_error(c, id, &err);
                return;
        }
        c->hooks->dispatch(reply, op, req, fds, n_fds, c->hooks_userdata);
        sbx_fds_close(fds, n_fds); /* what the op did not take */
        reply_unref(reply);
}

/* The fds of the line just handed out: -EPROTO (in two messages) and -EMSGSIZE (too many)
 * closed them; the line is then refused. */
static int connection_take_line_fds(Connection *c, int *fds, size_t *ret_n, ProtoError *err) {
        int r = sbx_fd_queue_take_line(&c->fds, c->in.line_end, fds, SBX_FDS_PER_MESSAGE, ret_n);
        if (r == -EPROTO)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "fds",
                                       "the file descriptors of one request came in more than one message");
        if (r < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "fds", "more than %d file descriptors for one request",
                                       SBX_FDS_PER_MESSAGE);
        return 0;
}

static void connection_process_lines(Connection *c) {
        char *line;
        size_t len;
        int r;

        /* Stop while replies pile up: the client must read before it may ask for more. */
        while (!c->dead && c->out_len - c->out_off < OUT_PAUSE_READING) {
                r = line_buffer_next(&c->in, &line, &len);
                /* A skipped line's fds: its end is found by this call or a later one (silently). */
                if (c->in.discarded_end != UINT64_MAX)
                        (void) sbx_fd_queue_drop_until(&c->fds, c->in.discarded_end);
                if (r == 0)
                        break;
                if (r == -E2BIG) {
                        ProtoError err;
                        proto_error_set(&err, SBX_E_TOO_LARGE, NULL, "request line longer than %zu bytes; skipped",
                                        c->in.max);
                        connection_reply_error(c, NULL, &err);
                        continue;
                }
                int fds[SBX_FDS_PER_MESSAGE];
                size_t n_fds = 0;
                ProtoError err = {};
                if (connection_take_line_fds(c, fds, &n_fds, &err) < 0) {
                        connection_reply_error(c, NULL, &err);
                        continue;
                }
                connection_handle_line(c, line, len, fds, n_fds);
        }
}

static int on_partial_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Connection *c = userdata;
        log_notice("connection from pid %d: partial request idle too long, closing", (int) c->peer.pid);
        connection_close(c);
        return 0;
}

static void connection_arm_partial_timer(Connection *c) {
        if (!line_buffer_has_partial(&c->in)) {
                if (c->partial_timer)
                        (void) sd_event_source_set_enabled(c->partial_timer, SD_EVENT_OFF);
                return;
        }
        if (c->partial_timer && sd_event_source_get_enabled(c->partial_timer, NULL) > 0)
                return; /* the line started earlier; its deadline stands */
        if (!c->partial_timer) {
                (void) sd_event_add_time_relative(c->set->event, &c->partial_timer, CLOCK_MONOTONIC,
                                                  c->set->config->request_timeout_usec, USEC_PER_SEC,
                                                  on_partial_timeout, c);
                return;
        }
        (void) sd_event_source_set_time_relative(c->partial_timer, c->set->config->request_timeout_usec);
        (void) sd_event_source_set_enabled(c->partial_timer, SD_EVENT_ONESHOT);
}

/* Once the client has shut down its sending side and everything it asked for has been
 * answered and sent, the connection closes. */
static int on_finish(sd_event_source *s, void *userdata) {
        Connection *c = userdata;

        connection_process_lines(c); /* what a full queue held back */
        if (c->dead || c->n_ref > 1 || connection_backlog(c) > 0)
                return 0; /* the last reference dropped or the last flush comes back here */
        connection_close(c);
        return 0;
}

/* recv() returns 0 both when the client shut down only its sending side (shutdown(SHUT_WR), as
 * socat does at the end of its input) and when it closed the socket; only the latter hangs
 * the socket up in both directions. */
static bool peer_gone(int fd) {
        struct pollfd p = { .fd = fd };
        return poll(&p, 1, 0) != 0 && (p.revents & (POLLHUP | POLLERR));
}

/* The client asks for nothing more: its requests are answered as any other's (runs finish,
 * their replies are sent), and then the connection closes. */
static int connection_end_input(Connection *c) {
        char *p;
        size_t avail;
        int r;

        c->input_ended = true;
        /* A last request without its newline is taken as ended; one past the cap stays too long. */
        if (c->in.len > c->in.start && !c->in.discarding) {
                r = line_buffer_reserve(&c->in, 1, &p, &avail);
                if (r < 0)
                        return r;
                if (avail > 0) {
                        *p = '\n';
                        line_buffer_commit(&c->in, 1);
                }
        }
        if (c->partial_timer)
                (void) sd_event_source_set_enabled(c->partial_timer, SD_EVENT_OFF);
        r = sd_event_add_defer(c->set->event, &c->finish, on_finish, c);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(c->finish, SD_EVENT_OFF);
        connection_writable(c); /* subscriptions already past their exit end now */
        return 0;
}

/* The fds lost (MSG_CTRUNC, more than a message may carry, or more than the connection may
 * hold): which line owns which can no longer be told, so the client is told once and dropped. */
static int connection_fds_lost(Connection *c) {
        ProtoError err;
        proto_error_set(&err, SBX_E_INVALID_REQUEST, "fds",
                        "file descriptors were lost: at most %d per message and %d held per connection",
                        SBX_FDS_PER_MESSAGE, SBX_FDS_PER_CONNECTION);
        connection_reply_error(c, NULL, &err);
        (void) connection_flush(c);
        return -EMSGSIZE;
}

static int connection_read(Connection *c) {
        int fds[SBX_FDS_PER_MESSAGE];
        size_t n_fds = 0;
        char *p;
        size_t avail;
        ssize_t n;
        int r = line_buffer_reserve(&c->in, READ_CHUNK, &p, &avail);

        if (r < 0)
                return r;
        n = sbx_fds_recv(c->fd, p, avail, MSG_DONTWAIT, fds, SBX_FDS_PER_MESSAGE, &n_fds);
        if (n == -EMSGSIZE)
                return connection_fds_lost(c);
        if (n < 0)
                return n == -EAGAIN || n == -EINTR ? 0 : (int) n;
        if (n == 0 && n_fds > 0) {
                sbx_fds_close(fds, n_fds); /* fds with no byte: no line can own them */
                return connection_fds_lost(c);
        }
        if (n == 0)
                return peer_gone(c->fd) ? -ECONNRESET : connection_end_input(c);
        line_buffer_commit(&c->in, (size_t) n);
        if (n_fds > 0 && sbx_fd_queue_push(&c->fds, fds, n_fds, c->in.committed - 1) < 0)
                return connection_fds_lost(c);
        return 1;
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Connection *c = connection_ref(userdata);

        if (revents & EPOLLOUT) {
                if (connection_flush(c) < 0)
                        connection_close(c);
                else {
                        connection_process_lines(c); /* resume what was paused */
                        if (!c->dead)
                                connection_writable(c);
                }
        }
        if (!c->dead && c->input_ended && (revents & (EPOLLHUP | EPOLLERR)))
                connection_close(c); /* it closed the socket after all: its runs die with it */
        else if (!c->dead && !c->input_ended && (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
                int r = connection_read(c);
                if (r < 0)
                        connection_close(c);
                else {
                        connection_process_lines(c);
                        if (!c->dead && uid_over_budget(c, partial_bytes(c), "a request not yet ended"))
                                connection_close(c);
                        else if (!c->dead && !c->input_ended)
                                connection_arm_partial_timer(c);
                }
        }
        if (!c->dead) {
                connection_shrink(c);
                connection_update_events(c);
                if (c->finish)
                        (void) sd_event_source_set_enabled(c->finish, SD_EVENT_ONESHOT);
        }
        connection_unref(c);
        return 0;
}

static void connection_update_events(Connection *c) {
        uint32_t ev = 0;
        if (c->dead || !c->io)
                return;
        if (c->out_len > c->out_off)
                ev |= EPOLLOUT;
        /* At the end of its input a socket is always readable; a hang-up is reported anyway. */
        if (c->out_len - c->out_off < OUT_PAUSE_READING && !c->input_ended)
                ev |= EPOLLIN;
        (void) sd_event_source_set_io_events(c->io, ev);
}

/* SO_PEERGROUPS gives the peer's supplementary groups as they were at connect(). */
static bool peer_in_group(int fd, const struct ucred *peer, gid_t gid) {
        gid_t groups[256];
        socklen_t len = sizeof(groups);
        if (peer->gid == gid)
                return true;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
                return false;
        for (size_t i = 0; i < len / sizeof(gid_t); i++)
                if (groups[i] == gid)
                        return true;
        return false;
}

int connection_new(ConnectionSet *m, int fd, const struct ucred *peer, Connection **ret) {
        Connection *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return -ENOMEM;
        c->n_ref = 1;
        c->set = m;
        c->fd = fd;
        c->peer = *peer;
        line_buffer_init(&c->in, m->config->max_line_bytes);
        sbx_fd_queue_init(&c->fds);
        c->admin = c->peer.uid == 0 || (m->have_admin_gid && peer_in_group(fd, &c->peer, m->admin_gid));
        c->hooks = m->hooks;
        c->hooks_userdata = m->hooks_userdata;
        ReplyPeer rp = { .cred = c->peer, .admin = c->admin };
        socklen_t glen = sizeof(rp.groups);
        /* The groups the client had when it connected, for what is opened with its rights ("mounts"). */
        rp.n_groups = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, rp.groups, &glen) < 0 ? -1 : (int) (glen / sizeof(gid_t));
        reply_sink_init(&c->sink, &connection_sink_ops, &rp);
        r = sd_event_add_io(m->event, &c->io, fd, EPOLLIN, on_io, c);
        if (r >= 0) {
                r = sd_event_add_defer(m->event, &c->close_source, on_close, c);
                if (r >= 0)
                        (void) sd_event_source_set_enabled(c->close_source, SD_EVENT_OFF);
        }
        if (r < 0) {
                c->fd = -EBADF;
                connection_unref(c);
                return r;
        }
        conn_link(m, c);
        *ret = c;
        return 0;
}
