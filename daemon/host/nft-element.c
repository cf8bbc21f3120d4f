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
#include "netlink-msg.h"
#include "nft-element.h"

#define NFT_NAME_MAX 256   /* NFT_TABLE_MAXNAMELEN, NFT_SET_MAXNAMELEN */

/* GETSETELEM of one element, not a dump: the kernel answers NEWSETELEM with it, or an error. */
static int request_make(NlMsg *m, const char *table, const char *set, uint32_t addr) {
        struct nlattr *elems, *elem, *key;
        uint32_t be = htonl(addr);

        if (strnlen(table, NFT_NAME_MAX) >= NFT_NAME_MAX || strnlen(set, NFT_NAME_MAX) >= NFT_NAME_MAX)
                return -ENAMETOOLONG;
        nlm_init(m, (uint16_t) (NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_GETSETELEM), 0, 1, NFPROTO_INET, 0);
        if (nlm_put_str(m, NFTA_SET_ELEM_LIST_TABLE, table) < 0 || nlm_put_str(m, NFTA_SET_ELEM_LIST_SET, set) < 0 ||
            !(elems = nlm_nest(m, NFTA_SET_ELEM_LIST_ELEMENTS | NLA_F_NESTED)) ||
            !(elem = nlm_nest(m, NFTA_LIST_ELEM | NLA_F_NESTED)) || !(key = nlm_nest(m, NFTA_SET_ELEM_KEY | NLA_F_NESTED)) ||
            nlm_put(m, NFTA_DATA_VALUE, &be, sizeof(be)) < 0)
                return -ENOBUFS;
        nlm_nest_end(m, key);
        nlm_nest_end(m, elem);
        nlm_nest_end(m, elems);
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
        NlMsg m;
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
