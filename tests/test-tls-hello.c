/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The SNI relay's parser (daemon/core/tls-hello.c): real ClientHellos, and every way one can be
 * cut short, lie about its lengths or hide its name; HTTP/1 requests with and without Host. Run
 * under ASan/UBSan too: no read past the buffer. */
#include <errno.h>

#include "tap.h"
#include "tls-hello.h"

/* openssl s_client -servername good.test (OpenSSL 3.0): the bytes it sent first */
static const uint8_t hello_openssl[] = {
        0x16, 0x03, 0x01, 0x01, 0x36, 0x01, 0x00, 0x01, 0x32, 0x03, 0x03, 0x23,
        0xf8, 0x8f, 0x41, 0x62, 0x29, 0xee, 0xd7, 0x3e, 0xc6, 0x0d, 0x34, 0x1c,
        0xcf, 0x8f, 0xd2, 0x4b, 0x03, 0x85, 0xbc, 0x1f, 0x33, 0x1b, 0x0c, 0x67,
        0xfc, 0x3f, 0x9c, 0x92, 0x39, 0x27, 0x39, 0x20, 0xc7, 0x53, 0x61, 0x0c,
        0x8d, 0xc1, 0x0c, 0x7f, 0xe4, 0xab, 0xa8, 0xcf, 0xe1, 0x39, 0x06, 0x05,
        0xa4, 0x47, 0x3f, 0x9e, 0xe3, 0x63, 0xc4, 0xa4, 0x6d, 0x31, 0xb9, 0x9b,
        0xc6, 0xf2, 0xef, 0x82, 0x00, 0x3e, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01,
        0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa,
        0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b,
        0xc0, 0x23, 0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39,
        0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d,
        0x00, 0x3c, 0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0xab,
        0x00, 0x00, 0x00, 0x0e, 0x00, 0x0c, 0x00, 0x00, 0x09, 0x67, 0x6f, 0x6f,
        0x64, 0x2e, 0x74, 0x65, 0x73, 0x74, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00,
        0x01, 0x02, 0x00, 0x0a, 0x00, 0x16, 0x00, 0x14, 0x00, 0x1d, 0x00, 0x17,
        0x00, 0x1e, 0x00, 0x19, 0x00, 0x18, 0x01, 0x00, 0x01, 0x01, 0x01, 0x02,
        0x01, 0x03, 0x01, 0x04, 0x00, 0x23, 0x00, 0x00, 0x00, 0x16, 0x00, 0x00,
        0x00, 0x17, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x2a, 0x00, 0x28, 0x04, 0x03,
        0x05, 0x03, 0x06, 0x03, 0x08, 0x07, 0x08, 0x08, 0x08, 0x09, 0x08, 0x0a,
        0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06, 0x04, 0x01, 0x05, 0x01,
        0x06, 0x01, 0x03, 0x03, 0x03, 0x01, 0x03, 0x02, 0x04, 0x02, 0x05, 0x02,
        0x06, 0x02, 0x00, 0x2b, 0x00, 0x09, 0x08, 0x03, 0x04, 0x03, 0x03, 0x03,
        0x02, 0x03, 0x01, 0x00, 0x2d, 0x00, 0x02, 0x01, 0x01, 0x00, 0x33, 0x00,
        0x26, 0x00, 0x24, 0x00, 0x1d, 0x00, 0x20, 0xd6, 0xb2, 0xf3, 0x55, 0x0a,
        0xf3, 0x5c, 0xc7, 0xee, 0x75, 0xb5, 0xf0, 0xc2, 0x60, 0x95, 0x1e, 0xfc,
        0xf8, 0x38, 0x1e, 0x17, 0xf2, 0xaa, 0xa9, 0x4f, 0x45, 0xbd, 0x03, 0x1a,
        0xfb, 0xb5, 0x54,
};

/* python3's ssl, server_hostname="Files.PythonHosted.org" (OpenSSL 3.0) */
static const uint8_t hello_python[] = {
        0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03, 0x5d,
        0xae, 0x59, 0xcd, 0x57, 0x16, 0x85, 0x25, 0xc1, 0xad, 0xd6, 0x00, 0xdc,
        0x88, 0x38, 0x9a, 0xfd, 0xd4, 0x71, 0xee, 0xef, 0xfb, 0x6f, 0xe3, 0x5e,
        0xcf, 0x0a, 0xbc, 0x8b, 0x12, 0xc7, 0x2d, 0x20, 0x72, 0xe9, 0xf8, 0xf1,
        0x33, 0x2b, 0x37, 0xfa, 0x09, 0xfa, 0x37, 0x91, 0x31, 0x98, 0x5f, 0x65,
        0x14, 0x58, 0xcd, 0x77, 0xc9, 0xf0, 0x54, 0x96, 0x20, 0xdf, 0xcd, 0xc4,
        0x3b, 0x50, 0xfe, 0xfa, 0x00, 0x24, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01,
        0xc0, 0x2c, 0xc0, 0x30, 0xc0, 0x2b, 0xc0, 0x2f, 0xcc, 0xa9, 0xcc, 0xa8,
        0xc0, 0x24, 0xc0, 0x28, 0xc0, 0x23, 0xc0, 0x27, 0x00, 0x9f, 0x00, 0x9e,
        0x00, 0x6b, 0x00, 0x67, 0x00, 0xff, 0x01, 0x00, 0x01, 0x8f, 0x00, 0x00,
        0x00, 0x1b, 0x00, 0x19, 0x00, 0x00, 0x16, 0x46, 0x69, 0x6c, 0x65, 0x73,
        0x2e, 0x50, 0x79, 0x74, 0x68, 0x6f, 0x6e, 0x48, 0x6f, 0x73, 0x74, 0x65,
        0x64, 0x2e, 0x6f, 0x72, 0x67, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00, 0x01,
        0x02, 0x00, 0x0a, 0x00, 0x16, 0x00, 0x14, 0x00, 0x1d, 0x00, 0x17, 0x00,
        0x1e, 0x00, 0x19, 0x00, 0x18, 0x01, 0x00, 0x01, 0x01, 0x01, 0x02, 0x01,
        0x03, 0x01, 0x04, 0x00, 0x23, 0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00,
        0x17, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x2a, 0x00, 0x28, 0x04, 0x03, 0x05,
        0x03, 0x06, 0x03, 0x08, 0x07, 0x08, 0x08, 0x08, 0x09, 0x08, 0x0a, 0x08,
        0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06,
        0x01, 0x03, 0x03, 0x03, 0x01, 0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06,
        0x02, 0x00, 0x2b, 0x00, 0x05, 0x04, 0x03, 0x04, 0x03, 0x03, 0x00, 0x2d,
        0x00, 0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d,
        0x00, 0x20, 0x05, 0xac, 0x7c, 0x63, 0x6a, 0x92, 0x74, 0x68, 0xd1, 0xa1,
        0x96, 0x78, 0x9d, 0x1b, 0x7b, 0x85, 0x7e, 0xd8, 0x30, 0xfe, 0x09, 0x5d,
        0x6b, 0x26, 0x93, 0x2a, 0xee, 0x48, 0x8a, 0x2a, 0xd5, 0x1f, 0x00, 0x15,
        0x00, 0xd7, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00,
};

typedef struct Msg {
        uint8_t b[TLS_HELLO_PEEK_MAX * 2];
        size_t n;
} Msg;

static void put8(Msg *m, uint8_t v) {
        m->b[m->n++] = v;
}

static void put16(Msg *m, uint16_t v) {
        put8(m, (uint8_t) (v >> 8));
        put8(m, (uint8_t) v);
}

static void put(Msg *m, const void *p, size_t l) {
        memcpy(m->b + m->n, p, l);
        m->n += l;
}

static void set16(Msg *m, size_t at, size_t v) {
        m->b[at] = (uint8_t) (v >> 8);
        m->b[at + 1] = (uint8_t) v;
}

static void set24(Msg *m, size_t at, size_t v) {
        m->b[at] = (uint8_t) (v >> 16);
        set16(m, at + 1, v & 0xffff);
}

/* An extension: type, then its data. */
typedef struct Ext {
        uint16_t type;
        const uint8_t *data;
        size_t len;
} Ext;

/* A ClientHello in one record with the extensions given (-1: no extensions block at all). */
static void hello(Msg *m, const Ext *exts, int n_exts) {
        size_t ext_len_at, hs_at;

        m->n = 0;
        put8(m, 0x16), put16(m, 0x0301), put16(m, 0);
        hs_at = m->n;
        put8(m, 1), put8(m, 0), put16(m, 0);
        put16(m, 0x0303);
        for (int i = 0; i < 32; i++)
                put8(m, (uint8_t) i);
        put8(m, 32);
        for (int i = 0; i < 32; i++)
                put8(m, 0xaa);
        put16(m, 4), put16(m, 0x1301), put16(m, 0x1302);
        put8(m, 1), put8(m, 0);
        if (n_exts >= 0) {
                ext_len_at = m->n;
                put16(m, 0);
                for (int i = 0; i < n_exts; i++) {
                        put16(m, exts[i].type), put16(m, (uint16_t) exts[i].len);
                        put(m, exts[i].data, exts[i].len);
                }
                set16(m, ext_len_at, m->n - ext_len_at - 2);
        }
        set24(m, hs_at + 1, m->n - hs_at - 4);
        set16(m, 3, m->n - 5);
}

/* server_name's data for one host_name. */
static size_t sni_data(uint8_t *out, const char *name) {
        size_t l = strlen(name);
        out[0] = (uint8_t) ((l + 3) >> 8), out[1] = (uint8_t) (l + 3);
        out[2] = 0;
        out[3] = (uint8_t) (l >> 8), out[4] = (uint8_t) l;
        memcpy(out + 5, name, l);
        return l + 5;
}

static int tls(const Msg *m, char *name) {
        return tls_hello_server_name(m->b, m->n, name);
}

static void test_real_hellos(void) {
        char name[TLS_HELLO_NAME_MAX + 1];
        TlsHelloKind kind = TLS_HELLO_HTTP;
        bool cut_ok = true;

        is_int(tls_hello_server_name(hello_openssl, sizeof(hello_openssl), name), 0, "openssl s_client's ClientHello is read");
        is_str(name, "good.test", "... its server_name");
        is_int(tls_hello_first_name(hello_python, sizeof(hello_python), &kind, name), 0, "python's ssl ClientHello is read");
        is_str(name, "files.pythonhosted.org", "... its server_name, in lower case");
        ok(kind == TLS_HELLO_TLS, "... as TLS by its first byte");
        for (size_t n = 0; n < sizeof(hello_openssl); n++)
                if (tls_hello_server_name(hello_openssl, n, name) != -EAGAIN) {
                        diag("cut at %zu: %d", n, tls_hello_server_name(hello_openssl, n, name));
                        cut_ok = false;
                }
        ok(cut_ok, "every prefix of it asks for more bytes (-EAGAIN), none gives a name");
}

/* Every byte of a real hello changed, one at a time, to each of a few values: no read past the
 * buffer (ASan), and a name only when the bytes still say one. */
static void test_mutations(void) {
        static const uint8_t values[] = { 0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff };
        uint8_t b[sizeof(hello_python)];
        char name[TLS_HELLO_NAME_MAX + 1];
        unsigned named = 0, total = 0;
        bool sane = true;

        for (size_t i = 0; i < sizeof(b); i++)
                for (size_t v = 0; v < sizeof(values); v++) {
                        memcpy(b, hello_python, sizeof(b));
                        b[i] = values[v];
                        int r = tls_hello_server_name(b, sizeof(b), name);
                        total++;
                        if (r == 0) {
                                named++;
                                sane = sane && strlen(name) >= 1 && strlen(name) <= TLS_HELLO_NAME_MAX;
                        } else
                                sane = sane && (r == -EAGAIN || r == -EBADMSG || r == -ENOENT || r == -EPROTO || r == -E2BIG);
                }
        ok(sane, "%u one-byte mutations of a real hello: each a name or one of the documented errors (%u named)", total, named);
}

static void test_lengths(void) {
        char name[TLS_HELLO_NAME_MAX + 1];
        uint8_t sni[300];
        Ext e = { 0, sni, sni_data(sni, "good.test") };
        Msg m;

        hello(&m, &e, 1);
        is_int(tls(&m, name), 0, "a built hello with one server_name");
        is_str(name, "good.test", "... its name");

        hello(&m, &e, 1);
        set16(&m, 3, m.n - 5 + 1);
        is_int(tls(&m, name), -EAGAIN, "a record length one past the bytes: more is asked for");
        hello(&m, &e, 1);
        set16(&m, 3, 16385);
        is_int(tls(&m, name), -EBADMSG, "a record longer than TLS allows (16385)");
        hello(&m, &e, 1);
        set24(&m, 6, 0xffffff);
        is_int(tls(&m, name), -E2BIG, "a handshake length of 16 MiB: over the peek bound");
        hello(&m, &e, 1);
        set24(&m, 6, m.n - 9 - 1);
        set16(&m, 3, m.n - 5 - 1);
        m.n--;
        is_int(tls(&m, name), -EBADMSG, "a hello one byte short of its extensions' length");
        hello(&m, &e, 1);
        m.b[m.n - 9 - 2] = 0x40; /* the host_name's length, high byte: past the extension */
        is_int(tls(&m, name), -EBADMSG, "a host_name longer than its extension");
        hello(&m, &e, 1);
        m.b[9 + 2 + 32] = 33;
        is_int(tls(&m, name), -EBADMSG, "a session id of 33 bytes");
        hello(&m, &e, 1);
        m.b[0] = 0x17;
        is_int(tls(&m, name), -EBADMSG, "an application data record first");
        hello(&m, &e, 1);
        m.b[5] = 2;
        is_int(tls(&m, name), -EBADMSG, "a handshake that is not a ClientHello");
        is_int(tls_hello_server_name((const uint8_t *) "\x16\x03\x01", 3, name), -EAGAIN, "a record header cut short: more");
        is_int(tls_hello_server_name((const uint8_t *) "\x16\x07", 2, name), -EBADMSG, "... unless its version is no TLS");
}

static void test_names(void) {
        char name[TLS_HELLO_NAME_MAX + 1], longname[300];
        uint8_t sni[400], two[400];
        Ext e[3];
        Msg m;
        size_t l;

        hello(&m, NULL, -1);
        is_int(tls(&m, name), -ENOENT, "a hello without extensions: no name");
        e[0] = (Ext) { 0x000a, (const uint8_t *) "\x00\x02\x00\x1d", 4 };
        hello(&m, e, 1);
        is_int(tls(&m, name), -ENOENT, "a hello without server_name: no name");
        e[1] = (Ext) { 0, sni, sni_data(sni, "good.test") };
        e[2] = (Ext) { 0, sni, e[1].len };
        hello(&m, e, 3);
        is_int(tls(&m, name), -EBADMSG, "two server_name extensions");
        l = sni_data(two, "good.test");
        two[l] = 0, two[l + 1] = 0, two[l + 2] = 9;
        memcpy(two + l + 3, "evil.test", 9);
        two[0] = (uint8_t) ((l - 2 + 12) >> 8), two[1] = (uint8_t) (l - 2 + 12);
        e[1] = (Ext) { 0, two, l + 12 };
        hello(&m, e, 2);
        is_int(tls(&m, name), -EBADMSG, "two host_name entries in one server_name");
        e[1] = (Ext) { 0, sni, sni_data(sni, "good.test.") };
        hello(&m, e, 2);
        is_int(tls(&m, name), -EBADMSG, "a name with a trailing dot");
        e[1] = (Ext) { 0, sni, sni_data(sni, "goodX.test") };
        sni[5 + 4] = '\0';
        hello(&m, e, 2);
        is_int(tls(&m, name), -EBADMSG, "a name with a NUL in it");
        e[1] = (Ext) { 0, sni, sni_data(sni, "a..test") };
        hello(&m, e, 2);
        is_int(tls(&m, name), -EBADMSG, "a name with an empty label");
        memset(longname, 'a', 254);
        longname[254] = '\0';
        for (int i = 60; i < 254; i += 61)
                longname[i] = '.';
        e[1] = (Ext) { 0, sni, sni_data(sni, longname) };
        hello(&m, e, 2);
        is_int(tls(&m, name), -EBADMSG, "a name of 254 characters");
        longname[253] = '\0';
        e[1] = (Ext) { 0, sni, sni_data(sni, longname) };
        hello(&m, e, 2);
        is_int(tls(&m, name), 0, "a name of 253 characters");
        e[1] = (Ext) { 0, sni, sni_data(sni, "good.test") };
        e[2] = (Ext) { 0xfe0d, (const uint8_t *) "\x00\x00\x01\x00\x01\x01", 6 };
        hello(&m, e, 3);
        is_int(tls(&m, name), -EPROTO, "Encrypted Client Hello (0xfe0d) beside a server_name: refused, the real name is hidden");
}

/* A hello split over two records (as a client may when its hello is long). */
static void test_two_records(void) {
        char name[TLS_HELLO_NAME_MAX + 1];
        uint8_t sni[300];
        Ext e = { 0, sni, sni_data(sni, "split.good.test") };
        Msg m, s = {};
        size_t body, first = 20;

        hello(&m, &e, 1);
        body = m.n - 5;
        put8(&s, 0x16), put16(&s, 0x0303), put16(&s, (uint16_t) first);
        put(&s, m.b + 5, first);
        put8(&s, 0x16), put16(&s, 0x0303), put16(&s, (uint16_t) (body - first));
        put(&s, m.b + 5 + first, body - first);
        is_int(tls(&s, name), 0, "a hello over two records is read");
        is_str(name, "split.good.test", "... its name");
        s.n -= 1;
        is_int(tls(&s, name), -EAGAIN, "... and one byte short of its second record asks for more");
}

static int http(const char *req, char *name) {
        return http_request_host((const uint8_t *) req, strlen(req), name);
}

static void test_http(void) {
        char name[TLS_HELLO_NAME_MAX + 1];
        TlsHelloKind kind = TLS_HELLO_TLS;
        static char big[TLS_HELLO_PEEK_MAX + 64];

        is_int(http("GET /simple HTTP/1.1\r\nUser-Agent: x\r\nHost: Good.Test\r\nAccept: */*\r\n\r\n", name), 0, "an HTTP/1.1 request with Host");
        is_str(name, "good.test", "... its Host, in lower case");
        is_int(http("GET / HTTP/1.1\r\nhost:   good.test:8080  \r\n\r\n", name), 0, "Host with a port and blanks");
        is_str(name, "good.test", "... the name without the port");
        is_int(http("GET / HTTP/1.0\r\nAccept: */*\r\n\r\n", name), -ENOENT, "HTTP/1.0 without Host: no name");
        is_int(http("GET / HTTP/1.1\r\nHost: good.test\r\nHost: evil.test\r\n\r\n", name), -EBADMSG, "two Host headers");
        is_int(http("GET / HTTP/1.1\r\nHost: good.test\r\n", name), -EAGAIN, "headers not ended yet: more");
        is_int(http("GET / HT", name), -EAGAIN, "a request line cut short: more");
        is_int(http("GET http://evil.test/ HTTP/1.1\r\nHost: good.test\r\n\r\n", name), -EBADMSG, "an absolute-form target");
        is_int(http("CONNECT evil.test:443 HTTP/1.1\r\nHost: good.test\r\n\r\n", name), -EBADMSG, "CONNECT");
        is_int(http("OPTIONS * HTTP/1.1\r\nHost: good.test\r\n\r\n", name), 0, "OPTIONS *");
        is_int(http("GET / HTTP/1.1\r\nX: a\r\n Host: evil.test\r\nHost: good.test\r\n\r\n", name), -EBADMSG, "a folded header line");
        is_int(http("GET / HTTP/1.1\nHost: good.test\n\n", name), -EBADMSG, "bare LF line ends");
        is_int(http("GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", name), -EBADMSG, "an IPv6 literal Host");
        is_int(http("GET / HTTP/1.1\r\nHost:\r\n\r\n", name), -EBADMSG, "an empty Host");
        is_int(http("GET / HTTP/1.1\r\nHost: good.test:\r\n\r\n", name), -EBADMSG, "a Host with an empty port");
        is_int(http("GET / HTTP/2.0\r\nHost: good.test\r\n\r\n", name), -EBADMSG, "a version other than HTTP/1.x");
        is_int(http("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", name), -EBADMSG, "HTTP/2 with prior knowledge (its :authority is compressed)");
        is_int(http("SSH-2.0-OpenSSH_9.2\r\n", name), -EBADMSG, "an SSH banner: refused at once");
        is_int(http("get / HTTP/1.1\r\n", name), -EBADMSG, "a method in lower case: refused at its first byte");
        is_int(http_request_host((const uint8_t *) "GET / HTTP/1.1\r\nHost: a\0b\r\n\r\n", 30, name), -EBADMSG, "a NUL in a header");
        memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
        memset(big + 19, 'a', sizeof(big) - 20);
        is_int(http_request_host((const uint8_t *) big, TLS_HELLO_PEEK_MAX, name), -E2BIG, "16 KiB of headers not ended: over the bound");
        is_int(tls_hello_first_name((const uint8_t *) "GET / HTTP/1.1\r\nHost: h.test\r\n\r\n", 32, &kind, name), 0, "the first bytes of a request: HTTP");
        ok(kind == TLS_HELLO_HTTP && strcmp(name, "h.test") == 0, "... kind HTTP, name h.test");
        is_int(tls_hello_first_name((const uint8_t *) "", 0, &kind, name), -EAGAIN, "no bytes yet: more");
}

int main(void) {
        test_real_hellos();
        test_mutations();
        test_lengths();
        test_names();
        test_two_records();
        test_http();
        return done_testing();
}
