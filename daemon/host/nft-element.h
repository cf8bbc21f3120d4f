/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One element of an nftables set, looked up in the kernel: a single NFT_MSG_GETSETELEM over a
 * NETLINK_NETFILTER socket of its own (no library, no cache of the ruleset: libnftables' `get
 * element` first lists the table, which grows with every sandbox's sets; this costs one round
 * trip to the kernel, which answers as it reads the request). What the sets are is egress.c's. */
#pragma once

#include <stdint.h>

/* Whether the set `set` of the table `table` (family inet) holds the IPv4 address addr (host
 * order) now: 1, 0 (not there, or its timeout ran out; no such set or table), or -errno. */
int nft_set_has_ipv4(const char *table, const char *set, uint32_t addr);
