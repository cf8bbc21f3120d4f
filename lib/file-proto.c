/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file-proto.h"
#include "macro.h"
#include "util.h"

/* A chunk's data in base64 is at most this long (the line cap is 4 MiB: room to spare). */
#define CHUNK_BASE64_MAX ((SBX_FILE_CHUNK_BYTES + 2) / 3 * 4)

static int check_components(const char *p, size_t len, const char *field, ProtoError *err) {
        size_t run = 0;
        for (size_t i = 0; i < len; i++) {
                if (p[i] == '/') {
                        run = 0;
                        continue;
                }
                if (++run > SBX_FILE_NAME_MAX)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                               "'%s' has a component longer than NAME_MAX (%d bytes)", field,
                                               SBX_FILE_NAME_MAX);
        }
        return 0;
}

int file_path_check(const char *path, size_t len, const char *field, char **ret, ProtoError *err) {
        bool relative;
        size_t total;
        char *abs;

        if (len == 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field, "'%s' must not be empty", field);
        if (memchr(path, '\0', len))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field, "'%s' contains a NUL byte", field);
        relative = path[0] != '/';
        total = len + (relative ? strlen(SBX_FILE_WORKDIR) + 1 : 0);
        if (total > SBX_FILE_PATH_MAX - 1)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                       "'%s' is longer than PATH_MAX (%zu bytes%s, at most %d)", field, total,
                                       relative ? " below /work" : "", SBX_FILE_PATH_MAX - 1);
        if (check_components(path, len, field, err) < 0)
                return -EINVAL;
        abs = malloc(total + 1);
        if (!abs)
                return -ENOMEM;
        if (relative) {
                memcpy(abs, SBX_FILE_WORKDIR "/", strlen(SBX_FILE_WORKDIR) + 1);
                memcpy(abs + strlen(SBX_FILE_WORKDIR) + 1, path, len);
        } else
                memcpy(abs, path, len);
        abs[total] = '\0';
        *ret = abs;
        return 0;
}

static int mode_from_string(const char *s, unsigned *ret) {
        size_t n = strlen(s);
        unsigned v = 0;

        if (n == 0 || n > 4)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '7')
                        return -EINVAL;
                v = v * 8 + (unsigned) (s[i] - '0');
        }
        *ret = v;
        return 0;
}

int file_mode_get(json_object *obj, const char *name, unsigned *ret, ProtoError *err) {
        json_object *v;
        unsigned mode;

        if (!json_object_object_get_ex(obj, name, &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (json_object_is_type(v, json_type_int)) {
                int64_t i = json_object_get_int64(v);
                if (i < 0 || i > 07777)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, name, "'%s' is out of range (0 to 0777)",
                                               name);
                mode = (unsigned) i;
        } else if (!json_object_is_type(v, json_type_string) || mode_from_string(json_object_get_string(v), &mode) < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, name,
                                       "'%s' must be an integer or a string of octal digits (\"0644\")", name);
        if (mode & 07000)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, name,
                                       "'%s' %04o: setuid, setgid and sticky bits are not accepted", name, mode);
        *ret = mode;
        return 1;
}

/* ---- Chunks ------------------------------------------------------------------------------ */

static json_object *base64_member(const void *data, size_t len) {
        _cleanup_free_ char *b = base64_encode(data, len);
        return b ? json_object_new_string_len(b, (int) strlen(b)) : NULL;
}

json_object *file_chunk_new(json_object *id, uint64_t seq, const void *data, size_t len, uint64_t zeros, bool eof) {
        _cleanup_json_ json_object *o = json_object_new_object();
        json_object *d;

        if (!o || len > SBX_FILE_CHUNK_BYTES)
                return NULL;
        json_object_object_add(o, "id", json_object_get(id));
        json_object_object_add(o, "op", json_object_new_string("file.chunk"));
        json_object_object_add(o, "seq", json_object_new_int64((int64_t) seq));
        if (data || zeros == 0) {
                d = base64_member(data ? data : "", data ? len : 0);
                if (!d)
                        return NULL;
                json_object_object_add(o, "data", d);
        }
        if (zeros > 0)
                json_object_object_add(o, "zeros", json_object_new_int64((int64_t) zeros));
        if (eof)
                json_object_object_add(o, "eof", json_object_new_boolean(true));
        return TAKE_PTR(o);
}

static const FieldSpec chunk_fields[] = {
        { "id", FIELD_ID, true },      { "op", FIELD_STRING, true }, { "seq", FIELD_INT, true },
        { "data", FIELD_STRING, false }, { "zeros", FIELD_INT, false }, { "eof", FIELD_BOOL, false },
        {},
};

int file_chunk_parse(json_object *line, FileChunk *ret, ProtoError *err) {
        FileChunk c = {};
        uint64_t seq = 0, zeros = 0;
        json_object *d;
        bool eof = false;
        int r;

        if (proto_check_fields(line, chunk_fields, "", err) < 0)
                return -EINVAL;
        if (proto_get_uint(line, "seq", 0, INT64_MAX, &seq, err) < 0 ||
            proto_get_uint(line, "zeros", 1, INT64_MAX, &zeros, err) < 0 || proto_get_bool(line, "eof", &eof, err) < 0)
                return -EINVAL;
        r = json_object_object_get_ex(line, "data", &d) && !json_object_is_type(d, json_type_null);
        if (r && zeros > 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "zeros", "a chunk has 'data' or 'zeros', not both");
        if (!r && zeros == 0 && !eof)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "data",
                                       "a chunk needs 'data' or 'zeros' (or 'eof')");
        if (r) {
                c.data = json_object_get_string(d);
                c.data_len = (size_t) json_object_get_string_len(d);
                if (c.data_len > CHUNK_BASE64_MAX)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "data",
                                               "'data' is longer than a chunk may be (%u bytes decoded)",
                                               SBX_FILE_CHUNK_BYTES);
        }
        c.seq = seq;
        c.zeros = zeros;
        c.eof = eof;
        *ret = c;
        return 0;
}

int file_chunk_decode(const FileChunk *c, void *buf, size_t size, size_t *ret_len, ProtoError *err) {
        size_t n = 0;
        int r;

        if (!c->data) {
                *ret_len = 0;
                return 0;
        }
        r = base64_decode_into(c->data, c->data_len, buf, size, &n);
        if (r == -ENOBUFS)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "data",
                                       "chunk %" PRIu64 " holds more than chunk_bytes (%zu)", c->seq, size);
        if (r < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "data",
                                       "chunk %" PRIu64 ": 'data' is not canonical base64 (RFC 4648, padded)", c->seq);
        *ret_len = n;
        return 0;
}

void file_window_init(FileWindow *w, unsigned window, uint64_t size) {
        *w = (FileWindow) { .window = window ? window : 1, .size = size };
}

unsigned file_window_room(const FileWindow *w) {
        uint64_t out = w->next_seq - w->acked;
        return out >= w->window || w->eof ? 0 : (unsigned) (w->window - out);
}

int file_window_take(FileWindow *w, const FileChunk *c, uint64_t len, ProtoError *err) {
        if (w->eof)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "seq",
                                       "chunk %" PRIu64 " comes after the chunk marked eof", c->seq);
        if (c->seq != w->next_seq)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "seq", "expected seq %" PRIu64 ", got %" PRIu64,
                                       w->next_seq, c->seq);
        if (c->seq - w->acked >= w->window)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "seq",
                                       "chunk %" PRIu64 " is beyond the window (%u chunks unacknowledged)", c->seq,
                                       w->window);
        if (len > w->size || w->bytes > w->size - len)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "size",
                                       "chunk %" PRIu64 " goes past the announced size (%" PRIu64 " bytes)", c->seq,
                                       w->size);
        w->bytes += len;
        w->next_seq++;
        w->eof = c->eof;
        return 0;
}

void file_window_ack(FileWindow *w, uint64_t seq) {
        if (seq >= w->acked && seq < w->next_seq)
                w->acked = seq + 1;
}

int file_window_finish(const FileWindow *w, ProtoError *err) {
        if (w->size != UINT64_MAX && w->bytes != w->size)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "size",
                                       "the transfer ended after %" PRIu64 " of %" PRIu64 " bytes", w->bytes, w->size);
        return 0;
}

/* ---- Data events ------------------------------------------------------------------------- */

json_object *file_data_event_new(json_object *id, uint64_t seq, uint64_t offset, const void *data, size_t len) {
        _cleanup_json_ json_object *o = proto_event(id, "data");
        json_object *d;

        if (!o || len > SBX_FILE_CHUNK_BYTES)
                return NULL;
        d = base64_member(data, len);
        if (!d)
                return NULL;
        json_object_object_add(o, "seq", json_object_new_int64((int64_t) seq));
        json_object_object_add(o, "offset", json_object_new_int64((int64_t) offset));
        json_object_object_add(o, "data", d);
        return TAKE_PTR(o);
}

/* Not proto_check_fields(): a client reads what a newer daemon sends, members it does not know
 * included. Only what it uses is checked. */
int file_data_event_parse(json_object *event, FileData *ret, ProtoError *err) {
        FileData f = {};
        json_object *d, *v;

        if (!json_object_object_get_ex(event, "seq", &v) || !json_object_is_type(v, json_type_int) ||
            !json_object_object_get_ex(event, "offset", &v) || !json_object_is_type(v, json_type_int))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "seq", "a data event needs integer 'seq' and 'offset'");
        if (!json_object_object_get_ex(event, "data", &d) || !json_object_is_type(d, json_type_string))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "data", "a data event needs a string 'data'");
        if (proto_get_uint(event, "seq", 0, INT64_MAX, &f.seq, err) < 0 ||
            proto_get_uint(event, "offset", 0, INT64_MAX, &f.offset, err) < 0)
                return -EINVAL;
        f.data = json_object_get_string(d);
        f.data_len = (size_t) json_object_get_string_len(d);
        if (f.data_len > CHUNK_BASE64_MAX)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "data", "a data event is longer than a chunk");
        *ret = f;
        return 0;
}

/* ---- The fast path ----------------------------------------------------------------------- */

size_t file_line_format_max(size_t len) {
        /* the longest fixed text, three 20-digit numbers, the data, the newline */
        return 64 + 3 * 21 + base64_encoded_len(len) + 16;
}

static size_t format_line(char *buf, size_t size, size_t head_len, const void *data, size_t len, const char *tail) {
        size_t tail_len = strlen(tail);

        if (head_len >= size || size - head_len < base64_encoded_len(len) + tail_len)
                return 0;
        size_t n = head_len + base64_encode_into(data, len, buf + head_len);
        memcpy(buf + n, tail, tail_len);
        return n + tail_len;
}

size_t file_chunk_format(char *buf, size_t size, int64_t id, uint64_t seq, const void *data, size_t len, bool eof) {
        int h = snprintf(buf, size, "{\"id\":%" PRId64 ",\"op\":\"file.chunk\",\"seq\":%" PRIu64 ",\"data\":\"", id, seq);

        if (h < 0 || seq > INT64_MAX || len > SBX_FILE_CHUNK_BYTES)
                return 0;
        return format_line(buf, size, (size_t) h, data, len, eof ? "\",\"eof\":true}\n" : "\"}\n");
}

size_t file_data_event_format(char *buf, size_t size, int64_t id, uint64_t seq, uint64_t offset, const void *data,
                              size_t len) {
        int h = snprintf(buf, size, "{\"id\":%" PRId64 ",\"event\":\"data\",\"seq\":%" PRIu64 ",\"offset\":%" PRIu64
                         ",\"data\":\"", id, seq, offset);

        if (h < 0 || seq > INT64_MAX || offset > INT64_MAX || len > SBX_FILE_CHUNK_BYTES)
                return 0;
        return format_line(buf, size, (size_t) h, data, len, "\"}\n");
}

/* A literal at *p. */
static bool scan_lit(const char **p, const char *end, const char *lit) {
        size_t n = strlen(lit);
        if ((size_t) (end - *p) < n || memcmp(*p, lit, n) != 0)
                return false;
        *p += n;
        return true;
}

/* A JSON integer as json-c reads it into an int64: -?(0|[1-9][0-9]*), no overflow. */
static bool scan_int(const char **p, const char *end, bool allow_negative, int64_t *ret) {
        const char *s = *p;
        bool neg = false;
        uint64_t v = 0;

        if (allow_negative && s < end && *s == '-') {
                neg = true;
                s++;
        }
        if (s >= end || *s < '0' || *s > '9' || (*s == '0' && s + 1 < end && s[1] >= '0' && s[1] <= '9'))
                return false;
        for (; s < end && *s >= '0' && *s <= '9'; s++) {
                if (v > (UINT64_C(1) << 63) / 10)
                        return false;
                v = v * 10 + (uint64_t) (*s - '0');
                if (v > (uint64_t) INT64_MAX + (neg ? 1 : 0))
                        return false;
        }
        if (neg && v == 0)
                return false; /* "-0": leave it to the general path */
        *ret = neg ? (int64_t) (0 - v) : (int64_t) v;
        *p = s;
        return true;
}

/* "<data>" without an escape, at most a chunk's worth. Its bytes are not checked here: the
 * base64 decoder refuses anything outside its alphabet, and a line whose data does not decode
 * is parsed again the general way for its exact error (a raw control byte is invalid_json
 * there). One memchr() each instead of a test per byte: this is what keeps the scan fast. */
static bool scan_data(const char **p, const char *end, const char **ret, size_t *ret_len) {
        const char *s = *p, *q = memchr(s, '"', (size_t) (end - s));

        if (!q || (size_t) (q - s) > CHUNK_BASE64_MAX || memchr(s, '\\', (size_t) (q - s)))
                return false;
        *ret = s;
        *ret_len = (size_t) (q - s);
        *p = q + 1;
        return true;
}

int file_chunk_scan(const char *line, size_t len, int64_t *ret_id, FileChunk *ret) {
        const char *p = line, *end = line + len;
        FileChunk c = {};
        int64_t id, seq;

        if (!scan_lit(&p, end, "{\"id\":") || !scan_int(&p, end, true, &id) ||
            !scan_lit(&p, end, ",\"op\":\"file.chunk\",\"seq\":") || !scan_int(&p, end, false, &seq) ||
            !scan_lit(&p, end, ",\"data\":\"") || !scan_data(&p, end, &c.data, &c.data_len))
                return 0;
        c.eof = scan_lit(&p, end, ",\"eof\":true");
        if (!scan_lit(&p, end, "}") || p != end)
                return 0;
        c.seq = (uint64_t) seq;
        *ret_id = id;
        *ret = c;
        return 1;
}

int file_data_event_scan(const char *line, size_t len, int64_t *ret_id, FileData *ret) {
        const char *p = line, *end = line + len;
        FileData d = {};
        int64_t id, seq, offset;

        if (!scan_lit(&p, end, "{\"id\":") || !scan_int(&p, end, true, &id) ||
            !scan_lit(&p, end, ",\"event\":\"data\",\"seq\":") || !scan_int(&p, end, false, &seq) ||
            !scan_lit(&p, end, ",\"offset\":") || !scan_int(&p, end, false, &offset) ||
            !scan_lit(&p, end, ",\"data\":\"") || !scan_data(&p, end, &d.data, &d.data_len) ||
            !scan_lit(&p, end, "}") || p != end)
                return 0;
        d.seq = (uint64_t) seq;
        d.offset = (uint64_t) offset;
        *ret_id = id;
        *ret = d;
        return 1;
}
