/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The nftables text of egress (daemon/sandbox/egress-rules.c), held to its golden text without
 * root or nftables: the table, a sandbox's chain with every kind of entry (its SNI flags kept,
 * refused reset, admitted on, being checked on only with a match-sni entry, its shares, its list,
 * match-sni entries last with QUIC refused, the rest refused), its sets and its map element, a
 * live update carrying a name's addresses, and an answer's address learned. t-egress and the VM
 * show that nftables takes it and that it holds. */
#include <json-c/json.h>
#include <string.h>

#include "egress-rules.h"
#include "egress-spec.h"
#include "tap.h"

static const EgressRule deny[] = {
        { .addr = 0x0a000000, .len = 8 },   /* 10.0.0.0/8 */
        { .addr = 0xa9fe0000, .len = 16 },  /* 169.254.0.0/16 */
};
static const EgressRulesConfig cfg = { .range_addr = 0x0ac80000, .range_len = 16, .deny = deny, .n_deny = 2,
                                       .connections = 2048, .connection_rate = 100 };

static void spec(const char *text, SandboxNet *n) {
        EgressSpecLimits lim = { .available = true, .sni = true };
        json_object *v = json_tokener_parse(text);
        ProtoError err = {};

        memset(n, 0, sizeof(*n));
        if (egress_spec_parse(&lim, v, n, &err) < 0)
                diag("spec %s: %s", text, err.message);
        json_object_put(v);
}

#define HEAD(chain, slot) \
        "add rule inet sandboxd " chain " ct mark set ct mark & 0x000f0000 | 0x5bd0000" slot "\n" \
        "add rule inet sandboxd " chain " ct mark & 0x00040000 == 0x00040000 counter reject with tcp reset\n" \
        "add rule inet sandboxd " chain " ct mark & 0x00020000 == 0x00020000 accept\n"
#define SHARES(chain) \
        "add rule inet sandboxd " chain " ct state established,related accept\n" \
        "add rule inet sandboxd " chain " ct state new ct count over 2048 counter reject\n" \
        "add rule inet sandboxd " chain " ct state new meta l4proto tcp limit rate over 100/second burst 100 packets counter " \
        "reject with tcp reset\n"
#define TAIL(chain) \
        "add rule inet sandboxd " chain " tcp flags & syn != syn counter reject with tcp reset\n" \
        "add rule inet sandboxd " chain " counter reject with icmpx type admin-prohibited\n"

int main(void) {
        static SandboxNet n, old, want;
        NftText t = {};

        /* The table. */
        egress_rules_table(&t, &cfg);
        ok(!t.failed, "the table's text");
        static const char table_head[] = "add table inet sandboxd\ndelete table inet sandboxd\ntable inet sandboxd {\n";
        ok(strncmp(t.data, table_head, strlen(table_head)) == 0,
           "... replaces the table there in its one commit");
        ok(strstr(t.data, "  set never { type ipv4_addr; flags interval; auto-merge; elements = { 10.0.0.0/8, 169.254.0.0/16 }; }\n"),
           "... its set never holds egress_deny");
        ok(strstr(t.data, "    oifname \"sx-*\" ct state established,related accept\n    oifname \"sx-*\" counter drop\n"),
           "... nothing toward a sandbox but replies");
        ok(strstr(t.data, "    iifname \"sx-*\" meta nfproto ipv6 counter drop\n"), "... no IPv6 out");
        ok(strstr(t.data, "    iifname \"sx-*\" ip daddr @never counter reject with icmpx type admin-prohibited\n"
                          "    iifname \"sx-*\" ip daddr @host counter reject with icmpx type admin-prohibited\n"
                          "    iifname \"sx-*\" iifname vmap @out\n    iifname \"sx-*\" counter drop\n"),
           "... never, then the host, then each sandbox's chain, then nothing");
        ok(strstr(t.data, "    iifname \"sx-*\" counter reject with icmpx type admin-prohibited\n  }\n"),
           "... the host's input refused to sandboxes");
        ok(strstr(t.data, "    ip saddr 10.200.0.0/16 oifname != \"sx-*\" masquerade\n  }\n}\n"), "... egress_range masqueraded out");
        free(t.data);

        /* A chain with every kind of entry. */
        spec("{\"egress\":{\"allow\":[\"203.0.113.0/24\",\"198.51.100.7:443/tcp\",\"pypi.org:53\",{\"name\":\"good.test\","
             "\"match\":\"sni\"},{\"name\":\"*.cdn.test\",\"port\":8443,\"match\":\"sni\"},\"*.github.com\"]}}", &n);
        snprintf(n.ifname, sizeof(n.ifname), "sx-t1");
        n.slot = 5;
        t = (NftText) {};
        egress_rules_sandbox(&t, &cfg, &n, "sx_t1");
        is_str(t.data,
               "add set inet sandboxd sx_t1_2 { type ipv4_addr; flags timeout; size 1024; }\n"
               "add set inet sandboxd sx_t1_3 { type ipv4_addr; flags timeout; size 1024; }\n"
               "add set inet sandboxd sx_t1_4 { type ipv4_addr; flags timeout; size 1024; }\n"
               "add set inet sandboxd sx_t1_5 { type ipv4_addr; flags timeout; size 1024; }\n"
               "add chain inet sandboxd sx_t1\n"
               HEAD("sx_t1", "5")
               "add rule inet sandboxd sx_t1 ct mark & 0x00010000 == 0x00010000 accept\n"
               SHARES("sx_t1")
               "add rule inet sandboxd sx_t1 ip daddr 203.0.113.0/24 accept\n"
               "add rule inet sandboxd sx_t1 ip daddr 198.51.100.7 tcp dport 443 accept\n"
               "add rule inet sandboxd sx_t1 ip daddr @sx_t1_2 meta l4proto { tcp, udp } th dport 53 accept\n"
               "add rule inet sandboxd sx_t1 ip daddr @sx_t1_5 accept\n"
               "add rule inet sandboxd sx_t1 ip daddr @sx_t1_3 tcp dport { 80, 443 } ct mark set ct mark | 0x00010000 accept\n"
               "add rule inet sandboxd sx_t1 ip daddr @sx_t1_3 udp dport 443 counter reject with icmpx type admin-prohibited\n"
               "add rule inet sandboxd sx_t1 ip daddr @sx_t1_4 tcp dport 8443 ct mark set ct mark | 0x00010000 accept\n"
               "add rule inet sandboxd sx_t1 ip daddr @sx_t1_4 udp dport 8443 counter reject with icmpx type admin-prohibited\n"
               TAIL("sx_t1")
               "add element inet sandboxd out { \"sx-t1\" : jump sx_t1 }\n",
               "a sandbox's sets, chain and map element: its list in order, match-sni entries last");
        free(t.data);

        /* "all", and no match-sni entry. */
        spec("{\"egress\":\"all\"}", &n);
        t = (NftText) {};
        egress_rules_chain(&t, &cfg, &n, "sx_t2", 12);
        is_str(t.data,
               "add rule inet sandboxd sx_t2 ct mark set ct mark & 0x000f0000 | 0x5bd0000c\n"
               "add rule inet sandboxd sx_t2 ct mark & 0x00040000 == 0x00040000 counter reject with tcp reset\n"
               "add rule inet sandboxd sx_t2 ct mark & 0x00020000 == 0x00020000 accept\n"
               "add rule inet sandboxd sx_t2 ct mark & 0x00010000 == 0x00010000 counter reject with tcp reset\n"
               SHARES("sx_t2")
               "add rule inet sandboxd sx_t2 accept\n"
               TAIL("sx_t2"),
               "\"all\": every new connection within its shares; one still marked as being checked is reset");
        free(t.data);

        /* An update: a name carried to a new index with its addresses, a set no longer named removed. */
        spec("{\"egress\":{\"allow\":[\"a.test\",\"b.test\"]}}", &old);
        snprintf(old.chain, sizeof(old.chain), "sx_t3");
        old.slot = 7;
        spec("{\"egress\":{\"allow\":[\"b.test\",\"192.0.2.1:22/tcp\"]}}", &want);
        NftElement carried[] = { { .addr = 0xc6336409, .expires_ms = 1500 }, { .addr = 0xc633640a, .expires_ms = 60000 } };
        NftElement *el[EGRESS_ALLOW_MAX] = { carried };
        size_t n_el[EGRESS_ALLOW_MAX] = { 2 };
        t = (NftText) {};
        egress_rules_update(&t, &cfg, &old, &want, el, n_el);
        static const char update_head[] = "flush chain inet sandboxd sx_t3\n"
                                          "delete set inet sandboxd sx_t3_1\n"
                                          "flush set inet sandboxd sx_t3_0\n"
                                          "add element inet sandboxd sx_t3_0 { 198.51.100.9 timeout 2s }\n"
                                          "add element inet sandboxd sx_t3_0 { 198.51.100.10 timeout 60s }\n"
                                          HEAD("sx_t3", "7");
        ok(strncmp(t.data, update_head, strlen(update_head)) == 0,
           "an update: the chain emptied, a set no longer named removed, the kept index emptied and given the name's "
           "addresses (time left rounded up), then the rules with the chain's own slot");
        ok(strstr(t.data, "add rule inet sandboxd sx_t3 ip daddr @sx_t3_0 accept\n"
                          "add rule inet sandboxd sx_t3 ip daddr 192.0.2.1 tcp dport 22 accept\n"),
           "... the new list's rules");
        free(t.data);

        /* An answer's address, its timeout started again without a moment missing. */
        t = (NftText) {};
        egress_rules_learn(&t, "sx_t4", 3, 0xc6336407, 300);
        is_str(t.data,
               "add element inet sandboxd sx_t4_3 { 198.51.100.7 timeout 300s }\n"
               "delete element inet sandboxd sx_t4_3 { 198.51.100.7 }\n"
               "add element inet sandboxd sx_t4_3 { 198.51.100.7 timeout 300s }\n",
               "an address learned: added, then replaced, in one commit");
        free(t.data);
        return done_testing();
}
