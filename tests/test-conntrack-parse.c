/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The parser of ctnetlink's dump messages (daemon/host/conntrack.c, conntrack_message_parse()) on
 * bytes made here: a message as the kernel sends one is read with its tuple, mark and TCP state;
 * a message of another type or family is passed over; then every truncation, every byte set to
 * each of a few values and every attribute length off by a few, each parsed without a crash (run
 * it under ASan to see a read past the end) and never read as an entry that lies about what it
 * holds. Needs nothing of the kernel. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter/nf_conntrack_tcp.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>
#include <netinet/in.h>

#include "conntrack.h"
#include "macro.h"
#include "netlink-hostile.h"
#include "tap.h"

/* An entry as the kernel dumps one: 10.200.0.6:40000 -> 198.51.100.7:80, TCP ESTABLISHED, its
 * reply tuple (NATed), a mark. */
static void message(Msg *m, uint16_t type, uint8_t family) {
        struct nlmsghdr *nh = (struct nlmsghdr *) m->buf;
        struct nfgenmsg *g = NLMSG_DATA(nh);
        struct nlattr *t, *ip, *p, *pi, *tcp;
        uint8_t proto = IPPROTO_TCP, state = TCP_CONNTRACK_ESTABLISHED;

        memset(m, 0, sizeof(*m));
        m->len = NLMSG_LENGTH(sizeof(*g));
        *nh = (struct nlmsghdr) { .nlmsg_type = (uint16_t) (NFNL_SUBSYS_CTNETLINK << 8 | type), .nlmsg_flags = NLM_F_MULTI };
        *g = (struct nfgenmsg) { .nfgen_family = family, .version = NFNETLINK_V0 };
        for (int dir = 0; dir < 2; dir++) {
                t = put(m, (dir ? CTA_TUPLE_REPLY : CTA_TUPLE_ORIG) | NLA_F_NESTED, NULL, 0);
                ip = put(m, CTA_TUPLE_IP | NLA_F_NESTED, NULL, 0);
                put_be32(m, CTA_IP_V4_SRC, dir ? 0xc6336407 : 0x0ac80006);
                put_be32(m, CTA_IP_V4_DST, dir ? 0xc0000201 : 0xc6336407);
                end(m, ip);
                p = put(m, CTA_TUPLE_PROTO | NLA_F_NESTED, NULL, 0);
                put(m, CTA_PROTO_NUM, &proto, 1);
                put_be16(m, CTA_PROTO_SRC_PORT, dir ? 80 : 40000);
                put_be16(m, CTA_PROTO_DST_PORT, dir ? 40000 : 80);
                end(m, p);
                end(m, t);
        }
        pi = put(m, CTA_PROTOINFO | NLA_F_NESTED, NULL, 0);
        tcp = put(m, CTA_PROTOINFO_TCP | NLA_F_NESTED, NULL, 0);
        put(m, CTA_PROTOINFO_TCP_STATE, &state, 1);
        end(m, tcp);
        end(m, pi);
        put_be32(m, CTA_MARK, 0x5bd00001);
        nh->nlmsg_len = (uint32_t) m->len;
}

/* buf[0..n) parsed from a copy of exactly n bytes on the heap: a read past them is ASan's to see. */
static int parse(const uint8_t *buf, size_t n) {
        ConntrackEntry e;
        uint8_t *copy = malloc(n ? n : 1);
        int r;

        if (!copy)
                return -ENOMEM;
        memcpy(copy, buf, n);
        r = conntrack_message_parse(copy, n, &e);
        free(copy);
        return r;
}

int main(void) {
        ConntrackEntry e = {};
        Msg m;
        int r;

        message(&m, IPCTNL_MSG_CT_NEW, AF_INET);
        r = conntrack_message_parse(m.buf, m.len, &e);
        is_int(r, 1, "a dump's message of an IPv4 entry is read (%zu bytes)", m.len);
        ok(e.proto == IPPROTO_TCP && e.src == 0x0ac80006 && e.dst == 0xc6336407 && e.sport == 40000 && e.dport == 80,
           "... its original tuple, not its reply's (%u %08x:%u -> %08x:%u)", e.proto, e.src, e.sport, e.dst, e.dport);
        is_int(e.mark, 0x5bd00001, "... its mark");
        is_int(e.tcp_state, TCP_CONNTRACK_ESTABLISHED, "... its TCP state");
        ok(!conntrack_entry_closed(&e), "... not closed");

        message(&m, IPCTNL_MSG_CT_NEW, AF_INET6);
        is_int(conntrack_message_parse(m.buf, m.len, &e), 0, "an IPv6 entry is passed over");
        message(&m, IPCTNL_MSG_CT_DELETE, AF_INET);
        is_int(conntrack_message_parse(m.buf, m.len, &e), 0, "a message of another type is passed over");

        message(&m, IPCTNL_MSG_CT_NEW, AF_INET);
        is_int(hostile_truncations(&m, parse), 0, "every truncation: refused or read within what is there");
        is_int(hostile_bytes(&m, parse), 0, "every byte set to each of 9 values: no crash, a sane result");
        is_int(hostile_lengths(&m, parse), 0, "every attribute length off by -5..+5: no crash, a sane result");
        return done_testing();
}
