/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One netfilter queue (nfnetlink_queue): packets an nftables rule "queue num N" hands to
 * userspace, each held by the kernel until a verdict names its id. Fail-closed as this module
 * binds it: without a listener, or with the queue full, the kernel drops the packet (no bypass,
 * no fail-open). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The most of a packet a message carries (its copy range). */
#define NFQ_PACKET_MAX 65535

/* A packet as the kernel handed it: its id for the verdict and its network-layer bytes (the IP
 * header first), pointing into the buffer it was parsed from. */
typedef struct NfqPacket {
        uint32_t id;
        uint16_t hw_protocol;   /* ETH_P_IP, ETH_P_IPV6, host order */
        const uint8_t *data;
        size_t len;
} NfqPacket;

/* A NETLINK_NETFILTER socket (read it with MSG_DONTWAIT) bound to queue num of this network namespace, copying
 * whole packets (up to NFQ_PACKET_MAX, GSO kept whole), at most maxlen waiting. -EBUSY: another socket
 * has num; -EPROTONOSUPPORT/-ENOENT: no nfnetlink_queue. */
int nfqueue_open(uint16_t num, uint32_t maxlen, int *ret_fd);
/* Puts first in chain of the nftables table "ip TABLE" a rule that hands every packet to queue num:
 * xtables' NFQUEUE target through nft_compat, which kernels without nft_queue have (nft's own
 * "queue" statement needs nft_queue). The chain's other rules are nft's; the rule is made over
 * nfnetlink here, as nft's language cannot say it. 0, or the kernel's -errno. */
int nfqueue_nft_rule(const char *table, const char *chain, uint16_t num);
/* One message of a receive (buf holds it whole, 4-byte aligned): 1 and *ret for a packet, 0 for
 * another message (an ack, an error: *ret_error its errno, else 0), -EBADMSG for a malformed one.
 * Pure, for tests/test-nfqueue.c's hostile bytes. */
int nfqueue_message_parse(const void *buf, size_t size, NfqPacket *ret, int *ret_error);
/* One datagram read (MSG_DONTWAIT) into buf (NFQ_PACKET_MAX + 4096 bytes holds any): each
 * packet in it to fn, an error the kernel sent logged. 1: one was read; 0: none waits; < 0. */
typedef void (*nfqueue_packet_fn)(const NfqPacket *p, void *userdata);
int nfqueue_read(int fd, void *buf, size_t size, nfqueue_packet_fn fn, void *userdata);
/* The verdict on packet id: NF_ACCEPT, NF_DROP, or NF_REPEAT (the hook's chain again, from its
 * first rule: after the connection's mark changed, say). */
int nfqueue_verdict(int fd, uint16_t num, uint32_t id, uint32_t verdict);
