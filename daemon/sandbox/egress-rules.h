/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The nftables text of egress (egress.h says what the rules do): the table "inet sandboxd", a
 * sandbox's chain and its names' sets, a live update of its list, an answer's addresses learned.
 * Pure: text from specs and settings, run by egress.c in one commit each; test-egress-rules holds
 * it to its golden text without root or nftables. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egress-types.h"
#include "macro.h"
#include "nft-listing.h"

#define EGRESS_TABLE "inet sandboxd"
/* A name's addresses: how many a sandbox's set of it holds (an answer past that is SERVFAIL). */
#define EGRESS_NAME_ADDRS_MAX 1024u

/* nft commands, growing; failed: out of memory (the text is not to be run). */
typedef struct NftText {
        char *data;
        size_t size, alloc;
        bool failed;
} NftText;

void nft_text_add(NftText *t, const char *fmt, ...) _printf_(2, 3);

/* The daemon's settings the rules carry. */
typedef struct EgressRulesConfig {
        uint32_t range_addr;       /* egress_range, host order */
        unsigned range_len;
        const EgressRule *deny;    /* egress_deny with egress_range: the set "never" */
        unsigned n_deny;
        uint64_t connections;      /* egress_connections: a sandbox's tracked connections at most */
        uint64_t connection_rate;  /* egress_connection_rate: its new TCP connections a second */
} EgressRulesConfig;

/* The table, new (it replaces one there in the same commit): what holds for every sandbox. */
void egress_rules_table(NftText *t, const EgressRulesConfig *c);
/* A name's set (entry i of chain): the addresses its relay learned, each with a timeout. */
void egress_rules_name_set(NftText *t, const char *chain, unsigned i);
/* The rules of n's chain, its connections marked with slot: its SNI flags kept, refused reset,
 * admitted on, being checked on to the SNI table (reset without a match-sni entry); established
 * on; past its share of the conntrack table or of new connections a second refused; its list
 * (entries matched on SNI last); the rest refused. */
void egress_rules_chain(NftText *t, const EgressRulesConfig *c, const SandboxNet *n, const char *chain, unsigned slot);
/* n's sets, its chain, and its interface's place in the verdict map. */
void egress_rules_sandbox(NftText *t, const EgressRulesConfig *c, const SandboxNet *n, const char *chain);
/* Elements into the set to_i of chain, each with the time it has left (rounded up). */
void egress_rules_elements(NftText *t, const char *chain, unsigned to_i, const NftElement *el, size_t n);
/* An address learned from an answer into set i of chain, its timeout started again. */
void egress_rules_learn(NftText *t, const char *chain, unsigned i, uint32_t addr, uint32_t ttl);
/* old's list replaced by want's in one commit (old's chain and slot): the chain emptied, the
 * sets of want's names made or emptied and given the addresses carried (el[i], n_el[i] for
 * entry i), the old list's other sets removed, want's rules. */
void egress_rules_update(NftText *t, const EgressRulesConfig *c, const SandboxNet *old, const SandboxNet *want,
                         NftElement *const *el, const size_t *n_el);
