/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A Reply: the pending answer to one request, and the only way the domain (runs, sessions,
 * waiters, snapshot jobs, sweeps) talks to a client. It is an id and a sink: the sink is what
 * the answer goes to (a connection, or a test's fake), behind an ops table as crun's
 * libcrun_cgroup_manager is; this file knows no Connection.
 *
 * The rules (tests/test-reply.c checks them):
 *  - sending never closes anything synchronously: a sink that cannot take an answer (out of
 *    memory, backlog or uid over its cap) marks itself gone and closes later, from its event loop;
 *  - an answer to a sink that is gone is dropped and counted (ReplySink.n_dropped);
 *  - close hooks run once, from that later close, never from inside a send; writable hooks run
 *    each time the sink has room again (or its input ended); a hook removed before runs never;
 *  - a Reply holds a reference on its sink; hooks hold none. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "file-proto.h"
#include "proto.h"

/* Unread answers beyond this pause a stream's source (a run's pipes, a session's terminal): the
 * program blocks on write until the client reads again. */
#define STREAM_PAUSE_BYTES (256u * 1024)

typedef struct ReplySink ReplySink;
typedef struct Reply Reply;

/* A callback on a sink's close or writable list: embedded in its owner, linked by
 * reply_on_close()/reply_on_writable(), unlinked by hook_remove() (or just before it runs, for a
 * close hook). */
typedef struct Hook Hook;
typedef void (*HookFn)(Hook *h, void *userdata);
struct Hook {
        HookFn fn;
        void *userdata;
        Hook **list;            /* the list it is on; NULL: none */
        Hook *next, *prev;
};
void hook_init(Hook *h, HookFn fn, void *userdata);
static inline bool hook_linked(const Hook *h) {
        return h->list != NULL;
}
/* Unlinks it; nothing when it is not linked. */
void hook_remove(Hook *h);

/* Who asked, for ownership and caps. */
#define REPLY_PEER_GROUPS_MAX 64
typedef struct ReplyPeer {
        struct ucred cred;
        bool admin;             /* root, or a member of the configured admin group */
        int n_groups;           /* SO_PEERGROUPS at connect; -1: unknown (or more than the max) */
        gid_t groups[REPLY_PEER_GROUPS_MAX];
} ReplyPeer;

typedef struct ReplySinkOps {
        /* Queues msg (taken); a failure marks the sink gone and defers its close. */
        void (*send)(ReplySink *sink, json_object *msg);
        /* Queues a line already serialized (ending in '\n'), as send would queue its JSON; NULL:
         * reply_send_line() parses it and calls send. */
        void (*send_line)(ReplySink *sink, const char *line, size_t len);
        /* Queues msg (taken) with fds (taken: the sink closes them once sent, or when it cannot
         * send them) on that line's bytes (SCM_RIGHTS, docs/protocol.md "File descriptors");
         * NULL: the sink cannot pass fds, reply_event_fds() closes them and sends msg alone. */
        void (*send_fds)(ReplySink *sink, json_object *msg, int *fds, size_t n_fds);
        /* Bytes queued that the peer has not read yet. */
        size_t (*backlog)(const ReplySink *sink);
        /* Whether the peer shut down its sending side: it asks nothing more, and is still answered. */
        bool (*input_ended)(const ReplySink *sink);
        void (*ref)(ReplySink *sink);
        void (*unref)(ReplySink *sink);
} ReplySinkOps;

/* Embedded in what it stands for (a Connection); filled by its owner. */
struct ReplySink {
        const ReplySinkOps *ops;
        ReplyPeer peer;
        bool gone;              /* answers are dropped; the close hooks run (or ran) from the loop */
        bool closed;            /* the close hooks ran */
        uint64_t n_dropped;     /* answers dropped because the peer was gone */
        /* Runs in flight that its requests started, and what their answers (2 x output_bytes)
         * and stdin may hold: the per-connection and per-uid caps count them (reply_account()). */
        unsigned n_runs;
        uint64_t run_reserved;
        unsigned n_transfers;   /* file transfers in flight (file.write, file.read) */
        Hook *close_hooks, *writable_hooks;
        struct Inlet *inlets;   /* requests that take chunk lines (reply_inlet_add()) */
        json_object *ended[16]; /* ids of the last inlets that ended: their late chunks are dropped */
        unsigned n_ended;
};

/* The sink's side: init, and the two notifications its owner gives from its event loop. */
void reply_sink_init(ReplySink *sink, const ReplySinkOps *ops, const ReplyPeer *peer);
/* The peer is gone: answers are dropped from now on (the owner defers reply_sink_closed()). */
void reply_sink_gone(ReplySink *sink);
/* Runs (and unlinks) every close hook; called once, from the event loop, never from a send. */
void reply_sink_closed(ReplySink *sink);
/* Runs every writable hook; they stay linked. Not while the sink is gone. */
void reply_sink_writable(ReplySink *sink);

/* A pending answer to the request with this id (may be NULL) on sink; one reference. */
int reply_new(ReplySink *sink, json_object *id, Reply **ret);
Reply *reply_ref(Reply *r);
Reply *reply_unref(Reply *r);

/* The answer: {"id", "ok": true} and then extra's members (taken; NULL: none). */
void reply_ok(Reply *r, json_object *extra);
/* The answer, an error; extra's members follow "error" (taken; NULL: none). */
void reply_error(Reply *r, const ProtoError *err);
void reply_error_extra(Reply *r, const ProtoError *err, json_object *extra);
/* An event of this request, made with its id ({"id", "event": kind}) for the caller to fill... */
json_object *reply_event_new(const Reply *r, const char *kind);
/* ...and sent (taken); the request stays pending. */
void reply_event(Reply *r, json_object *ev);
/* The same with fds on its line (taken, closed on every path: to a peer that is gone, none is
 * sent); ev should say "fds": n_fds for the peer. */
void reply_event_fds(Reply *r, json_object *ev, int *fds, size_t n_fds);
/* The request's id when it is an integer (lines formatted without json-c carry it so). */
bool reply_id_int(const Reply *r, int64_t *ret);
/* An event line formatted by the caller (canonical JSON with this request's id, ending in '\n'),
 * sent as it is: bulk data (file.read's data events) skips json-c's serializer. */
void reply_send_line(Reply *r, const char *line, size_t len);

/* Unread bytes of the peer (for STREAM_PAUSE_BYTES); 0 once it is gone. */
size_t reply_backlog(const Reply *r);
bool reply_gone(const Reply *r);
bool reply_input_ended(const Reply *r);
const ReplyPeer *reply_peer(const Reply *r);
/* Whether two replies go to the same peer (one connection). */
bool reply_same_peer(const Reply *a, const Reply *b);
/* Runs in flight and bytes reserved on the sink (ReplySink.n_runs, run_reserved): added, or
 * taken back when negative. */
void reply_account(Reply *r, int runs, int64_t bytes);
unsigned reply_runs(const Reply *r);
/* File transfers in flight on the sink (ReplySink.n_transfers), for their own caps. */
void reply_account_transfer(Reply *r, int n);
unsigned reply_transfers(const Reply *r);

/* h runs when the peer goes (once), or each time it has room again; it moves if linked already.
 * On a sink whose close hooks ran already a close hook never runs: whoever registers late
 * checks reply_gone() (a session's subscribers are swept by it). */
void reply_on_close(Reply *r, Hook *h);
void reply_on_writable(Reply *r, Hook *h);

/* A request that takes lines after it: file.write's file.chunk lines (docs/protocol.md), later
 * file.put's. Embedded in its owner and linked on its reply's sink under the reply's id; the
 * transport finds it by the id of a chunk line (reply_sink_inlet()) and hands it the chunk.
 * take returns < 0 only for a chunk whose data does not decode and that came by the fast path
 * (from_scan): the transport then parses the line the general way for its exact error. */
typedef struct Inlet Inlet;
struct Inlet {
        int (*take)(Inlet *in, const FileChunk *c, bool from_scan, void *userdata);
        /* A line with its id that is no valid chunk (err names the field): the transfer ends. */
        void (*refuse)(Inlet *in, const ProtoError *err, void *userdata);
        void *userdata;
        Reply *reply;           /* not referenced: the owner holds it while linked */
        Inlet *next, *prev;
        bool linked;
};
/* -EEXIST when an inlet with the same id is linked on that sink already. */
int reply_inlet_add(Reply *r, Inlet *in, int (*take)(Inlet *, const FileChunk *, bool, void *),
                    void (*refuse)(Inlet *, const ProtoError *, void *), void *userdata);
/* Unlinks it (nothing when it is not linked); its id joins the sink's ended ids. */
void inlet_remove(Inlet *in);
/* The inlet with this id (an integer one for the fast path's int_id), or NULL; *ret_ended tells
 * whether the id is one of the sink's last ended ones. */
Inlet *reply_sink_inlet(ReplySink *sink, json_object *id, bool *ret_ended);
Inlet *reply_sink_inlet_int(ReplySink *sink, int64_t id, bool *ret_ended);
/* The same on r's sink (a chunk line that came by the general path, as a request). */
Inlet *reply_peer_inlet(Reply *r, json_object *id, bool *ret_ended);
