/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Published ports (port.open, port.close): a listening socket on the host for the caller that
 * forwards each connection to a port of the sandbox's own loopback, made from inside the
 * sandbox's network namespace (host/port-forward.h moves the bytes). Each port is a member of
 * its sandbox, closed with it; the table holds them all, for the caps per uid and in all, and
 * the directory of the Unix sockets (RUNTIME/ports), emptied at start: the listeners of an
 * earlier daemon are gone with it. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "context.h"
#include "proto.h"
#include "reply.h"

typedef struct Port Port;
typedef struct Sandbox Sandbox;

typedef struct PortTable {
        Context *ctx;
        int dir_fd;           /* RUNTIME/ports, or -1: no Unix socket can be published */
        char *dir;
        int home_netns_fd;    /* our own network namespace, to come back to after each connect */
        Port *ports;          /* every published port, of every sandbox */
        uint64_t n_conns;     /* their connections in all */
} PortTable;

/* runtime_dir: where the daemon's socket is (NULL: none known; only TCP ports then). The
 * directory ports/ is made there (0711, ours), every file left in it removed. */
int ports_init(PortTable *t, Context *ctx, const char *runtime_dir);
void ports_done(PortTable *t);

/* Publishes port of s for uid (admin: not capped, and may ask for a TCP port below 1024) as
 * listen ("unix", "tcp" or "tcp:PORT"): answers reply with {"port": {...}}, or < 0 with err. */
int port_open(Sandbox *s, uid_t uid, bool privileged, uint16_t port, const char *listen, Reply *reply,
              ProtoError *err);
/* Closes s's published port: its listener, its connections, its socket file. */
int port_close(Sandbox *s, uint16_t port, ProtoError *err);
/* "ports": [{port, listen, path | address, connections}] into a sandbox's JSON (SandboxHooks). */
void ports_sandbox_json(Sandbox *s, json_object *o);
