/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl: turning reply members into text for people: sizes, durations, key: value lines,
 * tables. Missing and null members print as "-"; unexpected types print as JSON. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxctl.h"
#include "util.h"

#define KV_KEY_WIDTH 16

json_object *json_child(json_object *o, const char *key) {
        json_object *v;

        if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
                return NULL;
        return v;
}

const char *json_str(json_object *o, const char *key) {
        json_object *v = json_child(o, key);

        return json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

bool json_number(json_object *o, const char *key, double *ret) {
        json_object *v = json_child(o, key);

        if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double))
                return false;
        *ret = json_object_get_double(v);
        return true;
}

bool json_int(json_object *o, const char *key, int64_t *ret) {
        json_object *v = json_child(o, key);

        if (!json_object_is_type(v, json_type_int))
                return false;
        *ret = json_object_get_int64(v);
        return true;
}

bool json_true(json_object *o, const char *key) {
        json_object *v = json_child(o, key);

        return json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v);
}

/* Strings are shown as they are here; print_kv() and tables escape what they print. */
static const char *fmt_other(char buf[static FIELD_BUF], json_object *v) {
        if (!v)
                return "-";
        if (json_object_is_type(v, json_type_string))
                return json_object_get_string(v);
        snprintf(buf, FIELD_BUF, "%s", json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
        return buf;
}

const char *fmt_size(char buf[static FIELD_BUF], json_object *o, const char *key) {
        double d;

        if (!json_number(o, key, &d) || d < 0)
                return fmt_other(buf, json_child(o, key));
        return format_size(buf, FIELD_BUF, (uint64_t) d);
}

const char *fmt_seconds(char buf[static FIELD_BUF], json_object *o, const char *key) {
        double d;

        if (!json_number(o, key, &d) || d < 0)
                return fmt_other(buf, json_child(o, key));
        return format_duration(buf, FIELD_BUF, (uint64_t) (d * (double) USEC_PER_SEC + 0.5));
}

const char *fmt_value(char buf[static FIELD_BUF], json_object *o, const char *key) {
        json_object *v = json_child(o, key);

        switch (json_object_get_type(v)) {
        case json_type_int:
                snprintf(buf, FIELD_BUF, "%" PRIi64, json_object_get_int64(v));
                return buf;
        case json_type_double:
                snprintf(buf, FIELD_BUF, "%g", json_object_get_double(v));
                return buf;
        case json_type_boolean:
                return json_object_get_boolean(v) ? "yes" : "no";
        default:
                return fmt_other(buf, v);
        }
}

const char *fmt_enforced(char buf[static FIELD_BUF], json_object *enforced) {
        size_t n = 0;

        if (!json_object_is_type(enforced, json_type_object))
                return "-";
        buf[0] = '\0';
        json_object_object_foreach(enforced, key, v) {
                if (!json_object_is_type(v, json_type_boolean) || !json_object_get_boolean(v))
                        continue;
                const char *name = strcmp(key, "memory") == 0 ? "mem" : key;
                int k = snprintf(buf + n, FIELD_BUF - n, "%s%s", n ? "," : "", name);
                if (k < 0 || (size_t) k >= FIELD_BUF - n)
                        break;
                n += (size_t) k;
        }
        return n ? buf : "none";
}

/* ---- Text that came from a sandbox, a client or the daemon ---------------------------------- */

/* Code points a terminal acts on rather than shows: C0 and C1 controls, DEL, and the ones that
 * reorder or break lines (bidi overrides and isolates, the Unicode line and paragraph separators). */
static bool codepoint_is_control(uint32_t cp) {
        return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x200e || cp == 0x200f ||
               (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* The length of the UTF-8 sequence at s (left bytes), with its code point; 0 when invalid. */
static size_t utf8_sequence(const unsigned char *s, size_t left, uint32_t *ret_cp) {
        size_t n = s[0] < 0x80 ? 1 : s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
                 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
        uint32_t cp;

        if (n == 0 || n > left || !utf8_is_valid((const char *) s, n))
                return 0;
        cp = n == 1 ? s[0] : s[0] & (0x7f >> n);
        for (size_t k = 1; k < n; k++)
                cp = (cp << 6) | (s[k] & 0x3f);
        *ret_cp = cp;
        return n;
}

char *text_escape(const char *text) {
        const unsigned char *s = (const unsigned char *) text;
        size_t len = strlen(text), at = 0;
        /* At worst every byte becomes \xNN. */
        char *out = malloc(len * 4 + 1);

        if (!out)
                return NULL;
        for (size_t i = 0; i < len;) {
                uint32_t cp = 0;
                size_t n = utf8_sequence(s + i, len - i, &cp);

                if (n == 0 || codepoint_is_control(cp)) {
                        /* An invalid byte alone, a control character with all its bytes. */
                        for (size_t k = 0; k < (n ? n : 1); k++)
                                at += (size_t) sprintf(out + at, "\\x%02x", s[i + k]);
                        i += n ? n : 1;
                        continue;
                }
                if (cp == '\\')
                        out[at++] = '\\';
                memcpy(out + at, s + i, n);
                at += n;
                i += n;
        }
        out[at] = '\0';
        return out;
}

const char *esc(const char *text) {
        /* Enough for every string of one printf; each slot is freed when it comes round again. */
        static char *ring[16];
        static unsigned next;
        char *e;

        if (!text)
                return NULL;
        e = text_escape(text);
        if (!e)
                return "?";
        free(ring[next]);
        ring[next] = e;
        next = (next + 1) % ELEMENTSOF(ring);
        return e;
}

void print_kv(const char *key, const char *fmt, ...) {
        int pad = KV_KEY_WIDTH - (int) strlen(key);
        _cleanup_free_ char *value = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&value, fmt, ap);
        va_end(ap);
        if (r < 0)
                value = NULL;
        if (*key) /* an empty key continues the previous line's value */
                printf("%s:%*s ", esc(key), pad > 0 ? pad : 0, "");
        else
                printf("%*s", KV_KEY_WIDTH + 2, "");
        /* Every value goes through esc(): whatever it holds came from elsewhere. */
        printf("%s\n", value ? esc(value) : "?");
}

void print_flat(json_object *o, const char *prefix) {
        json_object_object_foreach(o, key, v) {
                char buf[FIELD_BUF];
                _cleanup_free_ char *name = NULL;

                if (!*prefix && (strcmp(key, "id") == 0 || strcmp(key, "ok") == 0))
                        continue;
                if (asprintf(&name, "%s%s", prefix, key) < 0)
                        return;
                if (json_object_is_type(v, json_type_object)) {
                        _cleanup_free_ char *sub = NULL;
                        if (asprintf(&sub, "%s.", name) < 0)
                                return;
                        print_flat(v, sub);
                } else
                        print_kv(name, "%s", fmt_value(buf, o, key));
        }
}

/* ---- Tables ------------------------------------------------------------------------------ */

struct Table {
        size_t n_columns, n_cells;
        char **cells; /* row-major, the headers first */
};

Table *table_new(size_t n_columns, const char *const *headers) {
        Table *t = calloc(1, sizeof(*t));

        if (!t)
                return NULL;
        t->n_columns = n_columns;
        if (table_add_row(t, headers) < 0)
                return table_free(t);
        return t;
}

Table *table_free(Table *t) {
        if (!t)
                return NULL;
        for (size_t i = 0; i < t->n_cells; i++)
                free(t->cells[i]);
        free(t->cells);
        free(t);
        return NULL;
}

int table_add_row(Table *t, const char *const *cells) {
        char **p = reallocarray(t->cells, t->n_cells + t->n_columns, sizeof(char *));

        if (!p)
                return -ENOMEM;
        t->cells = p;
        for (size_t i = 0; i < t->n_columns; i++) {
                p[t->n_cells] = text_escape(cells[i] ? cells[i] : "-");
                if (!p[t->n_cells])
                        return -ENOMEM;
                t->n_cells++;
        }
        return 0;
}

static size_t table_column_width(const Table *t, size_t column) {
        size_t w = 0;

        for (size_t i = column; i < t->n_cells; i += t->n_columns)
                if (strlen(t->cells[i]) > w)
                        w = strlen(t->cells[i]);
        return w;
}

void table_print(const Table *t) {
        _cleanup_free_ size_t *widths = calloc(t->n_columns, sizeof(size_t));

        if (!widths)
                return;
        for (size_t c = 0; c < t->n_columns; c++)
                widths[c] = table_column_width(t, c);
        for (size_t i = 0; i < t->n_cells; i++) {
                size_t c = i % t->n_columns;
                if (c + 1 == t->n_columns)
                        printf("%s\n", t->cells[i]);
                else
                        printf("%-*s  ", (int) widths[c], t->cells[i]);
        }
}

/* "\r[#########.....]  60%  TEXT" on stderr, redrawn in place. */
void progress_bar(int64_t done, int64_t total, const char *text) {
        char bar[31];
        int width = (int) sizeof(bar) - 1, filled = total > 0 ? (int) (done * width / total) : 0;
        if (filled > width)
                filled = width;
        memset(bar, '#', (size_t) filled);
        memset(bar + filled, '.', (size_t) (width - filled));
        bar[width] = '\0';
        fprintf(stderr, "\r[%s] %3d%%  %s   ", bar, total > 0 ? (int) (done * 100 / total) : 0, esc(text));
}

void progress_clear(void) {
        fprintf(stderr, "\r\033[K");
}
