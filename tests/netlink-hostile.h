/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Netlink messages made by a test, and the same message damaged every way a hostile or broken
 * peer could: every truncation, every byte set to each of a few values, every attribute length
 * off by a few. Each damaged copy goes to the test's parse function on a heap copy of exactly its
 * bytes (a read past them is ASan's to see), which answers -EBADMSG, 0 or 1 (anything else, or
 * -EFAULT for a result that lies about what it holds, counts as bad). Header-only, for
 * tests/test-conntrack-parse.c and tests/test-nfqueue-parse.c. */
#pragma once

#include <arpa/inet.h>
#include <errno.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

typedef struct Msg {
        alignas(4) uint8_t buf[512];
        size_t len;
} Msg;

/* buf[0..n), a copy of exactly n bytes on the heap: -EBADMSG, 0, 1, or -EFAULT. */
typedef int (*msg_parse_fn)(const uint8_t *buf, size_t n);

static inline struct nlattr *put(Msg *m, uint16_t type, const void *data, size_t len) {
        struct nlattr *a = (struct nlattr *) (m->buf + m->len);

        a->nla_type = type;
        a->nla_len = (uint16_t) (NLA_HDRLEN + len);
        if (len)
                memcpy(m->buf + m->len + NLA_HDRLEN, data, len);
        m->len += NLA_ALIGN(NLA_HDRLEN + len);
        return a;
}

static inline void put_be32(Msg *m, uint16_t type, uint32_t v) {
        v = htonl(v);
        put(m, type, &v, sizeof(v));
}

static inline void put_be16(Msg *m, uint16_t type, uint16_t v) {
        v = htons(v);
        put(m, type, &v, sizeof(v));
}

static inline void end(Msg *m, struct nlattr *a) {
        a->nla_len = (uint16_t) (m->buf + m->len - (uint8_t *) a);
}

static inline bool hostile_sane(int r) {
        return r == -EBADMSG || r == 0 || r == 1;
}

static inline unsigned hostile_bytes(const Msg *good, msg_parse_fn parse) {
        static const uint8_t values[] = { 0x00, 0x01, 0x03, 0x04, 0x05, 0x7f, 0x80, 0xfe, 0xff };
        unsigned bad = 0;

        for (size_t i = 0; i < good->len; i++)
                for (size_t v = 0; v < sizeof(values); v++) {
                        Msg m = *good;
                        m.buf[i] = values[v];
                        bad += !hostile_sane(parse(m.buf, m.len));
                }
        return bad;
}

/* Each attribute's length (every 16-bit field at a 4-byte boundary past the headers) off by -5..+5. */
static inline unsigned hostile_lengths(const Msg *good, msg_parse_fn parse) {
        unsigned bad = 0;

        for (size_t i = NLMSG_LENGTH(sizeof(struct nfgenmsg)); i + 2 <= good->len; i += 4)
                for (int d = -5; d <= 5; d++) {
                        Msg m = *good;
                        uint16_t len;
                        memcpy(&len, m.buf + i, 2);
                        len = (uint16_t) (len + d);
                        memcpy(m.buf + i, &len, 2);
                        bad += !hostile_sane(parse(m.buf, m.len));
                }
        return bad;
}

/* Cut with the header's length left as it was (a message longer than what was read: refused),
 * and with it cut too (a short message: a sane result). */
static inline unsigned hostile_truncations(const Msg *good, msg_parse_fn parse) {
        unsigned bad = 0;

        for (size_t n = 0; n < good->len; n++) {
                Msg m = *good;
                struct nlmsghdr *nh = (struct nlmsghdr *) m.buf;
                bad += n < nh->nlmsg_len && parse(m.buf, n) != -EBADMSG;
                if (n >= sizeof(*nh)) {
                        nh->nlmsg_len = (uint32_t) n;
                        bad += !hostile_sane(parse(m.buf, n));
                }
        }
        return bad;
}
