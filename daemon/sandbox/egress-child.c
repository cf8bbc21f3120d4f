/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a sandbox's egress teardown does, in the child egress-teardown.c starts (or on the loop
 * when no child can be started): its interface, its chain and map element, its connections. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conntrack.h"
#include "egress-internal.h"
#include "veth.h"

/* What egress_attach() made, removed: the interface (its peer goes with it), the chain and its
 * element of the map, the connections the kernel tracks with its mark. nft NULL: one of its own
 * (a child's: the daemon's context holds a netlink socket of the daemon's). */
int egress_teardown_run(Nftables *nft, const char *ifname, unsigned slot) {
        Nftables *own = NULL;
        const char *base = ifname + strlen(VETH_PREFIX);
        int failed = 0, r;
        NftText t = {};

        r = veth_remove(ifname);
        if (r < 0 && r != -ENODEV)
                failed |= TEARDOWN_VETH;
        if (!nft && nftables_new(&own) >= 0)
                nft = own;
        nft_text_add(&t, "delete element " EGRESS_TABLE " out { \"%s\" }\nflush chain " EGRESS_TABLE " sx_%s\n"
                     "delete chain " EGRESS_TABLE " sx_%s\n", ifname, base, base);
        if (!nft || t.failed || nftables_run(nft, t.data, NULL) < 0)
                failed |= TEARDOWN_RULES;
        free(t.data);
        nftables_free(own);
        r = conntrack_flush_mark(EGRESS_CT_MARK | slot, ~EGRESS_CT_FLAGS);
        if (r < 0 && r != -EPROTONOSUPPORT)
                failed |= TEARDOWN_CONNTRACK;
        return failed;
}

/* In the child. It never outlives the daemon: a new one, whose start removes what this one left,
 * may make an interface of the same name (a restored sandbox's) and take the slot's ct mark
 * again. */
int egress_teardown_child(void *arg, int report_fd) {
        const Teardown *t = arg;

        return egress_teardown_run(NULL, t->ifname, t->slot);
}
