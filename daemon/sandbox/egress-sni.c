/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* SNI matching of egress names: the check of a connection's first bytes (egress-sni.h). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "child-job.h"
#include "conntrack.h"
#include "dns-message.h"
#include "first-bytes.h"
#include "egress-sni.h"
#include "egress-spec.h"
#include "log.h"
#include "macro.h"
#include "nfqueue.h"
#include "nft-element.h"
#include "nftables.h"
#include "tls-hello.h"
#include "util.h"
#include "veth.h"

#define SNI_TABLE_NAME "sandboxd"   /* of family inet */
#define SNI_READ_BATCH 64
#define SNI_BUF_SIZE (NFQ_PACKET_MAX + 4096)
#define SNI_HELD_MAX 48             /* segments of one connection's first bytes */
#define SNI_NAMES_MAX EGRESS_SNI_CONNS_MAX
/* How long after its admission a segment of a connection still unmarked is let on: one queued
 * between the check's verdict and its mark. Past it the ring's entry names a connection of the
 * past, and a segment of its tuple is checked as a first. */
#define SNI_ADMIT_RACE_USEC (2 * UINT64_C(1000000))
/* How long the table outlives the last sandbox with a match-sni entry: the next one made soon
 * after finds it there. */
#define SNI_TABLE_LINGER_USEC (5 * UINT64_C(1000000))

_Static_assert(FIRST_BYTES_MAX == TLS_HELLO_PEEK_MAX, "the check holds what the parser reads at most");

typedef struct SniCheck SniCheck;

/* An admitted connection's name, for egress_sni_recheck(): the last SNI_NAMES_MAX admitted. */
typedef struct SniAdmitted {
        const SandboxNet *net;
        uint32_t saddr, daddr;
        uint16_t sport, dport;
        uint64_t usec;              /* when, CLOCK_MONOTONIC */
        char name[TLS_HELLO_NAME_MAX + 1];
} SniAdmitted;

/* The table EGRESS_SNI_TABLE: there only while a sandbox has a match-sni entry (and
 * SNI_TABLE_LINGER_USEC after), for its presence alone (a second base chain on the forward hook)
 * made every egress create of the daemon 2-5 ms slower. Removed by a child: a base chain's
 * removal waits for RCU grace periods (10-20 ms), which the loop must not. */
typedef enum SniTable {
        SNI_TABLE_NONE,
        SNI_TABLE_UP,
        SNI_TABLE_GOING,            /* the child removing it runs */
} SniTable;

struct EgressSni {
        Context *ctx;
        Nftables *nft;
        SniTable table;
        sd_event_source *linger;    /* up and unused: its removal's timer */
        ChildJob *going;            /* going: the child removing it */
        unsigned n_kept;            /* nets with a match-sni entry left to the next daemon */
        int fd;                     /* the queue */
        sd_event_source *src;
        uint8_t *buf;
        SniCheck *checks;
        unsigned n_checks;
        SandboxNet **nets;          /* attached: whose connections are checked */
        size_t n_nets, n_nets_alloc;
        SniAdmitted *admitted;      /* a ring of SNI_NAMES_MAX */
        size_t n_admitted, next_admitted;
};

/* One TCP segment of a queued IPv4 packet. */
typedef struct SniSegment {
        uint32_t saddr, daddr, seq;
        uint16_t sport, dport;
        uint8_t flags;
        const uint8_t *data;
        size_t len;
} SniSegment;

/* A packet held (no verdict yet): where its bytes start past the first, and how many. */
typedef struct SniHeld {
        uint32_t id, off, len;
} SniHeld;

/* A connection whose first bytes are awaited: its segments held by the kernel until the name
 * they carry is known, then all let go on (admitted) or dropped (refused). */
struct SniCheck {
        EgressSni *sni;
        SandboxNet *net;
        uint32_t saddr, daddr, seq0;  /* seq0: the sequence number of its first byte */
        uint16_t sport, dport;
        FirstBytes *bytes;            /* once it has any */
        SniHeld held[SNI_HELD_MAX];
        unsigned n_held;
        sd_event_source *timer;
        SniCheck *prev, *next;
};

/* ---- the packets ---- */

static uint16_t be16(const uint8_t *p) {
        return (uint16_t) (p[0] << 8 | p[1]);
}

static uint32_t be32(const uint8_t *p) {
        return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 | (uint32_t) p[2] << 8 | p[3];
}

/* An IPv4 TCP segment, not a fragment: 0; else -EBADMSG. */
static int segment_parse(const uint8_t *p, size_t n, SniSegment *s) {
        size_t ihl, total, doff;

        if (n < 20 || p[0] >> 4 != 4 || p[9] != IPPROTO_TCP || (be16(p + 6) & 0x3fff) != 0)
                return -EBADMSG;
        ihl = (size_t) (p[0] & 15) * 4;
        total = be16(p + 2);
        if (total == 0 || total > n) /* a GSO packet's may be 0 */
                total = n;
        if (ihl < 20 || ihl + 20 > total)
                return -EBADMSG;
        doff = (size_t) (p[ihl + 12] >> 4) * 4;
        if (doff < 20 || ihl + doff > total)
                return -EBADMSG;
        *s = (SniSegment) { .saddr = be32(p + 12), .daddr = be32(p + 16), .sport = be16(p + ihl),
                            .dport = be16(p + ihl + 2), .seq = be32(p + ihl + 4), .flags = p[ihl + 13],
                            .data = p + ihl + doff, .len = total - ihl - doff };
        return 0;
}

#define TCP_SYN 0x02
#define TCP_RST 0x04

/* ---- the checks ---- */

static void verdict(EgressSni *s, uint32_t id, uint32_t v) {
        int r = nfqueue_verdict(s->fd, EGRESS_SNI_QUEUE, id, v);
        if (r < 0)
                log_debug_errno(r, "egress: a verdict of the SNI check failed: %m");
}

/* The connection of the segment's tuple marked, before its packet's verdict, so that the rules
 * see the mark as the packet goes on. */
static int mark_add(uint32_t saddr, uint16_t sport, uint32_t daddr, uint16_t dport, uint32_t bits) {
        ConntrackEntry e = { .proto = IPPROTO_TCP, .src = saddr, .dst = daddr, .sport = sport, .dport = dport };
        int r = conntrack_mark_add(&e, bits);

        if (r < 0)
                log_debug_errno(r, "egress: cannot mark a connection checked on SNI: %m");
        return r;
}

static SniCheck *check_free(SniCheck *c) {
        EgressSni *s;

        if (!c)
                return NULL;
        s = c->sni;
        if (c->prev)
                c->prev->next = c->next;
        else
                s->checks = c->next;
        if (c->next)
                c->next->prev = c->prev;
        s->n_checks--;
        sd_event_source_disable_unref(c->timer);
        free(c->bytes);
        free(c);
        return NULL;
}

/* Refused: its segments dropped, but for the last, which goes through the chain again with the
 * connection marked refused: the chain resets it (the program sees ECONNRESET at once); no byte
 * reached the destination. Unmarked (ctnetlink failed), the last is dropped too: sent through
 * the chain again it would only come back here. */
static void check_refuse(SniCheck *c, const char *why, const char *name) {
        char d[INET_ADDRSTRLEN];
        bool marked;

        for (unsigned i = 0; i + 1 < c->n_held; i++)
                verdict(c->sni, c->held[i].id, NF_DROP);
        marked = mark_add(c->saddr, c->sport, c->daddr, c->dport, EGRESS_CT_SNI_REFUSED) >= 0;
        if (c->n_held)
                verdict(c->sni, c->held[c->n_held - 1].id, marked ? NF_REPEAT : NF_DROP);
        c->net->sni_refused++;
        log_debug("egress: %s: connection to %s:%u refused by SNI matching: %s%s%s", c->net->ifname,
                  inet_ntop(AF_INET, &(struct in_addr) { .s_addr = htonl(c->daddr) }, d, sizeof(d)), c->dport, why,
                  name ? ": " : "", name ? name : "");
        check_free(c);
}

static uint64_t sni_now(const EgressSni *s) {
        uint64_t t = 0;

        (void) sd_event_now(s->ctx->event, CLOCK_MONOTONIC, &t);
        return t;
}

static void admitted_add(EgressSni *s, const SniCheck *c, const char *name) {
        SniAdmitted *a = &s->admitted[s->next_admitted];

        *a = (SniAdmitted) { .net = c->net, .saddr = c->saddr, .daddr = c->daddr, .sport = c->sport, .dport = c->dport,
                             .usec = sni_now(s) };
        memcpy(a->name, name, sizeof(a->name));
        s->next_admitted = (s->next_admitted + 1) % SNI_NAMES_MAX;
        if (s->n_admitted < SNI_NAMES_MAX)
                s->n_admitted++;
}

/* Admitted: the connection marked admitted (so that the chain takes the rest of it without asking
 * again), then its segments go on in their order. */
static void check_admit(SniCheck *c, const char *name) {
        SniHeld *order[SNI_HELD_MAX];
        unsigned n = 0;

        /* Unmarked, its segments would come back here one by one: refused instead. */
        if (mark_add(c->saddr, c->sport, c->daddr, c->dport, EGRESS_CT_SNI_ADMITTED) < 0) {
                check_refuse(c, "its connection cannot be marked admitted", name);
                return;
        }

        for (unsigned i = 0; i < c->n_held; i++) {
                unsigned k = n++;
                while (k > 0 && order[k - 1]->off > c->held[i].off) {
                        order[k] = order[k - 1];
                        k--;
                }
                order[k] = &c->held[i];
        }
        for (unsigned i = 0; i < n; i++)
                verdict(c->sni, order[i]->id, NF_ACCEPT);
        admitted_add(c->sni, c, name);
        c->net->sni_admitted++;
        check_free(c);
}

/* Whether the set of n's entry i holds addr now; an error is a no. */
static bool set_holds(const SandboxNet *n, unsigned i, uint32_t addr) {
        char set[48];
        int r;

        snprintf(set, sizeof(set), "%s_%u", n->chain, i);
        r = nft_set_has_ipv4(SNI_TABLE_NAME, set, addr);
        if (r < 0)
                log_debug_errno(r, "egress: %s: cannot look %s up: %m", n->ifname, set);
        return r > 0;
}

static bool port_of_entry(const EgressRule *r, uint16_t port) {
        return r->port ? port == r->port : port == 80 || port == 443;
}

/* An entry with match sni that names it, on this port, whose set holds the destination. */
static bool sni_admits(const SandboxNet *n, const char *name, uint32_t addr, uint16_t port) {
        for (unsigned i = 0; i < n->n_allow; i++) {
                const EgressRule *r = &n->allow[i];
                if (r->sni && port_of_entry(r, port) && dns_name_matches(n->names[i], name) && set_holds(n, i, addr))
                        return true;
        }
        return false;
}

static const char *parse_error(int r) {
        switch (r) {
        case -EPROTO:
                return "Encrypted Client Hello hides the name";
        case -ENOENT:
                return "no name (no server_name, no Host)";
        case -E2BIG:
                return "no name in the first 16 KiB";
        default:
                return "neither a TLS ClientHello nor an HTTP/1 request";
        }
}

/* The bytes so far, from the first on without a gap: wait for more, refuse, or admit. */
static void check_decide(SniCheck *c) {
        char name[TLS_HELLO_NAME_MAX + 1];
        TlsHelloKind kind;
        size_t have = c->bytes->contiguous;
        int r;

        if (have == 0)
                return;
        r = tls_hello_first_name(c->bytes->bytes, have, &kind, name);
        if (r == -EAGAIN && have == TLS_HELLO_PEEK_MAX)
                r = -E2BIG;
        if (r == -EAGAIN)
                return;
        if (r < 0)
                check_refuse(c, parse_error(r), NULL);
        else if (!sni_admits(c->net, name, c->daddr, c->dport))
                check_refuse(c, kind == TLS_HELLO_TLS ? "server_name not allowed for this address and port"
                                                      : "Host not allowed for this address and port", name);
        else
                check_admit(c, name);
}

static int on_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        SniCheck *c = userdata;

        /* Nothing held (the program sent nothing) is refused the same: marked, its next packet
         * either way is reset. */
        check_refuse(c, "no name in time", NULL);
        return 0;
}

static SniCheck *check_find(EgressSni *s, const SniSegment *g) {
        for (SniCheck *c = s->checks; c; c = c->next)
                if (c->saddr == g->saddr && c->sport == g->sport && c->daddr == g->daddr && c->dport == g->dport)
                        return c;
        return NULL;
}

/* The sandbox whose /30 the packet comes from, its egress attached by us. */
static SandboxNet *net_of(const EgressSni *s, uint32_t src) {
        for (size_t i = 0; i < s->n_nets; i++)
                if (s->nets[i]->attached && s->nets[i]->addr == src)
                        return s->nets[i];
        return NULL;
}

static unsigned checks_of(const EgressSni *s, const SandboxNet *n) {
        unsigned k = 0;

        for (const SniCheck *c = s->checks; c; c = c->next)
                k += c->net == n;
        return k;
}

/* A check for g's connection, its first byte at seq0; NULL past the bounds. */
static SniCheck *check_new(EgressSni *s, SandboxNet *n, const SniSegment *g, uint32_t seq0) {
        unsigned share = EGRESS_SNI_CONNS_MAX / 4;
        SniCheck *c;

        if (s->ctx->config.egress_connections < share)
                share = (unsigned) s->ctx->config.egress_connections;
        if (s->n_checks >= EGRESS_SNI_CONNS_MAX || checks_of(s, n) >= share || !(c = calloc(1, sizeof(*c))))
                return NULL;
        *c = (SniCheck) { .sni = s, .net = n, .saddr = g->saddr, .daddr = g->daddr, .sport = g->sport,
                          .dport = g->dport, .seq0 = seq0, .next = s->checks };
        if (sd_event_add_time_relative(s->ctx->event, &c->timer, CLOCK_MONOTONIC, EGRESS_SNI_PEEK_USEC, 0, on_timer, c) < 0) {
                free(c);
                return NULL;
        }
        if (c->next)
                c->next->prev = c;
        s->checks = c;
        s->n_checks++;
        return c;
}

/* A segment with bytes: held, its bytes kept, and the check decided if it can be. */
static void check_take(SniCheck *c, const NfqPacket *p, const SniSegment *g) {
        uint32_t off = g->seq - c->seq0;
        int r;

        if (off > INT32_MAX || (g->flags & TCP_SYN)) {
                /* Before the first byte, or data on a SYN (TCP Fast Open): not taken; the
                 * program sends it again, or as a plain segment after the handshake. */
                verdict(c->sni, p->id, NF_DROP);
                return;
        }
        if (!c->bytes && !(c->bytes = calloc(1, sizeof(FirstBytes)))) {
                verdict(c->sni, p->id, NF_DROP);
                return;
        }
        if (c->n_held == SNI_HELD_MAX) {
                verdict(c->sni, p->id, NF_DROP); /* it goes with the rest */
                check_refuse(c, "its first bytes come in too many segments", NULL);
                return;
        }
        r = first_bytes_add(c->bytes, off, g->data, g->len);
        if (r == 0) {
                verdict(c->sni, p->id, NF_DROP); /* a retransmission of bytes held */
                return;
        }
        c->held[c->n_held++] = (SniHeld) { .id = p->id, .off = off, .len = (uint32_t) g->len };
        if (r < 0)
                /* What the check read would not be what the destination reads. */
                check_refuse(c, "its segments say different things for the same bytes", NULL);
        else
                check_decide(c);
}

static const SniAdmitted *admitted_find_tuple(const EgressSni *s, const SandboxNet *n, uint32_t saddr, uint16_t sport,
                                              uint32_t daddr, uint16_t dport) {
        for (size_t i = 0; i < s->n_admitted; i++) {
                const SniAdmitted *a = &s->admitted[i];
                if (a->net == n && a->saddr == saddr && a->daddr == daddr && a->sport == sport && a->dport == dport)
                        return a;
        }
        return NULL;
}

static void packet_take(EgressSni *s, const NfqPacket *p) {
        SniSegment g;
        SandboxNet *n;
        SniCheck *c;

        if (p->hw_protocol != 0x0800 || segment_parse(p->data, p->len, &g) < 0 || !(n = net_of(s, g.saddr))) {
                verdict(s, p->id, NF_DROP);
                return;
        }
        c = check_find(s, &g);
        if (g.len == 0) {
                /* No bytes (the handshake, an ACK, a FIN, a reset): on. A SYN starts the check,
                 * so that its first byte's number is known (again, for a tuple used anew before
                 * the last check of it ended); past the sandbox's share it is dropped. A reset
                 * ends the check, and what it held. */
                if ((g.flags & TCP_SYN) && c && c->n_held == 0)
                        c->seq0 = g.seq + 1;
                else if ((g.flags & TCP_SYN) && !c && !check_new(s, n, &g, g.seq + 1)) {
                        /* Its entry is not in the table yet (nothing to mark): dropped. */
                        n->sni_refused++;
                        verdict(s, p->id, NF_DROP);
                        return;
                } else if ((g.flags & TCP_RST) && c) {
                        for (unsigned i = 0; i < c->n_held; i++)
                                verdict(s, c->held[i].id, NF_DROP);
                        check_free(c);
                }
                verdict(s, p->id, NF_ACCEPT);
                return;
        }
        /* Queued before its connection was marked admitted: on. */
        const SniAdmitted *a = c ? NULL : admitted_find_tuple(s, n, g.saddr, g.sport, g.daddr, g.dport);
        if (a && sni_now(s) - a->usec < SNI_ADMIT_RACE_USEC) {
                verdict(s, p->id, NF_ACCEPT);
                return;
        }
        /* Bytes of a connection whose SYN this daemon did not see (the one before it did, or an
         * update cut it): its first bytes are these. */
        if (!c && !(c = check_new(s, n, &g, g.seq))) {
                n->sni_refused++;
                verdict(s, p->id, mark_add(g.saddr, g.sport, g.daddr, g.dport, EGRESS_CT_SNI_REFUSED) >= 0 ? NF_REPEAT : NF_DROP);
                return;
        }
        check_take(c, p, &g);
}

static void on_packet(const NfqPacket *p, void *userdata) {
        packet_take(userdata, p);
}

static int on_queue(sd_event_source *src, int fd, uint32_t events, void *userdata) {
        EgressSni *s = userdata;

        for (unsigned k = 0; k < SNI_READ_BATCH; k++) {
                int r = nfqueue_read(fd, s->buf, SNI_BUF_SIZE, on_packet, s);
                if (r < 0)
                        log_debug_errno(r, "egress: the SNI queue's read failed: %m");
                if (r <= 0)
                        break;
        }
        return 0;
}

/* ---- the queue and its table ---- */

/* The table that queues what is being checked, made anew (one commit), then its queue rule. Its
 * chain check drops what the rule does not take: were the rule missing, nothing is let through
 * unchecked. After the sandbox's chain (priority filter + 10), which accepts such packets to it. */
static int table_make(Nftables *nft) {
        char text[1024];
        int r;

        snprintf(text, sizeof(text),
                 "add table " EGRESS_SNI_TABLE "\ndelete table " EGRESS_SNI_TABLE "\n"
                 "table " EGRESS_SNI_TABLE " {\n"
                 "  chain forward {\n    type filter hook forward priority filter + 10; policy accept;\n"
                 "    iifname \"" VETH_PREFIX "*\" ct mark & 0x%08x == 0x%08x counter reject with tcp reset\n"
                 "    iifname \"" VETH_PREFIX "*\" ct mark & 0x%08x == 0x%08x goto check\n  }\n"
                 "  chain check {\n    counter drop\n  }\n}\n",
                 0xfff00000u | EGRESS_CT_SNI_REFUSED, EGRESS_CT_MARK | EGRESS_CT_SNI_REFUSED,
                 0xfff00000u | EGRESS_CT_SNI_CHECKING | EGRESS_CT_SNI_ADMITTED | EGRESS_CT_SNI_REFUSED,
                 EGRESS_CT_MARK | EGRESS_CT_SNI_CHECKING);
        r = nftables_run(nft, text, NULL);
        if (r < 0)
                return r;
        /* Before the drop: without NLM_F_APPEND a rule goes first. */
        r = nfqueue_nft_rule(EGRESS_SNI_TABLE_NAME, "check", EGRESS_SNI_QUEUE);
        if (r < 0)
                egress_sni_table_remove(nft);
        return r;
}

void egress_sni_table_remove(Nftables *nft) {
        (void) nftables_run(nft, "delete table " EGRESS_SNI_TABLE "\n", NULL);
}

/* The child removing the table ended. */
static void table_gone(EgressSni *s, const siginfo_t *si) {
        if (si->si_code != CLD_EXITED || si->si_status != 0)
                log_warning("egress: the table " EGRESS_SNI_TABLE " could not be removed: it stays until it is needed "
                            "again (egress creates are slower meanwhile)");
        s->going = child_job_free(s->going);
        s->table = SNI_TABLE_NONE;
}

static void on_table_gone(ChildJob *j, const siginfo_t *si, void *userdata) {
        table_gone(userdata, si);
}

/* Its removal, when it runs, waited for here (at most a commit's wait). */
static void table_gone_wait(EgressSni *s) {
        siginfo_t si = {};

        if (s->table != SNI_TABLE_GOING)
                return;
        (void) child_job_wait(s->going, 0, &si);
        table_gone(s, &si);
}

/* The table removed by a child the loop watches; without a loop or a child, here. */
static void table_remove_start(EgressSni *s) {
        if (s->ctx->event && child_job_start(s->ctx->event, &(ChildJobSpec) { .name = "sandboxd-net", .fn = egress_sni_table_remove_child,
                                                                               .on_exit = on_table_gone, .userdata = s },
                                             &s->going) >= 0) {
                s->table = SNI_TABLE_GOING;
                return;
        }
        egress_sni_table_remove(s->nft);
        s->table = SNI_TABLE_NONE;
}

static int on_linger(sd_event_source *src, uint64_t usec, void *userdata) {
        EgressSni *s = userdata;

        s->linger = sd_event_source_disable_unref(s->linger);
        if (s->table == SNI_TABLE_UP && s->n_nets == 0 && s->n_kept == 0)
                table_remove_start(s);
        return 0;
}

/* No sandbox needs the table any more: removed SNI_TABLE_LINGER_USEC from now, unless one does
 * again by then. */
static void table_unneeded(EgressSni *s) {
        if (s->table != SNI_TABLE_UP || s->n_nets || s->n_kept || s->linger)
                return;
        if (!s->ctx->event ||
            sd_event_add_time_relative(s->ctx->event, &s->linger, CLOCK_MONOTONIC, SNI_TABLE_LINGER_USEC, 0, on_linger, s) < 0)
                table_remove_start(s);
}

/* The table there for a sandbox about to send to it: kept if up, made if not (after its removal
 * ends, if it is going: at most a commit's wait). */
static int table_needed(EgressSni *s) {
        int r;

        s->linger = sd_event_source_disable_unref(s->linger);
        table_gone_wait(s);
        if (s->table == SNI_TABLE_UP)
                return 0;
        r = table_make(s->nft);
        if (r < 0)
                return log_warning_errno(r, "egress: cannot make the table " EGRESS_SNI_TABLE ": %m");
        s->table = SNI_TABLE_UP;
        return 0;
}

int egress_sni_watch(EgressSni *s, SandboxNet *n) {
        int r;

        if (!s)
                return 0;
        for (size_t i = 0; i < s->n_nets; i++)
                if (s->nets[i] == n)
                        return 0;
        if (s->n_nets == s->n_nets_alloc) {
                size_t want = s->n_nets_alloc ? s->n_nets_alloc * 2 : 64;
                SandboxNet **p = reallocarray(s->nets, want, sizeof(*p));
                if (!p)
                        return -ENOMEM;
                s->nets = p;
                s->n_nets_alloc = want;
        }
        if ((r = table_needed(s)) < 0)
                return r;
        s->nets[s->n_nets++] = n;
        return 0;
}

void egress_sni_restored(EgressSni *s) {
        /* Not a sandbox that went: no wait. */
        if (s && s->table == SNI_TABLE_UP && !s->n_nets && !s->n_kept)
                table_remove_start(s);
}

int egress_sni_new(Context *m, Nftables *nft, EgressSni **ret) {
        EgressSni *s = calloc(1, sizeof(*s));
        int r;

        if (!s)
                return -ENOMEM;
        s->ctx = m;
        s->nft = nft;
        s->fd = -EBADF;
        /* Made now, to know it can be, and for the sandboxes taken back running (it replaces the
         * earlier daemon's); removed after the restore if none of them has a match-sni entry. */
        if (!(s->buf = malloc(SNI_BUF_SIZE)) || !(s->admitted = calloc(SNI_NAMES_MAX, sizeof(*s->admitted))))
                r = -ENOMEM;
        else if ((r = nfqueue_open(EGRESS_SNI_QUEUE, EGRESS_SNI_CONNS_MAX * 4, &s->fd)) >= 0 && (r = table_make(nft)) >= 0)
                s->table = SNI_TABLE_UP;
        if (r >= 0 && m->event)
                r = sd_event_add_io(m->event, &s->src, s->fd, EPOLLIN, on_queue, s);
        if (r < 0) {
                egress_sni_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

EgressSni *egress_sni_free(EgressSni *s) {
        if (!s)
                return NULL;
        /* What is held is dropped by the kernel as the queue goes; the program sends it again,
         * to the next daemon. */
        while (s->checks)
                check_free(s->checks);
        s->linger = sd_event_source_disable_unref(s->linger);
        table_gone_wait(s);
        /* Sandboxes left running with a match-sni entry keep it, for the next daemon. */
        if (s->table == SNI_TABLE_UP && !s->n_kept)
                egress_sni_table_remove(s->nft);
        sd_event_source_disable_unref(s->src);
        safe_close(s->fd);
        free(s->buf);
        free(s->admitted);
        free(s->nets);
        free(s);
        return NULL;
}

/* n's checks dropped (what they held with them) and no more taken: whether it was watched. */
static bool net_drop(EgressSni *s, const SandboxNet *n) {
        for (SniCheck *c = s->checks, *next; c; c = next) {
                next = c->next;
                if (c->net != n)
                        continue;
                for (unsigned i = 0; i < c->n_held; i++)
                        verdict(s, c->held[i].id, NF_DROP);
                check_free(c);
        }
        for (size_t i = 0; i < s->n_admitted; i++)
                if (s->admitted[i].net == n)
                        s->admitted[i].net = NULL;
        for (size_t i = 0; i < s->n_nets; i++)
                if (s->nets[i] == n) {
                        s->nets[i] = s->nets[--s->n_nets];
                        return true;
                }
        return false;
}

void egress_sni_forget(EgressSni *s, const SandboxNet *n) {
        if (s && net_drop(s, n))
                table_unneeded(s);
}

void egress_sni_keep(EgressSni *s, const SandboxNet *n) {
        if (s && net_drop(s, n))
                s->n_kept++;
}

int egress_sni_recheck(EgressSni *s, const SandboxNet *n) {
        _cleanup_free_ ConntrackEntry *ct = NULL;
        size_t count;
        int cut = 0, r;

        if (!s)
                return 0;
        r = conntrack_dump(EGRESS_CT_MARK | n->slot | EGRESS_CT_SNI_ADMITTED,
                           ~(EGRESS_CT_FLAGS & ~EGRESS_CT_SNI_ADMITTED), &ct, &count);
        if (r < 0)
                return r;
        for (size_t k = 0; k < count; k++) {
                SniAdmitted *a = (SniAdmitted *) admitted_find_tuple(s, n, ct[k].src, ct[k].sport, ct[k].dst, ct[k].dport);
                /* A name this daemon does not know (admitted by the one before) is cut too. */
                if (a && sni_admits(n, a->name, ct[k].dst, ct[k].dport))
                        continue;
                if (a)
                        a->net = NULL; /* its next packet is checked again, as a first */
                if (conntrack_delete(&ct[k]) >= 0 && !conntrack_entry_closed(&ct[k]))
                        cut++;
        }
        return cut;
}

/* ---- the entry and the rules ---- */

json_object *egress_sni_state_json(const EgressSni *s, const SandboxNet *n) {
        json_object *o;

        if (!egress_spec_has_sni(n))
                return NULL;
        o = json_object_new_object();
        json_object_object_add(o, "checking", json_object_new_int((int) (s ? checks_of(s, n) : 0)));
        json_object_object_add(o, "admitted", json_object_new_int64((int64_t) n->sni_admitted));
        json_object_object_add(o, "refused", json_object_new_int64((int64_t) n->sni_refused));
        return o;
}
