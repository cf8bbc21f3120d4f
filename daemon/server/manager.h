/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The server: the listening sockets, accepting, the connections, and giving memory back after
 * them (trim). What every part reads is the Context (context.h), the sandboxes are the
 * Registry's (registry.h); lifecycle.c wires them together. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "connection.h"
#include "context.h"

typedef struct Connection Connection;
typedef struct Sandbox Sandbox;

#define MANAGER_MAX_LISTEN CONTEXT_MAX_MASKED

typedef struct Manager {
        Context *ctx;
        Registry *registry;        /* ctx->registry */
        int listen_fds[MANAGER_MAX_LISTEN];
        char *listen_paths[MANAGER_MAX_LISTEN]; /* masked inside every sandbox (Context.masked_paths) */
        unsigned n_listen;
        sd_event_source *listen_sources[MANAGER_MAX_LISTEN];
        sd_event_source *accept_timer; /* re-enables them after running out of fds */
        unsigned accept_paused_count;
        sd_event_source *trim_timer;   /* malloc_trim() after connections went (manager_schedule_trim) */
        ConnectionSet conns;
        bool stopping;
        bool socket_activated;      /* sd_listen_fds gave us the sockets: we may exit when idle */
} Manager;

/* hooks: what its connections call back (lifecycle.c), with the Manager as their userdata. */
int manager_new(Manager **ret, Context *ctx, const ConnectionHooks *hooks);
/* Closes every connection (and accepts no more). */
void manager_close_connections(Manager *m);
/* ... and every listener. */
Manager *manager_free(Manager *m);
/* Takes listening fds (from sd_listen_fds or our own bind). */
int manager_add_listener(Manager *m, int fd);
/* The accept timer; the listeners' paths into ctx->masked_paths. */
int manager_setup(Manager *m);
/* Gives freed heap pages back to the kernel a second from now (once, however often called). */
void manager_schedule_trim(Manager *m);
