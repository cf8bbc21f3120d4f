/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A netfilter netlink request built in place (netlink-msg.h). */
#include <errno.h>
#include <string.h>

#include <arpa/inet.h>
#include <linux/netfilter/nfnetlink.h>

#include "netlink-msg.h"

static void *tail(NlMsg *m) {
        return m->buf + NLMSG_ALIGN(m->nh.nlmsg_len);
}

void nlm_init(NlMsg *m, uint16_t type, uint16_t flags, uint32_t seq, uint8_t family, uint16_t res_id) {
        struct nfgenmsg *g;

        memset(m, 0, sizeof(*m));
        m->nh = (struct nlmsghdr) { .nlmsg_len = NLMSG_LENGTH(sizeof(*g)), .nlmsg_type = type,
                                    .nlmsg_flags = (uint16_t) (NLM_F_REQUEST | flags), .nlmsg_seq = seq };
        g = NLMSG_DATA(&m->nh);
        *g = (struct nfgenmsg) { .nfgen_family = family, .version = NFNETLINK_V0, .res_id = htons(res_id) };
}

int nlm_put(NlMsg *m, uint16_t type, const void *data, size_t len) {
        struct nlattr *a = tail(m);
        size_t total = NLMSG_ALIGN(m->nh.nlmsg_len) + NLA_ALIGN(NLA_HDRLEN + len);

        if (total > sizeof(m->buf) || NLA_HDRLEN + len > UINT16_MAX)
                return -ENOBUFS;
        memset(a, 0, NLA_ALIGN(NLA_HDRLEN + len));
        a->nla_type = type;
        a->nla_len = (uint16_t) (NLA_HDRLEN + len);
        if (len)
                memcpy((char *) a + NLA_HDRLEN, data, len);
        m->nh.nlmsg_len = (uint32_t) total;
        return 0;
}

int nlm_put_be32(NlMsg *m, uint16_t type, uint32_t v) {
        uint32_t be = htonl(v);
        return nlm_put(m, type, &be, sizeof(be));
}

int nlm_put_be16(NlMsg *m, uint16_t type, uint16_t v) {
        uint16_t be = htons(v);
        return nlm_put(m, type, &be, sizeof(be));
}

struct nlattr *nlm_nest(NlMsg *m, uint16_t type) {
        struct nlattr *a = tail(m);
        return nlm_put(m, type | NLA_F_NESTED, NULL, 0) < 0 ? NULL : a;
}

void nlm_nest_end(NlMsg *m, struct nlattr *a) {
        a->nla_len = (uint16_t) ((char *) tail(m) - (char *) a);
}
