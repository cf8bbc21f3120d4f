/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The kernel's connection tracking table, read and pruned over ctnetlink (a NETLINK_NETFILTER
 * socket, linux/netfilter/nfnetlink_conntrack.h; no library): in the network namespace the
 * calling thread is in. IPv4 only, as the sandboxes' way out is. Each call opens its socket,
 * sends one request and reads the kernel's answer to its end (a dump is produced as it is read:
 * the kernel never waits on anything else, so the answer is prompt; a receive timeout bounds it
 * all the same). Fails with -EPROTONOSUPPORT where nf_conntrack_netlink is not loaded. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Entries a conntrack_dump() keeps: beyond them it says so (1) rather than growing without end. */
#define CONNTRACK_DUMP_MAX 65536u

/* One tracked connection: its original direction's tuple (as the first packet went), host byte
 * order; ports 0 for a protocol without them. */
typedef struct ConntrackEntry {
        uint8_t proto;
        uint32_t src, dst;
        uint16_t sport, dport;
        uint32_t mark;
        uint8_t tcp_state;   /* TCP: the kernel's TCP_CONNTRACK_* (linux/netfilter/nf_conntrack_tcp.h); else 0 */
} ConntrackEntry;

/* A TCP connection that is over (TIME_WAIT, CLOSE): the kernel keeps its entry a while yet (two
 * minutes, ten seconds), but nft's "ct count" no longer counts it, nor does
 * conntrack_count_by_mark(). */
bool conntrack_entry_closed(const ConntrackEntry *e);

/* Every IPv4 entry whose (mark & mask) == mark (mask 0: all), malloc'ed in *ret (NULL when
 * none). 0, or 1 when there were more than CONNTRACK_DUMP_MAX (the first that many are kept). */
int conntrack_dump(uint32_t mark, uint32_t mask, ConntrackEntry **ret, size_t *ret_n);
/* Forgets the entry of e's original tuple (TCP, UDP, UDP-Lite, SCTP, DCCP: -EOPNOTSUPP for
 * another protocol); -ENOENT when there is none (any more). */
int conntrack_delete(const ConntrackEntry *e);
/* One dump of the entries whose (mark & base_mask) == base (slot = mark & slot_mask; the bits
 * neither mask has, flags, are anything; base has bits of base_mask only, and the masks none in
 * common: else -EINVAL): counts[slot] is how many each slot has that are not closed, for slots <
 * n_counts (zeroed first). */
int conntrack_count_by_mark(uint32_t base, uint32_t base_mask, uint32_t slot_mask, unsigned *counts, size_t n_counts);
/* One message of a dump as the kernel sends it (buf[0..size) holds it whole, 4-byte aligned) as
 * an entry: 1; 0 for a message that is not an IPv4 entry; -EBADMSG for a malformed one. What a
 * dump does with each message, on its own for tests/test-conntrack-parse.c's hostile bytes. */
int conntrack_message_parse(const void *buf, size_t size, ConntrackEntry *ret);
/* The entry of e's original tuple gains the mark bits (the others kept): 0, -ENOENT when there is
 * none. */
int conntrack_mark_add(const ConntrackEntry *e, uint32_t bits);
/* Forgets every entry whose (mark & mask) == mark (a sandbox's, at its end): none is not an
 * error. */
int conntrack_flush_mark(uint32_t mark, uint32_t mask);
