/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The nftables text of egress (egress-rules.h). */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "egress-rules.h"
#include "egress-spec.h"
#include "util.h"
#include "veth.h"

void nft_text_add(NftText *t, const char *fmt, ...) {
        va_list ap;
        int n;

        for (;;) {
                va_start(ap, fmt);
                n = vsnprintf(t->data ? t->data + t->size : NULL, t->data ? t->alloc - t->size : 0, fmt, ap);
                va_end(ap);
                if (n < 0) {
                        t->failed = true;
                        return;
                }
                if (t->data && t->size + (size_t) n < t->alloc) {
                        t->size += (size_t) n;
                        return;
                }
                size_t want = t->alloc ? t->alloc * 2 : 4096;
                while (want < t->size + (size_t) n + 1)
                        want *= 2;
                char *d = realloc(t->data, want);
                if (!d) {
                        t->failed = true;
                        return;
                }
                t->data = d;
                t->alloc = want;
        }
}

static void text_add_prefixes(NftText *t, const EgressRule *rules, unsigned n) {
        for (unsigned i = 0; i < n; i++) {
                char p[32];
                nft_text_add(t, "%s%s", i ? ", " : "", ipv4_prefix_format(p, sizeof(p), rules[i].addr, rules[i].len));
        }
}

/* The table, new: what holds for every sandbox. The host's own addresses are set before each
 * sandbox's chain (egress_host_addresses()): they change. */
void egress_rules_table(NftText *t, const EgressRulesConfig *c) {
        char range[32];

        ipv4_prefix_format(range, sizeof(range), c->range_addr, c->range_len);
        nft_text_add(t, "add table " EGRESS_TABLE "\ndelete table " EGRESS_TABLE "\n");
        nft_text_add(t, "table " EGRESS_TABLE " {\n");
        nft_text_add(t, "  set never { type ipv4_addr; flags interval; auto-merge; elements = { ");
        text_add_prefixes(t, c->deny, c->n_deny);
        nft_text_add(t, " }; }\n");
        nft_text_add(t, "  set host { type ipv4_addr; flags interval; auto-merge; }\n");
        nft_text_add(t, "  map out { type ifname : verdict; }\n");
        /* Replies in (those of a connection refused on SNI reset, the far end then knows too);
         * nothing else toward a sandbox (from outside, nor from another sandbox). */
        nft_text_add(t, "  chain forward {\n    type filter hook forward priority filter; policy accept;\n"
                    "    oifname \"" VETH_PREFIX "*\" ct mark & 0x%08x == 0x%08x counter reject with tcp reset\n"
                    "    oifname \"" VETH_PREFIX "*\" ct state established,related accept\n"
                    "    oifname \"" VETH_PREFIX "*\" counter drop\n"
                    "    iifname \"" VETH_PREFIX "*\" meta nfproto ipv6 counter drop\n"
                    "    iifname \"" VETH_PREFIX "*\" ip daddr @never counter reject with icmpx type admin-prohibited\n"
                    "    iifname \"" VETH_PREFIX "*\" ip daddr @host counter reject with icmpx type admin-prohibited\n"
                    "    iifname \"" VETH_PREFIX "*\" iifname vmap @out\n"
                    "    iifname \"" VETH_PREFIX "*\" counter drop\n  }\n",
                 EGRESS_CT_SNI_REFUSED, EGRESS_CT_SNI_REFUSED);
        /* The host itself: nothing from a sandbox (DNS is relayed on the sandbox's own loopback). */
        nft_text_add(t, "  chain input {\n    type filter hook input priority filter; policy accept;\n");
        nft_text_add(t, "    iifname \"" VETH_PREFIX "*\" counter reject with icmpx type admin-prohibited\n");
        nft_text_add(t, "  }\n");
        nft_text_add(t, "  chain postrouting {\n    type nat hook postrouting priority srcnat; policy accept;\n"
                    "    ip saddr %s oifname != \"" VETH_PREFIX "*\" masquerade\n  }\n}\n", range);
}

/* A name's set: the addresses its relay learned, each until its answer's TTL (clamped) runs out. */
void egress_rules_name_set(NftText *t, const char *chain, unsigned i) {
        nft_text_add(t, "add set " EGRESS_TABLE " %s_%u { type ipv4_addr; flags timeout; size %u; }\n", chain, i,
                 EGRESS_NAME_ADDRS_MAX);
}

/* The rules of its match-sni entries (egress-sni.h), after the others. */
static void sni_rules_text(NftText *t, const SandboxNet *n, const char *chain) {
        for (unsigned i = 0; i < n->n_allow; i++) {
                const EgressRule *r = &n->allow[i];
                char ports[16];
                if (!r->sni)
                        continue;
                if (r->port)
                        snprintf(ports, sizeof(ports), "%u", r->port);
                else
                        snprintf(ports, sizeof(ports), "{ 80, 443 }");
                nft_text_add(t, "add rule " EGRESS_TABLE " %s ip daddr @%s_%u tcp dport %s ct mark set ct mark | 0x%08x accept\n",
                         chain, chain, i, ports, EGRESS_CT_SNI_CHECKING);
                /* QUIC's name is encrypted: refused, so that HTTP/3 clients fall back to TCP. */
                nft_text_add(t, "add rule " EGRESS_TABLE " %s ip daddr @%s_%u udp dport %s counter reject with icmpx type "
                            "admin-prohibited\n", chain, chain, i, r->port ? ports : "443");
        }
}

/* The rules of a sandbox's chain (the forward chain's verdict map jumps to it): its connections
 * marked (their SNI flags kept); one refused by SNI matching reset, one admitted on, one being
 * checked on to the table that queues it (egress-sni.h); one it has already goes on (a name's
 * address that timed out included); a new one past its share of the conntrack table, or of TCP
 * connections a second, is refused; then its allow list, the entries matched on SNI last; the
 * rest refused (reset, for the rest of a connection that was cut). */
void egress_rules_chain(NftText *t, const EgressRulesConfig *c, const SandboxNet *n, const char *chain, unsigned slot) {
        nft_text_add(t, "add rule " EGRESS_TABLE " %s ct mark set ct mark & 0x%08x | 0x%08x\n", chain, EGRESS_CT_FLAGS,
                 EGRESS_CT_MARK | slot);
        nft_text_add(t, "add rule " EGRESS_TABLE " %s ct mark & 0x%08x == 0x%08x counter reject with tcp reset\n", chain,
                 EGRESS_CT_SNI_REFUSED, EGRESS_CT_SNI_REFUSED);
        nft_text_add(t, "add rule " EGRESS_TABLE " %s ct mark & 0x%08x == 0x%08x accept\n", chain, EGRESS_CT_SNI_ADMITTED,
                 EGRESS_CT_SNI_ADMITTED);
        /* Being checked, without an entry matched on SNI (an update took the last away, and the
         * table that queues may be gone): reset. */
        nft_text_add(t, "add rule " EGRESS_TABLE " %s ct mark & 0x%08x == 0x%08x %s\n", chain, EGRESS_CT_SNI_CHECKING,
                 EGRESS_CT_SNI_CHECKING, egress_spec_has_sni(n) ? "accept" : "counter reject with tcp reset");
        nft_text_add(t, "add rule " EGRESS_TABLE " %s ct state established,related accept\n", chain);
        nft_text_add(t, "add rule " EGRESS_TABLE " %s ct state new ct count over %" PRIu64 " counter reject\n", chain,
                 c->connections);
        nft_text_add(t, "add rule " EGRESS_TABLE " %s ct state new meta l4proto tcp limit rate over %" PRIu64
                    "/second burst %" PRIu64 " packets counter reject with tcp reset\n",
                 chain, c->connection_rate, c->connection_rate);
        if (n->all)
                nft_text_add(t, "add rule " EGRESS_TABLE " %s accept\n", chain);
        for (unsigned i = 0; i < n->n_allow; i++) {
                const EgressRule *r = &n->allow[i];
                char p[48];
                if (r->sni)
                        continue;
                if (r->name)
                        snprintf(p, sizeof(p), "@%s_%u", chain, i);
                else
                        ipv4_prefix_format(p, sizeof(p), r->addr, r->len);
                if (!r->port)
                        nft_text_add(t, "add rule " EGRESS_TABLE " %s ip daddr %s accept\n", chain, p);
                else if (r->proto)
                        nft_text_add(t, "add rule " EGRESS_TABLE " %s ip daddr %s %s dport %u accept\n", chain, p,
                                 r->proto == IPPROTO_TCP ? "tcp" : "udp", r->port);
                else
                        nft_text_add(t, "add rule " EGRESS_TABLE " %s ip daddr %s meta l4proto { tcp, udp } th dport %u accept\n",
                                 chain, p, r->port);
        }
        sni_rules_text(t, n, chain);
        /* A TCP packet without SYN that conntrack saw nothing of: a connection whose entry was
         * deleted (sandbox.update cut it, as the new list does not take it): reset, so the
         * program learns at once (ECONNRESET) rather than retransmitting into nothing. */
        nft_text_add(t, "add rule " EGRESS_TABLE " %s tcp flags & syn != syn counter reject with tcp reset\n", chain);
        nft_text_add(t, "add rule " EGRESS_TABLE " %s counter reject with icmpx type admin-prohibited\n", chain);
}

/* A sandbox's sets (one per name on its list), its chain, and its place in the verdict map. */
void egress_rules_sandbox(NftText *t, const EgressRulesConfig *c, const SandboxNet *n, const char *chain) {
        for (unsigned i = 0; i < n->n_allow; i++)
                if (n->allow[i].name)
                        egress_rules_name_set(t, chain, i);
        nft_text_add(t, "add chain " EGRESS_TABLE " %s\n", chain);
        egress_rules_chain(t, c, n, chain, n->slot);
        nft_text_add(t, "add element " EGRESS_TABLE " out { \"%s\" : jump %s }\n", n->ifname, chain);
}

/* Elements into the set to_i of chain: in a next daemon's table, what an earlier one's held; in
 * a changed allow list, what the same name's set held before. */
void egress_rules_elements(NftText *t, const char *chain, unsigned to_i, const NftElement *el, size_t n) {
        for (size_t k = 0; k < n; k++) {
                char a[INET_ADDRSTRLEN];
                struct in_addr in = { .s_addr = htonl(el[k].addr) };

                inet_ntop(AF_INET, &in, a, sizeof(a));
                nft_text_add(t, "add element " EGRESS_TABLE " %s_%u { %s timeout %" PRId64 "s }\n", chain, to_i, a,
                         (el[k].expires_ms + 999) / 1000);
        }
}

void egress_rules_learn(NftText *t, const char *chain, unsigned i, uint32_t addr, uint32_t ttl) {
        char a[INET_ADDRSTRLEN];
        struct in_addr in = { .s_addr = htonl(addr) };

        inet_ntop(AF_INET, &in, a, sizeof(a));
        /* Added if missing, then replaced, in one commit: its timeout starts again (an "add" of an
         * element there already leaves its timeout as it was), and it is never missing meanwhile. */
        nft_text_add(t, "add element " EGRESS_TABLE " %s_%u { %s timeout %us }\n", chain, i, a, ttl);
        nft_text_add(t, "delete element " EGRESS_TABLE " %s_%u { %s }\n", chain, i, a);
        nft_text_add(t, "add element " EGRESS_TABLE " %s_%u { %s timeout %us }\n", chain, i, a, ttl);
}

/* One commit: the chain emptied, the sets of the new list's names made (or emptied, where one of
 * that index was there), the old list's other sets removed, the carried addresses put back, the
 * new rules. A batch is all or nothing: on failure the old list stays in force. */
void egress_rules_update(NftText *t, const EgressRulesConfig *c, const SandboxNet *old, const SandboxNet *want,
                         NftElement *const *el, const size_t *n_el) {
        nft_text_add(t, "flush chain " EGRESS_TABLE " %s\n", old->chain);
        for (unsigned j = 0; j < old->n_allow; j++)
                if (old->allow[j].name && !(j < want->n_allow && want->allow[j].name))
                        nft_text_add(t, "delete set " EGRESS_TABLE " %s_%u\n", old->chain, j);
        for (unsigned i = 0; i < want->n_allow; i++) {
                if (!want->allow[i].name)
                        continue;
                if (i < old->n_allow && old->allow[i].name)
                        nft_text_add(t, "flush set " EGRESS_TABLE " %s_%u\n", old->chain, i);
                else
                        egress_rules_name_set(t, old->chain, i);
                egress_rules_elements(t, old->chain, i, el[i], n_el[i]);
        }
        egress_rules_chain(t, c, want, old->chain, old->slot);
}
