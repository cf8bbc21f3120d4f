/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* SNI matching of egress names: an allow entry {"name": "*.example.com", "match": "sni"}
 * (docs/protocol.md, "Egress by name, matched on SNI"). A name's address may be shared with sites
 * that are not allowed (a CDN): such an entry admits a TCP connection only when the name the
 * client asks for in its first bytes is allowed, not every connection to the address.
 *
 * Without terminating TLS, and out of the way once a connection is admitted: the sandbox's chain
 * marks its new TCP connections to an address of such a name's set (on 80 and 443, or the
 * entry's port) as being checked (EGRESS_CT_SNI_CHECKING) and accepts them on to the table
 * EGRESS_SNI_TABLE, whose chain hands them to the daemon's netfilter queue (EGRESS_SNI_QUEUE,
 * host/nfqueue.h; xtables' NFQUEUE target, which kernels without nft_queue have). The daemon lets the handshake
 * through, holds the segments that carry bytes (the kernel keeps them until a verdict) and reads
 * the name of the TLS ClientHello or HTTP/1 request they start with (core/tls-hello.h, at most
 * TLS_HELLO_PEEK_MAX bytes, in as many segments as it takes, for at most EGRESS_SNI_PEEK_USEC).
 * It admits the connection when an entry with match sni names it, allows that port, and its set
 * holds the destination (the address came from resolving an allowed name): the held segments go
 * on, the first marking the connection admitted (EGRESS_CT_SNI_ADMITTED), and from then on the
 * kernel forwards it as any other, the daemon never sees a packet of it again, and it outlives
 * the daemon. Anything else is refused: the held segments are dropped, the connection marked
 * refused (EGRESS_CT_SNI_REFUSED) and the program reset (the chain's "reject with tcp reset"):
 * no name, another name, Encrypted Client Hello, bytes past the bound or the time. The
 * destination then saw a TCP handshake and not one byte.
 *
 * Fail-closed: without the daemon (between two daemons) the queue has no listener and the
 * kernel drops what is being checked; the program sends it again, to the next daemon.
 *
 * Bounds: EGRESS_SNI_CONNS_MAX connections being checked in all, a quarter of that per sandbox
 * and no more than its egress_connections; a check holds at most 16 KiB and SNI_HELD_MAX
 * segments. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "context.h"
#include "egress-types.h"
#include "nftables.h"
#include "proto.h"

#define EGRESS_SNI_CONNS_MAX 1024
#define EGRESS_SNI_PEEK_USEC (5 * UINT64_C(1000000))
/* The queue's number, in the daemon's network namespace (one daemon gives egress there). */
#define EGRESS_SNI_QUEUE 23504
#define EGRESS_SNI_TABLE_NAME "sandboxd_sni"
#define EGRESS_SNI_TABLE "ip " EGRESS_SNI_TABLE_NAME

typedef struct EgressSni EgressSni;

/* The queue bound, in our network namespace (-EBUSY when another process holds it), and the table
 * EGRESS_SNI_TABLE that hands it what is being checked made anew (to know it can be, and for the
 * sandboxes taken back running). The table is there only while a sandbox has a match-sni entry
 * (and some seconds after): its presence alone makes every egress create slower. */
int egress_sni_new(Context *m, Nftables *nft, EgressSni **ret);
/* The table gone (here: a commit that waits for RCU grace periods). */
void egress_sni_table_remove(Nftables *nft);
/* The same in a child of the daemon (a ChildJobSpec's fn, egress-sni-child.c): 0, or 1. */
int egress_sni_table_remove_child(void *arg, int report_fd);
/* At the daemon's end: the table removed too, unless a sandbox left running needs it. */
EgressSni *egress_sni_free(EgressSni *s);
/* n's connections are checked (n has a match-sni entry, or is about to be given one): the table
 * made first if it is not there, so call it before the rules that send to it are committed. */
int egress_sni_watch(EgressSni *s, SandboxNet *n);
/* n detached, or its list left without a match-sni entry: its checks dropped, and no more taken;
 * the table removed (by a child) some seconds after the last sandbox watched went. */
void egress_sni_forget(EgressSni *s, const SandboxNet *n);
/* n left to the next daemon: its checks dropped; the table stays for it. */
void egress_sni_keep(EgressSni *s, const SandboxNet *n);
/* The sandboxes taken back running are watched: the table goes at once unless one of them needs it. */
void egress_sni_restored(EgressSni *s);
/* After a new allow list (egress_update()): n's admitted connections that it no longer admits
 * (their name, port and destination checked again; a name this daemon did not see admitted, by
 * the daemon before it, counts as not admitted) are cut (their conntrack entries deleted, so
 * that the chain resets them): how many, or < 0. */
int egress_sni_recheck(EgressSni *s, const SandboxNet *n);

/* inspect's network.sni: connections being checked, admitted and refused; NULL without a match-sni
 * entry. */
json_object *egress_sni_state_json(const EgressSni *s, const SandboxNet *n);
