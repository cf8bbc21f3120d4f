/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A netfilter queue's messages (daemon/host/nfqueue.c) on bytes made here: a packet message as the
 * kernel sends one is read with its id, protocol and packet; an error and an ack are told apart;
 * every truncation, every byte set to each of a few values and every attribute length off by a
 * few, each parsed without a crash (run it under ASan to see a read past the end) and never read
 * as a packet that reaches past the message. Then nfqueue_read() on a datagram of two packet
 * messages whose first has a length that is not a multiple of 4 (the kernel pads it; a loop that
 * took the padding off an int length went below 0 and read on: the bug ASan found). Needs
 * nothing of the kernel. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>

#include "macro.h"
#include "netlink-hostile.h"
#include "nfqueue.h"
#include "tap.h"

/* A packet message with id and a payload of n bytes (0xa0 + i); its nlmsg_len unpadded when
 * the payload is the last attribute and n is odd, as the kernel's own length says. */
static void message(Msg *m, uint32_t id, size_t n) {
        struct nlmsghdr *nh = (struct nlmsghdr *) m->buf;
        struct nfqnl_msg_packet_hdr ph = { .packet_id = htonl(id), .hw_protocol = htons(0x0800), .hook = 2 };
        uint32_t dev = htonl(5);
        uint8_t payload[64];

        memset(m, 0, sizeof(*m));
        for (size_t i = 0; i < n; i++)
                payload[i] = (uint8_t) (0xa0 + i);
        m->len = NLMSG_LENGTH(sizeof(struct nfgenmsg));
        put(m, NFQA_PACKET_HDR, &ph, sizeof(ph));
        put(m, NFQA_IFINDEX_INDEV, &dev, sizeof(dev));
        put(m, NFQA_PAYLOAD, payload, n);
        *nh = (struct nlmsghdr) { .nlmsg_len = (uint32_t) (m->len - (NLA_ALIGN(n) - n)),
                                  .nlmsg_type = NFNL_SUBSYS_QUEUE << 8 | NFQNL_MSG_PACKET };
}

/* On a heap copy of exactly n bytes; a packet read must lie within them. */
static int parse(const uint8_t *buf, size_t n) {
        uint8_t *copy = malloc(n ? n : 1);
        NfqPacket p;
        int err, r;

        if (!copy)
                return -ENOMEM;
        memcpy(copy, buf, n);
        r = nfqueue_message_parse(copy, n, &p, &err);
        if (r == 1 && (p.data < copy || p.data + p.len > copy + n))
                r = -EFAULT;
        free(copy);
        return r;
}

typedef struct Seen {
        unsigned n;
        uint32_t ids[4];
        size_t lens[4];
} Seen;

static void on_packet(const NfqPacket *p, void *userdata) {
        Seen *s = userdata;

        if (s->n < ELEMENTSOF(s->ids)) {
                s->ids[s->n] = p->id;
                s->lens[s->n] = p->len;
        }
        s->n++;
}

int main(void) {
        NfqPacket p = {};
        Msg m, second;
        int err = -1, r;

        message(&m, 7, 41);
        r = nfqueue_message_parse(m.buf, m.len, &p, &err);
        is_int(r, 1, "a packet message is read (%zu bytes)", m.len);
        ok(p.id == 7 && p.hw_protocol == 0x0800 && err == 0, "... its id and protocol (%u, %#x)", p.id, p.hw_protocol);
        ok(p.len == 41 && p.data[0] == 0xa0 && p.data[40] == 0xa0 + 40, "... its packet, all 41 bytes (%zu)", p.len);

        struct nlmsghdr *nh = (struct nlmsghdr *) m.buf;
        Msg e = { .len = NLMSG_LENGTH(sizeof(struct nlmsgerr)) };
        *(struct nlmsghdr *) e.buf = (struct nlmsghdr) { .nlmsg_len = (uint32_t) e.len, .nlmsg_type = NLMSG_ERROR };
        ((struct nlmsgerr *) NLMSG_DATA((struct nlmsghdr *) e.buf))->error = -ENOENT;
        is_int(nfqueue_message_parse(e.buf, e.len, &p, &err), 0, "an error message is no packet");
        is_int(err, ENOENT, "... and says its errno");
        ((struct nlmsgerr *) NLMSG_DATA((struct nlmsghdr *) e.buf))->error = 0;
        nfqueue_message_parse(e.buf, e.len, &p, &err);
        is_int(err, 0, "an ack says no error");
        nh->nlmsg_type = NFNL_SUBSYS_QUEUE << 8 | NFQNL_MSG_CONFIG;
        is_int(nfqueue_message_parse(m.buf, m.len, &p, &err), 0, "a message of another type is passed over");

        message(&m, 7, 41);
        is_int(hostile_truncations(&m, parse), 0, "every truncation: refused or read within what is there");
        is_int(hostile_bytes(&m, parse), 0, "every byte set to each of 9 values: no crash, a sane result");
        is_int(hostile_lengths(&m, parse), 0, "every attribute length off by -5..+5: no crash, a sane result");

        /* One datagram: a message of 41 bytes of packet (its length unpadded), then one of 40. */
        int sv[2];
        alignas(4) uint8_t dgram[1024], buf[1024];
        Seen seen = {};
        message(&second, 8, 40);
        memcpy(dgram, m.buf, m.len); /* m.len is padded: the second starts aligned */
        memcpy(dgram + m.len, second.buf, second.len);
        if (!ok(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) == 0, "a socket pair for the datagrams"))
                return done_testing();
        ok(send(sv[1], dgram, m.len + second.len, 0) == (ssize_t) (m.len + second.len), "a datagram of two messages sent");
        is_int(nfqueue_read(sv[0], buf, sizeof(buf), on_packet, &seen), 1, "nfqueue_read() reads it");
        ok(seen.n == 2 && seen.ids[0] == 7 && seen.lens[0] == 41 && seen.ids[1] == 8 && seen.lens[1] == 40,
           "... both packets, in order, with their lengths (%u seen)", seen.n);
        /* The last message unpadded and the datagram ending there: nothing read past it, though
         * what lies in the buffer past its padding (left there from before) is a message. */
        seen = (Seen) {};
        memcpy(buf + m.len, second.buf, second.len);
        ok(send(sv[1], dgram, ((struct nlmsghdr *) dgram)->nlmsg_len, 0) >= 0, "a datagram ending at an odd length");
        is_int(nfqueue_read(sv[0], buf, sizeof(buf), on_packet, &seen), 1, "nfqueue_read() reads it");
        is_int(seen.n, 1, "... one packet, nothing past its end");
        is_int(nfqueue_read(sv[0], buf, sizeof(buf), on_packet, &seen), 0, "nothing more waits: 0");
        close(sv[0]);
        close(sv[1]);
        return done_testing();
}
