/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The mechanism of a published port (port.open): the listening socket on the host (a Unix
 * socket of the caller's, or a loopback TCP port), a connection made from inside a network
 * namespace, and a relay that moves bytes between two connected sockets with splice() through a
 * pipe per direction, so no byte is copied through user space. Knows no sandbox: it takes an
 * sd_event, fds and paths (sandbox/port.c is the domain side). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

/* A listening Unix socket at dir_fd/name (path is the same file's full name, for bind()),
 * owned by uid, mode 0600, listening only once its owner and mode are set: nobody else can
 * connect in between. A leftover file of that name is replaced. */
int port_listen_unix(int dir_fd, const char *path, const char *name, uid_t uid, int *ret_fd);
/* A listening TCP socket on 127.0.0.1:port (0: one the kernel chooses), and its port. */
int port_listen_tcp(uint16_t port, int *ret_fd, uint16_t *ret_port);
/* A non-blocking TCP socket made inside netns_fd (home_fd: the namespace to return to), its
 * connect to 127.0.0.1:port started: 0 when connected, 1 when in progress (EPOLLOUT tells),
 * < 0 (-ECONNREFUSED: nothing listens) with no fd. */
int port_connect_in(int netns_fd, int home_fd, uint16_t port, int *ret_fd);

typedef struct PortRelay PortRelay;
/* The relay has ended (both directions done, or an error, or a refused connect): the caller frees
 * it (port_relay_free) from here or later. */
typedef void (*PortRelayDone)(PortRelay *r, int error, void *userdata);

/* Relays between client (an accepted socket) and inside (port_connect_in's, connected or
 * connecting). Takes both fds, also on failure. done is never called from here. */
int port_relay_new(sd_event *e, int client, int inside, PortRelayDone done, void *userdata, PortRelay **ret);
PortRelay *port_relay_free(PortRelay *r);
/* Bytes moved so far, client to inside and back. */
void port_relay_bytes(const PortRelay *r, uint64_t *ret_in, uint64_t *ret_out);
