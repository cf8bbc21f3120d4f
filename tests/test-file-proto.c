/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests for lib/file-proto.c: paths and modes as file requests give them, file.chunk lines
 * and their window (order, room, size), data events (docs/design/files.md, sections 2 and 3). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "file-proto.h"
#include "macro.h"
#include "tap.h"

static void test_paths(void) {
        ProtoError err = {};
        char *abs = NULL;
        char big[SBX_FILE_PATH_MAX + 8];

        ok(file_path_check("/work/a.txt", 11, "path", &abs, &err) == 0 && abs && strcmp(abs, "/work/a.txt") == 0,
           "an absolute path stays as it is");
        free(abs);
        abs = NULL;
        ok(file_path_check("out/b.bin", 9, "path", &abs, &err) == 0 && abs && strcmp(abs, "/work/out/b.bin") == 0,
           "a relative path is relative to /work");
        free(abs);
        abs = NULL;
        ok(file_path_check("", 0, "path", &abs, &err) < 0 && err.code == SBX_E_INVALID_REQUEST &&
           strcmp(err.field, "path") == 0 && !abs, "an empty path is invalid_request, field path");
        ok(file_path_check("/work/a\0b", 9, "path", &abs, &err) < 0 && strstr(err.message, "NUL") && !abs,
           "a NUL inside the bytes (a base64 path) is refused: '%s'", err.message);

        /* PATH_MAX counts the NUL: 4095 bytes are the most. */
        memset(big, 'a', sizeof(big));
        big[0] = '/';
        for (size_t i = 200; i < sizeof(big); i += 200)
                big[i] = '/';
        ok(file_path_check(big, SBX_FILE_PATH_MAX - 1, "path", &abs, &err) == 0 && abs &&
           strlen(abs) == SBX_FILE_PATH_MAX - 1, "a path of 4095 bytes is accepted");
        free(abs);
        abs = NULL;
        ok(file_path_check(big, SBX_FILE_PATH_MAX, "path", &abs, &err) < 0 && strstr(err.message, "PATH_MAX") && !abs,
           "a path of 4096 bytes is longer than PATH_MAX: '%s'", err.message);
        /* Relative: /work/ is added first, so 4090 bytes are too many then. */
        ok(file_path_check(big + 1, SBX_FILE_PATH_MAX - 6, "path", &abs, &err) < 0 && strstr(err.message, "below /work"),
           "a relative path counts /work/ towards PATH_MAX: '%s'", err.message);

        char comp[300];
        memset(comp, 'n', sizeof(comp));
        comp[0] = '/';
        ok(file_path_check(comp, SBX_FILE_NAME_MAX + 1, "path", &abs, &err) == 0, "a component of 255 bytes is accepted");
        free(abs);
        abs = NULL;
        ok(file_path_check(comp, SBX_FILE_NAME_MAX + 2, "path", &abs, &err) < 0 && strstr(err.message, "NAME_MAX"),
           "a component of 256 bytes is refused: '%s'", err.message);
        ok(file_path_check("/work/x", 7, "target", &abs, &err) == 0, "the field name is the caller's");
        free(abs);
        abs = NULL;
        ok(file_path_check("", 0, "mounts[0].target", &abs, &err) < 0 && strcmp(err.field, "mounts[0].target") == 0,
           "an error names the field it was given");
}

static json_object *parse(const char *s) {
        return json_tokener_parse(s);
}

static void test_modes(void) {
        static const struct {
                const char *json;
                int r;
                unsigned mode;
        } cases[] = {
                { "{\"mode\":420}", 1, 0644 },      { "{\"mode\":\"0644\"}", 1, 0644 },
                { "{\"mode\":\"755\"}", 1, 0755 },  { "{\"mode\":0}", 1, 0 },
                { "{}", 0, 0 },                     { "{\"mode\":null}", 0, 0 },
                { "{\"mode\":2541}", -EINVAL, 0 }, /* 04755: setuid */
                { "{\"mode\":\"4755\"}", -EINVAL, 0 }, { "{\"mode\":\"1777\"}", -EINVAL, 0 },
                { "{\"mode\":-1}", -EINVAL, 0 },    { "{\"mode\":4096}", -EINVAL, 0 },
                { "{\"mode\":\"0x1ff\"}", -EINVAL, 0 }, { "{\"mode\":\"\"}", -EINVAL, 0 },
                { "{\"mode\":\"08\"}", -EINVAL, 0 }, { "{\"mode\":\"00644\"}", -EINVAL, 0 },
                { "{\"mode\":true}", -EINVAL, 0 },  { "{\"mode\":6.5}", -EINVAL, 0 },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_json_ json_object *o = parse(cases[i].json);
                ProtoError err = {};
                unsigned m = 12345;
                int r = file_mode_get(o, "mode", &m, &err);
                ok(r == cases[i].r && (r != 1 || m == cases[i].mode) && (r == 1 || m == 12345) &&
                   (r >= 0 || strcmp(err.field, "mode") == 0),
                   "file_mode_get(%s) = %d%s", cases[i].json, cases[i].r, r < 0 ? ", field mode" : "");
                if (r != cases[i].r)
                        diag("got %d (%s)", r, err.message);
        }
}

static void test_chunks(void) {
        _cleanup_json_ json_object *id = json_object_new_int(3);
        unsigned char data[300], back[SBX_FILE_CHUNK_BYTES];
        ProtoError err = {};
        FileChunk c;
        size_t n = 0;

        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (unsigned char) (i * 7);
        _cleanup_json_ json_object *line = file_chunk_new(id, 5, data, sizeof(data), 0, true);
        ok(line != NULL, "file_chunk_new");
        size_t len;
        _cleanup_free_ char *text = proto_serialize(line, &len);
        _cleanup_json_ json_object *parsed = NULL;
        ok(text && proto_parse_line(text, len - 1, SBX_MAX_DEPTH, &parsed, &err) == 0,
           "a chunk line is strict JSON: %s", text ? "" : "(none)");
        ok(parsed && file_chunk_parse(parsed, &c, &err) == 0 && c.seq == 5 && c.eof && c.zeros == 0,
           "it parses back: seq 5, eof");
        ok(parsed && file_chunk_decode(&c, back, sizeof(back), &n, &err) == 0 && n == sizeof(data) &&
           memcmp(back, data, n) == 0, "its data decodes back to the 300 bytes");
        ok(parsed && file_chunk_decode(&c, back, 299, &n, &err) < 0 && strcmp(err.field, "data") == 0,
           "decoded into 299 bytes: invalid_request, field data ('%s')", err.message);

        _cleanup_json_ json_object *hole = file_chunk_new(id, 6, NULL, 0, 1 << 20, false);
        ok(hole && file_chunk_parse(hole, &c, &err) == 0 && c.zeros == 1u << 20 && !c.data,
           "a hole: zeros 1048576, no data");

        static const struct {
                const char *json, *field, *why;
        } bad[] = {
                { "{\"id\":3,\"op\":\"file.chunk\",\"seq\":0,\"data\":\"Zg==\",\"zeros\":5}", "zeros", "data and zeros" },
                { "{\"id\":3,\"op\":\"file.chunk\",\"seq\":0}", "data", "neither data, zeros nor eof" },
                { "{\"id\":3,\"op\":\"file.chunk\",\"seq\":-1,\"data\":\"\"}", "seq", "a negative seq" },
                { "{\"id\":3,\"op\":\"file.chunk\",\"seq\":\"1\",\"data\":\"\"}", "seq", "a string seq" },
                { "{\"id\":3,\"op\":\"file.chunk\",\"data\":\"\"}", "seq", "no seq" },
                { "{\"id\":3,\"op\":\"file.chunk\",\"seq\":0,\"data\":\"\",\"offset\":9}", "offset", "an unknown field" },
                { "{\"id\":3,\"op\":\"file.chunk\",\"seq\":0,\"zeros\":0}", "zeros", "zeros 0" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_json_ json_object *o = parse(bad[i].json);
                ProtoError e = {};
                int r = file_chunk_parse(o, &c, &e);
                ok(r < 0 && e.code == SBX_E_INVALID_REQUEST && strcmp(e.field, bad[i].field) == 0,
                   "a chunk with %s is invalid_request, field %s", bad[i].why, bad[i].field);
                if (r >= 0 || strcmp(e.field, bad[i].field) != 0)
                        diag("got %d, field '%s': %s", r, e.field, e.message);
        }
        _cleanup_json_ json_object *nc = parse("{\"id\":3,\"op\":\"file.chunk\",\"seq\":0,\"data\":\"Zh==\"}");
        ok(file_chunk_parse(nc, &c, &err) == 0 && file_chunk_decode(&c, back, sizeof(back), &n, &err) < 0 &&
           strstr(err.message, "canonical"), "non-canonical base64 in data is refused: '%s'", err.message);
}

static FileChunk chunk(uint64_t seq, bool eof) {
        return (FileChunk) { .seq = seq, .eof = eof };
}

static void test_window(void) {
        FileWindow w;
        ProtoError err = {};
        FileChunk c;

        file_window_init(&w, 4, UINT64_MAX);
        is_int(file_window_room(&w), 4, "a new window has room for 4 chunks");
        bool all = true;
        for (uint64_t s = 0; s < 4; s++)
                all = all && file_window_take(&w, (c = chunk(s, false), &c), 100, &err) == 0;
        ok(all && file_window_room(&w) == 0, "4 chunks taken: no room left");
        c = chunk(4, false);
        ok(file_window_take(&w, &c, 100, &err) < 0 && strcmp(err.field, "seq") == 0 && strstr(err.message, "window"),
           "a fifth before any ack is beyond the window: '%s'", err.message);
        file_window_ack(&w, 1);
        is_int(file_window_room(&w), 2, "acks of 0 and 1 (the ack of 1 implies 0) free 2");
        ok(file_window_take(&w, &c, 100, &err) == 0, "chunk 4 is then taken");
        c = chunk(6, false);
        ok(file_window_take(&w, &c, 100, &err) < 0 && strstr(err.message, "expected seq 5, got 6"),
           "chunk 6 before 5: '%s'", err.message);
        c = chunk(4, false);
        ok(file_window_take(&w, &c, 100, &err) < 0 && strstr(err.message, "expected seq 5, got 4"),
           "chunk 4 again (a duplicate): '%s'", err.message);
        file_window_ack(&w, 99);
        is_int((long long) w.acked, 2, "an ack of a chunk never sent changes nothing");
        c = chunk(5, true);
        ok(file_window_take(&w, &c, 0, &err) == 0 && w.eof && file_window_room(&w) == 0,
           "an empty eof chunk ends it; no room after eof");
        c = chunk(6, false);
        ok(file_window_take(&w, &c, 1, &err) < 0 && strstr(err.message, "after the chunk marked eof"),
           "a chunk after eof: '%s'", err.message);
        ok(file_window_finish(&w, &err) == 0, "without a size, any total is fine");
        is_int((long long) w.bytes, 500, "the total is 500 bytes");

        file_window_init(&w, 4, 250);
        c = chunk(0, false);
        ok(file_window_take(&w, &c, 200, &err) == 0, "200 of an announced 250");
        c = chunk(1, false);
        ok(file_window_take(&w, &c, 51, &err) < 0 && strcmp(err.field, "size") == 0,
           "51 more goes past the size: field size, '%s'", err.message);
        ok(file_window_take(&w, &c, UINT64_MAX, &err) < 0 && strcmp(err.field, "size") == 0,
           "a hole of 2^64-1 bytes does not wrap the total");
        c = chunk(1, true);
        ok(file_window_take(&w, &c, 10, &err) == 0 && file_window_finish(&w, &err) < 0 &&
           strstr(err.message, "after 210 of 250"), "eof at 210 of 250: '%s'", err.message);
}

static void test_data_events(void) {
        _cleanup_json_ json_object *id = json_object_new_string("r1");
        ProtoError err = {};
        FileData d;

        _cleanup_json_ json_object *ev = file_data_event_new(id, 2, 1 << 21, "hello", 5);
        ok(ev && file_data_event_parse(ev, &d, &err) == 0 && d.seq == 2 && d.offset == 1u << 21 && d.data_len == 8 &&
           memcmp(d.data, "aGVsbG8=", 8) == 0, "a data event: seq, offset, base64 data");
        json_object_object_add(ev, "later", json_object_new_int(1));
        ok(file_data_event_parse(ev, &d, &err) == 0, "a member a newer daemon adds is not refused");
        _cleanup_json_ json_object *bad = parse("{\"id\":1,\"event\":\"data\",\"seq\":0,\"data\":\"\"}");
        ok(file_data_event_parse(bad, &d, &err) < 0, "a data event without offset is refused");
}

/* The canonical lines: written directly, scanned back, the same as the general path reads them;
 * every other form is left to the general path (0), never misread. */
static void test_fast_path(void) {
        unsigned char data[3000];
        size_t size = file_line_format_max(sizeof(data));
        _cleanup_free_ char *buf = malloc(size);
        ProtoError err = {};
        FileChunk c, g;
        FileData d, gd;
        int64_t id = 0;

        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (unsigned char) (i * 13 + 7);
        size_t n = file_chunk_format(buf, size, -42, 17, data, sizeof(data), true);
        ok(n > 0 && buf[n - 1] == '\n', "file_chunk_format writes one line");
        _cleanup_json_ json_object *parsed = NULL;
        ok(proto_parse_line(buf, n - 1, SBX_MAX_DEPTH, &parsed, &err) == 0 && file_chunk_parse(parsed, &g, &err) == 0,
           "it is strict JSON and a valid file.chunk line for the general path");
        ok(file_chunk_scan(buf, n - 1, &id, &c) == 1 && id == -42 && c.seq == 17 && c.eof && c.data_len == g.data_len &&
           memcmp(c.data, g.data, g.data_len) == 0 && c.seq == g.seq && c.eof == g.eof,
           "file_chunk_scan reads it as the general path does (id -42, seq 17, eof, the same data)");
        unsigned char back[3000];
        size_t m = 0;
        ok(file_chunk_decode(&c, back, sizeof(back), &m, &err) == 0 && m == sizeof(data) && memcmp(back, data, m) == 0,
           "its data decodes to the 3000 bytes");
        is_int((long long) file_chunk_format(buf, n - 1, -42, 17, data, sizeof(data), true), 0,
               "a buffer one byte short: 0, nothing claimed written");

        n = file_chunk_format(buf, size, 5, 0, "", 0, false);
        ok(n > 0 && file_chunk_scan(buf, n - 1, &id, &c) == 1 && c.data_len == 0 && !c.eof,
           "an empty chunk without eof scans too");

        static const char *const misses[] = {
                "{\"id\":1,\"op\":\"file.chunk\",\"seq\":0,\"data\":\"Zg==\",\"eof\":false}",
                "{\"id\": 1,\"op\":\"file.chunk\",\"seq\":0,\"data\":\"Zg==\"}",
                "{\"op\":\"file.chunk\",\"id\":1,\"seq\":0,\"data\":\"Zg==\"}",
                "{\"id\":1,\"op\":\"file.chunk\",\"seq\":0,\"data\":\"Z\\/==\"}",
                "{\"id\":\"a\",\"op\":\"file.chunk\",\"seq\":0,\"data\":\"Zg==\"}",
                "{\"id\":1,\"op\":\"file.chunk\",\"seq\":01,\"data\":\"Zg==\"}",
                "{\"id\":-0,\"op\":\"file.chunk\",\"seq\":0,\"data\":\"Zg==\"}",
                "{\"id\":1,\"op\":\"file.chunk\",\"seq\":0,\"data\":\"Zg==\"} ",
                "{\"id\":1,\"op\":\"file.chunk\",\"seq\":0,\"data\":\"Zg==\"",
                "{\"id\":1,\"op\":\"file.chunk\",\"seq\":0,\"data\":\"Zg==\"}}",
                "{\"id\":1,\"op\":\"file.chunk\",\"seq\":-1,\"data\":\"Zg==\"}",
                "{\"id\":1,\"op\":\"file.chunk\",\"seq\":9223372036854775808,\"data\":\"Zg==\"}",
                "{\"id\":99999999999999999999,\"op\":\"file.chunk\",\"seq\":0,\"data\":\"Zg==\"}",
                "{\"id\":1,\"op\":\"file.chunk\",\"seq\":0,\"data\":\"Zg==\",\"zeros\":4}",
                "{\"id\":1.0,\"op\":\"file.chunk\",\"seq\":0,\"data\":\"Zg==\"}",
        };
        bool all = true;
        for (size_t i = 0; i < ELEMENTSOF(misses); i++)
                if (file_chunk_scan(misses[i], strlen(misses[i]), &id, &c) != 0) {
                        diag("scanned: %s", misses[i]);
                        all = false;
                }
        ok(all, "%zu lines not in the canonical form (eof false, a space, key order, an escape, a string id, "
                "a leading zero, -0, trailing bytes, a missing brace, negative or too large numbers, "
                "zeros, 1.0) are left to the general path", ELEMENTSOF(misses));
        const char *bad = "{\"id\":1,\"op\":\"file.chunk\",\"seq\":0,\"data\":\"Zg\x01=\"}";
        ok(file_chunk_scan(bad, strlen(bad), &id, &c) == 1 && file_chunk_decode(&c, back, sizeof(back), &m, &err) < 0,
           "a raw control byte in data scans, and the decoder refuses it (the general path then says invalid_json)");
        _cleanup_json_ json_object *bad_parsed = NULL;
        ok(proto_parse_line(bad, strlen(bad), SBX_MAX_DEPTH, &bad_parsed, &err) < 0 && err.code == SBX_E_INVALID_JSON,
           "... which it does");
        const char *max = "{\"id\":9223372036854775807,\"op\":\"file.chunk\",\"seq\":9223372036854775807,\"data\":\"\"}";
        ok(file_chunk_scan(max, strlen(max), &id, &c) == 1 && id == INT64_MAX && c.seq == INT64_MAX,
           "the largest id and seq scan");
        const char *min = "{\"id\":-9223372036854775808,\"op\":\"file.chunk\",\"seq\":0,\"data\":\"\"}";
        ok(file_chunk_scan(min, strlen(min), &id, &c) == 1 && id == INT64_MIN, "the smallest id scans");

        n = file_data_event_format(buf, size, 9, 4, (uint64_t) 1 << 40, data, 100);
        _cleanup_json_ json_object *ev = NULL;
        ok(n > 0 && proto_parse_line(buf, n - 1, SBX_MAX_DEPTH, &ev, &err) == 0 && file_data_event_parse(ev, &gd, &err) == 0,
           "file_data_event_format writes a strict, valid data event");
        ok(file_data_event_scan(buf, n - 1, &id, &d) == 1 && id == 9 && d.seq == 4 && d.offset == (uint64_t) 1 << 40 &&
           d.data_len == gd.data_len && memcmp(d.data, gd.data, d.data_len) == 0,
           "file_data_event_scan reads it as the general path does");
        const char *ev_miss = "{\"id\":9,\"event\":\"data\",\"offset\":0,\"seq\":4,\"data\":\"\"}";
        is_int(file_data_event_scan(ev_miss, strlen(ev_miss), &id, &d), 0, "a data event in another key order: 0");
}

int main(void) {
        test_paths();
        test_modes();
        test_chunks();
        test_window();
        test_data_events();
        test_fast_path();
        return done_testing();
}
