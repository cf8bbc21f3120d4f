/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The resolver a sandbox with egress is pointed at (its /etc/resolv.conf: nameserver 127.0.0.53):
 * a UDP socket the daemon bound on the loopback of the sandbox's own network namespace, before
 * anything of the sandbox ran there. Each query is relayed from the daemon's namespace to the
 * host's resolver (egress_dns) on a socket of its own, connected, and its answer sent back. So the
 * sandbox reaches the host's resolver without any route to the host, its loopback never exposed.
 * UDP only (a truncated answer cannot be retried over TCP); at most DNS_RELAY_INFLIGHT_MAX queries
 * in flight per sandbox and DNS_RELAY_INFLIGHT_TOTAL in all (each holds one of the daemon's fds),
 * each given DNS_RELAY_TIMEOUT_USEC. */
#pragma once

#include <netinet/in.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#define DNS_RELAY_INFLIGHT_MAX 32
#define DNS_RELAY_INFLIGHT_TOTAL 1024
#define DNS_RELAY_TIMEOUT_USEC (5 * UINT64_C(1000000))
#define DNS_RELAY_ADDR "127.0.0.53"

typedef struct DnsRelay DnsRelay;

/* Takes listen_fd (non-blocking, bound inside the sandbox's namespace). */
int dns_relay_new(sd_event *e, int listen_fd, const struct sockaddr_in *upstream, DnsRelay **ret);
DnsRelay *dns_relay_free(DnsRelay *r);
/* Queries relayed, answered, dropped (over the bound, malformed, no answer in time). */
void dns_relay_counts(const DnsRelay *r, uint64_t *ret_relayed, uint64_t *ret_answered, uint64_t *ret_dropped);
