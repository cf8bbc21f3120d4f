/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The name in a connection's first bytes (tls-hello.h). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "tls-hello.h"

#define TLS_RECORD_HANDSHAKE 22
#define TLS_RECORD_HEADER 5
#define TLS_RECORD_MAX 16384      /* plaintext bytes of a record (RFC 8446 5.1) */
#define TLS_HANDSHAKE_CLIENT_HELLO 1
#define TLS_EXT_SERVER_NAME 0x0000
#define TLS_EXT_ECH 0xfe0d
#define TLS_NAME_TYPE_HOST 0
#define HTTP_METHOD_MAX 16

/* A bounded reader: every get fails once past the end, and then stays failed. */
typedef struct Cursor {
        const uint8_t *p;
        size_t left;
        bool bad;
} Cursor;

static const uint8_t *take(Cursor *c, size_t len) {
        const uint8_t *p = c->p;

        if (c->bad || len > c->left) {
                c->bad = true;
                return NULL;
        }
        c->p += len;
        c->left -= len;
        return p;
}

static size_t get_n(Cursor *c, size_t bytes) {
        const uint8_t *p = take(c, bytes);
        size_t v = 0;

        for (size_t i = 0; p && i < bytes; i++)
                v = v << 8 | p[i];
        return v;
}

/* A part with a length prefix of `bytes` bytes, as a cursor of its own. */
static Cursor sub(Cursor *c, size_t bytes) {
        size_t len = get_n(c, bytes);
        const uint8_t *p = take(c, len);

        return p ? (Cursor) { .p = p, .left = len } : (Cursor) { .bad = true };
}

static bool name_char(uint8_t c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* A host name of s[0..len) into ret, lower case. */
static int name_take(const uint8_t *s, size_t len, char *ret) {
        size_t label = 0;

        if (len == 0 || len > TLS_HELLO_NAME_MAX)
                return -EBADMSG;
        for (size_t i = 0; i < len; i++) {
                if (s[i] == '.') {
                        if (label == 0)
                                return -EBADMSG;
                        label = 0;
                } else if (!name_char(s[i]) || ++label > 63)
                        return -EBADMSG;
                ret[i] = (char) (s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]);
        }
        if (label == 0)
                return -EBADMSG; /* a trailing dot */
        ret[len] = '\0';
        return 0;
}

/* ---- TLS ---- */

/* The handshake bytes of buf's records (a ClientHello may span several) into hs, until the first
 * handshake message is whole: its length (header included) in *ret_len. */
static int handshake_collect(const uint8_t *buf, size_t n, uint8_t *hs, size_t *ret_len) {
        size_t pos = 0, have = 0;

        for (;;) {
                if (have >= 4) {
                        size_t want = 4 + ((size_t) hs[1] << 16 | (size_t) hs[2] << 8 | hs[3]);
                        if (hs[0] != TLS_HANDSHAKE_CLIENT_HELLO)
                                return -EBADMSG;
                        if (want > TLS_HELLO_PEEK_MAX)
                                return -E2BIG;
                        if (have >= want) {
                                *ret_len = want;
                                return 0;
                        }
                }
                if (n - pos < TLS_RECORD_HEADER)
                        break;
                const uint8_t *h = buf + pos;
                size_t len = (size_t) h[3] << 8 | h[4];
                if (h[0] != TLS_RECORD_HANDSHAKE || h[1] != 3 || h[2] > 4 || len == 0 || len > TLS_RECORD_MAX)
                        return -EBADMSG;
                if (n - pos - TLS_RECORD_HEADER < len)
                        break;
                if (have + len > TLS_HELLO_PEEK_MAX)
                        return -E2BIG;
                memcpy(hs + have, h + TLS_RECORD_HEADER, len);
                have += len;
                pos += TLS_RECORD_HEADER + len;
        }
        /* A prefix that is not a handshake record is refused at once, not waited for. */
        if (n - pos >= 1 && buf[pos] != TLS_RECORD_HANDSHAKE)
                return -EBADMSG;
        if (n - pos >= 2 && buf[pos + 1] != 3)
                return -EBADMSG;
        return n >= TLS_HELLO_PEEK_MAX ? -E2BIG : -EAGAIN;
}

/* server_name's data (RFC 6066 3): one host_name, nothing malformed. */
static int server_name_ext(Cursor ext, bool *seen, char *ret) {
        Cursor list = sub(&ext, 2);

        if (ext.bad || list.bad || ext.left != 0 || list.left == 0)
                return -EBADMSG;
        while (list.left > 0) {
                size_t type = get_n(&list, 1);
                Cursor name = sub(&list, 2);
                if (list.bad || name.bad)
                        return -EBADMSG;
                if (type != TLS_NAME_TYPE_HOST)
                        continue;
                if (*seen)
                        return -EBADMSG;
                *seen = true;
                if (name_take(name.p, name.left, ret) < 0)
                        return -EBADMSG;
        }
        return 0;
}

static int client_hello_parse(const uint8_t *body, size_t len, char *ret) {
        Cursor c = { .p = body, .left = len }, exts;
        bool ext_seen = false, name_seen = false, ech = false;
        size_t v;

        (void) take(&c, 2 + 32);              /* legacy_version, random */
        if ((v = get_n(&c, 1)) > 32)          /* legacy_session_id */
                return -EBADMSG;
        (void) take(&c, v);
        v = get_n(&c, 2);                     /* cipher_suites */
        if (v < 2 || v % 2)
                return -EBADMSG;
        (void) take(&c, v);
        if ((v = get_n(&c, 1)) < 1)           /* legacy_compression_methods */
                return -EBADMSG;
        (void) take(&c, v);
        if (c.bad)
                return -EBADMSG;
        if (c.left == 0)
                return -ENOENT;               /* no extensions at all */
        exts = sub(&c, 2);
        if (exts.bad || c.left != 0)
                return -EBADMSG;
        while (exts.left > 0) {
                size_t type = get_n(&exts, 2);
                Cursor ext = sub(&exts, 2);
                if (exts.bad || ext.bad)
                        return -EBADMSG;
                if (type == TLS_EXT_ECH)
                        ech = true;
                else if (type == TLS_EXT_SERVER_NAME) {
                        if (ext_seen)
                                return -EBADMSG;
                        ext_seen = true;
                        if (server_name_ext(ext, &name_seen, ret) < 0)
                                return -EBADMSG;
                }
        }
        if (ech)
                return -EPROTO;
        return name_seen ? 0 : -ENOENT;
}

int tls_hello_server_name(const uint8_t *buf, size_t n, char *ret) {
        uint8_t hs[TLS_HELLO_PEEK_MAX];
        size_t len;
        int r;

        r = handshake_collect(buf, n, hs, &len);
        if (r < 0)
                return r;
        return client_hello_parse(hs + 4, len - 4, ret);
}

/* ---- HTTP/1 ---- */

static bool token_char(uint8_t c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The line at buf[pos..n) up to its CRLF: its length (without it), -EAGAIN if it does not end in
 * n, -EBADMSG for a CR or LF alone or a NUL. */
static int line_len(const uint8_t *buf, size_t n, size_t pos, size_t *ret) {
        for (size_t i = pos; i < n; i++) {
                if (buf[i] == '\0' || buf[i] == '\n')
                        return -EBADMSG;
                if (buf[i] == '\r') {
                        if (i + 1 >= n)
                                return -EAGAIN;
                        if (buf[i + 1] != '\n')
                                return -EBADMSG;
                        *ret = i - pos;
                        return 0;
                }
        }
        return -EAGAIN;
}

static bool has_prefix(const uint8_t *s, size_t len, const char *prefix) {
        size_t l = strlen(prefix);
        return len >= l && memcmp(s, prefix, l) == 0;
}

/* METHOD SP origin-form SP HTTP/1.x: the method checked as far as it goes, so that bytes that are
 * no request are refused before the line ends. */
static int request_line(const uint8_t *buf, size_t n, size_t *ret_end) {
        size_t m = 0, len;
        const uint8_t *sp, *sp2;
        int r;

        while (m < n && m <= HTTP_METHOD_MAX && buf[m] >= 'A' && buf[m] <= 'Z')
                m++;
        if (m < n && (m == 0 || m > HTTP_METHOD_MAX || buf[m] != ' '))
                return -EBADMSG;
        r = line_len(buf, n, 0, &len);
        if (r < 0)
                return r;
        if (has_prefix(buf, m, "CONNECT") && m == 7)
                return -EBADMSG;
        sp = buf + m;
        sp2 = memchr(sp + 1, ' ', len - m - 1);
        if (!sp2 || (sp[1] != '/' && !(sp2 == sp + 2 && sp[1] == '*')))
                return -EBADMSG; /* an absolute-form target names a host of its own */
        if ((size_t) (buf + len - sp2 - 1) != 8 ||
            !(has_prefix(sp2 + 1, 8, "HTTP/1.1") || has_prefix(sp2 + 1, 8, "HTTP/1.0")))
                return -EBADMSG;
        *ret_end = len + 2;
        return 0;
}

/* A Host value (OWS trimmed): host[:port]. */
static int host_value(const uint8_t *v, size_t len, char *ret) {
        const uint8_t *colon = memchr(v, ':', len);

        if (colon) {
                size_t plen = len - (size_t) (colon - v) - 1;
                if (plen == 0 || plen > 5)
                        return -EBADMSG;
                for (size_t i = 1; i <= plen; i++)
                        if (colon[i] < '0' || colon[i] > '9')
                                return -EBADMSG;
                len = (size_t) (colon - v);
        }
        return name_take(v, len, ret);
}

/* One header line: a Host (the only one) into ret. */
static int header_line(const uint8_t *l, size_t len, bool *seen, char *ret) {
        size_t k = 0;

        while (k < len && token_char(l[k]))
                k++;
        if (k == 0 || k == len || l[k] != ':')
                return -EBADMSG; /* obs-fold (a line starting with blanks) too */
        if (k != 4 || strncasecmp((const char *) l, "host", 4) != 0)
                return 0;
        if (*seen)
                return -EBADMSG;
        *seen = true;
        const uint8_t *v = l + k + 1, *end = l + len;
        while (v < end && (*v == ' ' || *v == '\t'))
                v++;
        while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
                end--;
        return host_value(v, (size_t) (end - v), ret);
}

int http_request_host(const uint8_t *buf, size_t n, char *ret) {
        size_t pos, len;
        bool seen = false;
        int r;

        if (n > TLS_HELLO_PEEK_MAX)
                n = TLS_HELLO_PEEK_MAX;
        r = request_line(buf, n, &pos);
        for (; r >= 0; pos += len + 2) {
                r = line_len(buf, n, pos, &len);
                if (r < 0)
                        break;
                if (len == 0)
                        return seen ? 0 : -ENOENT;
                r = header_line(buf + pos, len, &seen, ret);
        }
        if (r == -EAGAIN && n >= TLS_HELLO_PEEK_MAX)
                return -E2BIG;
        return r;
}

int tls_hello_first_name(const uint8_t *buf, size_t n, TlsHelloKind *ret_kind, char *ret) {
        if (n == 0)
                return -EAGAIN;
        *ret_kind = buf[0] == TLS_RECORD_HANDSHAKE ? TLS_HELLO_TLS : TLS_HELLO_HTTP;
        return *ret_kind == TLS_HELLO_TLS ? tls_hello_server_name(buf, n, ret) : http_request_host(buf, n, ret);
}
