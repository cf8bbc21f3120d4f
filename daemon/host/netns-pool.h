/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Network namespaces for sandboxes, made by the daemon and used again.
 *
 * Making a network namespace and tearing it down (the kernel's cleanup_net) was the largest
 * single cost of a throwaway run: about 0.8 ms of CPU of some 4 ms (docs/performance.md). So the
 * daemon makes them itself, owned by the host's user namespace, with the loopback up, and a
 * sandbox's init joins one instead of making its own. Owned by the host, not by the sandbox's
 * user namespace: nothing in any sandbox, root included, holds a capability over it, so no
 * sandbox can change its interfaces, addresses, routes, firewall or sysctls (nor reach the
 * kernel code behind them).
 *
 * What a sandbox can still leave in it (sockets, TIME_WAIT, IPv6 flow labels, TCP metrics, the
 * TCP Fast Open key, ...) is found by comparison, not by a list of known leftovers: the daemon
 * records what a new namespace shows (every entry of /proc/net by name and most files' content;
 * the TCP metrics; the Fast Open key), and when the sandbox's last process is gone
 * netns_pool_put() records the same again. Only a namespace that shows exactly what a new one
 * shows goes back to the pool; any other is closed and the kernel frees it. A kind of state
 * nobody thought of is caught as long as /proc/net shows it. See docs/security.md ("Network
 * namespaces used again") for what is compared, what is shared and what is not. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Clean namespaces kept at most: enough for the sandboxes made and destroyed at once under a
 * steady load (each is about 200 KiB of the kernel's memory, so some 6 MiB in all). */
#define NETNS_IDLE_MAX 32

/* What a namespace showed when it was made; shared by the namespaces that showed the same. */
typedef struct NetnsState NetnsState;

typedef struct NetnsSlot {
        int fd;                /* an idle namespace; -1 for one lent to a sandbox */
        uint64_t ino;          /* its nsfs inode: how netns_pool_put() finds a lent one */
        NetnsState *pristine;  /* what a new namespace showed; NULL: unknown, never used again */
} NetnsSlot;

typedef struct NetnsPool {
        int host_fd;           /* our own network namespace, to come back to; -1: pool off */
        NetnsSlot *idle;       /* clean namespaces, the most recently returned last */
        size_t n_idle, max_idle;
        NetnsSlot *lent;       /* the namespaces sandboxes have now */
        size_t n_lent, n_lent_alloc;
        NetnsState *last;      /* what the last namespace recorded new showed */
        uint64_t last_usec;    /* when (CLOCK_MONOTONIC) */
        uint16_t tcp_metrics_family; /* the generic netlink family "tcp_metrics"; 0: unknown */
        uint64_t made, reused, discarded;
        uint64_t checks, check_usec; /* netns_pool_put()'s comparisons, and their time in all */
} NetnsPool;

/* max_idle clean namespaces are kept at most; 0 turns the pool off (netns_pool_get() says
 * -EOPNOTSUPP, and each sandbox makes its own namespace as before). */
int netns_pool_init(NetnsPool *p, size_t max_idle);

/* A network namespace for a new sandbox (an fd, the caller's): a clean one from the pool, else a
 * new one. < 0: none (the sandbox makes its own). */
int netns_pool_get(NetnsPool *p);

/* A new namespace that is never used again (netns_pool_put() closes it): a sandbox with egress
 * gets an interface, addresses and routes in it, which no later sandbox may find. < 0: none. */
int netns_pool_fresh(NetnsPool *p);

/* The sandbox that had fd is gone, every process of it: fd is kept for the next sandbox when
 * it shows what a new namespace showed, else closed. Takes fd. */
void netns_pool_put(NetnsPool *p, int fd);

/* fd is not given back (its sandbox is freed before it was empty): closed, and forgotten as lent.
 * Takes fd. */
void netns_pool_drop(NetnsPool *p, int fd);

void netns_pool_done(NetnsPool *p);
