/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One nftables set element looked up over nfnetlink (daemon/host/nft-element.h), in a network
 * namespace of the test's own, on a set as egress.c makes a name's (ipv4_addr, flags timeout):
 * an address put in is held, another is not, one whose timeout ran out is not, nor anything of
 * a set or table that is not there; a name too long is refused before any message. Root only
 * (a network namespace, nftables); skipped otherwise. */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "nft-element.h"
#include "nftables.h"
#include "tap.h"

static const char rules[] = "table inet sandboxd {\n"
                            "  set sx_t_0 { type ipv4_addr; flags timeout; size 1024; }\n"
                            "}\n"
                            "add element inet sandboxd sx_t_0 { 198.51.100.7 timeout 60s, 203.0.113.5 timeout 1s }\n";

static uint32_t addr(const char *s) {
        struct in_addr a;
        return inet_pton(AF_INET, s, &a) == 1 ? ntohl(a.s_addr) : 0;
}

static void setup(void) {
        _cleanup_free_ char *msg = NULL;
        Nftables *nft = NULL;
        int r;

        if (geteuid() != 0)
                skip_all("needs root (a network namespace of its own, nftables)");
        if (unshare(CLONE_NEWNET) < 0)
                skip_all("cannot make a network namespace (unshare)");
        r = nftables_new(&nft);
        if (r == -EOPNOTSUPP)
                skip_all("built without libnftables");
        if (r < 0)
                skip_all("cannot use nftables");
        r = nftables_run(nft, rules, &msg);
        nftables_free(nft);
        if (r < 0)
                skip_all("nftables refused the set (nf_tables)");
}

int main(void) {
        char longname[300];

        setup();
        is_int(nft_set_has_ipv4("sandboxd", "sx_t_0", addr("198.51.100.7")), 1, "an address put in the set is held");
        is_int(nft_set_has_ipv4("sandboxd", "sx_t_0", addr("198.51.100.8")), 0, "another address is not");
        is_int(nft_set_has_ipv4("sandboxd", "sx_t_0", addr("203.0.113.5")), 1, "an address with a timeout of 1 s, at once");
        usleep(1600 * 1000);
        is_int(nft_set_has_ipv4("sandboxd", "sx_t_0", addr("203.0.113.5")), 0, "... and not once its timeout ran out");
        is_int(nft_set_has_ipv4("sandboxd", "sx_t_0", addr("198.51.100.7")), 1, "the other is still held");
        is_int(nft_set_has_ipv4("sandboxd", "sx_t_1", addr("198.51.100.7")), 0, "a set that is not there holds nothing");
        is_int(nft_set_has_ipv4("other", "sx_t_0", addr("198.51.100.7")), 0, "nor a table that is not there");
        memset(longname, 'a', sizeof(longname) - 1);
        longname[sizeof(longname) - 1] = '\0';
        is_int(nft_set_has_ipv4("sandboxd", longname, 1), -ENAMETOOLONG, "a set name of 299 characters is refused");
        return done_testing();
}
