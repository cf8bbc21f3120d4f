/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A sandbox's DNS relay (egress-dns.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "egress-dns.h"
#include "macro.h"

/* An answer of the resolver we take: what one UDP datagram of EDNS0's usual size holds, and more. */
#define DNS_ANSWER_MAX 4096
/* The header and question of a query (a name is at most 255 bytes on the wire), kept for a
 * SERVFAIL of ours. */
#define DNS_QUESTION_WIRE_MAX (DNS_HEADER_SIZE + 255 + 4)

typedef struct DnsQuery DnsQuery;

/* Queries in flight in all relays (the daemon's fds are not the sandboxes' to take), and per
 * owner uid: at most budget_total uids have any, each at least one. */
static unsigned budget_total = 1024, budget_uid = 256, budget_sandbox = DNS_RELAY_INFLIGHT_MAX;
static unsigned inflight_total;
static struct UidInflight {
        uid_t uid;
        unsigned n;
} *inflight_uids;
static unsigned n_inflight_uids;

void dns_relay_set_budget(unsigned total) {
        if (total < 4 || total > DNS_RELAY_INFLIGHT_TOTAL_MAX || inflight_total)
                return;
        free(inflight_uids);
        inflight_uids = NULL;
        budget_total = total;
        budget_uid = total / 4;
        budget_sandbox = budget_uid < DNS_RELAY_INFLIGHT_MAX ? budget_uid : DNS_RELAY_INFLIGHT_MAX;
}

struct DnsRelay {
        sd_event *event;
        int listen_fd;
        sd_event_source *listen_source;
        struct sockaddr_in upstream;
        DnsRelayPolicy policy;
        DnsQuery *queries;
        unsigned n_queries;
        DnsRelayCounts counts;
        DnsRelayName names[DNS_RELAY_NAMES_MAX]; /* most recent first */
        unsigned n_names;
};

struct DnsQuery {
        DnsRelay *relay;
        int fd;                     /* connected to the upstream resolver */
        sd_event_source *io, *timer;
        struct sockaddr_in client;  /* inside the sandbox */
        DnsQuestion question;
        uint8_t wire[DNS_QUESTION_WIRE_MAX];
        DnsQuery *next, *prev;
};

static struct UidInflight *uid_inflight(uid_t uid) {
        for (unsigned i = 0; i < n_inflight_uids; i++)
                if (inflight_uids[i].uid == uid)
                        return &inflight_uids[i];
        return NULL;
}

static bool budget_take(DnsRelay *r) {
        struct UidInflight *u = uid_inflight(r->policy.uid);

        if (r->n_queries >= budget_sandbox || inflight_total >= budget_total || (u && u->n >= budget_uid))
                return false;
        if (!inflight_uids && !(inflight_uids = calloc(budget_total, sizeof(*inflight_uids))))
                return false;
        if (!u) {
                u = &inflight_uids[n_inflight_uids++];
                *u = (struct UidInflight) { .uid = r->policy.uid };
        }
        u->n++;
        r->n_queries++;
        inflight_total++;
        return true;
}

static void budget_give(DnsRelay *r) {
        struct UidInflight *u = uid_inflight(r->policy.uid);

        if (u && --u->n == 0)
                *u = inflight_uids[--n_inflight_uids];
        r->n_queries--;
        inflight_total--;
}

static void query_free(DnsQuery *q) {
        DnsRelay *r = q->relay;

        if (q->prev)
                q->prev->next = q->next;
        else
                r->queries = q->next;
        if (q->next)
                q->next->prev = q->prev;
        budget_give(r);
        sd_event_source_disable_unref(q->io);
        sd_event_source_disable_unref(q->timer);
        safe_close(q->fd);
        free(q);
}

static int on_query_timeout(sd_event_source *src, uint64_t usec, void *userdata) {
        DnsQuery *q = userdata;
        q->relay->counts.dropped++;
        query_free(q);
        return 0;
}

static bool send_to(DnsRelay *r, const uint8_t *buf, size_t n, const struct sockaddr_in *client) {
        return sendto(r->listen_fd, buf, n, MSG_DONTWAIT, (const struct sockaddr *) client, sizeof(*client)) == (ssize_t) n;
}

/* An answer of the relay's own to the query buf (q parsed from it). */
static bool reply_own(DnsRelay *r, const uint8_t *buf, const DnsQuestion *q, uint8_t rcode,
                      const struct sockaddr_in *client) {
        uint8_t out[DNS_QUESTION_WIRE_MAX];
        int n = dns_reply_empty(buf, q, rcode, out, sizeof(out));

        return n > 0 && send_to(r, out, (size_t) n, client);
}

/* The A records of an answer to an A question (at most DNS_RELAY_LEARN_MAX): how many; 0 for
 * another question, another rcode or none; < 0 when the answer is malformed. */
static int answer_addresses(const DnsQuery *q, const uint8_t *buf, size_t n, uint32_t *addrs, uint32_t *ttls) {
        uint8_t rcode;
        int k;

        if (q->question.type != DNS_TYPE_A)
                return 0;
        k = dns_answer_addresses(buf, n, &q->question, &rcode, addrs, ttls, DNS_RELAY_LEARN_MAX);
        if (k < 0)
                return k;
        return rcode != DNS_RCODE_NOERROR ? 0 : k < DNS_RELAY_LEARN_MAX ? k : DNS_RELAY_LEARN_MAX;
}

/* An answer to a listed A question: its addresses (k of them) learned first. */
static bool answer_learned(DnsQuery *q, const uint32_t *addrs, const uint32_t *ttls, int k) {
        DnsRelay *r = q->relay;

        if (k < 0)
                return false;
        return k == 0 || r->policy.learn(r->policy.userdata, &q->question, addrs, ttls, (size_t) k) >= 0;
}

/* A name answered with addresses: first in the relay's names, once (an older answer of it goes). */
static void names_remember(DnsRelay *r, const DnsQuestion *q, const uint32_t *addrs, int k) {
        unsigned i;

        if (k <= 0)
                return;
        for (i = 0; i < r->n_names && strcmp(r->names[i].name, q->name) != 0; i++)
                ;
        if (i == r->n_names && r->n_names < DNS_RELAY_NAMES_MAX)
                r->n_names++;
        if (i == r->n_names)
                i--; /* full: the oldest goes */
        memmove(&r->names[1], &r->names[0], i * sizeof(r->names[0]));
        r->names[0] = (DnsRelayName) { .n_addrs = k < DNS_RELAY_NAME_ADDRS_MAX ? (unsigned) k : DNS_RELAY_NAME_ADDRS_MAX,
                                       .at = (uint64_t) time(NULL) };
        memcpy(r->names[0].name, q->name, sizeof(r->names[0].name));
        memcpy(r->names[0].addrs, addrs, r->names[0].n_addrs * sizeof(addrs[0]));
}

/* The answer, from the resolver the socket is connected to (the kernel drops any other's): back
 * to the client that asked, if it is an answer to its query. */
static int on_answer(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        DnsQuery *q = userdata;
        DnsRelay *r = q->relay;
        uint8_t buf[DNS_ANSWER_MAX];
        uint32_t addrs[DNS_RELAY_LEARN_MAX], ttls[DNS_RELAY_LEARN_MAX];
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        int k;

        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n < DNS_HEADER_SIZE || !(buf[2] & 0x80) || ((uint16_t) (buf[0] << 8 | buf[1])) != q->question.id) {
                r->counts.dropped++;
                query_free(q);
                return 0;
        }
        k = answer_addresses(q, buf, (size_t) n, addrs, ttls);
        if (r->policy.listed && q->question.type == DNS_TYPE_A && !answer_learned(q, addrs, ttls, k)) {
                reply_own(r, q->wire, &q->question, DNS_RCODE_SERVFAIL, &q->client);
                r->counts.dropped++;
        } else if (send_to(r, buf, (size_t) n, &q->client)) {
                r->counts.answered++;
                names_remember(r, &q->question, addrs, k);
        } else
                r->counts.dropped++;
        query_free(q);
        return 0;
}

static int query_start(DnsRelay *r, const uint8_t *buf, size_t n, const DnsQuestion *question,
                       const struct sockaddr_in *client) {
        DnsQuery *q;
        int k;

        if (question->end > sizeof(q->wire) || !budget_take(r))
                return -EBUSY;
        q = calloc(1, sizeof(*q));
        if (!q) {
                budget_give(r);
                return -ENOMEM;
        }
        *q = (DnsQuery) { .relay = r, .client = *client, .question = *question, .fd = -EBADF, .next = r->queries };
        memcpy(q->wire, buf, question->end);
        if (r->queries)
                r->queries->prev = q;
        r->queries = q;
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

/* One datagram from inside: a query relayed or answered here, or dropped. */
static void on_datagram(DnsRelay *r, const uint8_t *buf, size_t n, const struct sockaddr_in *client) {
        DnsQuestion q;

        if (dns_query_parse(buf, n, &q) < 0) {
                r->counts.dropped++;
                return;
        }
        if (r->policy.listed) {
                if (q.class != DNS_CLASS_IN || !r->policy.listed(r->policy.userdata, &q)) {
                        if (reply_own(r, buf, &q, DNS_RCODE_REFUSED, client))
                                r->counts.refused++;
                        else
                                r->counts.dropped++;
                        return;
                }
                if (q.type == DNS_TYPE_AAAA || q.type == DNS_TYPE_SVCB || q.type == DNS_TYPE_HTTPS) {
                        if (!reply_own(r, buf, &q, DNS_RCODE_NOERROR, client))
                                r->counts.dropped++;
                        return;
                }
        }
        if (query_start(r, buf, n, &q, client) < 0)
                r->counts.dropped++;
        else
                r->counts.relayed++;
}

/* At most a few datagrams per wakeup, so that one sandbox's flood does not hold the loop. */
static int on_query(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        DnsRelay *r = userdata;

        for (int i = 0; i < 16; i++) {
                uint8_t buf[DNS_QUERY_MAX + 1];
                struct sockaddr_in client;
                socklen_t len = sizeof(client);
                ssize_t n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *) &client, &len);

                if (n < 0)
                        return 0;
                if ((size_t) n > DNS_QUERY_MAX || len != sizeof(client) || client.sin_family != AF_INET) {
                        r->counts.dropped++;
                        continue;
                }
                on_datagram(r, buf, (size_t) n, &client);
        }
        return 0;
}

int dns_relay_new(sd_event *e, int listen_fd, const struct sockaddr_in *upstream, const DnsRelayPolicy *policy,
                  DnsRelay **ret) {
        DnsRelay *r = calloc(1, sizeof(*r));
        int k;

        if (!r) {
                safe_close(listen_fd);
                return -ENOMEM;
        }
        *r = (DnsRelay) { .event = e, .listen_fd = listen_fd, .upstream = *upstream, .policy = *policy };
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

void dns_relay_set_policy(DnsRelay *r, const DnsRelayPolicy *policy) {
        if (r)
                r->policy = *policy;
}

DnsRelayCounts dns_relay_counts(const DnsRelay *r) {
        return r ? r->counts : (DnsRelayCounts) {};
}

const DnsRelayName *dns_relay_name(const DnsRelay *r, size_t i) {
        return r && i < r->n_names ? &r->names[i] : NULL;
}
