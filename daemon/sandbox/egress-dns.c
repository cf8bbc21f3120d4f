/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A sandbox's DNS relay (egress-dns.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress-dns.h"
#include "macro.h"

/* A DNS message: a 12-byte header, then at most what fits in one UDP datagram we accept. */
#define DNS_HEADER 12
#define DNS_MAX 4096

typedef struct DnsQuery DnsQuery;

/* Queries in flight in all relays: the daemon's fds are not the sandboxes' to take. */
static unsigned inflight_total;

struct DnsRelay {
        sd_event *event;
        int listen_fd;
        sd_event_source *listen_source;
        struct sockaddr_in upstream;
        DnsQuery *queries;
        unsigned n_queries;
        uint64_t relayed, answered, dropped;
};

struct DnsQuery {
        DnsRelay *relay;
        int fd;                     /* connected to the upstream resolver */
        sd_event_source *io, *timer;
        struct sockaddr_in client;  /* inside the sandbox */
        uint16_t id;
        DnsQuery *next, *prev;
};

static void query_free(DnsQuery *q) {
        DnsRelay *r = q->relay;

        if (q->prev)
                q->prev->next = q->next;
        else
                r->queries = q->next;
        if (q->next)
                q->next->prev = q->prev;
        r->n_queries--;
        inflight_total--;
        sd_event_source_disable_unref(q->io);
        sd_event_source_disable_unref(q->timer);
        safe_close(q->fd);
        free(q);
}

static int on_query_timeout(sd_event_source *src, uint64_t usec, void *userdata) {
        DnsQuery *q = userdata;
        q->relay->dropped++;
        query_free(q);
        return 0;
}

/* The answer, from the resolver the socket is connected to (the kernel drops any other's): back
 * to the client that asked, if it is an answer to its query. */
static int on_answer(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        DnsQuery *q = userdata;
        DnsRelay *r = q->relay;
        uint8_t buf[DNS_MAX];
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n >= DNS_HEADER && (buf[2] & 0x80) && ((uint16_t) (buf[0] << 8 | buf[1])) == q->id &&
            sendto(r->listen_fd, buf, (size_t) n, MSG_DONTWAIT, (struct sockaddr *) &q->client, sizeof(q->client)) == n)
                r->answered++;
        else
                r->dropped++;
        query_free(q);
        return 0;
}

static int query_start(DnsRelay *r, const uint8_t *buf, size_t n, const struct sockaddr_in *client) {
        DnsQuery *q = calloc(1, sizeof(*q));
        int k;

        if (!q)
                return -ENOMEM;
        *q = (DnsQuery) { .relay = r, .client = *client, .id = (uint16_t) (buf[0] << 8 | buf[1]), .next = r->queries };
        if (r->queries)
                r->queries->prev = q;
        r->queries = q;
        r->n_queries++;
        inflight_total++;
        q->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (q->fd < 0 || connect(q->fd, (struct sockaddr *) &r->upstream, sizeof(r->upstream)) < 0 ||
            send(q->fd, buf, n, MSG_DONTWAIT) != (ssize_t) n) {
                k = -errno;
                query_free(q);
                return k;
        }
        if ((k = sd_event_add_io(r->event, &q->io, q->fd, EPOLLIN, on_answer, q)) < 0 ||
            (k = sd_event_add_time_relative(r->event, &q->timer, CLOCK_MONOTONIC, DNS_RELAY_TIMEOUT_USEC, 0,
                                            on_query_timeout, q)) < 0) {
                query_free(q);
                return k;
        }
        return 0;
}

/* A query (QR 0, opcode QUERY) from inside: relayed while fewer than the bound are in flight. At
 * most a few datagrams per wakeup, so that one sandbox's flood does not hold the loop. */
static int on_query(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        DnsRelay *r = userdata;

        for (int i = 0; i < 16; i++) {
                uint8_t buf[DNS_MAX];
                struct sockaddr_in client;
                socklen_t len = sizeof(client);
                ssize_t n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *) &client, &len);

                if (n < 0)
                        return 0;
                if (n < DNS_HEADER || (size_t) n > sizeof(buf) || len != sizeof(client) || client.sin_family != AF_INET ||
                    (buf[2] & 0xf8) != 0 || r->n_queries >= DNS_RELAY_INFLIGHT_MAX ||
                    inflight_total >= DNS_RELAY_INFLIGHT_TOTAL) {
                        r->dropped++;
                        continue;
                }
                if (query_start(r, buf, (size_t) n, &client) < 0)
                        r->dropped++;
                else
                        r->relayed++;
        }
        return 0;
}

int dns_relay_new(sd_event *e, int listen_fd, const struct sockaddr_in *upstream, DnsRelay **ret) {
        DnsRelay *r = calloc(1, sizeof(*r));
        int k;

        if (!r) {
                safe_close(listen_fd);
                return -ENOMEM;
        }
        *r = (DnsRelay) { .event = e, .listen_fd = listen_fd, .upstream = *upstream };
        k = sd_event_add_io(e, &r->listen_source, listen_fd, EPOLLIN, on_query, r);
        if (k < 0) {
                dns_relay_free(r);
                return k;
        }
        *ret = r;
        return 0;
}

DnsRelay *dns_relay_free(DnsRelay *r) {
        if (!r)
                return NULL;
        while (r->queries)
                query_free(r->queries);
        sd_event_source_disable_unref(r->listen_source);
        safe_close(r->listen_fd);
        free(r);
        return NULL;
}

void dns_relay_counts(const DnsRelay *r, uint64_t *ret_relayed, uint64_t *ret_answered, uint64_t *ret_dropped) {
        *ret_relayed = r ? r->relayed : 0;
        *ret_answered = r ? r->answered : 0;
        *ret_dropped = r ? r->dropped : 0;
}
