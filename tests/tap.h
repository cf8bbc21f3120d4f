/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A tiny TAP producer for the unit tests, read by automake's tap-driver.sh.
 *
 * Failures are reported as "not ok" lines and the program still exits 0: tap-driver counts them.
 * A crash, a non-zero exit or a plan that does not match is an ERROR, so the plan is printed at
 * the end by done_testing(). Exit 77 means nothing to tap-driver; skip a whole file with
 * skip_all(). A known, accepted defect can be marked with todo()/todo_end(): its "not ok" then
 * counts as an expected failure. */
#pragma once

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned tap_count;
static unsigned tap_failed;
static const char *tap_todo_reason;

__attribute__((format(printf, 2, 0))) static inline bool tap_vok(bool cond, const char *fmt, va_list ap) {
        tap_count++;
        if (!cond && !tap_todo_reason)
                tap_failed++;
        printf("%sok %u - ", cond ? "" : "not ", tap_count);
        vprintf(fmt, ap);
        if (tap_todo_reason)
                printf(" # TODO %s", tap_todo_reason);
        putchar('\n');
        /* Flush so that what passed is on record even if the next test crashes. */
        fflush(stdout);
        return cond;
}

__attribute__((format(printf, 1, 2))) static inline void diag(const char *fmt, ...) {
        va_list ap;
        fputs("# ", stdout);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
        fflush(stdout);
}

static inline void tap_diag_str(const char *label, const char *s) {
        if (s)
                diag("%s: '%s'", label, s);
        else
                diag("%s: NULL", label);
}

__attribute__((format(printf, 2, 3))) static inline bool ok(bool cond, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        cond = tap_vok(cond, fmt, ap);
        va_end(ap);
        return cond;
}

__attribute__((format(printf, 3, 4))) static inline bool is_int(long long got, long long want, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        bool r = tap_vok(got == want, fmt, ap);
        va_end(ap);
        if (!r) {
                diag("     got: %lld", got);
                diag("expected: %lld", want);
        }
        return r;
}

__attribute__((format(printf, 3, 4))) static inline bool is_uint64(uint64_t got, uint64_t want, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        bool r = tap_vok(got == want, fmt, ap);
        va_end(ap);
        if (!r) {
                diag("     got: %" PRIu64, got);
                diag("expected: %" PRIu64, want);
        }
        return r;
}

__attribute__((format(printf, 3, 4))) static inline bool is_str(const char *got, const char *want, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        bool r = tap_vok(got && want ? strcmp(got, want) == 0 : got == want, fmt, ap);
        va_end(ap);
        if (!r) {
                tap_diag_str("     got", got);
                tap_diag_str("expected", want);
        }
        return r;
}

/* A printable rendering of len bytes for test names (C escapes; '#' is escaped so that TAP does not
 * read a directive). Returns one of a few rotating static buffers, long inputs are cut. */
static inline const char *tap_quote(const char *s, size_t len) {
        static char bufs[4][200];
        static unsigned next;
        char *b = bufs[next++ % 4], *o = b, *end = b + sizeof(bufs[0]) - 8;
        size_t i;

        for (i = 0; i < len && o < end; i++) {
                unsigned char c = (unsigned char) s[i];
                if (c >= 0x20 && c < 0x7f && c != '\\' && c != '#')
                        *o++ = (char) c;
                else
                        o += sprintf(o, "\\x%02x", c);
        }
        strcpy(o, i < len ? "..." : "");
        return b;
}

/* Marks the following results as known failures until todo_end(). */
static inline void todo(const char *reason) {
        tap_todo_reason = reason;
}

static inline void todo_end(void) {
        tap_todo_reason = NULL;
}

__attribute__((noreturn)) static inline void skip_all(const char *reason) {
        printf("1..0 # SKIP %s\n", reason);
        exit(EXIT_SUCCESS);
}

/* Prints the plan; the exit status stays 0 so that tap-driver reports each failure itself. */
static inline int done_testing(void) {
        printf("1..%u\n", tap_count);
        if (tap_failed)
                diag("%u of %u tests failed", tap_failed, tap_count);
        fflush(stdout);
        return EXIT_SUCCESS;
}
