/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A strict RFC 8259 syntax check that runs before json-c sees a line. json-c 0.16 in strict mode
 * still accepts single quotes, NaN and duplicate keys (see HOST.md), so the grammar is enforced
 * here, and the number of keys of every object is recorded in document order so that a
 * duplicate key (which json-c silently collapses) can be detected after parsing. */

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "json-check.h"
#include "macro.h"
#include "util.h"

typedef struct Scanner {
        const char *s;
        size_t len, pos;
        unsigned depth, max_depth;
        JsonKeyCounts *counts;
        const char *why;
} Scanner;

static int fail(Scanner *sc, const char *why) {
        sc->why = why;
        return -EINVAL;
}

static void skip_ws(Scanner *sc) {
        while (sc->pos < sc->len) {
                char c = sc->s[sc->pos];
                if (c != ' ' && c != '\t' && c != '\r' && c != '\n')
                        break;
                sc->pos++;
        }
}

static bool at(Scanner *sc, char c) {
        return sc->pos < sc->len && sc->s[sc->pos] == c;
}

static int hex4(Scanner *sc, unsigned *ret) {
        unsigned v = 0;
        if (sc->len - sc->pos < 4)
                return fail(sc, "truncated \\u escape");
        for (int i = 0; i < 4; i++) {
                char c = sc->s[sc->pos++];
                v <<= 4;
                if (c >= '0' && c <= '9')
                        v |= (unsigned) (c - '0');
                else if (c >= 'a' && c <= 'f')
                        v |= (unsigned) (c - 'a' + 10);
                else if (c >= 'A' && c <= 'F')
                        v |= (unsigned) (c - 'A' + 10);
                else
                        return fail(sc, "bad \\u escape");
        }
        *ret = v;
        return 0;
}

/* Escaped surrogates must pair up, and "\u0000" is refused: no NUL may reach C strings. */
static int scan_escape(Scanner *sc) {
        unsigned u, lo;
        if (sc->pos >= sc->len)
                return fail(sc, "truncated escape");
        switch (sc->s[sc->pos++]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                return 0;
        case 'u':
                if (hex4(sc, &u) < 0)
                        return -EINVAL;
                if (u == 0)
                        return fail(sc, "\\u0000 is not allowed");
                if (u >= 0xDC00 && u <= 0xDFFF)
                        return fail(sc, "unpaired surrogate escape");
                if (u >= 0xD800 && u <= 0xDBFF) {
                        if (sc->len - sc->pos < 2 || sc->s[sc->pos] != '\\' || sc->s[sc->pos + 1] != 'u')
                                return fail(sc, "unpaired surrogate escape");
                        sc->pos += 2;
                        if (hex4(sc, &lo) < 0)
                                return -EINVAL;
                        if (lo < 0xDC00 || lo > 0xDFFF)
                                return fail(sc, "unpaired surrogate escape");
                }
                return 0;
        default:
                return fail(sc, "bad escape");
        }
}

static int scan_string(Scanner *sc) {
        size_t start;
        if (!at(sc, '"'))
                return fail(sc, "expected a string");
        start = ++sc->pos;
        while (sc->pos < sc->len) {
                unsigned char c = (unsigned char) sc->s[sc->pos];
                if (c == '"') {
                        if (!utf8_is_valid(sc->s + start, sc->pos - start))
                                return fail(sc, "string is not valid UTF-8");
                        sc->pos++;
                        return 0;
                }
                if (c < 0x20)
                        return fail(sc, "control character in string");
                sc->pos++;
                if (c == '\\' && scan_escape(sc) < 0)
                        return -EINVAL;
        }
        return fail(sc, "unterminated string");
}

static size_t scan_digits(Scanner *sc) {
        size_t n = 0;
        while (sc->pos < sc->len && sc->s[sc->pos] >= '0' && sc->s[sc->pos] <= '9')
                sc->pos++, n++;
        return n;
}

/* json-c saturates integers that do not fit in 64 bits without telling: refuse them here. */
static bool integer_fits(const char *s, size_t n) {
        static const char umax[] = "18446744073709551615", imin[] = "9223372036854775808";
        bool neg = s[0] == '-';
        const char *lim = neg ? imin : umax;
        size_t limlen = strlen(lim);
        if (neg)
                s++, n--;
        return n < limlen || (n == limlen && memcmp(s, lim, n) <= 0);
}

static int scan_number(Scanner *sc) {
        size_t start = sc->pos;
        bool integer = true;
        if (at(sc, '-'))
                sc->pos++;
        if (at(sc, '0'))
                sc->pos++;
        else if (scan_digits(sc) == 0)
                return fail(sc, "bad number");
        if (at(sc, '.')) {
                integer = false;
                sc->pos++;
                if (scan_digits(sc) == 0)
                        return fail(sc, "bad number");
        }
        if (at(sc, 'e') || at(sc, 'E')) {
                integer = false;
                sc->pos++;
                if (at(sc, '+') || at(sc, '-'))
                        sc->pos++;
                if (scan_digits(sc) == 0)
                        return fail(sc, "bad number");
        }
        if (integer && !integer_fits(sc->s + start, sc->pos - start))
                return fail(sc, "integer does not fit in 64 bits");
        return 0;
}

static int scan_literal(Scanner *sc, const char *word) {
        size_t n = strlen(word);
        if (sc->len - sc->pos < n || memcmp(sc->s + sc->pos, word, n) != 0)
                return fail(sc, "unexpected character");
        sc->pos += n;
        return 0;
}

static int scan_value(Scanner *sc);

static int counts_push(JsonKeyCounts *c, size_t *ret_index) {
        if (c->n == c->alloc) {
                size_t na = c->alloc ? c->alloc * 2 : 16;
                unsigned *nv = realloc(c->v, na * sizeof(*nv));
                if (!nv)
                        return -ENOMEM;
                c->v = nv;
                c->alloc = na;
        }
        c->v[c->n] = 0;
        *ret_index = c->n++;
        return 0;
}

static int scan_object(Scanner *sc) {
        size_t idx;
        sc->pos++;
        if (counts_push(sc->counts, &idx) < 0)
                return fail(sc, "out of memory");
        skip_ws(sc);
        if (at(sc, '}')) {
                sc->pos++;
                return 0;
        }
        for (;;) {
                skip_ws(sc);
                if (scan_string(sc) < 0)
                        return -EINVAL;
                skip_ws(sc);
                if (!at(sc, ':'))
                        return fail(sc, "expected ':'");
                sc->pos++;
                if (scan_value(sc) < 0)
                        return -EINVAL;
                sc->counts->v[idx]++;
                skip_ws(sc);
                if (at(sc, '}')) {
                        sc->pos++;
                        return 0;
                }
                if (!at(sc, ','))
                        return fail(sc, "expected ',' or '}'");
                sc->pos++;
        }
}

static int scan_array(Scanner *sc) {
        sc->pos++;
        skip_ws(sc);
        if (at(sc, ']')) {
                sc->pos++;
                return 0;
        }
        for (;;) {
                if (scan_value(sc) < 0)
                        return -EINVAL;
                skip_ws(sc);
                if (at(sc, ']')) {
                        sc->pos++;
                        return 0;
                }
                if (!at(sc, ','))
                        return fail(sc, "expected ',' or ']'");
                sc->pos++;
        }
}

static int scan_value(Scanner *sc) {
        int r;
        skip_ws(sc);
        if (sc->pos >= sc->len)
                return fail(sc, "unexpected end of input");
        switch (sc->s[sc->pos]) {
        case '{':
        case '[':
                if (++sc->depth > sc->max_depth)
                        return fail(sc, "nesting too deep");
                r = sc->s[sc->pos] == '{' ? scan_object(sc) : scan_array(sc);
                sc->depth--;
                return r;
        case '"':
                return scan_string(sc);
        case 't':
                return scan_literal(sc, "true");
        case 'f':
                return scan_literal(sc, "false");
        case 'n':
                return scan_literal(sc, "null");
        default:
                if (sc->s[sc->pos] == '-' || (sc->s[sc->pos] >= '0' && sc->s[sc->pos] <= '9'))
                        return scan_number(sc);
                return fail(sc, "unexpected character");
        }
}

int json_check(const char *s, size_t len, unsigned max_depth, JsonKeyCounts *counts, const char **ret_why) {
        Scanner sc = { .s = s, .len = len, .max_depth = max_depth, .counts = counts };
        int r;

        counts->n = 0;
        r = scan_value(&sc);
        if (r >= 0) {
                skip_ws(&sc);
                if (sc.pos != sc.len)
                        r = fail(&sc, "trailing characters after the value");
        }
        if (r < 0 && ret_why)
                *ret_why = sc.why;
        return r;
}

static int walk(json_object *o, const JsonKeyCounts *counts, size_t *i) {
        if (json_object_is_type(o, json_type_object)) {
                if (*i >= counts->n || (unsigned) json_object_object_length(o) != counts->v[*i])
                        return -EEXIST;
                (*i)++;
                json_object_object_foreach(o, key, val) {
                        (void) key;
                        if (walk(val, counts, i) < 0)
                                return -EEXIST;
                }
        } else if (json_object_is_type(o, json_type_array)) {
                size_t n = json_object_array_length(o);
                for (size_t k = 0; k < n; k++)
                        if (walk(json_object_array_get_idx(o, k), counts, i) < 0)
                                return -EEXIST;
        }
        return 0;
}

int json_check_no_duplicates(json_object *o, const JsonKeyCounts *counts) {
        size_t i = 0;
        return walk(o, counts, &i);
}
