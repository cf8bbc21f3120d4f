/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Egress: create's "network": {"egress": "all" | {"allow": [...]}} (docs/protocol.md).
 *
 * A sandbox with egress gets a network namespace of its own, new and never used again (not the
 * pool's: netns-pool.h), owned like every other by the host's user namespace (nothing inside has
 * CAP_NET_ADMIN over it), and in it a veth pair's end (veth.h) addressed from egress_range, its
 * default route through the host's end. The host's side is one nftables table of sandboxd's own,
 * "inet sandboxd": a chain per sandbox with its allow list, a verdict map from its interface to
 * that chain, what no sandbox ever reaches (egress_deny, the host's own addresses, the other
 * sandboxes), no connection in from outside, and masquerade out. DNS goes through the daemon's
 * relay on the sandbox's own loopback (egress-dns.h); its /etc/resolv.conf says so.
 *
 * Everything of it is named after the sandbox (interface sx-<id>, chain sx_<id>). A sandbox that
 * outlives its daemon (a restart, a crash, SIGKILL) keeps its interface, and the earlier daemon's
 * table stays in force while none runs; the next daemon takes the interface back with the
 * sandbox (egress_adopt()), replaces the table with its own in one commit, and removes every
 * other interface an earlier daemon left (egress_restored()). One daemon of a network namespace
 * gives egress: another instance (another state directory) says it cannot. */
#pragma once

#include <json-c/json.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "context.h"
#include "proto.h"

#include "egress-spec.h"
#include "egress-types.h"

/* At start, before any sandbox is restored: what an earlier daemon left is removed, and whether
 * egress can be given is found out (hello, create). Never fails the daemon. */
int egress_init(Context *m);
void egress_done(Context *m);

/* "network" of create or of a throwaway run (NULL, null or "none": none). Errors name the field
 * (network.egress.allow[2]). */
int egress_parse(Context *m, json_object *v, SandboxNet *ret, ProtoError *err);
/* A sandbox with egress can be made on this host now: else limit_unenforceable, saying why. */
int egress_check(Context *m, ProtoError *err);
/* inspect's "network": the request's form with the address, gateway, interface and resolver. */
json_object *egress_state_json(const SandboxNet *n);
/* The same with what changes by the moment (inspect, list's usage): "connections", those the
 * kernel tracks of it now (null when they cannot be counted), and "names_resolved", the last
 * names its relay answered with addresses (egress-dns.h), most recent first. */
json_object *egress_live_json(Context *m, const SandboxNet *n);
/* How many connections the kernel tracks of n now (its ct mark), from one conntrack dump of
 * every sandbox's made at most once an iteration of the event loop; -ENOTCONN when n has no
 * egress attached, or the dump's error. */
int egress_connections(Context *m, const SandboxNet *n);
/* hello's capabilities.egress. */
json_object *egress_capability_json(Context *m);

/* A sandbox taken back running (its init_pid, alive: init_pidfd): its interface again, as the
 * earlier daemon left it, or a new one into the init's namespace; its rules at egress_restored(). */
int egress_adopt(Context *m, SandboxNet *n, const char *id, pid_t init_pid, int init_pidfd, char **ret_error);
/* After the restore: the table of ours with the adopted sandboxes' chains (or the earlier
 * daemon's removed), and the interfaces no sandbox claimed removed. */
void egress_restored(Context *m);
/* At a stop that leaves n's sandbox running: its interface and rules are left for the next
 * daemon (which takes them back); only the resolver goes. */
void egress_keep(Context *m, SandboxNet *n);

/* Its interface, rules and resolver, into netns_fd (a namespace just made): on failure nothing
 * is left and *ret_error says what failed (malloc'ed). */
int egress_attach(Context *m, SandboxNet *n, const char *id, int netns_fd, char **ret_error);
/* A running sandbox's new allow list (want, from egress_parse(): "all" or a list, maybe empty) in
 * force at once, in one nftables commit: its names' sets keep the addresses they had where the
 * new list names them too; its relay answers by the new list; its tracked connections that the
 * new list does not admit are deleted (*ret_cut: how many; < 0: they could not be listed, the
 * rules are in force all the same). On failure (*ret_error says why) the old list stays. */
int egress_update(Context *m, SandboxNet *n, const SandboxNet *want, int *ret_cut, char **ret_error);
/* A detached tree of the generated /etc/resolv.conf for the init to mount, or < 0. */
int egress_resolv_tree(Context *m);
/* Removes everything egress_attach() made; nothing when it made nothing. The interface, rules
 * and connections go in a child (its steps wait for RCU grace periods in the kernel), the loop
 * watching it; its slot (the /30 and the ct mark) is taken until the child has exited, and the
 * names (sx-<id>, sx_<id>) are its sandbox's, which no other has. A daemon that stops waits for
 * them, bounded (egress_done()); a child dies with the daemon, and the next start removes what
 * it left. */
void egress_detach(Context *m, SandboxNet *n);
/* The same, done before it returns: for a sandbox that is attached again at once, under the same
 * names (a restore's new init). */
void egress_detach_now(Context *m, SandboxNet *n);
