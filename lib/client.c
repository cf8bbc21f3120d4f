/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "client-internal.h"
#include "fdpass.h"
#include "macro.h"
#include "proto.h"
#include "sandbox.h"

SBX_CLIENT_EXPORT int sbx_client_connect(const char *path, SbxClient **ret) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        SbxClient *c;

        if (!path)
                path = getenv(SBX_SOCKET_ENV);
        if (!path || !*path)
                path = SBX_DEFAULT_SOCKET;
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);

        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->fd = TAKE_FD(fd);
        c->next_id = 1;
        /* Replies carry whole run outputs; allow well above the request cap. */
        line_buffer_init(&c->in, 64u * 1024 * 1024);
        sbx_fd_queue_init(&c->fds);
        *ret = c;
        return 0;
}

SBX_CLIENT_EXPORT SbxClient *sbx_client_free(SbxClient *c) {
        if (!c)
                return NULL;
        safe_close(c->fd);
        (void) sbx_fd_queue_clear(&c->fds);
        sbx_fds_close(c->line_fds, c->n_line_fds);
        line_buffer_done(&c->in);
        free(c);
        return NULL;
}

SBX_CLIENT_EXPORT int sbx_client_fd(SbxClient *c) {
        return c->fd;
}

/* Sends request (with fds, in the same sendmsg as its first byte) and hands back (a reference
 * to) its id, the caller's or one we chose. */
int client_send_fds(SbxClient *c, json_object *request, const int *fds, size_t n_fds, json_object **ret_id) {
        _cleanup_json_ json_object *req = request;
        _cleanup_free_ char *line = NULL;
        json_object *id;
        size_t n;

        if (!json_object_is_type(req, json_type_object))
                return -EINVAL;
        if (n_fds > SBX_FDS_PER_MESSAGE)
                return -EINVAL;
        if (!json_object_object_get_ex(req, "id", &id)) {
                id = json_object_new_int64(c->next_id++);
                json_object_object_add(req, "id", id);
        }
        if (n_fds > 0)
                json_object_object_add(req, "fds", json_object_new_int((int) n_fds));
        line = proto_serialize(req, &n);
        if (!line)
                return -ENOMEM;
        int r = sbx_fds_send(c->fd, line, n, fds, n_fds);
        if (r >= 0 && ret_id)
                *ret_id = json_object_get(id);
        return r;
}

SBX_CLIENT_EXPORT int sbx_client_send(SbxClient *c, json_object *request, long long *ret_id) {
        _cleanup_json_ json_object *id = NULL;
        int r = client_send_fds(c, request, NULL, 0, &id);
        if (r >= 0 && ret_id)
                *ret_id = json_object_is_type(id, json_type_int) ? json_object_get_int64(id) : -1;
        return r;
}

/* The next complete line, and the fds that came with it in c->line_fds (the last line's, not
 * taken, closed): 1, 0 when more bytes are needed, -EMSGSIZE for an over-long one. */
static int client_take_line(SbxClient *c, char **ret_line, size_t *ret_len) {
        int r = line_buffer_next(&c->in, ret_line, ret_len);

        if (r == -E2BIG) {
                (void) sbx_fd_queue_drop_until(&c->fds, c->in.discarded_end);
                return -EMSGSIZE;
        }
        if (r <= 0)
                return r;
        sbx_fds_close(c->line_fds, c->n_line_fds);
        c->n_line_fds = 0;
        if (sbx_fd_queue_take_line(&c->fds, c->in.line_end, c->line_fds, SBX_FDS_PER_MESSAGE, &c->n_line_fds) < 0)
                c->n_line_fds = 0; /* closed: they came in two messages, or too many */
        return 1;
}

/* One read of at most size bytes into the buffer, with the fds that came with them queued. */
static ssize_t client_recv(SbxClient *c, size_t want, int flags) {
        int fds[SBX_FDS_PER_MESSAGE];
        size_t n_fds = 0, avail;
        char *p;
        ssize_t k;
        int r = line_buffer_reserve(&c->in, want, &p, &avail);

        if (r < 0)
                return r;
        k = sbx_fds_recv(c->fd, p, avail, flags, fds, SBX_FDS_PER_MESSAGE, &n_fds);
        if (k <= 0) {
                sbx_fds_close(fds, k == 0 ? n_fds : 0);
                return k;
        }
        line_buffer_commit(&c->in, (size_t) k);
        if (n_fds > 0 && sbx_fd_queue_push(&c->fds, fds, n_fds, c->in.committed - 1) < 0)
                return -EMSGSIZE;
        return k;
}

static int client_next_line(SbxClient *c, json_object **ret_message) {
        char *line;
        size_t len;
        ProtoError err;
        int r = client_take_line(c, &line, &len);

        if (r < 0)
                return r;
        if (r == 0)
                return -EAGAIN;
        if (proto_parse_line(line, len, 64, ret_message, &err) < 0)
                return -EBADMSG;
        return 0;
}

SBX_CLIENT_EXPORT int sbx_client_read_nowait(SbxClient *c, json_object **ret_message) {
        ssize_t k;
        int r = client_next_line(c, ret_message);

        if (r != -EAGAIN)
                return r;
        k = client_recv(c, 65536, MSG_DONTWAIT);
        if (k < 0)
                return k == -EINTR || k == -EWOULDBLOCK ? -EAGAIN : (int) k;
        if (k == 0)
                return -ECONNRESET;
        return client_next_line(c, ret_message);
}

int client_read_line(SbxClient *c, char **ret_line, size_t *ret_len) {
        for (;;) {
                int r = client_take_line(c, ret_line, ret_len);
                if (r < 0)
                        return r;
                if (r > 0)
                        return 0;
                /* Large reads: a file transfer's lines are about 1.4 MB each. */
                ssize_t k = client_recv(c, 256 * 1024, 0);
                if (k == -EINTR)
                        continue;
                if (k < 0)
                        return (int) k;
                if (k == 0)
                        return -ECONNRESET;
        }
}

SBX_CLIENT_EXPORT int sbx_client_line_fds(SbxClient *c, int *ret_fds, size_t max_fds, size_t *ret_n_fds) {
        if (c->n_line_fds > max_fds)
                return -EMSGSIZE;
        memcpy(ret_fds, c->line_fds, c->n_line_fds * sizeof(int));
        *ret_n_fds = c->n_line_fds;
        c->n_line_fds = 0;
        return 0;
}

SBX_CLIENT_EXPORT int sbx_client_read(SbxClient *c, json_object **ret_message) {
        char *line;
        size_t len;
        ProtoError err;
        json_object *o = NULL;
        int r = client_read_line(c, &line, &len);

        if (r < 0)
                return r;
        if (proto_parse_line(line, len, 64, &o, &err) < 0)
                return -EBADMSG;
        *ret_message = o;
        return 0;
}

/* Ours, or an error the daemon could not tie to any request (invalid_json, too_large): with one
 * request in flight, that one is ours too. */
bool client_answers(json_object *msg, json_object *id) {
        json_object *v;

        if (!json_object_object_get_ex(msg, "id", &v) || json_object_is_type(v, json_type_null))
                return !sbx_reply_ok(msg);
        return json_object_equal(v, id);
}

/* Reads events (to on_event) and the final reply of the request whose id is id. */
int client_wait_reply(SbxClient *c, json_object *id, sbx_event_fn on_event, void *userdata, json_object **ret_reply) {
        for (;;) {
                _cleanup_json_ json_object *msg = NULL;
                json_object *ev;
                int r = sbx_client_read(c, &msg);
                if (r < 0)
                        return r;
                if (!client_answers(msg, id))
                        continue;
                if (json_object_object_get_ex(msg, "event", &ev)) {
                        if (on_event && (r = on_event(msg, userdata)) < 0)
                                return r;
                        continue;
                }
                *ret_reply = TAKE_PTR(msg);
                return 0;
        }
}

SBX_CLIENT_EXPORT int sbx_client_call_fds(SbxClient *c, json_object *request, const int *fds, size_t n_fds,
                                          sbx_event_fn on_event, void *userdata, json_object **ret_reply) {
        _cleanup_json_ json_object *id = NULL;
        int r = client_send_fds(c, request, fds, n_fds, &id);
        if (r < 0)
                return r;
        return client_wait_reply(c, id, on_event, userdata, ret_reply);
}

SBX_CLIENT_EXPORT int sbx_client_call(SbxClient *c, json_object *request, sbx_event_fn on_event, void *userdata,
                                      json_object **ret_reply) {
        return sbx_client_call_fds(c, request, NULL, 0, on_event, userdata, ret_reply);
}

SBX_CLIENT_EXPORT bool sbx_reply_ok(json_object *reply) {
        json_object *ok;
        return reply && json_object_object_get_ex(reply, "ok", &ok) && json_object_get_boolean(ok);
}

static const char *error_member(json_object *reply, const char *key) {
        json_object *e, *v;
        if (!reply || !json_object_object_get_ex(reply, "error", &e) || !json_object_object_get_ex(e, key, &v))
                return NULL;
        return json_object_get_string(v);
}

SBX_CLIENT_EXPORT const char *sbx_reply_error_code(json_object *reply) {
        return error_member(reply, "code");
}

SBX_CLIENT_EXPORT const char *sbx_reply_error_message(json_object *reply) {
        return error_member(reply, "message");
}
