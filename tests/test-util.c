/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests for lib/util.c: sizes, durations, CPUs, UTF-8, base64, signal names. */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "util.h"

#define Q(s) tap_quote((s), strlen(s))
#define SENTINEL UINT64_C(0xdeadbeefcafe)

typedef int (*parse_fn)(const char *, uint64_t *);

/* Expects parse(s) == 0 and the value want. */
static void check_parse_ok(parse_fn parse, const char *what, const char *s, uint64_t want) {
        uint64_t v = SENTINEL;
        int r = parse(s, &v);
        if (!is_int(r, 0, "%s(\"%s\") succeeds", what, Q(s)))
                return;
        is_uint64(v, want, "%s(\"%s\") = %" PRIu64, what, Q(s), want);
}

/* Expects parse(s) == want_errno and the output left untouched. */
static void check_parse_fail(parse_fn parse, const char *what, const char *s, int want_errno) {
        uint64_t v = SENTINEL;
        int r = parse(s, &v);
        is_int(r, want_errno, "%s(\"%s\") fails with %s", what, Q(s), want_errno == -ERANGE ? "-ERANGE" : "-EINVAL");
        is_uint64(v, SENTINEL, "%s(\"%s\") leaves the output untouched", what, Q(s));
}

/* ---- parse_size ------------------------------------------------------------------------- */

static void test_parse_size_suffixes(void) {
        static const struct {
                const char *s;
                uint64_t v;
        } cases[] = {
                { "0", 0 },
                { "4096", 4096 },
                { "1B", 1 },         { "1b", 1 },
                { "64K", 65536 },    { "64k", 65536 },    { "64KB", 65536 },   { "64kb", 65536 },
                { "64KiB", 65536 },  { "64kib", 65536 },  { "64KIB", 65536 },
                { "256M", UINT64_C(256) << 20 },           { "256m", UINT64_C(256) << 20 },
                { "256MB", UINT64_C(256) << 20 },          { "256MiB", UINT64_C(256) << 20 },
                { "1G", UINT64_C(1) << 30 },               { "1g", UINT64_C(1) << 30 },
                { "1GB", UINT64_C(1) << 30 },              { "1GiB", UINT64_C(1) << 30 },
                { "2T", UINT64_C(2) << 40 },               { "2t", UINT64_C(2) << 40 },
                { "2TB", UINT64_C(2) << 40 },              { "2TiB", UINT64_C(2) << 40 },
                { "007K", 7 << 10 },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                check_parse_ok(parse_size, "parse_size", cases[i].s, cases[i].v);
}

static void test_parse_size_fractions(void) {
        check_parse_ok(parse_size, "parse_size", "1.5G", UINT64_C(1610612736));
        check_parse_ok(parse_size, "parse_size", "0.5K", 512);
        check_parse_ok(parse_size, "parse_size", "1.25M", UINT64_C(1310720));
        check_parse_ok(parse_size, "parse_size", "0.5T", UINT64_C(1) << 39);
        /* Fractions of a byte round down. */
        check_parse_ok(parse_size, "parse_size", "1.5", 1);
        check_parse_ok(parse_size, "parse_size", "1.9B", 1);
        /* Digits past the ninth decimal are ignored, rounding down. */
        check_parse_ok(parse_size, "parse_size", "0.9999999999K", 1023);
        check_parse_ok(parse_size, "parse_size", "1.0000000001G", UINT64_C(1) << 30);
        /* A precise fraction of a terabyte is an ordinary size (about 1.12 TiB). */
        check_parse_ok(parse_size, "parse_size", "1.123456789T", UINT64_C(1235253802809));
        check_parse_ok(parse_size, "parse_size", "0.017777777T", UINT64_C(19546872527));
}

static void test_parse_size_limits(void) {
        /* The top is INT64_MAX: every size goes out again as a JSON int64, where more would
         * wrap negative (-1, "no limit", for UINT64_MAX). */
        check_parse_ok(parse_size, "parse_size", "8388607T", UINT64_C(9223370937343148032));
        check_parse_ok(parse_size, "parse_size", "9223372036854775806", (uint64_t) INT64_MAX - 1);
        check_parse_ok(parse_size, "parse_size", "9223372036854775807", (uint64_t) INT64_MAX);
        check_parse_fail(parse_size, "parse_size", "9223372036854775808", -ERANGE);
        check_parse_fail(parse_size, "parse_size", "8388608T", -ERANGE);
        check_parse_fail(parse_size, "parse_size", "16777215T", -ERANGE);
        check_parse_fail(parse_size, "parse_size", "18446744073709551614", -ERANGE);
        check_parse_fail(parse_size, "parse_size", "18446744073709551615", -ERANGE);
        check_parse_fail(parse_size, "parse_size", "18446744073709551616", -ERANGE);
        check_parse_fail(parse_size, "parse_size", "99999999999999999999999", -ERANGE);
        check_parse_fail(parse_size, "parse_size", "16777216T", -ERANGE);
        check_parse_fail(parse_size, "parse_size", "17179869184G", -ERANGE);
        check_parse_fail(parse_size, "parse_size", "18014398509481984K", -ERANGE);
}

static void test_parse_size_garbage(void) {
        static const char *const bad[] = {
                "",   " ",    "abc",  "K",      "B",     "1X",    "1KK",  "1 K",  " 1",   "1 ",
                "-1", "+1",   "1.",   ".5",     "1..5",  "1.2.3", "0x10", "1e3",  "1PB",  "1P",
                "1E", "1iB",  "1Bi",  "1KiBB",  "1.K",   "K1",    "1K ",  "1\n",  "1\t",  "1,5G",
                "٣",  "1\xc2\xa0K",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                check_parse_fail(parse_size, "parse_size", bad[i], -EINVAL);
        uint64_t v = SENTINEL;
        is_int(parse_size(NULL, &v), -EINVAL, "parse_size(NULL) fails with -EINVAL");
}

/* ---- parse_duration --------------------------------------------------------------------- */

static void test_parse_duration(void) {
        static const struct {
                const char *s;
                uint64_t v;
        } cases[] = {
                { "0", 0 },
                { "30", 30 * USEC_PER_SEC },          { "30s", 30 * USEC_PER_SEC },
                { "30sec", 30 * USEC_PER_SEC },       { "500ms", 500 * USEC_PER_MSEC },
                { "250us", 250 },                     { "2m", 120 * USEC_PER_SEC },
                { "2min", 120 * USEC_PER_SEC },       { "1h", 3600 * USEC_PER_SEC },
                { "1.5s", 1500 * USEC_PER_MSEC },     { "0.5", 500 * USEC_PER_MSEC },
                { "1.5ms", 1500 },                    { "0.25h", 900 * USEC_PER_SEC },
                { "1.5m", 90 * USEC_PER_SEC },        { "0.000001", 1 },
                { "0.0000015s", 1 },                  { "1.9us", 1 },
                { "0.0000001", 0 },
                { "9223372036854s", UINT64_C(9223372036854000000) },
                { "9223372036854.775807s", (uint64_t) INT64_MAX },
                { "2562047788h", UINT64_C(9223372036800000000) },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                check_parse_ok(parse_duration, "parse_duration", cases[i].s, cases[i].v);

        static const char *const range[] = {
                "9223372036854.775808s", "9223372036855s", "9223372036855", "2562047789h",
                "18446744073709.551615s", "18446744073709.551616s", "18446744073710s", "18446744073710",
                "5124095577h", "307445734562min", "18446744073709551616us", "99999999999999999999999",
        };
        for (size_t i = 0; i < sizeof(range) / sizeof(range[0]); i++)
                check_parse_fail(parse_duration, "parse_duration", range[i], -ERANGE);

        static const char *const bad[] = {
                "", "s", "ms", "1x", "1 s", " 1s", "-1s", "-1", "+1s", "1.s", ".5s", "1.", "1ss",
                "1sms", "1d", "1w", "1ns", "1e3", "1s ", "1..5s", "0x10", "1h30m",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                check_parse_fail(parse_duration, "parse_duration", bad[i], -EINVAL);
        uint64_t v = SENTINEL;
        is_int(parse_duration(NULL, &v), -EINVAL, "parse_duration(NULL) fails with -EINVAL");
}

/* ---- parse_cpus ------------------------------------------------------------------------- */

static void test_parse_cpus(void) {
        check_parse_ok(parse_cpus, "parse_cpus", "0.5", 500);
        check_parse_ok(parse_cpus, "parse_cpus", "2", 2000);
        check_parse_ok(parse_cpus, "parse_cpus", "1.25", 1250);
        check_parse_ok(parse_cpus, "parse_cpus", "0.001", 1);
        check_parse_ok(parse_cpus, "parse_cpus", "1.2345", 1234);
        check_parse_ok(parse_cpus, "parse_cpus", "64", 64000);
        check_parse_ok(parse_cpus, "parse_cpus", "00.5", 500);

        /* Zero CPUs is not a limit. */
        check_parse_fail(parse_cpus, "parse_cpus", "0", -ERANGE);
        check_parse_fail(parse_cpus, "parse_cpus", "0.0", -ERANGE);
        check_parse_fail(parse_cpus, "parse_cpus", "0.0001", -ERANGE);
        check_parse_fail(parse_cpus, "parse_cpus", "18446744073709552", -ERANGE);
        check_parse_fail(parse_cpus, "parse_cpus", "99999999999999999999999", -ERANGE);

        static const char *const bad[] = { "", "a", "1c", "-1", "+1", ".5", "1.", "1 ", " 1", "1e2", "0x1", "1/2" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                check_parse_fail(parse_cpus, "parse_cpus", bad[i], -EINVAL);
        uint64_t v = SENTINEL;
        is_int(parse_cpus(NULL, &v), -EINVAL, "parse_cpus(NULL) fails with -EINVAL");
}

/* ---- format_size / format_duration ------------------------------------------------------ */

static void test_format_size(void) {
        static const struct {
                uint64_t v;
                const char *s;
        } cases[] = {
                { 0, "0B" },
                { 1, "1B" },
                { 1023, "1023B" },
                { 1024, "1K" },
                { 1025, "1K" },
                { 1536, "1.5K" },
                { 10 * 1024 + 512, "10K" },
                { UINT64_C(1) << 20, "1M" },
                { UINT64_C(1610612736), "1.5G" },
                { UINT64_C(2) << 40, "2T" },
                { UINT64_C(1) << 50, "1P" },
                { UINT64_C(1) << 60, "1E" },
                { UINT64_MAX, "15E" },
        };
        char buf[32];

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                is_str(format_size(buf, sizeof(buf), cases[i].v), cases[i].s, "format_size(%" PRIu64 ")", cases[i].v);

        char small[4];
        is_str(format_size(small, sizeof(small), 123456), "120", "format_size truncates into a small buffer");

        /* What format_size writes below a petabyte, parse_size reads back to within 10%. */
        bool all = true;
        for (uint64_t v = 1; v < (UINT64_C(1) << 50); v = v * 3 + 7) {
                uint64_t back = 0;
                if (parse_size(format_size(buf, sizeof(buf), v), &back) < 0 || back > v || back < v - v / 10) {
                        diag("format_size(%" PRIu64 ") = %s reads back as %" PRIu64, v, buf, back);
                        all = false;
                }
        }
        ok(all, "parse_size(format_size(v)) is within 10%% below v");
}

static void test_format_duration(void) {
        static const struct {
                uint64_t v;
                const char *s;
        } cases[] = {
                { 0, "0us" },
                { 999, "999us" },
                { 1000, "1.0ms" },
                { 1500, "1.5ms" },
                { 999999, "999.9ms" },
                { USEC_PER_SEC, "1.000s" },
                { 1234567, "1.234s" },
                { 30 * USEC_PER_SEC, "30.000s" },
                { 3600 * USEC_PER_SEC, "3600.000s" },
                { UINT64_MAX, "18446744073709.551s" },
        };
        char buf[64];

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                is_str(format_duration(buf, sizeof(buf), cases[i].v), cases[i].s, "format_duration(%" PRIu64 ")",
                       cases[i].v);

        bool all = true;
        for (uint64_t v = 0; v < UINT64_MAX / 4; v = v * 3 + 1) {
                uint64_t back = UINT64_MAX;
                if (parse_duration(format_duration(buf, sizeof(buf), v), &back) < 0 || back > v ||
                    v - back >= USEC_PER_MSEC) {
                        diag("format_duration(%" PRIu64 ") = %s reads back as %" PRIu64, v, buf, back);
                        all = false;
                }
        }
        ok(all, "parse_duration(format_duration(v)) is within 1ms below v");
}

/* ---- path_is_normal, path_is_below ------------------------------------------------------ */

static void test_paths(void) {
        static const struct {
                const char *p;
                bool normal;
        } normal[] = {
                { "/", true }, { "/work", true }, { "/work/a.b/..c", true }, { "work", false }, { "", false },
                { "/work/", false }, { "//work", false }, { "/work//a", false }, { "/work/.", false },
                { "/work/./a", false }, { "/work/..", false }, { "/../etc", false },
        };
        char longp[1030];

        for (size_t i = 0; i < sizeof(normal) / sizeof(normal[0]); i++)
                is_int(path_is_normal(normal[i].p, 4096), normal[i].normal, "path_is_normal(\"%s\")", normal[i].p);
        memset(longp, 'a', sizeof(longp) - 1);
        longp[0] = '/';
        longp[sizeof(longp) - 1] = '\0';
        ok(!path_is_normal(longp, 1024) && path_is_normal(longp, 4096), "path_is_normal: max bounds the length");
        ok(path_is_below("/work", "/work") && path_is_below("/work/a", "/work"), "path_is_below: the dir itself and beneath it");
        ok(!path_is_below("/workshop", "/work") && !path_is_below("/wor", "/work"), "path_is_below: a name that only starts the same is not");
        ok(path_is_below("/etc", "/") && path_is_below("/", "/"), "path_is_below: \"/\" holds every path");
}

/* ---- sysctl names and values (create's "sysctls", hostile input) ----------------------- */

static void test_sysctls(void) {
        static const char *const good[] = { "net.ipv4.ping_group_range", "kernel.msgmax", "kernel.sem",
                                            "fs.mqueue.msg_max", "net.ipv4.conf.eth0-1.forwarding", "net.ipv6.conf.lo.mtu" };
        static const char *const host[] = { "kernel.panic", "vm.overcommit_memory", "kernel.hostname", "kernel.shm",
                                            "kernel.msgmaxx", "fs.mqueue", "net", "fs.file-max" };
        static const char *const bad[] = { "", ".", "net.", ".net", "net..ipv4", "net/ipv4", "net.ipv4/../../x",
                                           "net.ipv4.a b", "net.\u00e9", "net.ipv4.\n" };
        char longname[160];

        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                ok(sysctl_name_valid(good[i]) && sysctl_name_namespaced(good[i]), "sysctl %s: valid, the sandbox's own", good[i]);
        for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
                ok(!sysctl_name_namespaced(host[i]), "sysctl '%s': not the sandbox's own", host[i]);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ok(!sysctl_name_valid(bad[i]) && !sysctl_name_namespaced(bad[i]), "sysctl name '%s': refused", bad[i]);
        memset(longname, 'a', sizeof(longname) - 1);
        memcpy(longname, "net.", 4);
        longname[129] = '\0';
        ok(!sysctl_name_valid(longname), "a sysctl name of 129 bytes: refused");
        longname[128] = '\0';
        ok(sysctl_name_valid(longname), "... of 128 bytes: valid");
        ok(sysctl_value_valid("0 2147483647", 12) && sysctl_value_valid("250\t32000", 9), "sysctl values with spaces and tabs");
        ok(!sysctl_value_valid("", 0) && !sysctl_value_valid("1\n", 2) && !sysctl_value_valid("a\0b", 3),
           "empty values, newlines and NULs are refused");
        char value[300];
        memset(value, '1', sizeof(value));
        ok(sysctl_value_valid(value, 256) && !sysctl_value_valid(value, 257), "values: 256 bytes at most");
}

/* ---- utf8_is_valid ---------------------------------------------------------------------- */

static void test_utf8(void) {
        static const struct {
                const char *s;
                size_t len;
                bool valid;
                const char *why;
        } cases[] = {
#define U(s, v, why) { s, sizeof(s) - 1, v, why }
                U("", true, "empty"),
                U("hello", true, "ASCII"),
                U("a\0b", true, "NUL is a valid code point"),
                U("\x7f", true, "DEL"),
                U("\xc2\x80", true, "U+0080, smallest 2-byte"),
                U("\xc3\xa9", true, "U+00E9"),
                U("\xdf\xbf", true, "U+07FF, largest 2-byte"),
                U("\xe0\xa0\x80", true, "U+0800, smallest 3-byte"),
                U("\xe2\x82\xac", true, "U+20AC"),
                U("\xed\x9f\xbf", true, "U+D7FF, below the surrogates"),
                U("\xee\x80\x80", true, "U+E000, above the surrogates"),
                U("\xef\xbf\xbf", true, "U+FFFF"),
                U("\xf0\x90\x80\x80", true, "U+10000, smallest 4-byte"),
                U("\xf0\x9f\x98\x80", true, "U+1F600"),
                U("\xf4\x8f\xbf\xbf", true, "U+10FFFF, largest"),
                U("a\xc3\xa9z\xe2\x82\xac!\xf0\x9f\x98\x80", true, "mixed"),

                U("\xc0\x80", false, "overlong NUL"),
                U("\xc0\xaf", false, "overlong '/'"),
                U("\xc1\xbf", false, "overlong 2-byte"),
                U("\xe0\x80\x80", false, "overlong 3-byte NUL"),
                U("\xe0\x9f\xbf", false, "overlong 3-byte U+07FF"),
                U("\xf0\x80\x80\x80", false, "overlong 4-byte NUL"),
                U("\xf0\x8f\xbf\xbf", false, "overlong 4-byte U+FFFF"),
                U("\xed\xa0\x80", false, "surrogate U+D800"),
                U("\xed\xad\xbf", false, "surrogate U+DB7F"),
                U("\xed\xb0\x80", false, "surrogate U+DC00"),
                U("\xed\xbf\xbf", false, "surrogate U+DFFF"),
                U("\xed\xa0\xbd\xed\xb8\x80", false, "CESU-8 surrogate pair"),
                U("\xf4\x90\x80\x80", false, "U+110000"),
                U("\xf5\x80\x80\x80", false, "lead byte F5"),
                U("\xf7\xbf\xbf\xbf", false, "lead byte F7"),
                U("\xf8\x88\x80\x80\x80", false, "5-byte form"),
                U("\xfc\x84\x80\x80\x80\x80", false, "6-byte form"),
                U("\xfe", false, "byte FE"),
                U("\xff", false, "byte FF"),
                U("\x80", false, "lone continuation"),
                U("\xbf", false, "lone continuation BF"),
                U("a\x80z", false, "continuation after ASCII"),
                U("\xc3", false, "truncated 2-byte"),
                U("\xe2\x82", false, "truncated 3-byte"),
                U("\xe2", false, "truncated 3-byte, lead only"),
                U("\xf0\x9f\x98", false, "truncated 4-byte"),
                U("abc\xc3", false, "truncated at the end"),
                U("\xc3\x28", false, "bad continuation in 2-byte"),
                U("\xe2\x28\xa1", false, "bad second byte in 3-byte"),
                U("\xe2\x82\x28", false, "bad third byte in 3-byte"),
                U("\xf0\x9f\x28\x80", false, "bad third byte in 4-byte"),
                U("\xf0\x9f\x98\x28", false, "bad fourth byte in 4-byte"),
                U("\xc3\xc3\xa9", false, "lead byte where a continuation is due"),
#undef U
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                is_int(utf8_is_valid(cases[i].s, cases[i].len), cases[i].valid, "utf8_is_valid(\"%s\"): %s %s",
                       tap_quote(cases[i].s, cases[i].len), cases[i].why, cases[i].valid ? "is valid" : "is refused");

        /* The length bounds the check: a valid prefix of a buffer is valid, a cut one is not. */
        ok(utf8_is_valid("\xc3\xa9\xff", 2), "utf8_is_valid stops at len (valid prefix before a bad byte)");
        ok(!utf8_is_valid("\xc3\xa9", 1), "utf8_is_valid with len cutting a sequence");
        ok(!utf8_is_valid("\xf0\x9f\x98\x80", 3), "utf8_is_valid with len cutting a 4-byte sequence");
        ok(utf8_is_valid(NULL, 0), "utf8_is_valid(NULL, 0)");
}

/* ---- base64 ----------------------------------------------------------------------------- */

static uint64_t rng_state = UINT64_C(0x9e3779b97f4a7c15);

static uint64_t rng(void) {
        /* xorshift64: reproducible runs without touching the libc generator. */
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        return rng_state;
}

static void test_base64_vectors(void) {
        static const char *const vec[][2] = {
                { "", "" },         { "f", "Zg==" },         { "fo", "Zm8=" },         { "foo", "Zm9v" },
                { "foob", "Zm9vYg==" }, { "fooba", "Zm9vYmE=" }, { "foobar", "Zm9vYmFy" },
                { "\xff\xfe\xfd", "//79" }, { "\xfb\xff", "+/8=" },
        };
        for (size_t i = 0; i < sizeof(vec) / sizeof(vec[0]); i++) {
                char *e = base64_encode(vec[i][0], strlen(vec[i][0]));
                is_str(e, vec[i][1], "base64_encode(\"%s\") (RFC 4648)", Q(vec[i][0]));
                free(e);

                void *d = NULL;
                size_t n = SIZE_MAX;
                int r = base64_decode(vec[i][1], strlen(vec[i][1]), &d, &n);
                ok(r == 0 && n == strlen(vec[i][0]) && memcmp(d, vec[i][0], n) == 0, "base64_decode(\"%s\")",
                   vec[i][1]);
                free(d);
        }
}

static void test_base64_round_trips(void) {
        unsigned char data[64];
        bool all = true;

        for (size_t len = 0; len <= sizeof(data); len++) {
                for (int rep = 0; rep < 8; rep++) {
                        for (size_t i = 0; i < len; i++)
                                data[i] = (unsigned char) rng();
                        char *e = base64_encode(data, len);
                        void *d = NULL;
                        size_t n = SIZE_MAX;
                        bool good = e && strlen(e) == (len + 2) / 3 * 4 &&
                                    strspn(e, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") ==
                                            strlen(e) &&
                                    base64_decode(e, strlen(e), &d, &n) == 0 && n == len &&
                                    (len == 0 || memcmp(d, data, len) == 0);
                        if (!good) {
                                diag("round trip failed for length %zu: %s", len, e ? e : "(null)");
                                all = false;
                        }
                        free(e);
                        free(d);
                }
        }
        ok(all, "base64 round trips random bytes of every length 0..64 (8 each)");
}

static void test_base64_decode_errors(void) {
        static const struct {
                const char *s;
                size_t len;
                const char *why;
        } bad[] = {
#define B(s, why) { s, sizeof(s) - 1, why }
                B("Zg", "missing padding"),
                B("Zg=", "length not a multiple of 4"),
                B("Zm9vY", "length 5"),
                B("Z===", "three padding characters"),
                B("====", "only padding"),
                B("=Zg=", "padding first"),
                B("Z=g=", "padding before data"),
                B("Zg==Zg==", "padding in the middle"),
                B("Zm9v!A==", "character outside the alphabet"),
                B("Zm 9", "space"),
                B("Zm9v\n", "newline"),
                B("Zm9v\r\nZm9v", "CRLF"),
                B("Zm-_", "URL-safe alphabet"),
                B("Zm9\0", "NUL byte"),
                B("Zm\xc3\xa9", "non-ASCII"),
                B("Zm\xff\xff", "byte FF"),
#undef B
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                void *d = (void *) 0x1;
                size_t n = 77;
                int r = base64_decode(bad[i].s, bad[i].len, &d, &n);
                is_int(r, -EINVAL, "base64_decode(\"%s\") fails: %s", tap_quote(bad[i].s, bad[i].len), bad[i].why);
                ok(d == (void *) 0x1 && n == 77, "base64_decode(\"%s\") leaves the outputs untouched",
                   tap_quote(bad[i].s, bad[i].len));
        }

        void *d = NULL;
        size_t n = 1;
        ok(base64_decode("", 0, &d, &n) == 0 && n == 0, "base64_decode of the empty string is empty");
        free(d);
}

/* A file transfer decodes into a buffer of its own: canonical encodings only (one byte string,
 * one text), and never a byte past the buffer. */
static void test_base64_canonical_and_bounded(void) {
        static const struct {
                const char *s, *why;
        } noncanonical[] = {
                { "Zh==", "a padded 1-byte group with low bits set (Zg== is canonical)" },
                { "Zm9=", "a padded 2-byte group with low bits set (Zm8= is canonical)" },
                { "AB==", "B leaves bits that padding drops" },
        };
        unsigned char buf[8];
        size_t n = 99;

        for (size_t i = 0; i < sizeof(noncanonical) / sizeof(noncanonical[0]); i++) {
                void *d = NULL;
                size_t m = 0;
                is_int(base64_decode(noncanonical[i].s, strlen(noncanonical[i].s), &d, &m), -EINVAL,
                       "base64_decode(\"%s\") fails: %s", noncanonical[i].s, noncanonical[i].why);
                free(d);
        }
        ok(base64_decode_into("Zg==", 4, buf, sizeof(buf), &n) == 0 && n == 1 && buf[0] == 'f',
           "base64_decode_into(\"Zg==\") is \"f\"");
        memset(buf, 0xaa, sizeof(buf));
        n = 99;
        is_int(base64_decode_into("Zm9vYmFy", 8, buf, 5, &n), -ENOBUFS,
               "base64_decode_into of 6 bytes into 5 is -ENOBUFS");
        ok(buf[5] == 0xaa && n == 99, "... and writes nothing past the 5 bytes, nor the length");
        ok(base64_decode_into("Zm9vYmFy", 8, buf, 6, &n) == 0 && n == 6 && memcmp(buf, "foobar", 6) == 0,
           "base64_decode_into of 6 bytes into exactly 6 fits");
        is_int((long long) base64_decoded_max(8), 6, "base64_decoded_max(8) is 6");
        is_int(base64_decode_into("Zm9v", 4, buf, 0, &n), -ENOBUFS, "base64_decode_into into 0 bytes is -ENOBUFS");

        /* Every byte value, through a buffer exactly the size of the result. */
        unsigned char all[256], back[256];
        for (int i = 0; i < 256; i++)
                all[i] = (unsigned char) i;
        char *e = base64_encode(all, sizeof(all));
        ok(e && base64_decode_into(e, strlen(e), back, sizeof(back), &n) == 0 && n == 256 &&
           memcmp(all, back, 256) == 0, "all 256 byte values round trip through base64_decode_into");
        free(e);
}

/* ---- signals ---------------------------------------------------------------------------- */

static void test_signals(void) {
        is_str(signal_to_name(SIGKILL), "KILL", "signal_to_name(SIGKILL)");
        is_str(signal_to_name(SIGTERM), "TERM", "signal_to_name(SIGTERM)");
        is_str(signal_to_name(SIGHUP), "HUP", "signal_to_name(SIGHUP)");
        is_str(signal_to_name(SIGSYS), "SYS", "signal_to_name(SIGSYS)");
        is_str(signal_to_name(SIGCHLD), "CHLD", "signal_to_name(SIGCHLD)");
        is_str(signal_to_name(0), NULL, "signal_to_name(0) is NULL");
        is_str(signal_to_name(-1), NULL, "signal_to_name(-1) is NULL");
        is_str(signal_to_name(-SIGKILL), NULL, "signal_to_name(-9) is NULL");
        /* Real-time signals by glibc's numbering (SIGRTMIN 34), as `kill -l` prints them; 32 and
         * 33 are glibc's own: no name, and not accepted. */
        is_str(signal_to_name(SIGRTMIN), "RTMIN", "signal_to_name(SIGRTMIN)");
        is_str(signal_to_name(SIGRTMIN + 1), "RTMIN+1", "signal_to_name(SIGRTMIN+1)");
        is_str(signal_to_name(SIGRTMIN + 15), "RTMIN+15", "signal_to_name(SIGRTMIN+15)");
        is_str(signal_to_name(SIGRTMAX - 14), "RTMAX-14", "signal_to_name(SIGRTMAX-14)");
        is_str(signal_to_name(SIGRTMAX - 1), "RTMAX-1", "signal_to_name(SIGRTMAX-1)");
        is_str(signal_to_name(SIGRTMAX), "RTMAX", "signal_to_name(SIGRTMAX)");
        is_str(signal_to_name(32), NULL, "signal_to_name(32) is NULL");
        is_str(signal_to_name(33), NULL, "signal_to_name(33) is NULL");
        is_str(signal_to_name(65), NULL, "signal_to_name(65) is NULL");
        char sb[12];
        is_str(signal_to_string(32, sb), "32", "signal_to_string(32) is the number");
        is_str(signal_to_string(SIGRTMAX, sb), "RTMAX", "signal_to_string(SIGRTMAX) is the name");
        is_str(signal_to_string(SIGKILL, sb), "KILL", "signal_to_string(SIGKILL) is the name");
        is_str(signal_to_string(0, sb), NULL, "signal_to_string(0) is NULL");
        is_str(signal_to_name(1000), NULL, "signal_to_name(1000) is NULL");
        is_str(signal_to_name(INT32_MIN), NULL, "signal_to_name(INT_MIN) is NULL");

        bool all = true;
        for (int sig = 1; sig < 65; sig++) {
                const char *name = signal_to_name(sig);
                char prefixed[32];
                if (!name)
                        continue;
                snprintf(prefixed, sizeof(prefixed), "SIG%s", name);
                if (signal_from_string(name) != sig || signal_from_string(prefixed) != sig) {
                        diag("signal %d (%s) does not read back", sig, name);
                        all = false;
                }
        }
        ok(all, "signal_from_string(signal_to_name(n)) == n, with and without SIG");

        static const struct {
                const char *s;
                int sig;
        } cases[] = {
                { "KILL", SIGKILL }, { "SIGKILL", SIGKILL }, { "kill", SIGKILL }, { "sigkill", SIGKILL },
                { "SigTerm", SIGTERM }, { "9", 9 },         { "15", 15 },        { "64", 64 },
                { "1", 1 },           { "WINCH", SIGWINCH },
                { "0", -EINVAL },     { "65", -EINVAL },    { "-9", -EINVAL },   { "+9", -EINVAL },
                { "9x", -EINVAL },    { " 9", -EINVAL },    { "9 ", -EINVAL },   { "", -EINVAL },
                { "SIG", -EINVAL },   { "SIGSIGKILL", -EINVAL }, { "FOO", -EINVAL }, { "KIL", -EINVAL },
                { "KILLL", -EINVAL }, { "SIG9", -EINVAL },  { "99999999999999999999", -EINVAL },
                { "4294967305", -EINVAL },
                { "RTMIN", 34 },  { "SIGRTMIN", 34 }, { "rtmin+1", 35 },
                { "RTMIN+30", 64 }, { "RTMAX", 64 }, { "SIGRTMAX", 64 },
                { "RTMAX-1", 63 }, { "SIGRTMAX-30", 34 }, { "34", 34 }, { "63", 63 },
                { "32", -EINVAL },      { "33", -EINVAL },       { "RTMIN-1", -EINVAL }, { "RTMIN+31", -EINVAL },
                { "RTMAX+1", -EINVAL }, { "RTMAX-31", -EINVAL }, { "RTMIN+", -EINVAL },  { "RTMIN-", -EINVAL },
                { "RTMIN1", -EINVAL },  { "RTMIN+1x", -EINVAL }, { "RTMIN++1", -EINVAL }, { "RTMIN+-1", -EINVAL },
                { "RTMIN+99999999999999999999", -EINVAL }, { "RT", -EINVAL }, { "RTMINX", -EINVAL },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                is_int(signal_from_string(cases[i].s), cases[i].sig, "signal_from_string(\"%s\")", cases[i].s);
        is_int(signal_from_string(NULL), -EINVAL, "signal_from_string(NULL)");
}

static void test_now(void) {
        uint64_t a = now_usec(CLOCK_MONOTONIC), b = now_usec(CLOCK_MONOTONIC);
        ok(a > 0 && b >= a, "now_usec(CLOCK_MONOTONIC) does not go backwards");
        /* time() reads the coarse clock, up to a tick behind clock_gettime(): just past a second's
         * boundary it still says the second before (a package build on a loaded machine hit it). */
        uint64_t t0 = (uint64_t) time(NULL);
        uint64_t rt = now_usec(CLOCK_REALTIME);
        uint64_t t1 = (uint64_t) time(NULL);
        ok(rt / USEC_PER_SEC + 1 >= t0 && rt / USEC_PER_SEC <= t1 + 1,
           "now_usec(CLOCK_REALTIME) agrees with time()");
}

static void test_mountinfo_find(void) {
        char *mnt = NULL;

        is_int(mountinfo_find("proc", &mnt), 0, "mountinfo_find(proc) finds procfs");
        is_str(mnt, "/proc", "mounted at /proc");
        free(mnt);
        is_int(mountinfo_find("proc", NULL), 0, "mountinfo_find without a mount point to return");
        mnt = NULL;
        is_int(mountinfo_find("no-such-fs", &mnt), -ENOENT, "an absent filesystem type is -ENOENT");
        ok(!mnt, "and nothing is returned");
}

static void test_read_small_file(void) {
        char dir[] = "/tmp/test-util-XXXXXX", path[64], buf[8];
        int dfd;
        FILE *f;

        if (!mkdtemp(dir)) {
                ok(false, "mkdtemp: %s", strerror(errno));
                return;
        }
        snprintf(path, sizeof(path), "%s/f", dir);
        f = fopen(path, "we");
        fputs("0123456789", f);
        fclose(f);
        snprintf(path, sizeof(path), "%s/l", dir);
        ok(symlink("f", path) == 0, "a symlink to the file");
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        is_int(read_small_file(dfd, "f", true, buf, sizeof(buf)), 7, "read_small_file reads at most size-1 bytes");
        is_str(buf, "0123456", "and ends them with a NUL");
        is_int(read_small_file(dfd, "l", true, buf, sizeof(buf)), -ELOOP, "nofollow refuses a symlink (-ELOOP)");
        is_int(read_small_file(dfd, "l", false, buf, sizeof(buf)), 7, "without nofollow it is followed");
        is_int(read_small_file(AT_FDCWD, path, false, buf, sizeof(buf)), 7, "an absolute path ignores dir_fd");
        is_int(read_small_file(dfd, "missing", false, buf, sizeof(buf)), -ENOENT, "a missing file is -ENOENT");
        close(dfd);
        unlinkat(AT_FDCWD, path, 0);
        snprintf(path, sizeof(path), "%s/f", dir);
        unlink(path);
        rmdir(dir);
}

/* Through a pipe, where one read() returns what one write() put in: read_full goes on. */
static void test_read_full(void) {
        char buf[16] = "";
        int p[2];

        if (pipe(p) < 0) {
                ok(false, "pipe: %s", strerror(errno));
                return;
        }
        ok(write(p[1], "abc", 3) == 3 && write(p[1], "defgh", 5) == 5, "two writes into a pipe");
        is_int((int) read_full(p[0], buf, 6), 6, "read_full reads across them, up to its size");
        is_str(buf, "abcdef", "in order");
        close(p[1]);
        is_int((int) read_full(p[0], buf, sizeof(buf)), 2, "then what is left, up to the end of the file");
        is_int((int) read_full(p[0], buf, sizeof(buf)), 0, "and 0 at the end");
        close(p[0]);
        is_int((int) read_full(p[0], buf, sizeof(buf)), -EBADF, "a closed fd is -EBADF");
}

/* ---- ipv4_prefix_parse: egress allow entries and the egress_* keys ------------------------ */

static void test_ipv4_prefix(void) {
        static const char *const bad[] = { "", "1.2.3", "1.2.3.4.5", "01.2.3.4", "1.2.3.256", "0x1.2.3.4", "1.2.3.4/",
                                           "1.2.3.4/33", "1.2.3.4/08", "1.2.3.4/1a", "1.2.3.4/123", " 1.2.3.4", "a.b.c.d",
                                           "1.2.3.4/-1" };
        uint32_t a;
        unsigned len;
        char buf[32];

        ok(ipv4_prefix_parse("203.0.113.0/24", 14, &a, &len) == 0 && a == 0xcb007100 && len == 24, "203.0.113.0/24");
        ok(ipv4_prefix_parse("198.51.100.7", 12, &a, &len) == 0 && a == 0xc6336407 && len == 32, "an address is a /32");
        ok(ipv4_prefix_parse("0.0.0.0/0", 9, &a, &len) == 0 && a == 0 && len == 0, "0.0.0.0/0");
        ok(ipv4_prefix_parse("198.51.100.7:80", 12, &a, &len) == 0 && a == 0xc6336407, "only the n bytes given are read");
        ok(ipv4_prefix_parse("198.51.100.7/24", 15, &a, &len) == -EDOM, "bits below the prefix: -EDOM");
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ok(ipv4_prefix_parse(bad[i], strlen(bad[i]), &a, &len) == -EINVAL, "'%s' is refused", bad[i]);
        is_str(ipv4_prefix_format(buf, sizeof(buf), 0x0ac80000, 16), "10.200.0.0/16", "format: a prefix");
        is_str(ipv4_prefix_format(buf, sizeof(buf), 0x0ac80002, 32), "10.200.0.2", "format: a /32 is the address");
        ok(ipv4_mask(0) == 0 && ipv4_mask(32) == UINT32_MAX && ipv4_mask(30) == 0xfffffffc, "ipv4_mask");
}

int main(void) {
        test_ipv4_prefix();
        test_parse_size_suffixes();
        test_parse_size_fractions();
        test_parse_size_limits();
        test_parse_size_garbage();
        test_parse_duration();
        test_parse_cpus();
        test_format_size();
        test_format_duration();
        test_utf8();
        test_paths();
        test_sysctls();
        test_base64_vectors();
        test_base64_round_trips();
        test_base64_decode_errors();
        test_base64_canonical_and_bounded();
        test_signals();
        test_now();
        test_mountinfo_find();
        test_read_small_file();
        test_read_full();
        return done_testing();
}
