/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Connection tracking over ctnetlink (conntrack.h). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <linux/netfilter/nf_conntrack_tcp.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>
#include <netinet/in.h>

#include "conntrack.h"
#include "macro.h"
#include "netlink-msg.h"

#define CT_MSG(type) ((uint16_t) (NFNL_SUBSYS_CTNETLINK << 8 | (type)))
/* How long one read of the kernel's answer may take before the call gives up (-ETIMEDOUT). */
#define CT_RECV_TIMEOUT_SEC 2
/* A first receive buffer; a bigger datagram (peeked first) grows it. */
#define CT_BUF_SIZE 32768

/* ---- The socket and the kernel's answer ---- */

typedef struct CtSocket {
        int fd;
        uint32_t seq;
        char *buf;
        size_t size;
} CtSocket;

static void ct_close(CtSocket *s) {
        s->fd = safe_close(s->fd);
        free(s->buf);
        s->buf = NULL;
}

/* Blocking, bounded by a receive timeout: every answer here is made by the kernel as it is
 * read, so a call never waits for anything but the kernel itself. */
static int ct_open(CtSocket *ret) {
        struct timeval tv = { .tv_sec = CT_RECV_TIMEOUT_SEC };
        CtSocket s = { .fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER), .seq = 1 };

        if (s.fd < 0)
                return -errno;
        s.size = CT_BUF_SIZE;
        if (setsockopt(s.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 || !(s.buf = malloc(s.size))) {
                int r = s.buf ? -errno : -ENOMEM;
                ct_close(&s);
                return r;
        }
        *ret = s;
        return 0;
}

static int ct_send(CtSocket *s, const NlMsg *m) {
        struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
        ssize_t n = sendto(s->fd, m, m->nh.nlmsg_len, 0, (struct sockaddr *) &kernel, sizeof(kernel));

        if (n < 0)
                return errno == EPROTONOSUPPORT || errno == ECONNREFUSED ? -EPROTONOSUPPORT : -errno;
        return n == (ssize_t) m->nh.nlmsg_len ? 0 : -EIO;
}

/* The next datagram, whole: its size is peeked first and the buffer grown to it. */
static ssize_t ct_recv(CtSocket *s) {
        for (;;) {
                ssize_t n = recv(s->fd, NULL, 0, MSG_PEEK | MSG_TRUNC);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        /* ENOBUFS: the socket overran, some of the answer is lost. */
                        return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
                if ((size_t) n > s->size) {
                        char *b = realloc(s->buf, (size_t) n);
                        if (!b)
                                return -ENOMEM;
                        s->buf = b;
                        s->size = (size_t) n;
                }
                n = recv(s->fd, s->buf, s->size, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
                return n;
        }
}

/* NLMSG_ERROR's errno (0 is an ack), or -EBADMSG when it is too short to say. */
static int msg_error(const struct nlmsghdr *nh) {
        const struct nlmsgerr *e = NLMSG_DATA(nh);

        if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
                return -EBADMSG;
        return e->error > 0 ? -EPROTO : e->error;
}

/* NLMSG_DONE of a dump carries the dump's own error, if it failed midway. */
static int msg_done(const struct nlmsghdr *nh) {
        int err;

        if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(int)))
                return 0;
        memcpy(&err, NLMSG_DATA(nh), sizeof(err));
        return err < 0 ? err : 0;
}

typedef int (*ct_message_fn)(const struct nlmsghdr *nh, void *userdata);

/* Reads the answer to request seq to its end: NLMSG_DONE (a dump), NLMSG_ERROR (an ack, or the
 * error), or a message that is not part of a multi-part answer. Each other message of ours goes
 * to fn. 0, or the first error (the kernel's, or fn's). */
static int ct_read_answer(CtSocket *s, ct_message_fn fn, void *userdata) {
        for (;;) {
                ssize_t n = ct_recv(s);
                bool last = false;
                size_t off = 0;

                if (n < 0)
                        return (int) n;
                if (n == 0)
                        return -ECONNRESET;
                for (struct nlmsghdr *nh; (nh = nlm_next(s->buf, (size_t) n, &off));) {
                        int r;
                        if (nh->nlmsg_seq != s->seq)
                                continue; /* not the answer to our request */
                        if (nh->nlmsg_type == NLMSG_ERROR)
                                return msg_error(nh);
                        if (nh->nlmsg_type == NLMSG_DONE)
                                return msg_done(nh);
                        if (nh->nlmsg_type == NLMSG_OVERRUN)
                                return -EOVERFLOW;
                        if (nh->nlmsg_type == NLMSG_NOOP)
                                continue;
                        if (fn && (r = fn(nh, userdata)) < 0)
                                return r;
                        last = last || !(nh->nlmsg_flags & NLM_F_MULTI);
                }
                if (last)
                        return 0;
        }
}

/* ---- Entries ---- */

static const void *attr_data(const struct nlattr *a, size_t want) {
        return a && a->nla_len >= NLA_HDRLEN + want ? (const char *) a + NLA_HDRLEN : NULL;
}

static int attr_nested(const struct nlattr *a, const struct nlattr **tb, unsigned max) {
        if (!a)
                return -EBADMSG;
        return nlm_attrs_parse((const char *) a + NLA_HDRLEN, a->nla_len - NLA_HDRLEN, tb, max);
}

static bool attr_be32(const struct nlattr *a, uint32_t *ret) {
        const void *d = attr_data(a, sizeof(uint32_t));
        uint32_t v;

        if (!d)
                return false;
        memcpy(&v, d, sizeof(v));
        *ret = ntohl(v);
        return true;
}

static bool attr_be16(const struct nlattr *a, uint16_t *ret) {
        const void *d = attr_data(a, sizeof(uint16_t));
        uint16_t v;

        if (!d)
                return false;
        memcpy(&v, d, sizeof(v));
        *ret = ntohs(v);
        return true;
}

/* CTA_TUPLE_ORIG's addresses, protocol and ports. */
static int tuple_parse(const struct nlattr *tuple, ConntrackEntry *e) {
        const struct nlattr *t[CTA_TUPLE_MAX + 1], *ip[CTA_IP_MAX + 1], *proto[CTA_PROTO_MAX + 1];
        const uint8_t *num;
        int r;

        if ((r = attr_nested(tuple, t, CTA_TUPLE_MAX)) < 0 || (r = attr_nested(t[CTA_TUPLE_IP], ip, CTA_IP_MAX)) < 0 ||
            (r = attr_nested(t[CTA_TUPLE_PROTO], proto, CTA_PROTO_MAX)) < 0)
                return r;
        if (!attr_be32(ip[CTA_IP_V4_SRC], &e->src) || !attr_be32(ip[CTA_IP_V4_DST], &e->dst) ||
            !(num = attr_data(proto[CTA_PROTO_NUM], 1)))
                return -EBADMSG;
        e->proto = *num;
        if (!attr_be16(proto[CTA_PROTO_SRC_PORT], &e->sport))
                e->sport = 0;
        if (!attr_be16(proto[CTA_PROTO_DST_PORT], &e->dport))
                e->dport = 0;
        return 0;
}

/* CTA_PROTOINFO's TCP state, where there is one (0 otherwise). */
static uint8_t tcp_state_parse(const struct nlattr *protoinfo) {
        const struct nlattr *pi[CTA_PROTOINFO_MAX + 1], *tcp[CTA_PROTOINFO_TCP_MAX + 1];
        const uint8_t *state;

        if (!protoinfo || attr_nested(protoinfo, pi, CTA_PROTOINFO_MAX) < 0 || !pi[CTA_PROTOINFO_TCP] ||
            attr_nested(pi[CTA_PROTOINFO_TCP], tcp, CTA_PROTOINFO_TCP_MAX) < 0 ||
            !(state = attr_data(tcp[CTA_PROTOINFO_TCP_STATE], 1)))
                return 0;
        return *state;
}

/* A message of a dump as an entry: 1, or 0 for one that is not an IPv4 entry. */
static int entry_parse(const struct nlmsghdr *nh, ConntrackEntry *ret) {
        const struct nlattr *tb[CTA_MAX + 1];
        const struct nfgenmsg *g = NLMSG_DATA(nh);
        ConntrackEntry e = {};
        size_t hdr = NLMSG_LENGTH(sizeof(*g));
        int r;

        if (nh->nlmsg_type != CT_MSG(IPCTNL_MSG_CT_NEW) || nh->nlmsg_len < hdr || g->nfgen_family != AF_INET)
                return 0;
        r = nlm_attrs_parse((const char *) nh + NLMSG_ALIGN(hdr), nh->nlmsg_len - NLMSG_ALIGN(hdr), tb, CTA_MAX);
        if (r < 0 || (r = tuple_parse(tb[CTA_TUPLE_ORIG], &e)) < 0)
                return r;
        /* The kernel leaves the mark out when it is 0. */
        if (!attr_be32(tb[CTA_MARK], &e.mark))
                e.mark = 0;
        if (e.proto == IPPROTO_TCP)
                e.tcp_state = tcp_state_parse(tb[CTA_PROTOINFO]);
        *ret = e;
        return 1;
}

int conntrack_message_parse(const void *buf, size_t size, ConntrackEntry *ret) {
        const struct nlmsghdr *nh = buf;

        if (size < sizeof(*nh) || nh->nlmsg_len < sizeof(*nh) || nh->nlmsg_len > size)
                return -EBADMSG;
        return entry_parse(nh, ret);
}

/* ---- Dumps ---- */

typedef int (*ct_entry_fn)(const ConntrackEntry *e, void *userdata);

typedef struct DumpWalk {
        uint32_t mark, mask;
        ct_entry_fn fn;
        void *userdata;
} DumpWalk;

static int walk_message(const struct nlmsghdr *nh, void *userdata) {
        DumpWalk *w = userdata;
        ConntrackEntry e;
        int r = entry_parse(nh, &e);

        /* The kernel filtered by mark already (where it can); again here, for one that did not. */
        if (r <= 0 || (e.mark & w->mask) != w->mark)
                return r;
        return w->fn(&e, w->userdata);
}

/* Every IPv4 entry with (mark & mask) == mark, to fn. */
static int ct_walk(uint32_t mark, uint32_t mask, ct_entry_fn fn, void *userdata) {
        _cleanup_(ct_close) CtSocket s = { .fd = -EBADF };
        DumpWalk w = { .mark = mark, .mask = mask, .fn = fn, .userdata = userdata };
        NlMsg m;
        int r;

        if ((r = ct_open(&s)) < 0)
                return r;
        nlm_init(&m, CT_MSG(IPCTNL_MSG_CT_GET), NLM_F_DUMP, s.seq, AF_INET, 0);
        if ((r = nlm_put_be32(&m, CTA_MARK, w.mark)) < 0 || (r = nlm_put_be32(&m, CTA_MARK_MASK, mask)) < 0 ||
            (r = ct_send(&s, &m)) < 0)
                return r;
        return ct_read_answer(&s, walk_message, &w);
}

typedef struct Collect {
        ConntrackEntry *v;
        size_t n, alloc;
        bool truncated;
} Collect;

static int collect_one(const ConntrackEntry *e, void *userdata) {
        Collect *c = userdata;

        if (c->n >= CONNTRACK_DUMP_MAX) {
                c->truncated = true;
                return 0; /* the rest of the answer is still read: the socket is left clean */
        }
        if (c->n == c->alloc) {
                size_t want = c->alloc ? c->alloc * 2 : 64;
                ConntrackEntry *v = reallocarray(c->v, want, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                c->v = v;
                c->alloc = want;
        }
        c->v[c->n++] = *e;
        return 0;
}

int conntrack_dump(uint32_t mark, uint32_t mask, ConntrackEntry **ret, size_t *ret_n) {
        Collect c = {};
        int r = ct_walk(mark, mask, collect_one, &c);

        if (r < 0) {
                free(c.v);
                return r;
        }
        *ret = c.v;
        *ret_n = c.n;
        return c.truncated;
}

typedef struct Buckets {
        uint32_t slot_mask;
        unsigned *counts;
        size_t n;
} Buckets;

bool conntrack_entry_closed(const ConntrackEntry *e) {
        return e->proto == IPPROTO_TCP && (e->tcp_state == TCP_CONNTRACK_TIME_WAIT || e->tcp_state == TCP_CONNTRACK_CLOSE);
}

static int count_one(const ConntrackEntry *e, void *userdata) {
        Buckets *b = userdata;
        size_t slot = e->mark & b->slot_mask;

        if (slot < b->n && !conntrack_entry_closed(e))
                b->counts[slot]++;
        return 0;
}

int conntrack_count_by_mark(uint32_t base, uint32_t base_mask, uint32_t slot_mask, unsigned *counts, size_t n_counts) {
        Buckets b = { .slot_mask = slot_mask, .counts = counts, .n = n_counts };

        if ((base & slot_mask) || (base & ~base_mask) || (base_mask & slot_mask))
                return -EINVAL;
        if (n_counts)
                memset(counts, 0, n_counts * sizeof(*counts));
        return ct_walk(base, base_mask, count_one, &b);
}

/* ---- Deletes ---- */

static bool has_ports(uint8_t proto) {
        return proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_UDPLITE || proto == IPPROTO_SCTP ||
               proto == IPPROTO_DCCP;
}

static int tuple_add(NlMsg *m, const ConntrackEntry *e) {
        struct nlattr *tuple, *ip, *proto;
        int r;

        if (!(tuple = nlm_nest(m, CTA_TUPLE_ORIG | NLA_F_NESTED)) || !(ip = nlm_nest(m, CTA_TUPLE_IP | NLA_F_NESTED)))
                return -ENOBUFS;
        if ((r = nlm_put_be32(m, CTA_IP_V4_SRC, e->src)) < 0 || (r = nlm_put_be32(m, CTA_IP_V4_DST, e->dst)) < 0)
                return r;
        nlm_nest_end(m, ip);
        if (!(proto = nlm_nest(m, CTA_TUPLE_PROTO | NLA_F_NESTED)))
                return -ENOBUFS;
        if ((r = nlm_put(m, CTA_PROTO_NUM, &e->proto, sizeof(e->proto))) < 0 ||
            (r = nlm_put_be16(m, CTA_PROTO_SRC_PORT, e->sport)) < 0 || (r = nlm_put_be16(m, CTA_PROTO_DST_PORT, e->dport)) < 0)
                return r;
        nlm_nest_end(m, proto);
        nlm_nest_end(m, tuple);
        return 0;
}

/* Sends m and reads its ack. */
static int ct_call(NlMsg *m) {
        _cleanup_(ct_close) CtSocket s = { .fd = -EBADF };
        int r;

        if ((r = ct_open(&s)) < 0)
                return r;
        m->nh.nlmsg_seq = s.seq;
        if ((r = ct_send(&s, m)) < 0)
                return r;
        return ct_read_answer(&s, NULL, NULL);
}

int conntrack_delete(const ConntrackEntry *e) {
        NlMsg m;
        int r;

        if (!has_ports(e->proto))
                return -EOPNOTSUPP;
        nlm_init(&m, CT_MSG(IPCTNL_MSG_CT_DELETE), NLM_F_ACK, 0, AF_INET, 0);
        if ((r = tuple_add(&m, e)) < 0)
                return r;
        return ct_call(&m);
}

/* An update (IPCTNL_MSG_CT_NEW without NLM_F_CREATE) of the entry of e's tuple: its mark becomes
 * (mark & ~MASK) ^ MARK, so MARK = MASK = bits sets them. */
int conntrack_mark_add(const ConntrackEntry *e, uint32_t bits) {
        NlMsg m;
        int r;

        if (!has_ports(e->proto))
                return -EOPNOTSUPP;
        nlm_init(&m, CT_MSG(IPCTNL_MSG_CT_NEW), NLM_F_ACK, 0, AF_INET, 0);
        if ((r = tuple_add(&m, e)) < 0 || (r = nlm_put_be32(&m, CTA_MARK, bits)) < 0 ||
            (r = nlm_put_be32(&m, CTA_MARK_MASK, bits)) < 0)
                return r;
        return ct_call(&m);
}

/* IPCTNL_MSG_CT_DELETE without a tuple is a flush, narrowed by CTA_MARK/CTA_MARK_MASK to the
 * connections whose mark is ours where mask has bits. */
int conntrack_flush_mark(uint32_t mark, uint32_t mask) {
        NlMsg m;
        int r;

        nlm_init(&m, CT_MSG(IPCTNL_MSG_CT_DELETE), NLM_F_ACK, 0, AF_INET, 0);
        if ((r = nlm_put_be32(&m, CTA_MARK, mark)) < 0 || (r = nlm_put_be32(&m, CTA_MARK_MASK, mask)) < 0)
                return r;
        r = ct_call(&m);
        return r == -ENOENT ? 0 : r;
}
