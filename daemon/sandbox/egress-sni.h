/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* SNI matching of egress names: an allow entry {"name": "*.example.com", "match": "sni"}
 * (docs/protocol.md, "Egress by name, matched on SNI"). A name's address may be shared with sites
 * that are not allowed (a CDN): such an entry admits a TCP connection only when the name the
 * client asks for in its first bytes is allowed, not every connection to the address.
 *
 * Without terminating TLS: the sandbox's nat chain (sx_<id>_sni) redirects its new TCP
 * connections to an address of such a name's set (on 80 and 443, or the entry's port) to one
 * listener of the daemon, in the daemon's network namespace, on a port the kernel picks at each
 * start. The relay takes the connection's original destination (SO_ORIGINAL_DST) and its
 * sandbox (by source address: a /30 each), reads its first bytes (at most TLS_HELLO_PEEK_MAX, for
 * at most EGRESS_SNI_PEEK_USEC), takes the name of its TLS ClientHello or HTTP/1 request
 * (core/tls-hello.h), and admits it when an entry with match sni names it, allows that port, and
 * its set holds the original destination (the address came from resolving an allowed name),
 * and the destination is none that no sandbox reaches (egress_deny, the host's own addresses).
 * Then it connects to the destination, sends the bytes it read, and relays both ways with
 * splice() through a pipe each way until both sides have ended. Anything else is reset (SO_LINGER
 * 0) and counted: no name, another name, Encrypted Client Hello, bytes past the bound or the
 * time.
 *
 * Bounds: EGRESS_SNI_CONNS_MAX connections through the relay in all, a quarter of that per
 * sandbox and no more than its egress_connections; each holds two sockets and two pipes. Nothing
 * blocks: every socket is non-blocking on the daemon's loop, and a connection's turn moves at
 * most EGRESS_SNI_TURN_BYTES each way before others get theirs. Connections in flight end with
 * the daemon; the next one's listener has a port of its own, and its rules (made anew at its
 * start) redirect there. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "context.h"
#include "egress-types.h"
#include "proto.h"

#define EGRESS_SNI_CONNS_MAX 1024
#define EGRESS_SNI_PEEK_USEC (5 * UINT64_C(1000000))
#define EGRESS_SNI_CONNECT_USEC (10 * UINT64_C(1000000))
#define EGRESS_SNI_PIPE_SIZE (256 * 1024)
#define EGRESS_SNI_TURN_BYTES (4 * 1024 * 1024)

typedef struct EgressSni EgressSni;

/* The listener, in our network namespace; deny: what no sandbox reaches (egress_deny and
 * egress_range), copied. */
int egress_sni_new(Context *m, const EgressRule *deny, unsigned n_deny, EgressSni **ret);
EgressSni *egress_sni_free(EgressSni *s);
/* The port the sandboxes' nat chains redirect to. */
uint16_t egress_sni_port(const EgressSni *s);
/* n attached (its address and its host's end set): the relay takes its connections. */
int egress_sni_watch(EgressSni *s, SandboxNet *n);
/* n detached or left to the next daemon: its connections through the relay ended, and no more
 * taken. */
void egress_sni_forget(EgressSni *s, const SandboxNet *n);
/* After a new allow list (egress_update()): n's connections through the relay that it no longer
 * admits (their name, port and destination checked again) are reset: how many. */
int egress_sni_recheck(EgressSni *s, const SandboxNet *n);

/* An allow entry given as an object: {"name": NAME, "port": N, "proto": "tcp"|"udp", "match":
 * "sni"}, name required. Errors name the field (network.egress.allow[2].match). */
int egress_sni_parse_entry(json_object *v, const char *field, EgressRule *r, char *name, ProtoError *err);
/* An entry as egress_spec_json() gives it back: a string, or the object form for match sni. */
json_object *egress_sni_entry_json(const EgressRule *r, const char *name);
/* The rules of the nat chain of a sandbox with n's allow list and address saddr (after "add chain
 * ... sx_<id>_sni"), as nft commands (malloc'ed; "" without a match-sni entry): the connections
 * that n's other entries admit are left alone (they go through its forward chain), those to a
 * match-sni name's addresses on its ports are redirected to the relay at port. */
char *egress_sni_chain_text(const SandboxNet *n, uint32_t saddr, const char *table, const char *chain, uint16_t port);
/* inspect's network.sni: connections open, relayed and refused; NULL without a match-sni entry. */
json_object *egress_sni_state_json(const EgressSni *s, const SandboxNet *n);
