/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The metrics endpoint's request reader (metrics_http_route(), daemon/server/metrics-http.h):
 * what each request head is answered, that a head cut into reads of any size is answered the
 * same as when it comes whole (and not before its end), the 4 KiB cap, and random bytes, each
 * input in a buffer of exactly its size so that ASan sees a read past it. */
#include <stdlib.h>
#include <string.h>

#include "metrics-http.h"
#include "tap.h"

#define CAP METRICS_REQUEST_MAX

static const char *route_name(MetricsRoute r) {
        static const char *const names[] = {
                [METRICS_INCOMPLETE] = "incomplete", [METRICS_GET] = "get",           [METRICS_HEAD] = "head",
                [METRICS_BAD_REQUEST] = "400",       [METRICS_NOT_FOUND] = "404",     [METRICS_BAD_METHOD] = "405",
        };
        return (unsigned) r < sizeof(names) / sizeof(names[0]) ? names[r] : "?";
}

/* The whole of s (n bytes) at once, in a buffer of exactly n bytes. */
static MetricsRoute whole(const char *s, size_t n) {
        char *b = malloc(n ? n : 1);
        size_t scanned = 0;
        MetricsRoute r;

        memcpy(b, s, n);
        r = metrics_http_route(b, n, CAP, &scanned);
        free(b);
        return r;
}

/* The same growing read by read (steps of 1..max bytes): the first answer that is not
 * "incomplete", and where it came (*ret_at). */
static MetricsRoute chunked(const char *s, size_t n, unsigned max, size_t *ret_at) {
        size_t have = 0, scanned = 0;
        MetricsRoute r = METRICS_INCOMPLETE;

        while (have < n && r == METRICS_INCOMPLETE) {
                size_t step = 1 + (size_t) rand() % max;
                char *b;
                have = have + step > n ? n : have + step;
                b = malloc(have);
                memcpy(b, s, have);
                r = metrics_http_route(b, have, CAP, &scanned);
                free(b);
        }
        *ret_at = have;
        return r;
}

static const struct {
        const char *req;
        MetricsRoute want;
} cases[] = {
        { "GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n", METRICS_GET },
        { "GET /metrics HTTP/1.0\n\n", METRICS_GET },
        { "GET /metrics?name[]=x HTTP/1.1\r\n\r\n", METRICS_GET },
        { "HEAD /metrics HTTP/1.1\r\n\r\n", METRICS_HEAD },
        { "POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", METRICS_BAD_METHOD },
        { "DELETE / HTTP/1.1\r\n\r\n", METRICS_BAD_METHOD },
        { "GET / HTTP/1.1\r\n\r\n", METRICS_NOT_FOUND },
        { "GET /metricsx HTTP/1.1\r\n\r\n", METRICS_NOT_FOUND },
        { "GET /metric HTTP/1.1\r\n\r\n", METRICS_NOT_FOUND },
        { "GET /metrics/ HTTP/1.1\r\n\r\n", METRICS_NOT_FOUND },
        { "GET //metrics HTTP/1.1\r\n\r\n", METRICS_NOT_FOUND },
        { "GET /metrics HTTP/2.0\r\n\r\n", METRICS_BAD_REQUEST },
        { "GET /metrics HTTP/1.1 \r\n\r\n", METRICS_BAD_REQUEST },
        { "GET /metrics HTTP/1.12\r\n\r\n", METRICS_BAD_REQUEST },
        { "GET /metrics\r\n\r\n", METRICS_BAD_REQUEST },
        { "GET  /metrics HTTP/1.1\r\n\r\n", METRICS_BAD_REQUEST },
        { "get /metrics HTTP/1.1\r\n\r\n", METRICS_BAD_REQUEST },
        { "GET metrics HTTP/1.1\r\n\r\n", METRICS_BAD_REQUEST },
        { " GET /metrics HTTP/1.1\r\n\r\n", METRICS_BAD_REQUEST },
        { "\r\n\r\n", METRICS_BAD_REQUEST },
        { "\n\n", METRICS_BAD_REQUEST },
        { "\x16\x03\x01\x02\x05\x01\x07\x01\xfc\r\n\r\n", METRICS_BAD_REQUEST }, /* a TLS hello, NULs aside */
        { "GET /metrics HTTP/1.1", METRICS_INCOMPLETE },
        { "GET /metrics HTTP/1.1\r\nHost: x\r\n", METRICS_INCOMPLETE },
        { "GET /metrics HTTP/1.1\r\n\r", METRICS_INCOMPLETE },
};

static void test_cases(void) {
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                size_t n = strlen(cases[i].req), at;
                MetricsRoute w = whole(cases[i].req, n);
                is_str(route_name(w), route_name(cases[i].want), "%s", tap_quote(cases[i].req, n));
                for (unsigned max = 1; max <= 8; max *= 2) {
                        MetricsRoute c = chunked(cases[i].req, n, max, &at);
                        if (c != w) {
                                ok(false, "%s in reads of up to %u bytes: %s", tap_quote(cases[i].req, n), max, route_name(c));
                                return;
                        }
                }
        }
        ok(true, "every case cut into reads of 1, up to 2, 4 and 8 bytes is answered as when it comes whole");
}

/* The NUL bytes of a request are bytes like any other. */
static void test_nul(void) {
        static const char a[] = "GET /metrics HTTP/1.1\0\r\n\r\n", b[] = "GET /metr\0cs HTTP/1.1\r\n\r\n",
                          c[] = "GET /metrics\0HTTP/1.1\r\n\r\n";
        is_str(route_name(whole(a, sizeof(a) - 1)), "400", "a NUL after the version: 400");
        is_str(route_name(whole(b, sizeof(b) - 1)), "404", "a NUL in the path: 404");
        is_str(route_name(whole(c, sizeof(c) - 1)), "400", "a NUL for the space before the version: 400");
}

static void test_cap(void) {
        char *b = malloc(CAP + 1);
        size_t scanned = 0;

        memset(b, 'a', CAP + 1);
        is_str(route_name(metrics_http_route(b, CAP - 1, CAP, &scanned)), "incomplete", "%d bytes without an end: incomplete", CAP - 1);
        is_str(route_name(metrics_http_route(b, CAP, CAP, &scanned)), "400", "%d bytes (the cap) without an end: 400", CAP);
        memcpy(b, "GET /metrics HTTP/1.1\r\n", 23);
        memcpy(b + CAP - 2, "\n\n", 2);
        scanned = 0;
        is_str(route_name(metrics_http_route(b, CAP, CAP, &scanned)), "get", "a head that ends at the cap's last byte: answered");
        free(b);
}

/* Random heads of a small alphabet (so that they often nearly make sense): chunked equals whole,
 * an answer only once an empty line is there, and nothing read past the buffer. */
static void test_random(void) {
        static const char alphabet[] = "GETHAD /metrics?HTP1.0\r\n\n\0x";
        char buf[200];
        unsigned bad = 0, answered = 0;

        for (int i = 0; i < 20000 && bad == 0; i++) {
                size_t n = (size_t) rand() % sizeof(buf), at;
                MetricsRoute w, c;
                if (rand() % 2 && n > 30) {
                        memcpy(buf, "GET /metrics HTTP/1.1\r\n", 23);
                        for (size_t k = 23; k < n; k++)
                                buf[k] = alphabet[rand() % (sizeof(alphabet) - 1)];
                } else
                        for (size_t k = 0; k < n; k++)
                                buf[k] = alphabet[rand() % (sizeof(alphabet) - 1)];
                w = whole(buf, n);
                c = chunked(buf, n, 1 + (unsigned) rand() % 16, &at);
                bad += c != w;
                answered += w != METRICS_INCOMPLETE;
                if (w != METRICS_INCOMPLETE && !memmem(buf, n, "\n\n", 2) && !memmem(buf, n, "\n\r\n", 3))
                        bad++;
                if (bad)
                        diag("input %s: whole %s, chunked %s", tap_quote(buf, n), route_name(w), route_name(c));
        }
        ok(bad == 0, "20000 random heads: read by read as whole, answered only after an empty line (%u answered)", answered);
}

int main(void) {
        srand(1);
        test_cases();
        test_nul();
        test_cap();
        test_random();
        return done_testing();
}
