/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A running sandbox's new allow list, in force at once (egress.h, egress_update()). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conntrack.h"
#include "egress-internal.h"
#include "egress-spec.h"
#include "log.h"

/* ---- a new allow list for a running sandbox ---- */

/* The addresses each name of a new list starts with: what the set of the same name (any port)
 * held under the old list. */
typedef struct Carried {
        NftElement *el[EGRESS_ALLOW_MAX];
        size_t n[EGRESS_ALLOW_MAX];
} Carried;

static void carried_free(Carried *c) {
        for (unsigned i = 0; i < EGRESS_ALLOW_MAX; i++)
                free(c->el[i]);
}

static int carried_take(Egress *e, const SandboxNet *old, const SandboxNet *want, Carried *c) {
        for (unsigned i = 0; i < want->n_allow; i++) {
                if (!want->allow[i].name)
                        continue;
                for (unsigned j = 0; j < old->n_allow; j++) {
                        if (!old->allow[j].name || strcmp(old->names[j], want->names[i]) != 0)
                                continue;
                        if (!(c->el[i] = calloc(EGRESS_NAME_ADDRS_MAX, sizeof(NftElement))))
                                return -ENOMEM;
                        c->n[i] = egress_set_elements(e, old->chain, j, c->el[i], EGRESS_NAME_ADDRS_MAX);
                        break;
                }
        }
        return 0;
}

static bool addr_carried(const Carried *c, unsigned i, uint32_t addr) {
        for (size_t k = 0; k < c->n[i]; k++)
                if (c->el[i][k].addr == addr)
                        return true;
        return false;
}

/* Whether the new list lets a connection (its original direction) go on: as its chain would
 * take it as a new one, the bounds aside. An entry matched on SNI admits none of these: its
 * connections are the SNI check's (egress_sni_recheck()). */
static bool update_admits(const SandboxNet *want, const Carried *c, const ConntrackEntry *ct) {
        if (want->all)
                return true;
        for (unsigned i = 0; i < want->n_allow; i++) {
                const EgressRule *r = &want->allow[i];
                if (r->sni)
                        continue;
                bool addr = r->name ? addr_carried(c, i, ct->dst)
                                    : r->len == 0 || ((ct->dst ^ r->addr) >> (32 - r->len)) == 0;
                bool port = !r->port || (ct->dport == r->port && (r->proto ? ct->proto == r->proto
                                                                       : ct->proto == IPPROTO_TCP || ct->proto == IPPROTO_UDP));
                if (addr && port)
                        return true;
        }
        return false;
}

/* The sandbox's tracked connections that the new list does not admit, deleted: how many were
 * open (a closed one's entry, kept a while by the kernel, goes too, uncounted); < 0 if they
 * could not be listed. */
static int update_cut(const SandboxNet *n, const SandboxNet *want, const Carried *c) {
        _cleanup_free_ ConntrackEntry *ct = NULL;
        size_t count;
        int cut = 0, r;

        r = conntrack_dump(EGRESS_CT_MARK | n->slot, ~EGRESS_CT_FLAGS, &ct, &count);
        if (r < 0)
                return r;
        for (size_t k = 0; k < count; k++)
                if (!(ct[k].mark & (EGRESS_CT_SNI_CHECKING | EGRESS_CT_SNI_ADMITTED)) && /* egress_sni_recheck()'s */
                    !update_admits(want, c, &ct[k]) && conntrack_delete(&ct[k]) >= 0 && !conntrack_entry_closed(&ct[k]))
                        cut++;
        return cut;
}

int egress_update(Context *m, SandboxNet *n, const SandboxNet *want, int *ret_cut, char **ret_error) {
        _cleanup_free_ char *msg = NULL;
        Carried c = {};
        NftText t = {};
        int r;

        *ret_cut = 0;
        if (!n->egress || !n->attached || !n->eg)
                return egress_attach_fail(ret_error, -ENOTCONN, "the sandbox has no way out to change");
        r = carried_take(n->eg, n, want, &c);
        /* A first match-sni entry: the table its rules send to, before them. */
        if (r >= 0 && egress_spec_has_sni(want) && (r = egress_sni_watch(n->eg->sni, n)) < 0)
                egress_attach_fail(ret_error, r, "cannot make the table " EGRESS_SNI_TABLE " that checks names on SNI: %s",
                            strerror(-r));
        else if (r >= 0) {
                EgressRulesConfig rc = egress_rules_config(m);
                egress_rules_update(&t, &rc, n, want, c.el, c.n);
                r = egress_nft_apply(n->eg, &t, &msg);
                free(t.data);
                if (r < 0)
                        egress_attach_fail(ret_error, r, "nftables refused the new rules: %s", msg ? msg : strerror(-r));
        }
        if (r >= 0) {
                n->all = want->all;
                n->n_allow = want->n_allow;
                n->n_names = want->n_names;
                memcpy(n->allow, want->allow, sizeof(n->allow));
                memcpy(n->names, want->names, sizeof(n->names));
                n->n_learned = 0; /* the sets' indexes changed: the next answers commit again */
                DnsRelayPolicy policy = egress_relay_policy(n);
                dns_relay_set_policy(n->dns, &policy);
                *ret_cut = update_cut(n, want, &c);
                if (*ret_cut < 0)
                        log_warning("egress: %s: cannot list its connections to cut those the new list does not allow: %s",
                                    n->ifname, strerror(-*ret_cut));
                int sni = egress_sni_recheck(n->eg->sni, n);
                if (sni < 0)
                        log_warning("egress: %s: cannot list its connections admitted on SNI: %s", n->ifname, strerror(-sni));
                else if (*ret_cut >= 0)
                        *ret_cut += sni;
        }
        /* Its checks end with its last match-sni entry (or its first did not take). */
        if (!egress_spec_has_sni(n))
                egress_sni_forget(n->eg->sni, n);
        carried_free(&c);
        return r;
}
