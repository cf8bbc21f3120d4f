/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The SNI check's table removed in a child of the daemon (egress-sni.h): a base chain's removal
 * waits for RCU grace periods, which the loop must not. */
#include "egress-sni.h"
#include "nftables.h"

int egress_sni_table_remove_child(void *arg, int report_fd) {
        Nftables *nft = NULL;

        return nftables_new(&nft) >= 0 && nftables_run(nft, "delete table " EGRESS_SNI_TABLE "\n", NULL) >= 0 ? 0 : 1;
}
