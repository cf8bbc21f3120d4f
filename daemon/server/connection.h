/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One client connection: non-blocking reads framed into lines, dispatch, and a bounded queue
 * of replies written as the client reads them. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>

#include "conf.h"
#include "fdpass.h"
#include "proto.h"
#include "reply.h"

typedef struct Connection Connection;

/* Lines with fds a connection may hold unsent (a client that does not read): past it, it is closed. */
#define CONNECTION_OUT_FDS_MAX 8

/* What the transport knows of the daemon: the callbacks it was given at connection_new(), as
 * sd-varlink's server knows its bind_method and bind_disconnect. dispatch answers through reply
 * (it takes its own reference to answer later; fds are the n_fds file descriptors that came with
 * the line, as many as its "fds" said: it takes those it keeps, setting them to -1, and the
 * connection closes the rest); closed runs from the deferred close, after the
 * close hooks of the replies; writable (optional) when the client has room again, after their
 * writable hooks. route (optional) sees each complete line without fds before it is parsed,
 * with the sink of the connection's replies: it returns true when it took the line (a
 * file.chunk line in its canonical form, handed to its transfer), false to have it parsed and
 * dispatched as usual. */
typedef struct ConnectionHooks {
        void (*dispatch)(Reply *reply, const char *op, json_object *req, int *fds, size_t n_fds, void *userdata);
        bool (*route)(ReplySink *sink, const char *line, size_t len, void *userdata);
        void (*closed)(Connection *c, void *userdata);
        void (*writable)(Connection *c, void *userdata);
} ConnectionHooks;

/* The connections of one server (Manager.conns): the list, how many are open, what they read. */
typedef struct ConnectionSet {
        sd_event *event;
        const Config *config;
        gid_t admin_gid;   /* admin_group's: its members' connections are admin (have_admin_gid) */
        bool have_admin_gid;
        const ConnectionHooks *hooks; /* given to each new connection, with hooks_userdata */
        void *hooks_userdata;
        Connection *head;
        unsigned n;        /* open ones: a closed one waiting for its close hooks is not counted */
} ConnectionSet;

struct Connection {
        unsigned n_ref;
        ConnectionSet *set;
        const ConnectionHooks *hooks;
        void *hooks_userdata;
        ReplySink sink;    /* what its requests' replies go to */
        int fd;
        struct ucred peer;
        bool admin;        /* root, or a member of the configured admin group */
        sd_event_source *io;
        sd_event_source *partial_timer; /* closes a connection whose partial line goes stale */
        LineBuffer in;
        SbxFdQueue fds;    /* received, until their line is complete (lib/fdpass.h) */
        char *out;
        size_t out_len, out_off, out_alloc;
        /* fds that go with lines of out (reply_event_fds()): each set on the sendmsg() that starts
         * its line, at stream offset at (counted as out_queued and out_sent count), len bytes */
        struct {
                int fd[SBX_FDS_PER_MESSAGE];
                size_t n, len;
                uint64_t at;
        } out_fds[CONNECTION_OUT_FDS_MAX];
        size_t n_out_fds;
        uint64_t out_queued, out_sent;
        bool dead;         /* fd closed; replies are dropped; the close is deferred to close_source */
        sd_event_source *close_source; /* runs the close hooks and drops it from the manager */
        bool input_ended;  /* the client shut down its sending side; it is still answered */
        sd_event_source *finish; /* after input_ended: closes it once nothing it asked for is left */
        struct Connection *next, *prev;
};

static inline size_t connection_backlog(const Connection *c) {
        return c->out_len - c->out_off;
}

/* One uid's share of the daemon, for its caps (max_connections_per_uid, max_runs_per_uid,
 * max_buffered_per_uid): its connections, their runs in flight, what those runs' replies may
 * take (reserved) and the replies and requests its connections hold now (unread). */
typedef struct UidUsage {
        unsigned connections, runs, transfers;
        uint64_t reserved, unread;
} UidUsage;
UidUsage connection_uid_usage(const ConnectionSet *set, uid_t uid);

/* A connection on fd, from the peer whose SO_PEERCRED the caller read. */
int connection_new(ConnectionSet *set, int fd, const struct ucred *peer, Connection **ret);
Connection *connection_ref(Connection *c);
Connection *connection_unref(Connection *c);
/* Closes the socket and drops what it would send; the rest of the close (its replies' close
 * hooks: runs killed, sessions told; hooks.closed; leaving the manager's list) runs from the
 * event loop, never from inside the call that found the connection dead (a send over a cap). */
void connection_close(Connection *c);
/* The same, all of it now (the manager's teardown, when no loop runs any more). */
void connection_close_now(Connection *c);

/* Whether the client has shut down its sending side (shutdown(SHUT_WR)): it asks for nothing
 * more, and what it asked for is still answered. A subscription (pty.attach) of such a
 * connection ends with the exit event. */
static inline bool connection_input_ended(const Connection *c) {
        return c->input_ended;
}
