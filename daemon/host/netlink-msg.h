/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One netfilter netlink request (nfnetlink: ctnetlink, nfqueue, nf_tables), built in place in a
 * fixed buffer: a header, an nfgenmsg, attributes, nests. Every append checks the room left
 * (-ENOBUFS), so a request can never run past its buffer. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <linux/netlink.h>

typedef struct NlMsg {
        union {
                struct nlmsghdr nh;
                char buf[512];
        };
} NlMsg;

/* type: (subsystem << 8 | message); res_id: the nfgenmsg's resource id (an nfqueue's number),
 * in host order. */
void nlm_init(NlMsg *m, uint16_t type, uint16_t flags, uint32_t seq, uint8_t family, uint16_t res_id);
int nlm_put(NlMsg *m, uint16_t type, const void *data, size_t len);
int nlm_put_be32(NlMsg *m, uint16_t type, uint32_t v);
int nlm_put_be16(NlMsg *m, uint16_t type, uint16_t v);
/* A nest, closed by nlm_nest_end(); NULL when it does not fit. */
struct nlattr *nlm_nest(NlMsg *m, uint16_t type);
void nlm_nest_end(NlMsg *m, struct nlattr *a);
