/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>

#include "macro.h"
#include "metrics.h"
#include "reply.h"

struct Reply {
        unsigned n_ref;
        ReplySink *sink;
        json_object *id;
};

void hook_init(Hook *h, HookFn fn, void *userdata) {
        *h = (Hook) { .fn = fn, .userdata = userdata };
}

void hook_remove(Hook *h) {
        if (!h->list)
                return;
        if (h->prev)
                h->prev->next = h->next;
        else
                *h->list = h->next;
        if (h->next)
                h->next->prev = h->prev;
        h->list = NULL;
        h->next = h->prev = NULL;
}

static void hook_push(Hook **list, Hook *h) {
        hook_remove(h);
        h->list = list;
        h->prev = NULL;
        h->next = *list;
        if (*list)
                (*list)->prev = h;
        *list = h;
}

void reply_sink_init(ReplySink *sink, const ReplySinkOps *ops, const ReplyPeer *peer) {
        *sink = (ReplySink) { .ops = ops, .peer = *peer };
}

void reply_sink_gone(ReplySink *sink) {
        sink->gone = true;
}

/* Each hook is unlinked before it runs: it may free its owner, and with it other hooks of this
 * list, which then unlink themselves from it. */
void reply_sink_closed(ReplySink *sink) {
        Hook *h;

        sink->gone = sink->closed = true;
        while ((h = sink->close_hooks)) {
                hook_remove(h);
                h->fn(h, h->userdata);
        }
        for (size_t i = 0; i < ELEMENTSOF(sink->ended); i++)
{
                json_object_put(sink->ended[i]);
                sink->ended[i] = NULL;
        }
}

/* The list moves aside (in the order of registration), and each hook goes back onto the sink's
 * list before it runs: one may remove itself or others (wherever they are), or free its owner;
 * hooks linked meanwhile wait for the next time. */
void reply_sink_writable(ReplySink *sink) {
        Hook *pending = NULL, *h;

        if (sink->gone)
                return;
        while ((h = sink->writable_hooks))
                hook_push(&pending, h);
        while ((h = pending)) {
                hook_push(&sink->writable_hooks, h);
                if (!sink->gone)
                        h->fn(h, h->userdata);
        }
}

int reply_new(ReplySink *sink, json_object *id, Reply **ret) {
        Reply *r = calloc(1, sizeof(*r));

        if (!r)
                return -ENOMEM;
        r->n_ref = 1;
        r->sink = sink;
        sink->ops->ref(sink);
        r->id = id ? json_object_get(id) : NULL;
        *ret = r;
        return 0;
}

Reply *reply_ref(Reply *r) {
        if (r)
                r->n_ref++;
        return r;
}

Reply *reply_unref(Reply *r) {
        if (!r || --r->n_ref > 0)
                return NULL;
        json_object_put(r->id);
        r->sink->ops->unref(r->sink);
        free(r);
        return NULL;
}

static void reply_send(Reply *r, json_object *msg) {
        ReplySink *sink = r->sink;

        if (sink->gone) {
                sink->n_dropped++;
                json_object_put(msg);
                return;
        }
        sink->ops->send(sink, msg);
}

static json_object *merge(json_object *msg, json_object *extra) {
        if (!extra)
                return msg;
        json_object_object_foreach(extra, key, value)
                json_object_object_add(msg, key, json_object_get(value));
        json_object_put(extra);
        return msg;
}

void reply_ok(Reply *r, json_object *extra) {
        reply_send(r, merge(proto_reply_ok(r->id), extra));
}

void reply_error(Reply *r, const ProtoError *err) {
        metrics_error(err->code);
        reply_send(r, proto_reply_error(r->id, err));
}

void reply_error_extra(Reply *r, const ProtoError *err, json_object *extra) {
        metrics_error(err->code);
        reply_send(r, merge(proto_reply_error(r->id, err), extra));
}

json_object *reply_event_new(const Reply *r, const char *kind) {
        return proto_event(r->id, kind);
}

void reply_event(Reply *r, json_object *ev) {
        reply_send(r, ev);
}

void reply_event_fds(Reply *r, json_object *ev, int *fds, size_t n_fds) {
        ReplySink *sink = r->sink;

        if (sink->gone || !sink->ops->send_fds) {
                for (size_t i = 0; i < n_fds; i++)
                        fds[i] = safe_close(fds[i]);
                reply_send(r, ev);
                return;
        }
        sink->ops->send_fds(sink, ev, fds, n_fds);
}

bool reply_id_int(const Reply *r, int64_t *ret) {
        if (!r->id || !json_object_is_type(r->id, json_type_int))
                return false;
        *ret = json_object_get_int64(r->id);
        return true;
}

void reply_send_line(Reply *r, const char *line, size_t len) {
        ReplySink *sink = r->sink;
        json_object *msg;

        if (sink->gone) {
                sink->n_dropped++;
                return;
        }
        if (sink->ops->send_line) {
                sink->ops->send_line(sink, line, len);
                return;
        }
        msg = json_tokener_parse(line);
        if (msg)
                sink->ops->send(sink, msg);
}

size_t reply_backlog(const Reply *r) {
        return r->sink->gone ? 0 : r->sink->ops->backlog(r->sink);
}

bool reply_gone(const Reply *r) {
        return r->sink->gone;
}

bool reply_input_ended(const Reply *r) {
        return r->sink->ops->input_ended(r->sink);
}

const ReplyPeer *reply_peer(const Reply *r) {
        return &r->sink->peer;
}

bool reply_same_peer(const Reply *a, const Reply *b) {
        return a->sink == b->sink;
}

void reply_account(Reply *r, int runs, int64_t bytes) {
        r->sink->n_runs += runs;
        r->sink->run_reserved += bytes;
}

unsigned reply_runs(const Reply *r) {
        return r->sink->n_runs;
}

void reply_account_transfer(Reply *r, int n) {
        r->sink->n_transfers += n;
}

unsigned reply_transfers(const Reply *r) {
        return r->sink->n_transfers;
}

void reply_on_close(Reply *r, Hook *h) {
        hook_push(&r->sink->close_hooks, h);
}

void reply_on_writable(Reply *r, Hook *h) {
        hook_push(&r->sink->writable_hooks, h);
}

/* ---- Inlets ------------------------------------------------------------------------------ */

static bool id_is_int(json_object *id, int64_t v) {
        return id && json_object_is_type(id, json_type_int) && json_object_get_int64(id) == v;
}

static bool id_equal(json_object *a, json_object *b) {
        return a && b && json_object_equal(a, b);
}

int reply_inlet_add(Reply *r, Inlet *in, int (*take)(Inlet *, const FileChunk *, bool, void *),
                    void (*refuse)(Inlet *, const ProtoError *, void *), void *userdata) {
        ReplySink *sink = r->sink;

        for (Inlet *i = sink->inlets; i; i = i->next)
                if (id_equal(i->reply->id, r->id))
                        return -EEXIST;
        *in = (Inlet) { .take = take, .refuse = refuse, .userdata = userdata, .reply = r, .next = sink->inlets, .linked = true };
        if (sink->inlets)
                sink->inlets->prev = in;
        sink->inlets = in;
        return 0;
}

void inlet_remove(Inlet *in) {
        ReplySink *sink;

        if (!in->linked)
                return;
        sink = in->reply->sink;
        if (in->prev)
                in->prev->next = in->next;
        else
                sink->inlets = in->next;
        if (in->next)
                in->next->prev = in->prev;
        in->linked = false;
        in->next = in->prev = NULL;
        if (sink->closed)
                return;
        json_object_put(sink->ended[sink->n_ended % ELEMENTSOF(sink->ended)]);
        sink->ended[sink->n_ended++ % ELEMENTSOF(sink->ended)] = json_object_get(in->reply->id);
}

Inlet *reply_sink_inlet(ReplySink *sink, json_object *id, bool *ret_ended) {
        *ret_ended = false;
        for (Inlet *i = sink->inlets; i; i = i->next)
                if (id_equal(i->reply->id, id))
                        return i;
        for (size_t i = 0; i < ELEMENTSOF(sink->ended); i++)
                if (id_equal(sink->ended[i], id))
                        *ret_ended = true;
        return NULL;
}

Inlet *reply_peer_inlet(Reply *r, json_object *id, bool *ret_ended) {
        return reply_sink_inlet(r->sink, id, ret_ended);
}

Inlet *reply_sink_inlet_int(ReplySink *sink, int64_t id, bool *ret_ended) {
        *ret_ended = false;
        for (Inlet *i = sink->inlets; i; i = i->next)
                if (id_is_int(i->reply->id, id))
                        return i;
        for (size_t i = 0; i < ELEMENTSOF(sink->ended); i++)
                if (id_is_int(sink->ended[i], id))
                        *ret_ended = true;
        return NULL;
}
