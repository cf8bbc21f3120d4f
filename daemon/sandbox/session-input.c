/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What pty.write sends a session: queued within PTY_MAX_PENDING_INPUT, written to its terminal or
 * stdin as it takes it, each write answered once it is (session.h, session_write()). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "macro.h"
#include "session-internal.h"

/* Every pty.write its written bytes cover answered (err: every one, with it). */
void session_answer_writes(Session *p, const ProtoError *err) {
        while (p->writes && (err || p->writes->until <= p->in_written)) {
                PendingReply *w = p->writes;
                p->writes = w->next;
                if (err)
                        reply_error(w->reply, err);
                else {
                        json_object *o = json_object_new_object();
                        json_object_object_add(o, "written", json_object_new_int64((int64_t) w->until));
                        reply_ok(w->reply, o);
                }
                reply_unref(w->reply);
                free(w);
        }
}

/* Its input closed: the watch, the fd, and the store's copy (session_input_closed()). */
void session_stop_input(Session *p) {
        p->in_source = sd_event_source_disable_unref(p->in_source);
        p->in_fd = safe_close(p->in_fd);
        session_input_closed(p);
}

static void session_flush_input(Session *p) {
        while (p->in_fd >= 0 && p->in_off < p->in_len) {
                ssize_t n = write(p->in_fd, p->in_buf + p->in_off, p->in_len - p->in_off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        break;
                if (n < 0) {
                        ProtoError err;
                        proto_error_set(&err, SBX_E_CONFLICT, "session", "the program does not take input any more: %s",
                                        strerror(errno));
                        session_answer_writes(p, &err);
                        p->in_off = p->in_len = 0;
                        if (!p->pty)
                                session_stop_input(p);
                        return;
                }
                p->in_off += (size_t) n;
                p->in_written += (uint64_t) n;
        }
        if (p->in_off == p->in_len)
                p->in_off = p->in_len = 0;
        session_answer_writes(p, NULL);
        if (p->in_len == 0 && p->in_eof && !p->pty)
                session_stop_input(p);
        if (p->in_source)
                (void) sd_event_source_set_enabled(p->in_source, p->in_len > 0 ? SD_EVENT_ON : SD_EVENT_OFF);
}

int session_on_input(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        session_flush_input(userdata);
        return 0;
}

static int session_queue_input(Session *p, const char *data, size_t n) {
        if (n > 0 && p->in_off > 0) {
                memmove(p->in_buf, p->in_buf + p->in_off, p->in_len - p->in_off);
                p->in_len -= p->in_off;
                p->in_off = 0;
        }
        if (n > 0) {
                char *b = realloc(p->in_buf, p->in_len + n);
                if (!b)
                        return -ENOMEM;
                p->in_buf = b;
                memcpy(p->in_buf + p->in_len, data, n);
                p->in_len += n;
        }
        p->in_queued += n;
        return 0;
}

int session_write(Session *p, Reply *reply, const char *data, size_t n, bool eof, ProtoError *err) {
        PendingReply *w, **tail;

        if (p->output_done || p->in_fd < 0 || p->in_eof || p->free_when_done)
                return proto_error_set(err, SBX_E_CONFLICT, "session", "session %s %s", p->id,
                                       p->output_done || p->free_when_done ? "has exited" : "has no input any more");
        if (eof && p->pty)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "eof",
                                       "'eof' is for pipe sessions; on a terminal send the EOF character (\\u0004)");
        if (p->in_len - p->in_off + n > PTY_MAX_PENDING_INPUT)
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "data",
                                       "more than %u bytes of input would be waiting; wait for earlier writes",
                                       PTY_MAX_PENDING_INPUT);
        w = calloc(1, sizeof(*w));
        if (!w || session_queue_input(p, data, n) < 0) {
                free(w);
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        }
        *w = (PendingReply) { .reply = reply_ref(reply), .until = p->in_queued };
        for (tail = &p->writes; *tail; tail = &(*tail)->next)
                ;
        *tail = w;
        p->in_eof = eof;
        session_flush_input(p);
        return 0;
}
