/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What egress.c (setup, attach, adoption), egress-update.c (a live new list) and
 * egress-teardown.c (detach) share, and nobody else: the rest of the daemon knows egress through
 * egress.h. */
#pragma once

#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "child-job.h"
#include "egress-dns.h"
#include "egress-rules.h"
#include "egress-sni.h"
#include "egress.h"
#include "macro.h"
#include "nft-listing.h"
#include "nftables.h"
#include "veth.h"

/* How long a daemon that stops waits for the teardowns still running (then kills them: the next
 * start removes what they left). */
#define EGRESS_TEARDOWN_WAIT_MS 5000
/* Held by the one daemon of a network namespace that gives egress (an abstract socket: per
 * namespace, gone with its holder): another instance would remove this one's interfaces and
 * table at its start, and each table's rules would drop the other's sandboxes' packets. */
#define EGRESS_LOCK_NAME "sandboxd/egress"

/* A sandbox's interface, rules and connections being removed by a child (egress_detach()). Its
 * slot, and so its /30 and its ct mark, stays taken until the child has exited. */
typedef struct Teardown {
        Egress *egress;
        ChildJob *job;
        unsigned slot;
        char ifname[IFNAMSIZ];
        struct Teardown *prev, *next;
} Teardown;

struct Egress {
        bool available;
        char *reason;             /* why not, when !available */
        char *sni_reason;         /* why no SNI matching, when !sni */
        Nftables *nft;
        bool table_made;
        uint32_t range_addr;      /* host order */
        unsigned range_len;
        uint8_t *slots;           /* one byte per /30 of the range: taken or not */
        unsigned n_slots, n_taken;
        EgressRule deny[64];
        unsigned n_deny;
        struct sockaddr_in dns;   /* sin_family 0: none */
        char *resolv_path;
        int home_fd;              /* our own network namespace */
        int lock_fd;              /* EGRESS_LOCK_NAME */
        Teardown *teardowns;      /* running */
        EgressSni *sni;           /* the relay of names with "match": "sni"; NULL: none */
        /* From the start to egress_restored(): an earlier daemon's interfaces (those of the
         * sandboxes taken back running are claimed, with their slots, the others removed), its
         * table (in force until ours replaces it), and the claimed sandboxes whose chains are not
         * in our table yet. */
        VethFound *found;
        size_t n_found;
        bool old_table;
        struct Pending { SandboxNet *net; char id[32]; } *pending;
        size_t n_pending;
        unsigned n_kept;          /* left attached for a next daemon (egress_keep()) */
        /* The connections the kernel tracks of each slot (n_slots of them), as counted at the
         * loop's iteration conn_iteration (conn_r: the dump's result). */
        unsigned *conn_counts;
        uint64_t conn_iteration;
        bool conn_counted;
        int conn_r;
};

/* ---- egress-child.c's ---- */

/* The steps of a teardown that failed: a child's exit status. */
#define TEARDOWN_VETH 1
#define TEARDOWN_RULES 2
#define TEARDOWN_CONNTRACK 4
/* What egress_attach() made, removed (nft NULL: one of its own, in a child): the TEARDOWN_* steps
 * that failed. */
int egress_teardown_run(Nftables *nft, const char *ifname, unsigned slot);
/* The same in a teardown's child (a ChildJobSpec's fn, arg its Teardown): its exit status. */
int egress_teardown_child(void *arg, int report_fd);

/* ---- egress.c's ---- */

/* *ret_error set to the message (malloc'ed) if not set yet: r returned. */
int egress_attach_fail(char **ret_error, int r, const char *fmt, ...) _printf_(3, 4);
/* t committed in one batch (once more if it met another commit); nft's message in *ret_error. */
int egress_nft_apply(Egress *e, NftText *t, char **ret_error);
/* The settings the rules carry. */
EgressRulesConfig egress_rules_config(Context *m);
/* The relay's policy for n's list. */
DnsRelayPolicy egress_relay_policy(SandboxNet *n);
/* What the set i of chain holds now, at most max: how many. */
size_t egress_set_elements(Egress *e, const char *chain, unsigned i, NftElement *out, size_t max);
/* A slot free again. */
void egress_give_slot(Egress *e, unsigned slot);
/* At stop: each teardown still running gets until the deadline, then is killed. */
void egress_teardowns_wait(Egress *e);
