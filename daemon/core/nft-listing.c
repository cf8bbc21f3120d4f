/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nft-listing.h"

int64_t nft_duration_ms(const char *s) {
        int64_t total = 0;
        bool any = false;

        while (isdigit((unsigned char) *s)) {
                char *end;
                long long v = strtoll(s, &end, 10);
                int64_t unit = strncmp(end, "ms", 2) == 0 ? 1 : *end == 'd' ? 86400000 : *end == 'h' ? 3600000
                             : *end == 'm' ? 60000 : *end == 's' ? 1000 : 0;
                if (unit == 0 || v < 0 || v > 1000000)
                        return -1;
                total += v * unit;
                any = true;
                s = end + (unit == 1 ? 2 : 1);
        }
        return any ? total : -1;
}

/* One element's text ("192.0.2.1 timeout 30s expires 29s990ms") into *ret: 0, or -1 to skip. */
static int element_parse(const char *item, NftElement *ret) {
        char addr[INET_ADDRSTRLEN];
        const char *expires = strstr(item, "expires ");
        struct in_addr a;
        int64_t ms;

        if (sscanf(item, "%15s", addr) != 1 || inet_pton(AF_INET, addr, &a) != 1 || !expires ||
            (ms = nft_duration_ms(expires + strlen("expires "))) <= 0)
                return -1;
        *ret = (NftElement) { .addr = ntohl(a.s_addr), .expires_ms = ms };
        return 0;
}

size_t nft_set_elements_parse(const char *listing, NftElement *out, size_t max) {
        const char *p = listing ? strstr(listing, "elements = {") : NULL, *end;
        size_t n = 0;

        if (!p || !(end = strchr(p, '}')))
                return 0;
        for (p += strlen("elements = {"); p < end && n < max;) {
                char item[128];
                const char *stop;

                while (p < end && (isspace((unsigned char) *p) || *p == ','))
                        p++;
                for (stop = p; stop < end && *stop != ','; stop++)
                        ;
                if (stop == p)
                        break;
                snprintf(item, sizeof(item), "%.*s", (int) (stop - p), p);
                p = stop;
                if (element_parse(item, &out[n]) == 0)
                        n++;
        }
        return n;
}
