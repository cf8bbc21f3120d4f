/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A sandbox's way out (egress.h): a veth pair between the daemon's network namespace and the
 * sandbox's, addressed, with the sandbox's default route through the host's end. Plain rtnetlink
 * on sockets of the namespace each step is for: no fork of ip(8), nothing that blocks for long. */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Interfaces of sandboxd in the daemon's namespace are named VETH_PREFIX + the sandbox's id
 * without its "sbx-": a new daemon keeps those of the sandboxes it takes back running and removes
 * every other one (egress.c, from veth_list()). */
#define VETH_PREFIX "sx-"
/* The sandbox's end, inside its namespace. */
#define VETH_INSIDE "eth0"

typedef struct VethSpec {
        const char *host_name;   /* VETH_PREFIX...: the daemon's end */
        int netns_fd;            /* the sandbox's namespace (host-owned: netns-pool.h) */
        int home_fd;             /* the daemon's own namespace, to come back to */
        uint32_t host_addr, sandbox_addr; /* network order; one /prefix_len between them */
        unsigned prefix_len;
} VethSpec;

/* Makes the pair, addresses both ends, brings them up, forwarding on for the host's end (IPv6 off on
 * both: the sandbox's way out is IPv4 only), and the sandbox's default route through it. On
 * failure, nothing of it is left. */
int veth_create(const VethSpec *spec);
/* Removes the host's end (the kernel removes its peer with it); -ENODEV when there is none. */
int veth_remove(const char *host_name);
/* An interface named VETH_PREFIX* of the daemon's namespace (an earlier daemon's) and the first
 * IPv4 address of it (host order; 0: none). */
typedef struct VethFound {
        char name[IFNAMSIZ];
        uint32_t host_addr;
        bool claimed;   /* egress.c: a sandbox taken back running has it again */
} VethFound;

/* Every one of them, malloc'ed in *ret (*ret_n of them; NULL when none). */
int veth_list(VethFound **ret, size_t *ret_n);

/* A non-blocking UDP socket bound to addr:port (network order) inside netns_fd's namespace: the
 * sandbox's resolver (egress-dns.h), bound before anything of the sandbox runs there. */
int veth_udp_socket_in(int netns_fd, int home_fd, uint32_t addr, uint16_t port, int *ret_fd);
