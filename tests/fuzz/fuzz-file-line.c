/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The fast path of the lines that carry file bytes (lib/file-proto.h) against the general one:
 * whatever a line is, when file_chunk_scan() or file_data_event_scan() takes it, the strict
 * JSON check and the field parser must take it too and read the same id, seq, offset, eof and
 * data (abort otherwise: a broken property is a crash to libFuzzer and a "not ok" to the replay).
 * And a formatted line must always scan back to what was formatted. */

#include <stdlib.h>
#include <string.h>

#include "file-proto.h"
#include "fuzz.h"
#include "macro.h"
#include "proto.h"

#define CHECK(x)                  \
        do {                      \
                if (!(x))         \
                        abort();  \
        } while (0)

static void check_chunk(const char *line, size_t len) {
        _cleanup_json_ json_object *o = NULL;
        ProtoError err;
        FileChunk fast, slow;
        int64_t id;
        json_object *v;

        if (file_chunk_scan(line, len, &id, &fast) != 1)
                return;
        CHECK(proto_parse_line(line, len, SBX_MAX_DEPTH, &o, &err) == 0 || err.code == SBX_E_INVALID_JSON);
        if (!o) {
                /* Only data bytes the scanner leaves to the decoder may make the line invalid
                 * JSON; the decoder must then refuse them. */
                unsigned char *buf = malloc(SBX_FILE_CHUNK_BYTES);
                size_t n;
                CHECK(buf);
                CHECK(file_chunk_decode(&fast, buf, SBX_FILE_CHUNK_BYTES, &n, &err) < 0);
                free(buf);
                return;
        }
        CHECK(file_chunk_parse(o, &slow, &err) == 0);
        CHECK(json_object_object_get_ex(o, "id", &v) && json_object_is_type(v, json_type_int));
        CHECK(json_object_get_int64(v) == id);
        CHECK(fast.seq == slow.seq && fast.eof == slow.eof && fast.zeros == 0 && slow.zeros == 0);
        CHECK(fast.data_len == slow.data_len && memcmp(fast.data, slow.data, fast.data_len) == 0);
}

static void check_data_event(const char *line, size_t len) {
        _cleanup_json_ json_object *o = NULL;
        ProtoError err;
        FileData fast, slow;
        int64_t id;
        json_object *v;

        if (file_data_event_scan(line, len, &id, &fast) != 1)
                return;
        if (proto_parse_line(line, len, SBX_MAX_DEPTH, &o, &err) < 0) {
                CHECK(err.code == SBX_E_INVALID_JSON);
                return;
        }
        CHECK(file_data_event_parse(o, &slow, &err) == 0);
        CHECK(json_object_object_get_ex(o, "id", &v) && json_object_get_int64(v) == id);
        CHECK(fast.seq == slow.seq && fast.offset == slow.offset && fast.data_len == slow.data_len &&
              memcmp(fast.data, slow.data, fast.data_len) == 0);
}

/* The input's first bytes as numbers and data, formatted and scanned back. */
static void check_round_trip(const uint8_t *data, size_t size) {
        int64_t id = 0, got;
        uint64_t seq = 0;
        if (size >= 16) {
                memcpy(&id, data, 8);
                memcpy(&seq, data + 8, 8);
                data += 16;
                size -= 16;
        }
        seq &= INT64_MAX;
        if (size > 4096)
                size = 4096;
        size_t room = file_line_format_max(size);
        char *buf = malloc(room);
        FileChunk c;
        FileData d;
        CHECK(buf);
        size_t n = file_chunk_format(buf, room, id, seq, data, size, size % 2);
        CHECK(n > 0 && buf[n - 1] == '\n');
        CHECK(file_chunk_scan(buf, n - 1, &got, &c) == 1 && got == id && c.seq == seq && c.eof == (size % 2));
        check_chunk(buf, n - 1);
        n = file_data_event_format(buf, room, id, seq, seq, data, size);
        CHECK(n > 0 && file_data_event_scan(buf, n - 1, &got, &d) == 1 && got == id && d.offset == seq);
        check_data_event(buf, n - 1);
        free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *line = malloc(size + 1);

        if (!line)
                return 0;
        memcpy(line, data, size);
        line[size] = '\0';
        check_chunk(line, size);
        check_data_event(line, size);
        free(line);
        check_round_trip(data, size);
        return 0;
}
