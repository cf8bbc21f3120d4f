/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A netfilter queue over nfnetlink (nfqueue.h). */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nf_tables_compat.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netfilter/xt_NFQUEUE.h>

#include "log.h"
#include "macro.h"
#include "netlink-msg.h"
#include "nfqueue.h"

#define NFQ_MSG(type) ((uint16_t) (NFNL_SUBSYS_QUEUE << 8 | (type)))
#define NFQ_RCVBUF (4 * 1024 * 1024)

static int config(int fd, uint16_t num, uint32_t seq, uint8_t command, uint32_t maxlen) {
        NlMsg m;
        int r;

        nlm_init(&m, NFQ_MSG(NFQNL_MSG_CONFIG), NLM_F_ACK, seq, AF_UNSPEC, num);
        if (command) {
                struct nfqnl_msg_config_cmd cmd = { .command = command };
                return nlm_put(&m, NFQA_CFG_CMD, &cmd, sizeof(cmd)) < 0 ? -ENOBUFS : nlm_send_ack(fd, &m, m.nh.nlmsg_len, seq);
        }
        struct nfqnl_msg_config_params p = { .copy_range = htonl(NFQ_PACKET_MAX), .copy_mode = NFQNL_COPY_PACKET };
        if ((r = nlm_put(&m, NFQA_CFG_PARAMS, &p, sizeof(p))) < 0 || (r = nlm_put_be32(&m, NFQA_CFG_QUEUE_MAXLEN, maxlen)) < 0 ||
            (r = nlm_put_be32(&m, NFQA_CFG_MASK, NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN)) < 0 ||
            (r = nlm_put_be32(&m, NFQA_CFG_FLAGS, NFQA_CFG_F_GSO)) < 0)
                return r;
        return nlm_send_ack(fd, &m, m.nh.nlmsg_len, seq);
}

int nfqueue_open(uint16_t num, uint32_t maxlen, int *ret_fd) {
        struct timeval tv = { .tv_sec = 2 };
        int one = 1, size = NFQ_RCVBUF, r;
        _cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);

        if (fd < 0)
                return -errno;
        /* Blocking, bounded, for the acks here; the loop reads with MSG_DONTWAIT. */
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
                return -errno;
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size));
        (void) setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof(one));
        if ((r = config(fd, num, 1, NFQNL_CFG_CMD_BIND, 0)) < 0)
                return r;
        if ((r = config(fd, num, 2, 0, maxlen)) < 0)
                return r;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* The rule: one expression, the target NFQUEUE (revision 1: a queue and how many from it). */
static int rule_msg(NlMsg *m, const char *table, const char *chain, uint16_t num) {
        struct xt_NFQ_info_v1 info = { .queuenum = num, .queues_total = 1 };
        char padded[8] = {}; /* XT_ALIGN() of it */
        struct nlattr *exprs, *elem, *data;

        memcpy(padded, &info, sizeof(info));
        nlm_init(m, (uint16_t) (NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWRULE),
                 NLM_F_CREATE | NLM_F_ACK, 2, NFPROTO_IPV4, 0);
        if (nlm_put_str(m, NFTA_RULE_TABLE, table) < 0 || nlm_put_str(m, NFTA_RULE_CHAIN, chain) < 0 ||
            !(exprs = nlm_nest(m, NFTA_RULE_EXPRESSIONS | NLA_F_NESTED)) || !(elem = nlm_nest(m, NFTA_LIST_ELEM | NLA_F_NESTED)) ||
            nlm_put_str(m, NFTA_EXPR_NAME, "target") < 0 || !(data = nlm_nest(m, NFTA_EXPR_DATA | NLA_F_NESTED)) ||
            nlm_put_str(m, NFTA_TARGET_NAME, "NFQUEUE") < 0 || nlm_put_be32(m, NFTA_TARGET_REV, 1) < 0 ||
            nlm_put(m, NFTA_TARGET_INFO, padded, sizeof(padded)) < 0)
                return -ENOBUFS;
        nlm_nest_end(m, data);
        nlm_nest_end(m, elem);
        nlm_nest_end(m, exprs);
        return 0;
}

int nfqueue_nft_rule(const char *table, const char *chain, uint16_t num) {
        struct timeval tv = { .tv_sec = 2 };
        NlMsg begin, rule, end;
        char batch[3 * sizeof(NlMsg)];
        size_t n = 0;
        int r;
        _cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);

        if (fd < 0)
                return -errno;
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
                return -errno;
        nlm_init(&begin, NFNL_MSG_BATCH_BEGIN, 0, 1, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
        nlm_init(&end, NFNL_MSG_BATCH_END, 0, 3, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
        if ((r = rule_msg(&rule, table, chain, num)) < 0)
                return r;
        /* One datagram: the batch's begin, the rule (seq 2, the one acked), its end. */
        for (const NlMsg *const *m = (const NlMsg *const[]) { &begin, &rule, &end, NULL }; *m; m++) {
                memcpy(batch + n, *m, (*m)->nh.nlmsg_len);
                n += NLMSG_ALIGN((*m)->nh.nlmsg_len);
        }
        return nlm_send_ack(fd, batch, n, 2);
}

int nfqueue_message_parse(const void *buf, size_t size, NfqPacket *ret, int *ret_error) {
        const struct nlmsghdr *h = buf;
        const struct nlattr *tb[NFQA_MAX + 1] = {};
        const struct nfqnl_msg_packet_hdr *ph;

        *ret_error = 0;
        if (size < NLMSG_HDRLEN || h->nlmsg_len < NLMSG_HDRLEN || h->nlmsg_len > size)
                return -EBADMSG;
        if (h->nlmsg_type == NLMSG_ERROR) {
                if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr)))
                        return -EBADMSG;
                *ret_error = -((const struct nlmsgerr *) NLMSG_DATA(h))->error;
                return 0;
        }
        if (h->nlmsg_type != NFQ_MSG(NFQNL_MSG_PACKET))
                return 0;
        if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct nfgenmsg)) ||
            nlm_attrs_parse((const char *) h + NLMSG_LENGTH(sizeof(struct nfgenmsg)),
                            h->nlmsg_len - NLMSG_LENGTH(sizeof(struct nfgenmsg)), tb, NFQA_MAX) < 0)
                return -EBADMSG;
        if (!tb[NFQA_PACKET_HDR] || tb[NFQA_PACKET_HDR]->nla_len < NLA_HDRLEN + sizeof(*ph) || !tb[NFQA_PAYLOAD])
                return -EBADMSG;
        ph = (const void *) ((const char *) tb[NFQA_PACKET_HDR] + NLA_HDRLEN);
        *ret = (NfqPacket) { .id = ntohl(ph->packet_id), .hw_protocol = ntohs(ph->hw_protocol),
                             .data = (const uint8_t *) tb[NFQA_PAYLOAD] + NLA_HDRLEN,
                             .len = tb[NFQA_PAYLOAD]->nla_len - NLA_HDRLEN };
        return 1;
}

int nfqueue_read(int fd, void *buf, size_t size, nfqueue_packet_fn fn, void *userdata) {
        ssize_t n = recv(fd, buf, size, MSG_DONTWAIT);

        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        size_t off = 0;
        for (struct nlmsghdr *h; (h = nlm_next(buf, (size_t) n, &off));) {
                NfqPacket p;
                int err, r = nfqueue_message_parse(h, h->nlmsg_len, &p, &err);
                if (r > 0)
                        fn(&p, userdata);
                else if (r < 0 || err)
                        log_debug_errno(r < 0 ? r : -err, "nfqueue: a message of the kernel's: %m");
        }
        return 1;
}

int nfqueue_verdict(int fd, uint16_t num, uint32_t id, uint32_t verdict) {
        struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
        struct nfqnl_msg_verdict_hdr v = { .verdict = htonl(verdict), .id = htonl(id) };
        NlMsg m;
        ssize_t n;

        nlm_init(&m, NFQ_MSG(NFQNL_MSG_VERDICT), 0, 0, AF_UNSPEC, num);
        if (nlm_put(&m, NFQA_VERDICT_HDR, &v, sizeof(v)) < 0)
                return -ENOBUFS;
        do
                n = sendto(fd, &m, m.nh.nlmsg_len, 0, (struct sockaddr *) &kernel, sizeof(kernel));
        while (n < 0 && errno == EINTR);
        return n < 0 ? -errno : 0;
}
