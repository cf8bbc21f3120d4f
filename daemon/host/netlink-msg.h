/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One netlink request built in place in a fixed buffer: a header, a family's own header
 * (nfgenmsg for netfilter's subsystems, ifinfomsg or ifaddrmsg for rtnetlink), attributes,
 * nests; and the messages of a datagram the kernel sent, one after the other. Every append checks
 * the room left (-ENOBUFS), and every message read lies within what was received. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <linux/netlink.h>

typedef struct NlMsg {
        union {
                struct nlmsghdr nh;
                char buf[1024];
        };
} NlMsg;

/* The header alone (NLM_F_REQUEST added to flags); the family's header follows by nlm_reserve(). */
void nlm_init_header(NlMsg *m, uint16_t type, uint16_t flags, uint32_t seq);
/* The header and an nfgenmsg: type is (subsystem << 8 | message); res_id (an nfqueue's number, a
 * batch's subsystem) in host order. */
void nlm_init(NlMsg *m, uint16_t type, uint16_t flags, uint32_t seq, uint8_t family, uint16_t res_id);
/* len bytes, zeroed, at the end (a family's header): NULL when they do not fit. */
void *nlm_reserve(NlMsg *m, size_t len);
int nlm_put(NlMsg *m, uint16_t type, const void *data, size_t len);
int nlm_put_str(NlMsg *m, uint16_t type, const char *s);
int nlm_put_be32(NlMsg *m, uint16_t type, uint32_t v);
int nlm_put_be16(NlMsg *m, uint16_t type, uint16_t v);
/* A nest of type as given (netfilter's want NLA_F_NESTED in it, rtnetlink's take it bare), closed
 * by nlm_nest_end(); NULL when it does not fit. */
struct nlattr *nlm_nest(NlMsg *m, uint16_t type);
void nlm_nest_end(NlMsg *m, struct nlattr *a);

/* Sends req[0..len) (requests of which one, of sequence number seq, asks NLM_F_ACK) to the kernel
 * on fd and reads until that one's ack: 0, the first error the kernel sends back (-errno), or
 * -errno of the socket (a receive timeout set on fd bounds the wait). */
int nlm_send_ack(int fd, const void *req, size_t len, uint32_t seq);

/* The message at *off of buf[0..n), whole, *off moved past it and its padding; NULL at the end,
 * or at a message that does not fit (which ends the datagram too). buf is 4-byte aligned. */
struct nlmsghdr *nlm_next(void *buf, size_t n, size_t *off);
/* The attributes of data[0..len) by type, for types <= max (the last of a type wins; tb zeroed
 * first); an attribute whose length does not fit is -EBADMSG. */
int nlm_attrs_parse(const void *data, size_t len, const struct nlattr **tb, unsigned max);
