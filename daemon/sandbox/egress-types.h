/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A sandbox's way out as the egress modules share it: its allow list and where it is attached
 * (egress.h has the calls). Apart from egress.h so that egress.c's helpers (egress-sni.h) read
 * the same types without their modules including each other. */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "context.h"

#define EGRESS_ALLOW_MAX 64
#define EGRESS_ENTRY_MAX 64   /* characters of an allow entry */

/* A sandbox's connections carry the ct mark EGRESS_CT_MARK | its slot (egress.c), and flags its
 * chain keeps: those of SNI matching (egress-sni.h): the first bytes awaited, the connection
 * admitted, or refused. conntrack_flush_mark() at its end leaves the flags out of the match. */
#define EGRESS_CT_MARK 0x5bd00000u
#define EGRESS_CT_SNI_CHECKING 0x00010000u
#define EGRESS_CT_SNI_ADMITTED 0x00020000u
#define EGRESS_CT_SNI_REFUSED 0x00040000u
#define EGRESS_CT_FLAGS 0x000f0000u

typedef struct EgressRule {
        uint32_t addr;   /* host order */
        uint8_t len;
        uint8_t proto;   /* 0: TCP and UDP; IPPROTO_TCP or IPPROTO_UDP */
        uint16_t port;   /* 0: every port */
        bool name;       /* a name (SandboxNet.names[i]), not an address: addr and len unused */
        bool sni;        /* a name's "match": "sni": TCP only, its first bytes checked (egress-sni.h) */
} EgressRule;

typedef struct DnsRelay DnsRelay;

/* An address the relay put into the set of a name on the list, and until when it stays there (as
 * we set its timeout; CLOCK_MONOTONIC): an answer that asks for no longer is not committed again. */
#define EGRESS_LEARNED_MAX 128
typedef struct EgressLearned {
        uint64_t until;
        uint32_t addr;
        uint8_t set;     /* the entry's index */
} EgressLearned;

typedef struct SandboxNet {
        bool egress, all;
        EgressRule allow[EGRESS_ALLOW_MAX];
        char names[EGRESS_ALLOW_MAX][EGRESS_ENTRY_MAX + 1]; /* of the allow[i] that are names */
        unsigned n_allow, n_names;
        uid_t uid;       /* the sandbox's owner (its relay's budget): set before egress_attach() */
        /* While its init lives (egress_attach() to egress_detach()). */
        bool attached;
        Egress *eg;      /* the egress of the daemon that attached it */
        char chain[32];  /* sx_<id>: its nftables chain; its names' sets are sx_<id>_<i> */
        unsigned slot;
        char ifname[IFNAMSIZ];
        uint32_t host_addr, addr;  /* host order */
        DnsRelay *dns;
        EgressLearned learned[EGRESS_LEARNED_MAX]; /* the relay's last commits, for relay_learn() */
        unsigned n_learned;
        uint64_t sni_admitted, sni_refused; /* connections checked on SNI (egress-sni.h) */
        char *error;   /* why the last egress_attach() failed, for create's answer */
} SandboxNet;
