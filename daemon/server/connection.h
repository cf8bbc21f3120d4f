/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One client connection: non-blocking reads framed into lines, dispatch, and a bounded queue
 * of replies written as the client reads them. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>

#include "proto.h"

typedef struct Manager Manager;
typedef struct Context Context;

typedef struct Connection {
        unsigned n_ref;
        Manager *manager;
        Context *ctx;      /* manager->ctx, for the ops (context.h) */
        int fd;
        struct ucred peer;
        bool admin;        /* root, or a member of the configured admin group */
        sd_event_source *io;
        sd_event_source *partial_timer; /* closes a connection whose partial line goes stale */
        LineBuffer in;
        char *out;
        size_t out_len, out_off, out_alloc;
        unsigned n_runs;   /* runs in flight started by this connection */
        uint64_t run_reserved; /* what its runs' output (2 x output_bytes) and stdin may hold */
        bool dead;         /* fd closed; replies are dropped */
        bool input_ended;  /* the client shut down its sending side; it is still answered */
        sd_event_source *finish; /* after input_ended: closes it once nothing it asked for is left */
        struct Connection *next, *prev;
} Connection;

/* Unread replies beyond this pause a stream's source (a run's pipes, a session's terminal): the
 * program blocks on write until the client reads again. */
#define STREAM_PAUSE_BYTES (256u * 1024)

static inline size_t connection_backlog(const Connection *c) {
        return c->out_len - c->out_off;
}

/* One uid's share of the daemon, for its caps (max_connections_per_uid, max_runs_per_uid,
 * max_buffered_per_uid): its connections, their runs in flight, what those runs' replies may
 * take (reserved) and the replies and requests its connections hold now (unread). */
typedef struct UidUsage {
        unsigned connections, runs;
        uint64_t reserved, unread;
} UidUsage;
UidUsage connection_uid_usage(Manager *m, uid_t uid);

/* A connection on fd, from the peer whose SO_PEERCRED the caller read. */
int connection_new(Manager *m, int fd, const struct ucred *peer, Connection **ret);
Connection *connection_ref(Connection *c);
Connection *connection_unref(Connection *c);
/* Closes the socket, kills the runs it asked for, and drops it from the manager. */
void connection_close(Connection *c);

/* Whether the client has shut down its sending side (shutdown(SHUT_WR)): it asks for nothing
 * more, and what it asked for is still answered. A subscription (pty.attach) of such a
 * connection ends with the exit event. */
static inline bool connection_input_ended(const Connection *c) {
        return c->input_ended;
}

/* Queues one message (not consumed). Errors close the connection. */
void connection_send(Connection *c, json_object *msg);
/* Sends and puts msg. */
void connection_send_take(Connection *c, json_object *msg);
void connection_reply_error(Connection *c, json_object *id, const ProtoError *err);
