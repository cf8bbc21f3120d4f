/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Reading `nft list set` back (daemon/core/nft-listing.c): durations as nft prints them, and a
 * set's elements with the time each has left, as the egress code carries them over. */
#include "nft-listing.h"
#include "tap.h"

/* As nft 1.0.6 prints a set with timeouts (an element without one, 10.9.9.9, has no expiry). */
static const char listing[] =
        "table inet sandboxd {\n"
        "\tset sx_0123456789ab_2 {\n"
        "\t\ttype ipv4_addr\n"
        "\t\tsize 1024\n"
        "\t\tflags timeout\n"
        "\t\telements = { 10.0.0.1 timeout 2d expires 1d23h59m58s772ms, 10.9.9.9,\n"
        "\t\t\t     192.0.2.1 timeout 30s expires 28s772ms, 198.51.100.7 timeout 1h expires 59m58s772ms }\n"
        "\t}\n"
        "}\n";

static void test_durations(void) {
        is_int(nft_duration_ms("28s772ms"), 28772, "28s772ms");
        is_int(nft_duration_ms("59m58s772ms"), 3598772, "59m58s772ms");
        is_int(nft_duration_ms("1d23h59m58s772ms"), 172798772, "1d23h59m58s772ms");
        is_int(nft_duration_ms("5ms"), 5, "5ms");
        is_int(nft_duration_ms("30s, 10.0.0.1"), 30000, "a duration followed by more text ends at the text");
        is_int(nft_duration_ms(""), -1, "nothing is no duration");
        is_int(nft_duration_ms("s"), -1, "a unit alone is none");
        is_int(nft_duration_ms("12x"), -1, "an unknown unit is none");
        is_int(nft_duration_ms("2000000s"), -1, "a figure past a million is refused");
}

static void test_elements(void) {
        NftElement e[8];
        size_t n = nft_set_elements_parse(listing, e, 8);

        is_int((long long) n, 3, "three elements with an expiry (the one without is skipped)");
        is_uint64(e[0].addr, 0x0a000001, "the first is 10.0.0.1, host order");
        is_int(e[0].expires_ms, 172798772, "with 1d23h59m58s772ms left");
        is_uint64(e[1].addr, 0xc0000201, "then 192.0.2.1 (past the line break)");
        is_int(e[1].expires_ms, 28772, "with 28s772ms left");
        is_uint64(e[2].addr, 0xc6336407, "then 198.51.100.7");
        is_int(e[2].expires_ms, 3598772, "with 59m58s772ms left");
        is_int((long long) nft_set_elements_parse(listing, e, 2), 2, "at most max elements");
        is_int((long long) nft_set_elements_parse("table inet t {\n\tset e {\n\t\ttype ipv4_addr\n\t}\n}\n", e, 8), 0,
               "an empty set (no elements line) has none");
        is_int((long long) nft_set_elements_parse(NULL, e, 8), 0, "no listing has none");
        is_int((long long) nft_set_elements_parse("elements = { 192.0.2.1 timeout 30s expires 3s", e, 8), 0,
               "an unterminated list has none");
        is_int((long long) nft_set_elements_parse("elements = { 999.1.1.1 timeout 30s expires 3s, fe80::1 expires 3s }", e, 8),
               0, "addresses that are not IPv4 dotted quads are skipped");
}

int main(void) {
        test_durations();
        test_elements();
        return done_testing();
}
