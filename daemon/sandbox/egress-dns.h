/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The resolver a sandbox with egress is pointed at (its /etc/resolv.conf: nameserver 127.0.0.53):
 * a UDP socket the daemon bound on the loopback of the sandbox's own network namespace, before
 * anything of the sandbox ran there. Each query is relayed from the daemon's namespace to the
 * host's resolver (egress_dns) on a socket of its own, connected, and its answer sent back. So the
 * sandbox reaches the host's resolver without any route to the host, its loopback never exposed.
 *
 * Only a query in the form a stub resolver sends is relayed (core/dns-message.h: one question,
 * EDNS0 allowed, nothing else); anything else is dropped. UDP only (a truncated answer cannot be
 * retried over TCP). Queries in flight are bounded in all (dns_relay_set_budget(): each holds one
 * of the daemon's fds), per owner uid over all its sandboxes (a quarter of that) and per sandbox
 * (DNS_RELAY_INFLIGHT_MAX, or the uid's share if less), each given DNS_RELAY_TIMEOUT_USEC: one
 * user's flood of queries a resolver never answers leaves the others three quarters of the
 * budget.
 *
 * With a policy of names (an allow list that names hosts: egress.c), the relay answers the rest
 * itself: a name not on the list, or not of class IN, is REFUSED; AAAA, SVCB and HTTPS questions
 * of a listed name get an empty NOERROR (sandboxes have no IPv6, and an HTTPS record's address
 * hints would be addresses nobody learned); an A answer's addresses are handed to the policy's
 * learn() before the answer leaves, so the sandbox can reach them by the time it knows them. An
 * answer whose addresses cannot be learned, or that is malformed, becomes SERVFAIL. */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "dns-message.h"

#define DNS_RELAY_INFLIGHT_MAX 32
#define DNS_RELAY_INFLIGHT_TOTAL_MAX 65536
#define DNS_RELAY_TIMEOUT_USEC (5 * UINT64_C(1000000))
#define DNS_RELAY_ADDR "127.0.0.53"
#define DNS_RELAY_LEARN_MAX 32   /* addresses of one answer learned; the rest are not reachable */

typedef struct DnsRelay DnsRelay;

typedef struct DnsRelayPolicy {
        uid_t uid; /* the sandbox's owner: whose budget its queries take */
        /* NULL: every name is relayed (an address list, "all"). Else whether q's name is listed. */
        bool (*listed)(void *userdata, const DnsQuestion *q);
        /* The addresses of an answer to a listed A question, made reachable; < 0: not. */
        int (*learn)(void *userdata, const DnsQuestion *q, const uint32_t *addrs, const uint32_t *ttls, size_t n);
        void *userdata;
} DnsRelayPolicy;

typedef struct DnsRelayCounts {
        uint64_t relayed;   /* sent to the resolver */
        uint64_t answered;  /* answers of the resolver sent back */
        uint64_t refused;   /* names not on the list, answered REFUSED by the relay */
        uint64_t dropped;   /* malformed, over a bound, no answer in time */
} DnsRelayCounts;

/* A name the relay answered with addresses (an A question's, NOERROR, at least one A record),
 * as sent back to the sandbox: inspect's network.names_resolved. */
#define DNS_RELAY_NAMES_MAX 8
#define DNS_RELAY_NAME_ADDRS_MAX 8   /* the first of an answer's addresses kept */
typedef struct DnsRelayName {
        char name[DNS_NAME_TEXT_MAX + 1];
        uint32_t addrs[DNS_RELAY_NAME_ADDRS_MAX]; /* host order */
        unsigned n_addrs;
        uint64_t at;                              /* when, CLOCK_REALTIME seconds */
} DnsRelayName;

/* The bound of queries in flight in all relays (egress_dns_queries, 4..DNS_RELAY_INFLIGHT_TOTAL_MAX). */
void dns_relay_set_budget(unsigned total);
/* Takes listen_fd (non-blocking, bound inside the sandbox's namespace). */
int dns_relay_new(sd_event *e, int listen_fd, const struct sockaddr_in *upstream, const DnsRelayPolicy *policy,
                  DnsRelay **ret);
DnsRelay *dns_relay_free(DnsRelay *r);
/* A changed allow list's policy (sandbox.update): for the questions that come from now on; one
 * in flight is answered under the new list too (its addresses go into the sets of the names
 * that match it now). */
void dns_relay_set_policy(DnsRelay *r, const DnsRelayPolicy *policy);
DnsRelayCounts dns_relay_counts(const DnsRelay *r);
/* The i-th most recent of the last DNS_RELAY_NAMES_MAX distinct names it answered with
 * addresses (a name answered again is the most recent, once); NULL past them. */
const DnsRelayName *dns_relay_name(const DnsRelay *r, size_t i);
