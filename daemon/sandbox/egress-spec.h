/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A request's "network" (docs/protocol.md, "network"): parsed into the spec part of a SandboxNet
 * (egress, all, allow, names) and given back as JSON. Pure: json-c and no I/O, so that
 * test-egress-spec runs it without root, a daemon or a network. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>

#include "egress-types.h"
#include "proto.h"

/* What the daemon can give, for the parse to refuse what it cannot. */
typedef struct EgressSpecLimits {
        bool available;            /* egress is set up in this daemon */
        bool sni;                  /* entries with "match": "sni" can be checked */
        const EgressRule *deny;    /* ranges no entry may be within (egress_deny, egress_range) */
        unsigned n_deny;
} EgressSpecLimits;

/* "network" of create, of a throwaway run or of sandbox.update (NULL, null or "none": none).
 * Errors name the field (network.egress.allow[2], network.egress.allow[2].match). */
int egress_spec_parse(const EgressSpecLimits *lim, json_object *v, SandboxNet *ret, ProtoError *err);
/* The request's form: "none", or {"egress": "all"} or {"egress": {"allow": [...]}} (meta.json):
 * parsed again, it gives the same spec. */
json_object *egress_spec_json(const SandboxNet *n);
/* Whether n's allow list has an entry with "match": "sni". */
bool egress_spec_has_sni(const SandboxNet *n);
