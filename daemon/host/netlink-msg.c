/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A netlink request built in place, and the messages of a datagram (netlink-msg.h). */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <linux/netfilter/nfnetlink.h>

#include "netlink-msg.h"

static void *tail(NlMsg *m) {
        return m->buf + NLMSG_ALIGN(m->nh.nlmsg_len);
}

void nlm_init_header(NlMsg *m, uint16_t type, uint16_t flags, uint32_t seq) {
        memset(m, 0, sizeof(*m));
        m->nh = (struct nlmsghdr) { .nlmsg_len = NLMSG_HDRLEN, .nlmsg_type = type,
                                    .nlmsg_flags = (uint16_t) (NLM_F_REQUEST | flags), .nlmsg_seq = seq };
}

void *nlm_reserve(NlMsg *m, size_t len) {
        void *p = tail(m);

        if (NLMSG_ALIGN(m->nh.nlmsg_len) + NLMSG_ALIGN(len) > sizeof(m->buf))
                return NULL;
        memset(p, 0, NLMSG_ALIGN(len));
        m->nh.nlmsg_len = (uint32_t) (NLMSG_ALIGN(m->nh.nlmsg_len) + NLMSG_ALIGN(len));
        return p;
}

void nlm_init(NlMsg *m, uint16_t type, uint16_t flags, uint32_t seq, uint8_t family, uint16_t res_id) {
        struct nfgenmsg *g;

        nlm_init_header(m, type, flags, seq);
        g = nlm_reserve(m, sizeof(*g)); /* always fits an empty message */
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

int nlm_put_str(NlMsg *m, uint16_t type, const char *s) {
        return nlm_put(m, type, s, strlen(s) + 1);
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
        return nlm_put(m, type, NULL, 0) < 0 ? NULL : a;
}

void nlm_nest_end(NlMsg *m, struct nlattr *a) {
        a->nla_len = (uint16_t) ((char *) tail(m) - (char *) a);
}

struct nlmsghdr *nlm_next(void *buf, size_t n, size_t *off) {
        struct nlmsghdr *h = (struct nlmsghdr *) ((char *) buf + *off);

        if (*off + NLMSG_HDRLEN > n || h->nlmsg_len < NLMSG_HDRLEN || h->nlmsg_len > n - *off)
                return NULL;
        *off += NLMSG_ALIGN(h->nlmsg_len);
        return h;
}

int nlm_attrs_parse(const void *data, size_t len, const struct nlattr **tb, unsigned max) {
        const char *p = data;

        memset(tb, 0, (max + 1) * sizeof(*tb));
        while (len >= NLA_HDRLEN) {
                const struct nlattr *a = (const struct nlattr *) p;
                size_t step;
                unsigned type = a->nla_type & NLA_TYPE_MASK;

                if (a->nla_len < NLA_HDRLEN || a->nla_len > len)
                        return -EBADMSG;
                if (type <= max)
                        tb[type] = a;
                step = NLA_ALIGN(a->nla_len);
                if (step >= len)
                        break;
                p += step;
                len -= step;
        }
        return 0;
}

int nlm_send_ack(int fd, const void *req, size_t len, uint32_t seq) {
        struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
        char buf[4096] __attribute__((aligned(NLMSG_ALIGNTO)));

        if (sendto(fd, req, len, 0, (struct sockaddr *) &kernel, sizeof(kernel)) < 0)
                return -errno;
        for (;;) {
                ssize_t n = recv(fd, buf, sizeof(buf), 0);
                size_t off = 0;

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                for (struct nlmsghdr *h; (h = nlm_next(buf, (size_t) n, &off));) {
                        const struct nlmsgerr *e = NLMSG_DATA(h);
                        if (h->nlmsg_type != NLMSG_ERROR)
                                continue;
                        if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
                                return -EBADMSG;
                        if (e->error != 0 || h->nlmsg_seq == seq)
                                return e->error;
                }
        }
}
