/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests for lib/proto.c and lib/json-check.c: line framing, strict decoding, the request
 * envelope, field tables, typed getters and reply encoding. */

#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "proto.h"
#include "tap.h"
#include "util.h"

#define Q(s) tap_quote((s), strlen(s))

static uint64_t rng_state = UINT64_C(0x2545f4914f6cdd1d);

static uint64_t rng(void) {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        return rng_state;
}

/* ---- error codes ------------------------------------------------------------------------ */

static void test_error_codes(void) {
        bool all = true;
        for (int c = SBX_OK; c < _SBX_E_MAX; c++) {
                const char *s = sbx_error_code_to_string((SbxErrorCode) c);
                if (!s || sbx_error_code_from_string(s) != (SbxErrorCode) c)
                        all = false;
        }
        ok(all, "every error code has a name that reads back");
        is_str(sbx_error_code_to_string(SBX_E_INVALID_JSON), "invalid_json", "SBX_E_INVALID_JSON is invalid_json");
        is_str(sbx_error_code_to_string(SBX_E_TOO_LARGE), "too_large", "SBX_E_TOO_LARGE is too_large");
        is_str(sbx_error_code_to_string(_SBX_E_MAX), "internal", "an out-of-range code is internal");
        is_str(sbx_error_code_to_string((SbxErrorCode) -1), "internal", "a negative code is internal");
        is_int(sbx_error_code_from_string("bogus"), SBX_E_INTERNAL, "an unknown name is SBX_E_INTERNAL");
        is_int(sbx_error_code_from_string(NULL), SBX_E_INTERNAL, "NULL is SBX_E_INTERNAL");

        ProtoError e;
        is_int(proto_error_set(&e, SBX_E_NOT_FOUND, NULL, "no %s", "such"), -EINVAL, "proto_error_set returns -EINVAL");
        ok(e.code == SBX_E_NOT_FOUND && e.field[0] == '\0' && strcmp(e.message, "no such") == 0,
           "proto_error_set fills code, empty field and message");
        char longname[200];
        memset(longname, 'f', sizeof(longname) - 1);
        longname[sizeof(longname) - 1] = '\0';
        proto_error_set(&e, SBX_E_INVALID_REQUEST, longname, "%s%s%s%s%s%s", longname, longname, longname, longname,
                        longname, longname);
        ok(strlen(e.field) == sizeof(e.field) - 1 && strlen(e.message) == sizeof(e.message) - 1,
           "proto_error_set truncates a long field and message");
}

/* ---- LineBuffer ------------------------------------------------------------------------- */

/* Feeds input through a LineBuffer and records what comes out: "[line]" per line (escaped),
 * "!" per -E2BIG. Also checks the buffer's invariants on the way. */
typedef struct Feed {
        LineBuffer b;
        char log[16384];
        size_t log_len;
        bool sane;
} Feed;

static void feed_init(Feed *f, size_t max) {
        *f = (Feed) { .sane = true };
        line_buffer_init(&f->b, max);
}

static void feed_log(Feed *f, const char *s) {
        size_t n = strlen(s);
        if (f->log_len + n < sizeof(f->log)) {
                memcpy(f->log + f->log_len, s, n + 1);
                f->log_len += n;
        }
}

static void feed_insane(Feed *f, const char *what) {
        if (f->sane)
                diag("LineBuffer invariant broken: %s", what);
        f->sane = false;
}

static void feed_drain(Feed *f) {
        for (;;) {
                char *line;
                size_t n;
                int r = line_buffer_next(&f->b, &line, &n);
                if (r == 0)
                        return;
                if (r == -E2BIG) {
                        feed_log(f, "!");
                        continue;
                }
                if (r != 1) {
                        feed_insane(f, "line_buffer_next returned something else than 1, 0 or -E2BIG");
                        return;
                }
                if (n > f->b.max)
                        feed_insane(f, "a line longer than max was returned");
                if (line[n] != '\0')
                        feed_insane(f, "the line is not NUL-terminated");
                if (memchr(line, '\n', n))
                        feed_insane(f, "the line holds a newline");
                feed_log(f, "[");
                feed_log(f, tap_quote(line, n));
                feed_log(f, "]");
        }
}

/* Writes len bytes in chunks of the sizes in chunks[] (cycled), draining after each commit. */
static void feed_chunks(Feed *f, const char *data, size_t len, const size_t *chunks, size_t n_chunks) {
        size_t pos = 0, k = 0;
        while (pos < len) {
                size_t want = chunks[k++ % n_chunks], avail = 0;
                char *p;
                if (want > len - pos)
                        want = len - pos;
                if (line_buffer_reserve(&f->b, want, &p, &avail) < 0) {
                        feed_insane(f, "line_buffer_reserve failed");
                        return;
                }
                if (avail == 0 || avail > want)
                        feed_insane(f, "line_buffer_reserve offered no space or more than asked");
                if (f->b.len + avail > f->b.max + 1 || f->b.alloc > f->b.max + 1)
                        feed_insane(f, "line_buffer_reserve offered more than max+1 bytes in total");
                if (avail == 0)
                        return;
                memcpy(p, data + pos, avail);
                line_buffer_commit(&f->b, avail);
                pos += avail;
                feed_drain(f);
        }
}

static void feed_all(Feed *f, const char *data, size_t len, size_t chunk) {
        feed_chunks(f, data, len, &chunk, 1);
}

/* The reference: complete lines in order, "!" for those longer than max (with their '\r'), and
 * one "!" for an unfinished tail already longer than max. */
static void model_transcript(const char *data, size_t len, size_t max, Feed *out) {
        size_t start = 0;
        for (size_t i = 0; i < len; i++) {
                if (data[i] != '\n')
                        continue;
                size_t n = i - start;
                if (n > max)
                        feed_log(out, "!");
                else {
                        if (n > 0 && data[i - 1] == '\r')
                                n--;
                        feed_log(out, "[");
                        feed_log(out, tap_quote(data + start, n));
                        feed_log(out, "]");
                }
                start = i + 1;
        }
        if (len - start > max)
                feed_log(out, "!");
}

static void test_line_buffer_cases(void) {
        static const struct {
                const char *in;
                size_t len;
                const char *out;
                const char *why;
        } cases[] = {
#define L(in, out, why) { in, sizeof(in) - 1, out, why }
                L("hello\nworld\n", "[hello][world]", "two lines"),
                L("a\nb\nc\n", "[a][b][c]", "several short lines"),
                L("a\r\nb\r\n", "[a][b]", "CRLF"),
                L("\r\n", "[]", "an empty CRLF line"),
                L("a\rb\n", "[a\\x0db]", "only a trailing CR is dropped"),
                L("a\r\r\n", "[a\\x0d]", "only one trailing CR is dropped"),
                L("\n\n\n", "[][][]", "empty lines"),
                L("a\0b\n", "[a\\x00b]", "a NUL byte inside a line"),
                L("12345678\n", "[12345678]", "a line of exactly max"),
                L("12345678\n1234567\n", "[12345678][1234567]", "max, then max-1"),
                L("123456789\nnext\n", "![next]", "max+1: one -E2BIG, then the next line"),
                L("123456789\n", "!", "max+1 alone"),
                L("ab\n123456789\nok\n", "[ab]![ok]", "a short line, max+1, a short line"),
                L("123456789012345678901234567890\nok\n", "![ok]", "more than 3*max"),
                L("123456789\n123456789\nok\n", "!![ok]", "two over-long lines in a row"),
                L("12345678\n123456789\n87654321\n", "[12345678]![87654321]", "max, max+1, max"),
                L("123456789\n\nok\n", "![][ok]", "an over-long line, then an empty one"),
                L("123456789\r\nok\r\n", "![ok]", "an over-long CRLF line"),
                L("1234567890", "!", "an unfinished over-long line is reported at once"),
                L("abc", "", "an unfinished short line waits"),
#undef L
        };
        static const size_t chunks[] = { 1, 2, 3, 4, 5, 7, 8, 9, 10, 16, 4096 };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
                        Feed f;
                        feed_init(&f, 8);
                        feed_all(&f, cases[i].in, cases[i].len, chunks[c]);
                        is_str(f.log, cases[i].out, "line buffer, max 8, chunks of %zu: %s", chunks[c], cases[i].why);
                        if (!f.sane)
                                ok(false, "line buffer invariants hold (chunks of %zu: %s)", chunks[c], cases[i].why);
                        line_buffer_done(&f.b);
                }
}

static void test_line_buffer_random(void) {
        /* A stream mixing short, exact, over-long, CRLF and empty lines, cut at random. */
        char stream[4096];
        size_t len = 0;
        while (len < sizeof(stream) - 64) {
                size_t n = rng() % 5 == 0 ? rng() % 40 : rng() % 12;
                for (size_t i = 0; i < n; i++)
                        stream[len++] = (char) ('a' + rng() % 26);
                if (rng() % 4 == 0)
                        stream[len++] = '\r';
                stream[len++] = '\n';
        }
        for (size_t max = 0; max <= 16; max += 4) {
                Feed want;
                feed_init(&want, max);
                model_transcript(stream, len, max, &want);
                bool all = true, sane = true;
                for (int run = 0; run < 100; run++) {
                        size_t chunks[64];
                        for (size_t k = 0; k < 64; k++)
                                chunks[k] = 1 + rng() % (run % 2 ? 3 : 40);
                        Feed f;
                        feed_init(&f, max);
                        feed_chunks(&f, stream, len, chunks, 64);
                        if (strcmp(f.log, want.log) != 0) {
                                if (all)
                                        diag("run %d differs from the model", run);
                                all = false;
                        }
                        sane = sane && f.sane;
                        line_buffer_done(&f.b);
                }
                ok(all, "line buffer, max %zu: 100 random chunkings of a 4K stream match the model", max);
                ok(sane, "line buffer, max %zu: invariants hold over the random chunkings", max);
        }
}

static void test_line_buffer_reserve(void) {
        LineBuffer b;
        char *p;
        size_t avail;

        line_buffer_init(&b, 8);
        ok(!line_buffer_has_partial(&b), "a new buffer holds no partial line");
        ok(line_buffer_reserve(&b, 1000, &p, &avail) == 0 && avail == 9, "reserve offers at most max+1 bytes");
        ok(line_buffer_reserve(&b, 3, &p, &avail) == 0 && avail == 3, "reserve offers what is asked when it fits");
        memcpy(p, "abc", 3);
        line_buffer_commit(&b, 3);
        ok(line_buffer_reserve(&b, 1000, &p, &avail) == 0 && avail == 6, "reserve counts the bytes held");
        ok(line_buffer_has_partial(&b), "an unfinished line is partial");
        memcpy(p, "defghi", 6);
        line_buffer_commit(&b, 6);
        char *line;
        size_t n;
        is_int(line_buffer_next(&b, &line, &n), -E2BIG, "max+1 bytes without a newline: -E2BIG");
        is_int(line_buffer_next(&b, &line, &n), 0, "-E2BIG is reported once");
        ok(line_buffer_has_partial(&b), "inside an over-long line is partial");
        ok(line_buffer_reserve(&b, 1000, &p, &avail) == 0 && b.len + avail <= 9,
           "reserve while discarding still offers at most max+1");
        ok(b.alloc <= 9, "the buffer never grew past max+1");
        memcpy(p, "xx\nok\n", 6);
        line_buffer_commit(&b, 6);
        ok(line_buffer_next(&b, &line, &n) == 1 && n == 2 && strcmp(line, "ok") == 0,
           "the line after the over-long one is intact");
        ok(!line_buffer_has_partial(&b), "nothing partial after the last newline");
        line_buffer_done(&b);
        is_uint64(b.max, 8, "line_buffer_done keeps max");
        ok(line_buffer_reserve(&b, 4, &p, &avail) == 0 && avail == 4, "the buffer is usable after line_buffer_done");
        line_buffer_done(&b);
        line_buffer_done(&b);
        ok(true, "line_buffer_done twice is harmless");
}

static void test_line_buffer_big(void) {
        const size_t max = SBX_DEFAULT_MAX_LINE;
        char *big = malloc(max + 16);

        for (int extra = 0; extra <= 1; extra++) {
                LineBuffer b;
                size_t pos = 0, lines = 0, toobig = 0, first = 0, last = 0, peak = 0;
                char *line;
                size_t n;
                int r;
                line_buffer_init(&b, max);
                /* max (+1) bytes, a newline, then "{}\n", in 64 KiB reads. */
                memset(big, 'x', max + 1);
                memcpy(big + max + extra, "\n{}\n", 4);
                size_t total = max + extra + 4;
                while (pos < total) {
                        char *p;
                        size_t avail;
                        if (line_buffer_reserve(&b, 65536, &p, &avail) < 0 || avail == 0)
                                break;
                        if (avail > total - pos)
                                avail = total - pos;
                        memcpy(p, big + pos, avail);
                        line_buffer_commit(&b, avail);
                        pos += avail;
                        if (b.alloc > peak)
                                peak = b.alloc;
                        while ((r = line_buffer_next(&b, &line, &n)) != 0) {
                                if (r == -E2BIG)
                                        toobig++;
                                else {
                                        if (lines++ == 0)
                                                first = n;
                                        last = n;
                                }
                        }
                }
                if (extra == 0)
                        ok(lines == 2 && toobig == 0 && first == max && last == 2,
                           "a 4 MiB line in 64 KiB reads is returned whole");
                else
                        ok(lines == 1 && toobig == 1 && last == 2 && strcmp(line, "{}") == 0,
                           "a 4 MiB + 1 line in 64 KiB reads: one -E2BIG, then the next line");
                ok(peak <= max + 1, "the buffer stays within max+1 bytes (%zu)", peak);
                line_buffer_done(&b);
        }
        free(big);
}

/* The stream offsets that tie fds to lines (lib/fdpass.h): the '\n' of each line handed out,
 * and of each over-long line skipped, counted from the first byte ever committed, across
 * compactions and reads that split lines. */
/* Commits as much of s as the buffer takes now; returns how much. */
static size_t feed(LineBuffer *b, const char *s) {
        char *p;
        size_t avail, n = strlen(s);
        if (line_buffer_reserve(b, n, &p, &avail) < 0)
                return 0;
        if (n > avail)
                n = avail;
        memcpy(p, s, n);
        line_buffer_commit(b, n);
        return n;
}

static void test_line_buffer_offsets(void) {
        LineBuffer b;
        char *line;
        size_t len;

        line_buffer_init(&b, 8);
        ok(b.line_end == UINT64_MAX && b.discarded_end == UINT64_MAX && b.committed == 0, "a new buffer has no line end");
        feed(&b, "ab\ncd");
        ok(line_buffer_next(&b, &line, &len) == 1 && b.line_end == 2, "\"ab\\n\": its newline is byte 2");
        ok(line_buffer_next(&b, &line, &len) == 0, "\"cd\" is not complete");
        feed(&b, "e\r\n");
        ok(line_buffer_next(&b, &line, &len) == 1 && strcmp(line, "cde") == 0 && b.line_end == 7,
           "\"cde\\r\\n\" split across reads: its newline is byte 7");
        is_int((long long) feed(&b, "0123456789"), 9, "the buffer takes 9 bytes of a 10-byte line (max 8)");
        is_int(line_buffer_next(&b, &line, &len), -E2BIG, "an over-long line");
        feed(&b, "9abc\nok\n");
        ok(line_buffer_next(&b, &line, &len) == 1 && strcmp(line, "ok") == 0, "the next line after it");
        ok(b.discarded_end == 21 && b.line_end == 24, "the skipped line ended at 21, \"ok\" at 24 (got %llu, %llu)",
           (unsigned long long) b.discarded_end, (unsigned long long) b.line_end);
        is_int((long long) b.committed, 25, "25 bytes committed in all");
        line_buffer_done(&b);
}

static void test_line_buffer_max0(void) {
        Feed f;
        feed_init(&f, 0);
        feed_all(&f, "\n\na\n\n", 5, 1);
        is_str(f.log, "[][]![]", "max 0: only empty lines pass");
        line_buffer_done(&f.b);
}

/* ---- proto_parse_line ------------------------------------------------------------------- */

static json_object *parse_ok(const char *s, size_t len, unsigned depth, const char *why) {
        json_object *o = NULL;
        ProtoError e = {};
        int r = proto_parse_line(s, len, depth, &o, &e);
        if (!is_int(r, 0, "parses: %s: %s", why, tap_quote(s, len)))
                diag("error: %s", e.message);
        return o;
}

static void parse_fail(const char *s, size_t len, unsigned depth, const char *why) {
        json_object *o = (json_object *) 0x1;
        ProtoError e = {};
        int r = proto_parse_line(s, len, depth, &o, &e);
        ok(r < 0 && e.code == SBX_E_INVALID_JSON && e.message[0] && !e.field[0] && o == (json_object *) 0x1,
           "refused as invalid_json: %s: %s", why, tap_quote(s, len));
        if (r == 0 && o != (json_object *) 0x1)
                json_object_put(o);
}

static void test_parse_valid(void) {
        static const struct {
                const char *s;
                const char *why;
        } cases[] = {
                { "{}", "empty object" },
                { "{\"id\":1,\"op\":\"hello\"}", "a request" },
                { " \t{ \"a\" : [ 1 , 2 ] }\r ", "whitespace everywhere" },
                { "{\"\":1}", "empty key" },
                { "{\"s\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}", "every simple escape" },
                { "{\"s\":\"\\u00e9\\u20AC\\ud83d\\ude00\\uDBFF\\uDFFF\"}", "unicode escapes and pairs" },
                { "{\"s\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}", "raw UTF-8" },
                { "{\"s\":\"\x7f\"}", "DEL is not a control character" },
                { "{\"n\":[0,-0,1.5,-1.5e10,1E+2,1e-2,123456789,-9223372036854775808]}", "numbers" },
                { "{\"l\":[true,false,null]}", "literals" },
                { "[{\"a\":1},{\"a\":2}]", "the same key in sibling objects" },
                { "{\"a\":{\"a\":{\"a\":1}}}", "the same key at different levels" },
                { "{\"a\":1,\"b\":{\"a\":2},\"c\":[{\"a\":3,\"b\":4}]}", "nested, no duplicates" },
                { "[]", "an array" },
                { "\"x\"", "a string" },
                { "{\"s\":\"\\u0001\"}", "an escaped control character" },
                { "{\"a\":1,\"A\":2}", "keys differ in case" },
                { "{\"\xc3\xa9\":1,\"e\\u0301\":2}", "keys equal only after normalisation" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                json_object_put(parse_ok(cases[i].s, strlen(cases[i].s), SBX_MAX_DEPTH, cases[i].why));

        const char *req = "{\"id\":7,\"op\":\"run\",\"argv\":[\"a\",\"b\"]}";
        json_object *o = parse_ok(req, strlen(req), SBX_MAX_DEPTH, "a run request");
        json_object *v;
        ok(o && json_object_object_get_ex(o, "argv", &v) && json_object_array_length(v) == 2 &&
           strcmp(json_object_get_string(json_object_array_get_idx(v, 1)), "b") == 0,
           "the parsed object holds what the line said");
        json_object_put(o);

        const char *pair = "{\"s\":\"\\ud83d\\ude00\"}";
        o = parse_ok(pair, strlen(pair), SBX_MAX_DEPTH, "a surrogate pair");
        ok(o && json_object_object_get_ex(o, "s", &v) && strcmp(json_object_get_string(v), "\xf0\x9f\x98\x80") == 0,
           "a surrogate pair decodes to one code point");
        json_object_put(o);

        /* Only len bytes count: a line need not be NUL-terminated. */
        json_object_put(parse_ok("{}garbage", 2, SBX_MAX_DEPTH, "the first 2 bytes of a longer buffer"));
}

static void test_parse_scalars(void) {
        /* RFC 8259 allows any value at the top level; a request needs an object, but deciding that
         * is proto_request_envelope's job (invalid_request), not the parser's (invalid_json). */
        static const char *const scalars[] = { "\"s\"", "1", "-1.5", "true", "null" };
        for (size_t i = 0; i < sizeof(scalars) / sizeof(scalars[0]); i++)
                json_object_put(parse_ok(scalars[i], strlen(scalars[i]), SBX_MAX_DEPTH, "a top-level scalar"));

        /* Whatever the verdict, trailing whitespace must not change it (the fuzzer found "1 "). */
        json_object *o = NULL;
        ProtoError e;
        int with = proto_parse_line("1 ", 2, SBX_MAX_DEPTH, &o, &e);
        json_object_put(o);
        o = NULL;
        int without = proto_parse_line("1", 1, SBX_MAX_DEPTH, &o, &e);
        json_object_put(o);
        is_int(without, with, "\"1\" and \"1 \" get the same verdict");
}

static void test_parse_invalid(void) {
        static const struct {
                const char *s;
                size_t len;
                const char *why;
        } cases[] = {
#define I(s, why) { s, sizeof(s) - 1, why }
                I("", "empty line"),
                I("   ", "only whitespace"),
                I("{'a':1}", "single-quoted key"),
                I("{\"a\":'x'}", "single-quoted value"),
                I("NaN", "NaN"),
                I("{\"a\":NaN}", "NaN value"),
                I("{\"a\":nan}", "nan value"),
                I("{\"a\":Infinity}", "Infinity"),
                I("{\"a\":-Infinity}", "-Infinity"),
                I("{\"a\":inf}", "inf"),
                I("{\"a\":1,}", "trailing comma in object"),
                I("[1,]", "trailing comma in array"),
                I("[,1]", "leading comma"),
                I("[1,,2]", "double comma"),
                I("{,}", "lone comma"),
                I("{\"a\":1}//c", "line comment"),
                I("{\"a\":/*c*/1}", "block comment"),
                I("#{}", "hash comment"),
                I("{\"a\":1} x", "trailing garbage"),
                I("{\"a\":1}{}", "two values"),
                I("{\"a\":1}}", "extra brace"),
                I("{\"a\":1}\0", "trailing NUL byte"),
                I("\0{}", "leading NUL byte"),
                I("{\"a\"}", "key without value"),
                I("{\"a\" 1}", "missing colon"),
                I("{\"a\":1 \"b\":2}", "missing comma"),
                I("{a:1}", "unquoted key"),
                I("{1:1}", "number key"),
                I("{\"a\":1", "unterminated object"),
                I("[1,2", "unterminated array"),
                I("{\"a\":\"x", "unterminated string"),
                I("\"abc", "unterminated top-level string"),
                I("{\"a\":1,\"a\":2}", "duplicate key"),
                I("{\"a\":1,\"b\":2,\"a\":3}", "duplicate key, not adjacent"),
                I("{\"a\":1,\"a\":1}", "duplicate key, same value"),
                I("{\"a\":null,\"a\":null}", "duplicate key, null values"),
                I("[{\"x\":1,\"x\":1}]", "duplicate key in an object in an array"),
                I("{\"o\":{\"k\":1,\"k\":2}}", "duplicate key in a nested object"),
                I("{\"a\":[{\"b\":{\"c\":1,\"c\":1}}]}", "duplicate key three levels down"),
                I("[{},{},{\"z\":{},\"z\":[]}]", "duplicate key in the third element"),
                I("{\"a\":1,\"\\u0061\":2}", "duplicate key spelled with an escape"),
                I("{\"a\":{\"x\":1},\"a\":{\"y\":1,\"z\":2}}", "duplicate key whose values are objects"),
                I("{\"a\":{},\"b\":{\"c\":1,\"c\":2},\"d\":{}}", "duplicate key between clean siblings"),
                I("{\"s\":\"\\u0000\"}", "\\u0000"),
                I("{\"s\":\"a\\u0000b\"}", "\\u0000 inside a string"),
                I("{\"\\u0000\":1}", "\\u0000 in a key"),
                I("{\"s\":\"\\ud800\"}", "lone high surrogate"),
                I("{\"s\":\"\\udc00\"}", "lone low surrogate"),
                I("{\"s\":\"\\udfff\\ud800\"}", "surrogates in the wrong order"),
                I("{\"s\":\"\\ud800\\u0041\"}", "high surrogate then a non-surrogate"),
                I("{\"s\":\"\\ud800\\ud800\"}", "two high surrogates"),
                I("{\"s\":\"\\ud800x\"}", "high surrogate then a character"),
                I("{\"s\":\"\\ud800\"", "high surrogate at the end"),
                I("{\"s\":\"\\u12\"}", "short \\u escape"),
                I("{\"s\":\"\\u12G4\"}", "bad hex digit"),
                I("{\"s\":\"\\x41\"}", "\\x escape"),
                I("{\"s\":\"\\a\"}", "\\a escape"),
                I("{\"s\":\"\\'\"}", "escaped single quote"),
                I("{\"s\":\"\\", "backslash at the end"),
                I("{\"s\":\"\xff\"}", "byte FF in a string"),
                I("{\"s\":\"\xc3\"}", "truncated UTF-8 in a string"),
                I("{\"s\":\"\xc0\xaf\"}", "overlong UTF-8"),
                I("{\"s\":\"\xed\xa0\x80\"}", "raw UTF-8 surrogate"),
                I("{\"s\":\"\xf4\x90\x80\x80\"}", "UTF-8 above U+10FFFF"),
                I("{\"\xff\":1}", "invalid UTF-8 in a key"),
                I("\xef\xbb\xbf{}", "byte order mark"),
                I("{\"s\":\"a\tb\"}", "raw tab in a string"),
                I("{\"s\":\"a\nb\"}", "raw newline in a string"),
                I("{\"s\":\"a\x01\"}", "raw control character"),
                I("{\"s\":\"a\x1f\"}", "raw 0x1F"),
                I("{\"n\":01}", "leading zero"),
                I("{\"n\":-01}", "negative leading zero"),
                I("{\"n\":00}", "double zero"),
                I("{\"n\":1.}", "no digit after the point"),
                I("{\"n\":.5}", "no digit before the point"),
                I("{\"n\":-}", "lone minus"),
                I("{\"n\":-.5}", "minus then point"),
                I("{\"n\":+1}", "plus sign"),
                I("{\"n\":--1}", "double minus"),
                I("{\"n\":1e}", "empty exponent"),
                I("{\"n\":1e+}", "signed empty exponent"),
                I("{\"n\":1.5.5}", "two points"),
                I("{\"n\":0x10}", "hexadecimal"),
                I("{\"n\":1_000}", "digit separator"),
                I("{\"n\":Infinity}", "Infinity again"),
                I("01", "top-level leading zero"),
                I("-", "top-level minus"),
                I("1.", "top-level 1."),
                I(".5", "top-level .5"),
                I("{\"l\":tru}", "truncated true"),
                I("{\"l\":True}", "capitalised True"),
                I("{\"l\":TRUE}", "TRUE"),
                I("{\"l\":nul}", "truncated null"),
                I("{\"l\":nulll}", "null with an extra l"),
                I("{\"l\":None}", "None"),
                I("{\"l\":undefined}", "undefined"),
#undef I
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                parse_fail(cases[i].s, cases[i].len, SBX_MAX_DEPTH, cases[i].why);
}

/* n nested arrays around a 1 ("[[1]]" for 2), or objects ({"a":{"a":1}}). */
static char *nested(unsigned n, bool objects) {
        char *s = malloc(n * 6 + 2), *p = s;
        for (unsigned i = 0; i < n; i++)
                p = stpcpy(p, objects ? "{\"a\":" : "[");
        *p++ = '1';
        for (unsigned i = 0; i < n; i++)
                *p++ = objects ? '}' : ']';
        *p = '\0';
        return s;
}

static void test_parse_depth(void) {
        for (int objects = 0; objects <= 1; objects++) {
                char *s = nested(SBX_MAX_DEPTH, objects);
                json_object_put(parse_ok(s, strlen(s), SBX_MAX_DEPTH, objects ? "16 nested objects" : "16 nested arrays"));
                free(s);
                s = nested(SBX_MAX_DEPTH + 1, objects);
                parse_fail(s, strlen(s), SBX_MAX_DEPTH, objects ? "17 nested objects" : "17 nested arrays");
                free(s);
                s = nested(3, objects);
                json_object_put(parse_ok(s, strlen(s), 3, "3 levels with a limit of 3"));
                parse_fail(s, strlen(s), 2, "3 levels with a limit of 2");
                free(s);
        }
        json_object_put(parse_ok("[[],{},[1]]", 11, 2, "siblings do not add up depth"));
        json_object_put(parse_ok("{}", 2, 1, "an object with limit 1"));
        parse_fail("{}", 2, 0, "an object with limit 0");

        char s16[64] = "", *p = s16;
        for (int i = 0; i < 16; i++)
                *p++ = '[';
        for (int i = 0; i < 16; i++)
                *p++ = ']';
        json_object_put(parse_ok(s16, 32, SBX_MAX_DEPTH, "16 nested empty arrays"));

        /* A hostile line must be refused without recursing down its whole depth. */
        size_t n = 1000000;
        char *deep = malloc(n);
        memset(deep, '[', n);
        parse_fail(deep, n, SBX_MAX_DEPTH, "a million opening brackets");
        memset(deep, '{', n);
        parse_fail(deep, n, SBX_MAX_DEPTH, "a million opening braces");
        free(deep);
}

/* ---- proto_request_envelope ------------------------------------------------------------- */

static json_object *parse_quiet(const char *s) {
        json_object *o = NULL;
        ProtoError e;
        if (proto_parse_line(s, strlen(s), SBX_MAX_DEPTH, &o, &e) < 0) {
                diag("test input does not parse: %s: %s", Q(s), e.message);
                return NULL;
        }
        return o;
}

static void envelope_ok(const char *s, const char *want_op, const char *why) {
        _cleanup_json_ json_object *o = parse_quiet(s);
        json_object *id = NULL;
        const char *op = NULL;
        ProtoError e = {};
        int r = proto_request_envelope(o, &id, &op, &e);
        ok(r == 0 && id && op && strcmp(op, want_op) == 0, "envelope accepted: %s: %s", why, Q(s));
}

static void envelope_fail(const char *s, const char *want_field, const char *why) {
        _cleanup_json_ json_object *o = parse_quiet(s);
        json_object *id = NULL;
        const char *op = NULL;
        ProtoError e = {};
        int r = proto_request_envelope(o, &id, &op, &e);
        ok(r < 0 && e.code == SBX_E_INVALID_REQUEST && strcmp(e.field, want_field) == 0 && op == NULL,
           "envelope refused (field '%s'): %s: %s", want_field, why, Q(s));
        if (r < 0 && strcmp(e.field, want_field) != 0)
                diag("field was '%s'", e.field);
}

static void test_envelope(void) {
        envelope_ok("{\"id\":1,\"op\":\"hello\"}", "hello", "integer id");
        envelope_ok("{\"op\":\"hello\",\"id\":1}", "hello", "op first");
        envelope_ok("{\"id\":\"abc\",\"op\":\"list\"}", "list", "string id");
        envelope_ok("{\"id\":-1,\"op\":\"x\"}", "x", "negative id");
        envelope_ok("{\"id\":0,\"op\":\"x\"}", "x", "zero id");
        envelope_ok("{\"id\":9223372036854775807,\"op\":\"x\"}", "x", "INT64_MAX id");
        envelope_ok("{\"id\":1,\"op\":\"run\",\"argv\":[\"true\"]}", "run", "other fields are not its business");

        char s[400], longid[SBX_MAX_ID_LEN + 2];
        memset(longid, 'i', sizeof(longid));
        longid[SBX_MAX_ID_LEN] = '\0';
        snprintf(s, sizeof(s), "{\"id\":\"%s\",\"op\":\"x\"}", longid);
        envelope_ok(s, "x", "a string id of exactly 128 bytes");
        longid[SBX_MAX_ID_LEN] = 'i';
        longid[SBX_MAX_ID_LEN + 1] = '\0';
        snprintf(s, sizeof(s), "{\"id\":\"%s\",\"op\":\"x\"}", longid);
        envelope_fail(s, "id", "a string id of 129 bytes");

        envelope_fail("{\"op\":\"hello\"}", "id", "missing id");
        envelope_fail("{\"id\":\"\",\"op\":\"hello\"}", "id", "empty string id");
        envelope_fail("{\"id\":null,\"op\":\"hello\"}", "id", "null id");
        envelope_fail("{\"id\":true,\"op\":\"hello\"}", "id", "boolean id");
        envelope_fail("{\"id\":1.5,\"op\":\"hello\"}", "id", "fractional id");
        envelope_fail("{\"id\":1.0,\"op\":\"hello\"}", "id", "1.0 is a double");
        envelope_fail("{\"id\":[1],\"op\":\"hello\"}", "id", "array id");
        envelope_fail("{\"id\":{},\"op\":\"hello\"}", "id", "object id");
        envelope_fail("{\"id\":1}", "op", "missing op");
        envelope_fail("{\"id\":1,\"op\":1}", "op", "integer op");
        envelope_fail("{\"id\":1,\"op\":null}", "op", "null op");
        envelope_fail("{\"id\":1,\"op\":[\"hello\"]}", "op", "array op");
        envelope_fail("{\"id\":1,\"op\":{}}", "op", "object op");
        envelope_fail("{\"id\":1,\"op\":true}", "op", "boolean op");
        envelope_fail("[]", "", "an array");
        envelope_fail("\"hello\"", "", "a string");
        envelope_fail("{}", "id", "an empty object");

        json_object *id = NULL;
        const char *op = NULL;
        ProtoError e = {};
        ok(proto_request_envelope(NULL, &id, &op, &e) < 0 && e.code == SBX_E_INVALID_REQUEST,
           "envelope of NULL is refused");
}

/* ---- proto_check_fields ----------------------------------------------------------------- */

static const FieldSpec test_spec[] = {
        { "id", FIELD_ID, true },
        { "op", FIELD_STRING, true },
        { "name", FIELD_STRING, false },
        { "pids", FIELD_INT, false },
        { "cpus", FIELD_NUMBER, false },
        { "best_effort", FIELD_BOOL, false },
        { "limits", FIELD_OBJECT, false },
        { "argv", FIELD_ARRAY, false },
        { "memory", FIELD_SIZE, false },
        { "timeout_s", FIELD_DURATION, false },
        { "command", FIELD_STRING_OR_ARRAY, false },
        { "sandbox", FIELD_ID, false },
        {}
};

static int check_with(const char *s, const char *prefix, ProtoError *e) {
        _cleanup_json_ json_object *o = parse_quiet(s);
        *e = (ProtoError) {};
        return o ? proto_check_fields(o, test_spec, prefix, e) : -EBADMSG;
}

static void fields_ok(const char *s, const char *why) {
        ProtoError e;
        int r = check_with(s, NULL, &e);
        if (!ok(r == 0, "fields accepted: %s: %s", why, Q(s)))
                diag("refused: %s (field '%s')", e.message, e.field);
}

static void fields_fail(const char *s, const char *prefix, const char *want_field, const char *why) {
        ProtoError e;
        int r = check_with(s, prefix, &e);
        if (!ok(r == -EINVAL && e.code == SBX_E_INVALID_REQUEST && strcmp(e.field, want_field) == 0 &&
                        strstr(e.message, want_field),
                "fields refused, naming '%s': %s: %s", want_field, why, Q(s)))
                diag("returned %d, field '%s', message: %s", r, e.field, e.message);
}

static void test_check_fields(void) {
        fields_ok("{\"id\":1,\"op\":\"run\"}", "required only");
        fields_ok("{\"id\":\"x\",\"op\":\"run\",\"name\":\"n\",\"pids\":-5,\"cpus\":1,\"best_effort\":false,"
                  "\"limits\":{},\"argv\":[],\"memory\":1,\"timeout_s\":1,\"command\":\"c\",\"sandbox\":1}",
                  "every field");
        fields_ok("{\"id\":1,\"op\":\"run\",\"cpus\":0.5,\"memory\":\"1K\",\"timeout_s\":\"1s\",\"command\":[\"a\"],"
                  "\"sandbox\":\"s\"}",
                  "the other accepted types");
        fields_ok("{\"id\":1,\"op\":\"run\",\"memory\":1.5,\"timeout_s\":0.5}", "fractional size and duration");
        fields_ok("{\"id\":1,\"op\":\"run\",\"name\":null,\"pids\":null,\"limits\":null,\"argv\":null}",
                  "null means absent for optional fields");

        fields_fail("{\"id\":1,\"op\":\"run\",\"bogus\":1}", NULL, "bogus", "an unknown field");
        fields_fail("{\"id\":1,\"op\":\"run\",\"bogus\":null}", NULL, "bogus", "an unknown field set to null");
        fields_fail("{\"id\":1,\"op\":\"run\",\"Name\":\"x\"}", NULL, "Name", "field names are case-sensitive");
        fields_fail("{\"id\":1,\"op\":\"run\",\"\":1}", NULL, "", "an empty field name");
        fields_fail("{\"id\":1,\"op\":\"run\",\"bogus\":1}", "limits.", "limits.bogus", "an unknown field, with prefix");
        fields_fail("{\"id\":1}", NULL, "op", "a missing required field");
        fields_fail("{\"op\":\"x\"}", "limits.", "limits.id", "a missing required field, with prefix");
        fields_fail("{\"id\":1,\"op\":null}", NULL, "op", "null for a required field");

        static const struct {
                const char *field, *value;
        } wrong[] = {
                { "name", "1" },        { "name", "true" },     { "name", "[]" },        { "name", "{}" },
                { "pids", "\"1\"" },    { "pids", "1.5" },      { "pids", "1e3" },       { "pids", "true" },
                { "pids", "[]" },       { "cpus", "\"1\"" },    { "cpus", "true" },      { "cpus", "{}" },
                { "best_effort", "1" }, { "best_effort", "\"true\"" },                   { "best_effort", "[]" },
                { "limits", "[]" },     { "limits", "\"x\"" },  { "limits", "1" },       { "argv", "{}" },
                { "argv", "\"x\"" },    { "memory", "true" },   { "memory", "[]" },      { "memory", "{}" },
                { "timeout_s", "false" }, { "timeout_s", "[\"1s\"]" },                  { "command", "1" },
                { "command", "true" },  { "command", "{}" },    { "sandbox", "1.5" },    { "sandbox", "true" },
                { "sandbox", "[]" },    { "id", "1.5" },        { "id", "[]" },          { "op", "1" },
        };
        for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
                char s[256];
                if (strcmp(wrong[i].field, "id") == 0 || strcmp(wrong[i].field, "op") == 0)
                        snprintf(s, sizeof(s), "{\"%s\":%s,\"%s\":%s}", wrong[i].field, wrong[i].value,
                                 strcmp(wrong[i].field, "id") == 0 ? "op" : "id",
                                 strcmp(wrong[i].field, "id") == 0 ? "\"x\"" : "1");
                else
                        snprintf(s, sizeof(s), "{\"id\":1,\"op\":\"x\",\"%s\":%s}", wrong[i].field, wrong[i].value);
                fields_fail(s, NULL, wrong[i].field, "a value of the wrong type");
        }

        char s[512], key[200];
        memset(key, 'k', sizeof(key) - 1);
        key[sizeof(key) - 1] = '\0';
        snprintf(s, sizeof(s), "{\"id\":1,\"op\":\"x\",\"%s\":1}", key);
        ProtoError e;
        int r = check_with(s, "limits.", &e);
        ok(r == -EINVAL && strncmp(e.field, "limits.kkkk", 11) == 0 && strlen(e.field) < sizeof(e.field),
           "an unknown 199-byte field name is cut to fit");

        e = (ProtoError) {};
        _cleanup_json_ json_object *arr = json_object_new_array();
        ok(proto_check_fields(arr, test_spec, "limits.", &e) == -EINVAL && strcmp(e.field, "limits.") == 0,
           "proto_check_fields on an array is refused");
}

/* ---- getters ---------------------------------------------------------------------------- */

#define SENTINEL UINT64_C(0xdeadbeefcafe)

static int get_uint_from(const char *value, uint64_t min, uint64_t max, uint64_t *ret, ProtoError *e) {
        char s[256];
        snprintf(s, sizeof(s), "{\"v\":%s}", value);
        _cleanup_json_ json_object *o = parse_quiet(s);
        *e = (ProtoError) {};
        *ret = SENTINEL;
        return o ? proto_get_uint(o, "v", min, max, ret, e) : -EBADMSG;
}

static void uint_ok(const char *value, uint64_t min, uint64_t max, uint64_t want) {
        ProtoError e;
        uint64_t v;
        int r = get_uint_from(value, min, max, &v, &e);
        if (is_int(r, 1, "proto_get_uint(%s) in [%" PRIu64 ", %" PRIu64 "] is present", value, min, max))
                is_uint64(v, want, "proto_get_uint(%s) = %" PRIu64, value, want);
        else
                diag("error: %s", e.message);
}

static void uint_fail(const char *value, uint64_t min, uint64_t max) {
        ProtoError e;
        uint64_t v;
        int r = get_uint_from(value, min, max, &v, &e);
        ok(r < 0 && e.code == SBX_E_INVALID_REQUEST && strcmp(e.field, "v") == 0 && v == SENTINEL,
           "proto_get_uint(%s) outside [%" PRIu64 ", %" PRIu64 "] is refused, output untouched", value, min, max);
        if (r >= 0)
                diag("returned %d with %" PRIu64, r, v);
}

/* json-c would saturate integers beyond 64 bits silently, so the strict check refuses the line. */
static void wide_integer_refused(const char *value) {
        char s[256];
        ProtoError e = {};
        json_object *o = NULL;
        snprintf(s, sizeof(s), "{\"v\":%s}", value);
        int r = proto_parse_line(s, strlen(s), SBX_MAX_DEPTH, &o, &e);
        ok(r < 0 && e.code == SBX_E_INVALID_JSON && !o, "an integer beyond 64 bits (%s) is refused as invalid_json", value);
        json_object_put(o);
}

static void test_get_uint(void) {
        uint_ok("5", 0, 10, 5);
        uint_ok("0", 0, 10, 0);
        uint_ok("10", 0, 10, 10);
        uint_ok("5", 5, 5, 5);
        uint_ok("9223372036854775807", 0, UINT64_MAX, UINT64_C(9223372036854775807));
        uint_fail("11", 0, 10);
        uint_fail("4", 5, 10);
        uint_fail("-1", 0, 10);
        uint_fail("-1", 0, UINT64_MAX);
        uint_fail("-9223372036854775808", 0, UINT64_MAX);
        wide_integer_refused("-9223372036854775809");
        uint_fail("1.5", 0, 10);
        uint_fail("1.0", 0, 10);
        uint_fail("\"5\"", 0, 10);
        uint_fail("true", 0, 10);
        uint_fail("[]", 0, 10);
        uint_fail("9223372036854775807", 0, UINT64_C(9223372036854775806));

        /* json-c keeps integers above INT64_MAX as uint64 and saturates beyond UINT64_MAX, without
         * errno: a value must come back exact or be refused, never clamped to INT64_MAX. (UINT64_MAX
         * itself is left out: json-c cannot tell it from a saturated larger number.) */
        uint_ok("9223372036854775808", 0, UINT64_MAX, UINT64_C(9223372036854775808));
        uint_ok("18446744073709551614", 0, UINT64_MAX, UINT64_MAX - 1);
        uint_fail("9223372036854775808", 0, UINT64_C(9223372036854775807));
        wide_integer_refused("18446744073709551616");
        wide_integer_refused("100000000000000000000000000000");

        _cleanup_json_ json_object *o = parse_quiet("{\"v\":null}");
        ProtoError e = {};
        uint64_t v = SENTINEL;
        ok(proto_get_uint(o, "v", 0, 10, &v, &e) == 0 && v == SENTINEL, "proto_get_uint: null is absent");
        ok(proto_get_uint(o, "w", 0, 10, &v, &e) == 0 && v == SENTINEL, "proto_get_uint: a missing field is absent");
        ok(proto_get_uint(NULL, "w", 0, 10, &v, &e) == 0 && v == SENTINEL, "proto_get_uint on a NULL object is absent");
}

typedef int (*getter_fn)(json_object *, const char *, uint64_t *, ProtoError *);

static int get_unit_from(getter_fn get, const char *value, uint64_t *ret, ProtoError *e) {
        char s[256];
        snprintf(s, sizeof(s), "{\"v\":%s}", value);
        _cleanup_json_ json_object *o = parse_quiet(s);
        *e = (ProtoError) {};
        *ret = SENTINEL;
        return o ? get(o, "v", ret, e) : -EBADMSG;
}

static void unit_ok(getter_fn get, const char *what, const char *value, uint64_t want) {
        ProtoError e;
        uint64_t v;
        int r = get_unit_from(get, value, &v, &e);
        if (is_int(r, 1, "%s(%s) is present", what, Q(value)))
                is_uint64(v, want, "%s(%s) = %" PRIu64, what, Q(value), want);
        else
                diag("error: %s", e.message);
}

static void unit_fail(getter_fn get, const char *what, const char *value) {
        ProtoError e;
        uint64_t v;
        int r = get_unit_from(get, value, &v, &e);
        ok(r < 0 && e.code == SBX_E_INVALID_REQUEST && strcmp(e.field, "v") == 0 && v == SENTINEL,
           "%s(%s) is refused, naming the field, output untouched", what, Q(value));
        if (r >= 0)
                diag("returned %d with %" PRIu64, r, v);
}

/* Refused as out of range, saying so (issue 17: past INT64_MAX a size went out as -1). */
static void unit_range(getter_fn get, const char *what, const char *value) {
        ProtoError e;
        uint64_t v;
        int r = get_unit_from(get, value, &v, &e);
        ok(r < 0 && e.code == SBX_E_INVALID_REQUEST && strcmp(e.field, "v") == 0 && v == SENTINEL &&
                   strstr(e.message, "out of range"),
           "%s(%s) is refused as out of range, naming the field", what, Q(value));
        if (r < 0)
                diag("message: %s", e.message);
}

static void test_get_size(void) {
        const char *n = "proto_get_size";
        unit_ok(proto_get_size, n, "-0", 0);
        unit_ok(proto_get_size, n, "-0.0", 0);
        unit_ok(proto_get_size, n, "1.0", 1);
        unit_range(proto_get_size, n, "9223372036854775808");
        unit_range(proto_get_size, n, "18446744073709551615");
        unit_range(proto_get_size, n, "\"9223372036854775808\"");
        unit_range(proto_get_size, n, "\"18446744073709551615\"");
        unit_range(proto_get_size, n, "\"8388608T\"");
        unit_range(proto_get_size, n, "-1");
        unit_range(proto_get_size, n, "-0.5");
        unit_ok(proto_get_size, n, "1024", 1024);
        unit_ok(proto_get_size, n, "0", 0);
        unit_ok(proto_get_size, n, "\"1K\"", 1024);
        unit_ok(proto_get_size, n, "\"256M\"", UINT64_C(256) << 20);
        unit_ok(proto_get_size, n, "\"1.5G\"", UINT64_C(1610612736));
        unit_ok(proto_get_size, n, "\"2TiB\"", UINT64_C(2) << 40);
        unit_ok(proto_get_size, n, "1.5", 1);
        unit_ok(proto_get_size, n, "2048.0", 2048);
        unit_ok(proto_get_size, n, "1.5e3", 1500);
        unit_ok(proto_get_size, n, "1e14", UINT64_C(100000000000000));
        unit_ok(proto_get_size, n, "9223372036854775807", UINT64_C(9223372036854775807));
        unit_fail(proto_get_size, n, "-1");
        unit_fail(proto_get_size, n, "-1.5");
        unit_fail(proto_get_size, n, "\"-1\"");
        unit_fail(proto_get_size, n, "\"abc\"");
        unit_fail(proto_get_size, n, "\"\"");
        unit_fail(proto_get_size, n, "\"1X\"");
        unit_fail(proto_get_size, n, "\"16777216T\"");
        unit_fail(proto_get_size, n, "1e15");
        unit_fail(proto_get_size, n, "1e300");
        unit_fail(proto_get_size, n, "1e999");
        unit_fail(proto_get_size, n, "true");
        unit_fail(proto_get_size, n, "[]");
        unit_fail(proto_get_size, n, "{}");
        /* Above INT64_MAX a size must be exact or refused, never clamped. */
        wide_integer_refused("18446744073709551616");
}

static void test_get_duration(void) {
        const char *n = "proto_get_duration";
        unit_ok(proto_get_duration, n, "30", 30 * USEC_PER_SEC);
        unit_ok(proto_get_duration, n, "0", 0);
        unit_ok(proto_get_duration, n, "1.5", 1500 * USEC_PER_MSEC);
        unit_ok(proto_get_duration, n, "0.000001", 1);
        unit_ok(proto_get_duration, n, "\"500ms\"", 500 * USEC_PER_MSEC);
        unit_ok(proto_get_duration, n, "\"2m\"", 120 * USEC_PER_SEC);
        unit_ok(proto_get_duration, n, "\"1h\"", 3600 * USEC_PER_SEC);
        unit_ok(proto_get_duration, n, "\"30\"", 30 * USEC_PER_SEC);
        unit_ok(proto_get_duration, n, "86400", 86400 * USEC_PER_SEC);
        unit_fail(proto_get_duration, n, "-1");
        unit_fail(proto_get_duration, n, "-0.5");
        unit_fail(proto_get_duration, n, "\"-1s\"");
        unit_fail(proto_get_duration, n, "\"1d\"");
        unit_fail(proto_get_duration, n, "\"soon\"");
        unit_fail(proto_get_duration, n, "1e15");
        unit_fail(proto_get_duration, n, "9223372036854775807");
        unit_fail(proto_get_duration, n, "false");
        unit_ok(proto_get_duration, n, "-0", 0);
        unit_ok(proto_get_duration, n, "-0.0", 0);
        unit_range(proto_get_duration, n, "\"9223372036855\"");
        unit_range(proto_get_duration, n, "\"2562047789h\"");
        unit_range(proto_get_duration, n, "9223372036855");
}

static void test_get_cpus(void) {
        const char *n = "proto_get_cpus";
        unit_ok(proto_get_cpus, n, "0.5", 500);
        unit_ok(proto_get_cpus, n, "2", 2000);
        unit_ok(proto_get_cpus, n, "\"1.25\"", 1250);
        unit_ok(proto_get_cpus, n, "0.001", 1);
        unit_fail(proto_get_cpus, n, "0");
        unit_fail(proto_get_cpus, n, "0.0");
        unit_fail(proto_get_cpus, n, "0.0001");
        unit_fail(proto_get_cpus, n, "\"0\"");
        unit_fail(proto_get_cpus, n, "-1");
        unit_fail(proto_get_cpus, n, "\"two\"");
        unit_fail(proto_get_cpus, n, "true");
}

static void test_get_string_bool(void) {
        _cleanup_json_ json_object *o = parse_quiet("{\"s\":\"abc\",\"e\":\"\",\"n\":null,\"i\":1,\"t\":true,\"f\":false}");
        ProtoError e = {};
        const char *s = "untouched";
        bool b = false;

        ok(proto_get_string(o, "s", 3, &s, &e) == 1 && strcmp(s, "abc") == 0, "proto_get_string at max_len");
        s = "untouched";
        ok(proto_get_string(o, "s", 2, &s, &e) < 0 && strcmp(e.field, "s") == 0 && strcmp(s, "untouched") == 0,
           "proto_get_string over max_len is refused");
        ok(proto_get_string(o, "e", 0, &s, &e) == 1 && strcmp(s, "") == 0, "proto_get_string of an empty string");
        s = "untouched";
        ok(proto_get_string(o, "n", 10, &s, &e) == 0 && strcmp(s, "untouched") == 0, "proto_get_string: null is absent");
        ok(proto_get_string(o, "x", 10, &s, &e) == 0, "proto_get_string: missing is absent");
        ok(proto_get_string(o, "i", 10, &s, &e) < 0 && strcmp(e.field, "i") == 0, "proto_get_string of an integer");

        ok(proto_get_bool(o, "t", &b, &e) == 1 && b, "proto_get_bool(true)");
        ok(proto_get_bool(o, "f", &b, &e) == 1 && !b, "proto_get_bool(false)");
        ok(proto_get_bool(o, "n", &b, &e) == 0, "proto_get_bool: null is absent");
        ok(proto_get_bool(o, "i", &b, &e) < 0 && strcmp(e.field, "i") == 0, "proto_get_bool of an integer");
        ok(proto_get_bool(o, "s", &b, &e) < 0, "proto_get_bool of a string");
}

static void test_get_strv(void) {
        _cleanup_json_ json_object *o = parse_quiet(
                "{\"a\":[\"x\",\"yy\",\"\"],\"e\":[],\"n\":null,\"i\":[\"x\",1],\"s\":\"x\",\"nn\":[null],"
                "\"u\":[\"\\u00e9\"]}");
        ProtoError e = {};
        const char **v = NULL;
        size_t n = 99;

        ok(proto_get_strv(o, "a", 3, 2, &v, &n, &e) == 1 && n == 3 && strcmp(v[0], "x") == 0 && strcmp(v[1], "yy") == 0 &&
                   strcmp(v[2], "") == 0 && v[3] == NULL,
           "proto_get_strv returns the strings, NULL-terminated");
        free(v);
        v = NULL;
        ok(proto_get_strv(o, "a", 3, 2, &v, NULL, &e) == 1 && v && v[3] == NULL, "proto_get_strv with ret_n NULL");
        free(v);
        v = NULL;
        ok(proto_get_strv(o, "e", 0, 10, &v, &n, &e) == 1 && n == 0 && v && v[0] == NULL, "proto_get_strv of []");
        free(v);
        v = NULL;
        ok(proto_get_strv(o, "a", 2, 10, &v, &n, &e) < 0 && strcmp(e.field, "a") == 0 && !v,
           "proto_get_strv over max_items is refused");
        ok(proto_get_strv(o, "a", 3, 1, &v, &n, &e) < 0 && strcmp(e.field, "a") == 0 && !v,
           "proto_get_strv with an item over max_len is refused");
        ok(proto_get_strv(o, "u", 1, 1, &v, &n, &e) < 0 && !v, "max_len counts bytes, not characters");
        ok(proto_get_strv(o, "i", 10, 10, &v, &n, &e) < 0 && !v, "proto_get_strv with a non-string item");
        ok(proto_get_strv(o, "nn", 10, 10, &v, &n, &e) < 0 && !v, "proto_get_strv with a null item");
        ok(proto_get_strv(o, "s", 10, 10, &v, &n, &e) < 0 && !v, "proto_get_strv of a string");
        ok(proto_get_strv(o, "n", 10, 10, &v, &n, &e) == 0 && !v, "proto_get_strv: null is absent");
        ok(proto_get_strv(o, "x", 10, 10, &v, &n, &e) == 0 && !v, "proto_get_strv: missing is absent");

        /* The contract says "without NUL"; a tree built in-process can hold one. */
        _cleanup_json_ json_object *p = json_object_new_object();
        json_object *arr = json_object_new_array();
        json_object_array_add(arr, json_object_new_string_len("a\0b", 3));
        json_object_object_add(p, "a", arr);
        v = NULL;
        ok(proto_get_strv(p, "a", 10, 10, &v, &n, &e) < 0 && !v, "proto_get_strv refuses a string holding a NUL");
        free(v);
}

/* ---- encoding --------------------------------------------------------------------------- */

/* Serialises o, checks it is exactly one line, parses it back strictly; returns the parsed copy. */
static json_object *wire_round_trip(json_object *o, const char *what) {
        size_t len = 0;
        _cleanup_free_ char *line = proto_serialize(o, &len);
        json_object *back = NULL;
        ProtoError e = {};

        if (!ok(line && len > 0 && strlen(line) == len && line[len - 1] == '\n' && strchr(line, '\n') == line + len - 1,
                "%s serialises as one line ending in a newline", what))
                return NULL;
        if (!ok(proto_parse_line(line, len - 1, SBX_MAX_DEPTH, &back, &e) == 0, "%s parses back strictly", what)) {
                diag("line: %s", tap_quote(line, len));
                diag("error: %s", e.message);
                return NULL;
        }
        ok(json_object_equal(o, back), "%s reads back equal", what);
        return back;
}

static void test_replies(void) {
        _cleanup_json_ json_object *id = json_object_new_int(7);
        _cleanup_json_ json_object *r = proto_reply_ok(id);
        _cleanup_json_ json_object *back = wire_round_trip(r, "proto_reply_ok");
        json_object *v;
        ok(back && json_object_object_get_ex(back, "id", &v) && json_object_get_int(v) == 7 &&
                   json_object_object_get_ex(back, "ok", &v) && json_object_get_boolean(v),
           "reply_ok carries the id and ok:true");

        _cleanup_json_ json_object *rnull = proto_reply_ok(NULL);
        _cleanup_json_ json_object *bnull = wire_round_trip(rnull, "proto_reply_ok(NULL)");
        ok(bnull && json_object_object_get_ex(bnull, "id", &v) && v == NULL, "reply_ok without an id has id:null");

        _cleanup_json_ json_object *sid = json_object_new_string("a\"b\\c\n\r\t/\x01\xc3\xa9\xf0\x9f\x98\x80\x7f");
        _cleanup_json_ json_object *rs = proto_reply_ok(sid);
        json_object_put(wire_round_trip(rs, "a reply with a string id full of escapes"));

        ProtoError e;
        proto_error_set(&e, SBX_E_NOT_FOUND, "sandbox", "no sandbox '%s'", "x\ny\"z");
        _cleanup_json_ json_object *re = proto_reply_error(id, &e);
        _cleanup_json_ json_object *be = wire_round_trip(re, "proto_reply_error");
        json_object *err = NULL;
        ok(be && json_object_object_get_ex(be, "ok", &v) && !json_object_get_boolean(v) &&
                   json_object_object_get_ex(be, "error", &err) && json_object_object_get_ex(err, "code", &v) &&
                   strcmp(json_object_get_string(v), "not_found") == 0 && json_object_object_get_ex(err, "field", &v) &&
                   strcmp(json_object_get_string(v), "sandbox") == 0 &&
                   json_object_object_get_ex(err, "message", &v) &&
                   strcmp(json_object_get_string(v), "no sandbox 'x\ny\"z'") == 0,
           "reply_error carries ok:false, code, field and message");

        proto_error_set(&e, SBX_E_INVALID_JSON, NULL, "malformed");
        _cleanup_json_ json_object *re2 = proto_reply_error(NULL, &e);
        _cleanup_json_ json_object *be2 = wire_round_trip(re2, "proto_reply_error without a field");
        ok(be2 && json_object_object_get_ex(be2, "error", &err) && !json_object_object_get_ex(err, "field", NULL),
           "reply_error has no field member when the error names none");

        _cleanup_json_ json_object *ev = proto_event(id, "stdout");
        _cleanup_json_ json_object *bev = wire_round_trip(ev, "proto_event");
        ok(bev && json_object_object_get_ex(bev, "event", &v) && strcmp(json_object_get_string(v), "stdout") == 0,
           "event carries its kind");

        size_t len = 0;
        _cleanup_json_ json_object *slash = json_object_new_string("/run/x");
        _cleanup_free_ char *line = proto_serialize(slash, &len);
        is_str(line, "\"/run/x\"\n", "proto_serialize does not escape slashes");
        _cleanup_free_ char *line2 = proto_serialize(slash, NULL);
        ok(line2 != NULL, "proto_serialize with ret_len NULL");
}

/* Errors quote what the client sent, cut to a fixed length; the cut must not split a UTF-8
 * character or the reply becomes a line the client's strict parser refuses. */
static void test_error_text_is_utf8(void) {
        char s[512], val[64];
        memset(val, 'a', 31);
        strcpy(val + 31, "\xc3\xa9\xc3\xa9");
        snprintf(s, sizeof(s), "{\"v\":\"%s\"}", val);
        _cleanup_json_ json_object *o = parse_quiet(s);
        ProtoError e = {};
        uint64_t x;
        ok(proto_get_size(o, "v", &x, &e) < 0, "an unparsable size with a UTF-8 character at byte 32 is refused");
        ok(utf8_is_valid(e.message, strlen(e.message)), "the error message quoting it is valid UTF-8");
        _cleanup_json_ json_object *id = json_object_new_int(1);
        _cleanup_json_ json_object *r = proto_reply_error(id, &e);
        json_object_put(wire_round_trip(r, "the reply to an unparsable size with UTF-8 at the cut"));

        char key[64];
        memset(key, 'k', 39);
        strcpy(key + 39, "\xc3\xa9\xc3\xa9");
        snprintf(s, sizeof(s), "{\"id\":1,\"op\":\"x\",\"%s\":1}", key);
        ProtoError e2 = {};
        int rr = check_with(s, NULL, &e2);
        ok(rr < 0 && utf8_is_valid(e2.field, strlen(e2.field)) && utf8_is_valid(e2.message, strlen(e2.message)),
           "an unknown field with a UTF-8 character at byte 40 is named in valid UTF-8");
        _cleanup_json_ json_object *r2 = proto_reply_error(id, &e2);
        json_object_put(wire_round_trip(r2, "the reply to an unknown field with UTF-8 at the cut"));

        /* Escaped control characters arrive decoded; the reply must escape them again. */
        _cleanup_json_ json_object *o3 = parse_quiet("{\"v\":\"1\\n\\u0001\\r\\u001f\"}");
        ProtoError e3 = {};
        ok(proto_get_size(o3, "v", &x, &e3) < 0, "a size with escaped control characters is refused");
        _cleanup_json_ json_object *r3 = proto_reply_error(id, &e3);
        json_object_put(wire_round_trip(r3, "the reply quoting control characters"));
}

static void check_bytes(const void *data, size_t len, const char *want_enc, const char *why) {
        _cleanup_json_ json_object *o = json_object_new_object();
        json_object *v, *enc;
        int r = proto_add_bytes(o, "stdout", data, len);
        ok(r == 0 && json_object_object_get_ex(o, "stdout_encoding", &enc) &&
                   strcmp(json_object_get_string(enc), want_enc) == 0,
           "proto_add_bytes: %s is sent as %s", why, want_enc);
        if (r < 0 || !json_object_object_get_ex(o, "stdout", &v))
                return;
        const char *s = json_object_get_string(v);
        size_t n = (size_t) json_object_get_string_len(v);
        void *dec = NULL;
        size_t dec_len = 0;
        if (strcmp(want_enc, "base64") == 0 && base64_decode(s, n, &dec, &dec_len) == 0)
                ok(dec_len == len && (len == 0 || memcmp(dec, data, len) == 0), "proto_add_bytes: %s decodes back", why);
        else
                ok(n == len && (len == 0 || memcmp(s, data, len) == 0), "proto_add_bytes: %s is kept as is", why);
        free(dec);
        json_object_put(wire_round_trip(o, why));
}

/* Runs fn in a child, for what a sanitizer turns into an abort: one failed test, not the end of
 * the file. */
static bool ok_in_child(bool (*fn)(void), const char *what) {
        int status = 0;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0)
                _exit(fn() ? EXIT_SUCCESS : EXIT_FAILURE);
        return ok(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "%s", what);
}

/* Empty output may well have no buffer at all. */
static bool add_bytes_null(void) {
        _cleanup_json_ json_object *o = json_object_new_object();
        json_object *v;
        return proto_add_bytes(o, "stdout", NULL, 0) == 0 && json_object_object_get_ex(o, "stdout", &v) &&
               json_object_get_string_len(v) == 0;
}

static bool reserve_nothing(void) {
        LineBuffer b;
        char *p;
        size_t avail = 1;
        line_buffer_init(&b, 8);
        int r = line_buffer_reserve(&b, 0, &p, &avail);
        line_buffer_done(&b);
        return r == 0 && avail == 0;
}

static void test_undefined_behaviour(void) {
        ok_in_child(add_bytes_null, "proto_add_bytes(NULL, 0) adds an empty string, without undefined behaviour");
        ok_in_child(reserve_nothing, "line_buffer_reserve(0) on a new buffer offers nothing, without undefined behaviour");
}

static void test_add_bytes(void) {
        check_bytes("hello\n", 6, "utf-8", "ASCII text");
        check_bytes("\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80", 10, "utf-8", "UTF-8 text");
        check_bytes("", 0, "utf-8", "nothing");
        check_bytes("a\0b", 3, "base64", "text holding a NUL");
        check_bytes("\xff\xfe", 2, "base64", "invalid UTF-8");
        check_bytes("abc\xc3", 4, "base64", "text with a truncated character at the end");
        check_bytes("\xed\xa0\x80", 3, "base64", "an encoded surrogate");
        check_bytes("\x1b[31mred\x1b[0m\r\n\t", 15, "utf-8", "control characters");

        _cleanup_json_ json_object *o = json_object_new_object();
        json_object *v;
        proto_add_bytes(o, "stderr", "a\0b", 3);
        ok(json_object_object_get_ex(o, "stderr", &v) && strcmp(json_object_get_string(v), "YQBi") == 0,
           "proto_add_bytes base64 of a\\0b is YQBi");

        bool all = true;
        for (int i = 0; i < 200; i++) {
                unsigned char buf[100];
                size_t len = rng() % sizeof(buf);
                for (size_t k = 0; k < len; k++)
                        buf[k] = (unsigned char) (i % 2 ? rng() : 0x20 + rng() % 0x5f);
                _cleanup_json_ json_object *p = json_object_new_object();
                json_object *s;
                void *dec = NULL;
                size_t dec_len = 0;
                proto_add_bytes(p, "b", buf, len);
                const char *enc = json_object_get_string(json_object_object_get(p, "b_encoding"));
                s = json_object_object_get(p, "b");
                if (strcmp(enc, "base64") == 0) {
                        if (base64_decode(json_object_get_string(s), (size_t) json_object_get_string_len(s), &dec,
                                          &dec_len) < 0 ||
                            dec_len != len || memcmp(dec, buf, len) != 0)
                                all = false;
                } else if ((size_t) json_object_get_string_len(s) != len || memcmp(json_object_get_string(s), buf, len) != 0)
                        all = false;
                free(dec);
        }
        ok(all, "proto_add_bytes keeps 200 random buffers intact");
}

int main(void) {
        test_error_codes();
        test_line_buffer_cases();
        test_line_buffer_random();
        test_line_buffer_reserve();
        test_line_buffer_big();
        test_line_buffer_max0();
        test_line_buffer_offsets();
        test_parse_valid();
        test_parse_scalars();
        test_parse_invalid();
        test_parse_depth();
        test_envelope();
        test_check_fields();
        test_get_uint();
        test_get_size();
        test_get_duration();
        test_get_cpus();
        test_get_string_bool();
        test_get_strv();
        test_replies();
        test_error_text_is_utf8();
        test_add_bytes();
        test_undefined_behaviour();
        return done_testing();
}
