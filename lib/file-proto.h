/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The wire side of the file operations (docs/design/files.md), shared by sandboxd and its
 * clients: path and mode checks, the file.chunk lines of a transfer in, the data events of a
 * transfer out, and the window that bounds what is in flight. No logging, no global state. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define SBX_FILE_CHUNK_BYTES (1024u * 1024) /* decoded bytes per chunk or data event */
#define SBX_FILE_WINDOW 4u                  /* chunks sent and not yet acknowledged */
#define SBX_FILE_TRANSFERS_PER_CONNECTION 4u /* file.write, file.read in flight on one connection */
#define SBX_FILE_PATH_MAX 4096              /* PATH_MAX, its NUL included */
#define SBX_FILE_NAME_MAX 255
#define SBX_FILE_WORKDIR "/work"

/* A path of the sandbox as a request gives it (bytes: a base64 path_encoding may hold any
 * byte): not empty, no NUL, at most PATH_MAX-1 bytes once made absolute, no component over
 * NAME_MAX. A relative path is taken relative to /work. Returns 0 and the absolute path
 * (malloc'd; "." and ".." are left to the resolver inside the sandbox), or -EINVAL with err set
 * (invalid_request, field). */
int file_path_check(const char *path, size_t len, const char *field, char **ret, ProtoError *err);

/* A mode field: an integer 0..0777, or a string of octal digits ("644", "0644"). Setuid,
 * setgid and sticky bits are refused. 0 when absent (ret untouched), 1 when present, -EINVAL. */
int file_mode_get(json_object *obj, const char *name, unsigned *ret, ProtoError *err);

/* ---- Transfers in: file.chunk lines ------------------------------------------------------ */

typedef struct FileChunk {
        uint64_t seq;
        const char *data; /* base64 text (borrowed from the line), NULL without data */
        size_t data_len;
        uint64_t zeros;   /* a hole of this many bytes instead of data */
        bool eof;
} FileChunk;

/* {"id":ID,"op":"file.chunk","seq":SEQ,"data":"<base64>"[,"zeros":N][,"eof":true]}; data may
 * be NULL (len 0) for a chunk that carries none. id is referenced, not taken. */
json_object *file_chunk_new(json_object *id, uint64_t seq, const void *data, size_t len, uint64_t zeros, bool eof);
/* Validates a file.chunk line (already known to be op file.chunk): its fields, types, that
 * data and zeros are not both given. Borrowed pointers into line. */
int file_chunk_parse(json_object *line, FileChunk *ret, ProtoError *err);
/* Decodes c's data into buf (size at least SBX_FILE_CHUNK_BYTES, or the chunk_bytes announced):
 * bad base64 or more than size bytes is invalid_request, field data. */
int file_chunk_decode(const FileChunk *c, void *buf, size_t size, size_t *ret_len, ProtoError *err);

/* What the receiving side tracks of a transfer in. */
typedef struct FileWindow {
        uint64_t next_seq; /* the seq the next chunk must have */
        uint64_t acked;    /* chunks acknowledged (seq < acked are done) */
        unsigned window;
        uint64_t bytes;    /* bytes taken so far, holes included */
        uint64_t size;     /* announced total, or UINT64_MAX for none */
        bool eof;
} FileWindow;

void file_window_init(FileWindow *w, unsigned window, uint64_t size);
/* Takes a chunk of len bytes (decoded data plus zeros): its seq must be next_seq, it must be
 * within the window, the total must stay within size, nothing after eof. -EINVAL with err
 * (invalid_request; field seq, data, zeros or size) otherwise. */
int file_window_take(FileWindow *w, const FileChunk *c, uint64_t len, ProtoError *err);
void file_window_ack(FileWindow *w, uint64_t seq);
/* At eof: the total must be size when one was announced (field size, "ended after N of M"). */
int file_window_finish(const FileWindow *w, ProtoError *err);
/* How many chunks the sender may still send now. */
unsigned file_window_room(const FileWindow *w);

/* ---- Transfers out: data events ---------------------------------------------------------- */

typedef struct FileData {
        uint64_t seq;
        uint64_t offset; /* where these bytes go; a jump past the last end is a hole */
        const char *data;
        size_t data_len;
} FileData;

json_object *file_data_event_new(json_object *id, uint64_t seq, uint64_t offset, const void *data, size_t len);
int file_data_event_parse(json_object *event, FileData *ret, ProtoError *err);

/* ---- The fast path for the lines that carry the bytes ------------------------------------
 * json-c's serialiser escapes a string a byte at a time (57 MB/s for a 1 MiB chunk here) and a
 * strict check plus parse of such a line runs near 80 MB/s; base64 itself runs at several
 * hundred. So the lines that carry data have one canonical form, written directly and
 * recognised by a scanner that checks every byte of it; a line in any other form (other key
 * order, spaces, escapes, a string id) is not an error: it goes through proto_parse_line() and
 * file_chunk_parse()/file_data_event_parse(), which give the same result for a line both take.
 *
 *   {"id":7,"op":"file.chunk","seq":3,"data":"<base64>"[,"eof":true]}\n
 *   {"id":7,"event":"data","seq":3,"offset":3145728,"data":"<base64>"}\n                        */

/* Room file_chunk_format() and file_data_event_format() need for len bytes of data. */
size_t file_line_format_max(size_t len);
/* Write the line (with its '\n') into buf; the length, or 0 when buf is too small. */
size_t file_chunk_format(char *buf, size_t size, int64_t id, uint64_t seq, const void *data, size_t len, bool eof);
size_t file_data_event_format(char *buf, size_t size, int64_t id, uint64_t seq, uint64_t offset, const void *data,
                              size_t len);
/* 1 and the fields (pointers into line) when line (without its '\n') is exactly the canonical
 * form; 0 when it is not (then parse it the general way). The data's bytes are left to the
 * decoder: when it refuses them, parse the line the general way for the exact error. */
int file_chunk_scan(const char *line, size_t len, int64_t *ret_id, FileChunk *ret);
int file_data_event_scan(const char *line, size_t len, int64_t *ret_id, FileData *ret);
