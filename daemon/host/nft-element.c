/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An nftables set element looked up over nfnetlink (nft-element.h). */
#include <errno.h>
#include <netinet/in.h> /* before the kernel's headers: its struct in_addr is then not defined twice */
#include <string.h>
#include <sys/socket.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include "macro.h"
#include "nft-element.h"

#define NFT_NAME_MAX 256   /* NFT_TABLE_MAXNAMELEN, NFT_SET_MAXNAMELEN */

typedef struct Request {
        union {
                struct nlmsghdr nh;
                char buf[1024];
        };
} Request;

static void *tail(Request *m) {
        return m->buf + NLMSG_ALIGN(m->nh.nlmsg_len);
}

static int add(Request *m, uint16_t type, const void *data, size_t len) {
        struct nlattr *a = tail(m);
        size_t total = NLMSG_ALIGN(m->nh.nlmsg_len) + NLA_ALIGN(NLA_HDRLEN + len);

        if (total > sizeof(m->buf))
                return -ENOBUFS;
        memset(a, 0, NLA_ALIGN(NLA_HDRLEN + len));
        a->nla_type = type;
        a->nla_len = (uint16_t) (NLA_HDRLEN + len);
        if (len)
                memcpy((char *) a + NLA_HDRLEN, data, len);
        m->nh.nlmsg_len = (uint32_t) total;
        return 0;
}

static struct nlattr *nest(Request *m, uint16_t type) {
        struct nlattr *a = tail(m);
        return add(m, type | NLA_F_NESTED, NULL, 0) < 0 ? NULL : a;
}

static void nest_end(Request *m, struct nlattr *a) {
        a->nla_len = (uint16_t) ((char *) tail(m) - (char *) a);
}

/* GETSETELEM of one element, not a dump: the kernel answers NEWSETELEM with it, or an error. */
static int request_make(Request *m, const char *table, const char *set, uint32_t addr) {
        struct nlattr *elems, *elem, *key;
        uint32_t be = htonl(addr);
        struct nfgenmsg *g;

        if (strnlen(table, NFT_NAME_MAX) >= NFT_NAME_MAX || strnlen(set, NFT_NAME_MAX) >= NFT_NAME_MAX)
                return -ENAMETOOLONG;
        memset(m, 0, sizeof(*m));
        m->nh = (struct nlmsghdr) { .nlmsg_len = NLMSG_LENGTH(sizeof(*g)),
                                    .nlmsg_type = (uint16_t) (NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_GETSETELEM),
                                    .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 1 };
        g = NLMSG_DATA(&m->nh);
        *g = (struct nfgenmsg) { .nfgen_family = NFPROTO_INET, .version = NFNETLINK_V0 };
        if (add(m, NFTA_SET_ELEM_LIST_TABLE, table, strlen(table) + 1) < 0 ||
            add(m, NFTA_SET_ELEM_LIST_SET, set, strlen(set) + 1) < 0 || !(elems = nest(m, NFTA_SET_ELEM_LIST_ELEMENTS)) ||
            !(elem = nest(m, NFTA_LIST_ELEM)) || !(key = nest(m, NFTA_SET_ELEM_KEY)) ||
            add(m, NFTA_DATA_VALUE, &be, sizeof(be)) < 0)
                return -ENOBUFS;
        nest_end(m, key);
        nest_end(m, elem);
        nest_end(m, elems);
        return 0;
}

/* The answer: queued by the kernel before sendto() returned, so it is read without waiting. */
static int answer_read(int fd) {
        union {
                struct nlmsghdr nh;
                char buf[8192];
        } a;
        ssize_t n = recv(fd, &a, sizeof(a), MSG_DONTWAIT);

        if (n < 0)
                return errno == EAGAIN ? -ETIMEDOUT : -errno;
        if ((size_t) n < sizeof(struct nlmsghdr) || a.nh.nlmsg_len > (size_t) n)
                return -EBADMSG;
        if (a.nh.nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *e = NLMSG_DATA(&a.nh);
                if (a.nh.nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
                        return -EBADMSG;
                return e->error == -ENOENT ? 0 : e->error < 0 ? e->error : -EBADMSG;
        }
        return a.nh.nlmsg_type == (NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWSETELEM) ? 1 : -EBADMSG;
}

int nft_set_has_ipv4(const char *table, const char *set, uint32_t addr) {
        struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
        _cleanup_close_ int fd = -EBADF;
        Request m;
        int r;

        r = request_make(&m, table, set, addr);
        if (r < 0)
                return r;
        fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
        if (fd < 0)
                return -errno;
        if (sendto(fd, &m, m.nh.nlmsg_len, 0, (struct sockaddr *) &kernel, sizeof(kernel)) < 0)
                return -errno;
        return answer_read(fd);
}
