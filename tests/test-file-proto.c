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

int main(void) {
        test_paths();
        test_modes();
        test_chunks();
        test_window();
        test_data_events();
        return done_testing();
}
