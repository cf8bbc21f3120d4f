/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file-helper.h"
#include "file-inflow.h"
#include "file-proto.h"
#include "macro.h"
#include "util.h"

/* One chunk decoded, as the frame the helper reads; written to its pipe in seq order. */
typedef struct Slot {
        char *buf;              /* FileFrame, then up to chunk_bytes */
        size_t len, off;        /* len 0: free */
} Slot;

struct FileInflow {
        FileInflowParams p;
        Inlet inlet;
        FileWindow w;
        Slot *slots;            /* window of them: chunk seq goes to slots[seq % window] */
        uint64_t head;          /* the seq whose frame goes to the pipe next */
        uint64_t acked_bytes;
        sd_event_source *pipe_source, *timer;
        bool ready, ended, eof_queued;
};

static void inflow_close_pipe(FileInflow *in) {
        in->pipe_source = sd_event_source_disable_unref(in->pipe_source);
        in->p.pipe_fd = safe_close(in->p.pipe_fd);
}

void file_inflow_end(FileInflow *in) {
        if (!in)
                return;
        in->ended = true;
        inlet_remove(&in->inlet);
        if (in->timer)
                (void) sd_event_source_set_enabled(in->timer, SD_EVENT_OFF);
        inflow_close_pipe(in);
}

FileInflow *file_inflow_free(FileInflow *in) {
        if (!in)
                return NULL;
        file_inflow_end(in);
        in->timer = sd_event_source_disable_unref(in->timer);
        for (unsigned i = 0; in->slots && i < in->p.window; i++)
                free(in->slots[i].buf);
        free(in->slots);
        reply_unref(in->p.reply);
        free(in);
        return NULL;
}

static int inflow_fail(FileInflow *in, const ProtoError *err) {
        if (in->ended)
                return 0;
        file_inflow_end(in);
        in->p.failed(in->p.userdata, err);
        return 0;
}

/* Progress (a chunk, an ack): the deadline starts again; none is kept once eof is queued. */
static void inflow_touch(FileInflow *in) {
        if (!in->timer || in->ended)
                return;
        if (in->eof_queued) {
                (void) sd_event_source_set_enabled(in->timer, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_time_relative(in->timer, in->p.timeout_usec);
        (void) sd_event_source_set_enabled(in->timer, SD_EVENT_ONESHOT);
}

static int on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        FileInflow *in = userdata;
        ProtoError err;

        proto_error_set(&err, SBX_E_INVALID_REQUEST, "seq",
                        "no chunk came for %" PRIu64 " s (request_timeout) while chunk %" PRIu64
                        " was awaited; the transfer is abandoned and the old file is as it was",
                        in->p.timeout_usec / 1000000, in->w.next_seq);
        return inflow_fail(in, &err);
}

/* As much of the queued frames as the pipe takes; the rest when it has room. */
static void inflow_flush(FileInflow *in) {
        while (in->p.pipe_fd >= 0 && in->head < in->w.next_seq) {
                Slot *s = &in->slots[in->head % in->p.window];
                ssize_t k = write(in->p.pipe_fd, s->buf + s->off, s->len - s->off);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && errno == EAGAIN) {
                        (void) sd_event_source_set_enabled(in->pipe_source, SD_EVENT_ON);
                        return;
                }
                if (k <= 0) {
                        /* The helper is gone (EPIPE): its end is reported by its exit. */
                        inflow_close_pipe(in);
                        return;
                }
                s->off += (size_t) k;
                if (s->off < s->len)
                        continue;
                s->len = s->off = 0;
                in->head++;
        }
        if (in->pipe_source)
                (void) sd_event_source_set_enabled(in->pipe_source, SD_EVENT_OFF);
        if (in->eof_queued && in->head == in->w.next_seq)
                inflow_close_pipe(in); /* the helper has its eof frame */
}

static int on_pipe(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        inflow_flush(userdata);
        return 0;
}

static Slot *inflow_slot(FileInflow *in, uint64_t seq) {
        Slot *s = &in->slots[seq % in->p.window];
        if (!s->buf)
                s->buf = malloc(sizeof(FileFrame) + in->p.chunk_bytes);
        return s->buf ? s : NULL;
}

/* One chunk: its order and window first (nothing is held for a chunk that may not come), then
 * its data decoded into its slot, then the size. */
static int inflow_take(Inlet *inlet, const FileChunk *c, bool from_scan, void *userdata) {
        FileInflow *in = userdata;
        FileWindow probe = in->w;
        FileFrame frame = { .seq = c->seq, .zeros = c->zeros, .flags = c->eof ? FILE_FRAME_EOF : 0 };
        ProtoError err;
        size_t n = 0;
        Slot *s;

        if (in->ended || (in->ready && in->p.pipe_fd < 0))
                return 0; /* the helper is gone: its exit answers, the chunk has nowhere to go */
        if (!in->ready)
                return inflow_fail(in, (proto_error_set(&err, SBX_E_INVALID_REQUEST, "seq",
                                                        "chunk %" PRIu64 " came before the ready event", c->seq),
                                        &err));
        if (file_window_take(&probe, c, 0, &err) < 0)
                return inflow_fail(in, &err);
        s = inflow_slot(in, c->seq);
        if (!s)
                return inflow_fail(in, (proto_error_set(&err, SBX_E_INTERNAL, NULL, "out of memory"), &err));
        if (file_chunk_decode(c, s->buf + sizeof(FileFrame), in->p.chunk_bytes, &n, &err) < 0)
                return from_scan ? -EBADMSG : inflow_fail(in, &err);
        if (file_window_take(&in->w, c, n + c->zeros, &err) < 0 || (c->eof && file_window_finish(&in->w, &err) < 0))
                return inflow_fail(in, &err);
        frame.len = (uint32_t) n;
        memcpy(s->buf, &frame, sizeof(frame));
        s->len = sizeof(frame) + n;
        s->off = 0;
        if (c->eof) {
                in->eof_queued = true;
                inlet_remove(&in->inlet); /* what follows eof is dropped */
        }
        inflow_touch(in);
        inflow_flush(in);
        return 0;
}

static void inflow_refuse(Inlet *inlet, const ProtoError *err, void *userdata) {
        (void) inflow_fail(userdata, err);
}

int file_inflow_ready(FileInflow *in) {
        json_object *ev;

        if (in->ready)
                return -EPROTO;
        in->ready = true;
        if (in->ended)
                return 0; /* refused before it was ready: nothing more to tell */
        ev = reply_event_new(in->p.reply, "ready");
        json_object_object_add(ev, "chunk_bytes", json_object_new_uint64(in->p.chunk_bytes));
        json_object_object_add(ev, "window", json_object_new_uint64(in->p.window));
        reply_event(in->p.reply, ev);
        inflow_touch(in);
        return 0;
}

int file_inflow_ack(FileInflow *in, uint64_t seq, uint64_t bytes) {
        json_object *ev;

        if (!in->ready || seq != in->w.acked || seq >= in->head || bytes < in->acked_bytes || bytes > in->w.bytes)
                return -EPROTO;
        file_window_ack(&in->w, seq);
        in->acked_bytes = bytes;
        if (in->ended)
                return 0;
        ev = reply_event_new(in->p.reply, "ack");
        json_object_object_add(ev, "seq", json_object_new_uint64(seq));
        json_object_object_add(ev, "bytes", json_object_new_uint64(bytes));
        reply_event(in->p.reply, ev);
        inflow_touch(in);
        return 0;
}

int file_inflow_new(const FileInflowParams *p, FileInflow **ret, ProtoError *err) {
        FileInflow *in = calloc(1, sizeof(*in));
        int r;

        if (in) {
                in->p = *p;
                in->p.reply = reply_ref(p->reply);
                in->slots = calloc(p->window, sizeof(Slot));
        }
        if (!in || !in->slots) {
                if (in)
                        in->p.reply = reply_unref(in->p.reply);
                free(in);
                safe_close(p->pipe_fd);
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        }
        file_window_init(&in->w, p->window, p->size);
        r = reply_inlet_add(in->p.reply, &in->inlet, inflow_take, inflow_refuse, in);
        if (r < 0) {
                file_inflow_free(in);
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "id",
                                       "a file.write with this id is in flight on this connection");
        }
        r = sd_event_add_io(p->event, &in->pipe_source, in->p.pipe_fd, EPOLLOUT, on_pipe, in);
        if (r >= 0)
                r = sd_event_source_set_enabled(in->pipe_source, SD_EVENT_OFF);
        if (r >= 0)
                r = sd_event_add_time_relative(p->event, &in->timer, CLOCK_MONOTONIC, p->timeout_usec, USEC_PER_SEC / 10,
                                               on_timeout, in);
        if (r >= 0)
                r = sd_event_source_set_enabled(in->timer, SD_EVENT_OFF);
        if (r < 0) {
                file_inflow_free(in);
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "cannot watch the file helper's pipe: %s", strerror(-r));
        }
        *ret = in;
        return 0;
}
