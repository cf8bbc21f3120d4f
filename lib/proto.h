/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The wire protocol shared by sandboxd and its clients: line framing, strict JSON decoding of one
 * line, field validation against a per-operation table, error codes, and reply encoding.
 * See docs/protocol.md. No logging and no global state here. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SBX_PROTOCOL_VERSION 1
#define SBX_DEFAULT_SOCKET "/run/sandboxd/sandboxd.sock"
#define SBX_DEFAULT_MAX_LINE (4u * 1024 * 1024)
#define SBX_MAX_DEPTH 16
#define SBX_MAX_ID_LEN 128

typedef enum SbxErrorCode {
        SBX_OK = 0,
        SBX_E_INVALID_JSON,
        SBX_E_INVALID_REQUEST,
        SBX_E_UNKNOWN_OP,
        SBX_E_TOO_LARGE,
        SBX_E_NOT_FOUND,
        SBX_E_PERMISSION_DENIED,
        SBX_E_LIMIT_UNENFORCEABLE,
        SBX_E_RESOURCE_EXHAUSTED,
        SBX_E_SPAWN_FAILED,
        SBX_E_CONFLICT,
        SBX_E_INTERNAL,
        SBX_E_SESSION_LOST,
        SBX_E_TEARDOWN_STUCK,
        SBX_E_NO_SPACE, /* the sandbox's disk is full (ENOSPC, EDQUOT): file operations */
        _SBX_E_MAX,
} SbxErrorCode;

const char *sbx_error_code_to_string(SbxErrorCode code);
SbxErrorCode sbx_error_code_from_string(const char *s);

/* An error on its way to becoming a reply: a stable code, a message for a person, and optionally
 * the field it concerns. */
typedef struct ProtoError {
        SbxErrorCode code;
        char field[64];
        char message[1024]; /* room for a path and its advice: a refusal is never cut short */
        char step[32];       /* spawn_failed: where ("exec") */
        char errno_name[32]; /* spawn_failed: why ("ENOENT") */
} ProtoError;

int proto_error_set(ProtoError *e, SbxErrorCode code, const char *field, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* Adds where and why a spawn failed (error.step, error.errno) to an error already set. */
void proto_error_set_spawn(ProtoError *e, const char *step, int err);

/* ---- Line framing ------------------------------------------------------------------------ */

/* Accumulates bytes and hands out complete lines. A line longer than max is reported once as
 * too long and then skipped up to its newline without being buffered. */
typedef struct LineBuffer {
        char *data;
        size_t start;    /* first byte not yet handed out */
        size_t len;      /* end of the bytes held */
        size_t scanned;  /* bytes already searched for '\n' */
        size_t alloc;
        size_t max;      /* longest accepted line, without its '\n' */
        bool discarding; /* inside an over-long line */
        /* Stream offsets (bytes committed before): what ties fds received with SCM_RIGHTS to a
         * line (lib/fdpass.h). committed counts every byte ever committed; line_end is the
         * offset of the '\n' of the last line handed out, discarded_end that of the last
         * over-long line skipped (UINT64_MAX before any). */
        uint64_t committed;
        uint64_t line_end;
        uint64_t discarded_end;
} LineBuffer;

void line_buffer_init(LineBuffer *b, size_t max);
void line_buffer_done(LineBuffer *b);
/* Space to read into: at most want bytes, never more than the cap allows. */
int line_buffer_reserve(LineBuffer *b, size_t want, char **ret_ptr, size_t *ret_avail);
void line_buffer_commit(LineBuffer *b, size_t n);
/* 1 and a line (NUL-terminated in place, valid until the next reserve) when one is complete; 0 when
 * more bytes are needed; -E2BIG once per over-long line. */
int line_buffer_next(LineBuffer *b, char **ret_line, size_t *ret_len);
bool line_buffer_has_partial(const LineBuffer *b);

/* ---- Decoding ---------------------------------------------------------------------------- */

/* Strict RFC 8259 check of one line: valid UTF-8, no trailing garbage, nesting at most
 * max_depth, no duplicate keys, no NaN/Infinity, no single quotes. Then parses it with json-c. */
int proto_parse_line(const char *line, size_t len, unsigned max_depth, json_object **ret, ProtoError *err);

/* Validates the envelope of a request ({"id":..,"op":..}); returns the id (borrowed) and op. */
int proto_request_envelope(json_object *req, json_object **ret_id, const char **ret_op, ProtoError *err);

typedef enum FieldType {
        FIELD_STRING,
        FIELD_INT,      /* json integer */
        FIELD_NUMBER,   /* integer or double */
        FIELD_BOOL,
        FIELD_OBJECT,
        FIELD_ARRAY,
        FIELD_SIZE,     /* integer bytes or "256M" */
        FIELD_DURATION, /* number of seconds or "30s" */
        FIELD_STRING_OR_ARRAY,
        FIELD_STRING_OR_OBJECT,
        FIELD_ID,       /* integer or string */
        FIELD_DECIMAL,  /* number or numeric string ("0.5") */
} FieldType;

typedef struct FieldSpec {
        const char *name;
        FieldType type;
        bool required;
} FieldSpec;

/* Rejects unknown members, missing required ones and wrong types, naming the field.
 * prefix names the enclosing object in messages ("limits."). */
int proto_check_fields(json_object *obj, const FieldSpec *spec, const char *prefix, ProtoError *err);

/* Typed getters for fields already checked by proto_check_fields(). Return 0 when absent
 * (ret untouched), 1 when present, negative with err set when the value is out of range. */
int proto_get_string(json_object *obj, const char *name, size_t max_len, const char **ret, ProtoError *err);
int proto_get_uint(json_object *obj, const char *name, uint64_t min, uint64_t max, uint64_t *ret, ProtoError *err);
int proto_get_bool(json_object *obj, const char *name, bool *ret, ProtoError *err);
int proto_get_size(json_object *obj, const char *name, uint64_t *ret, ProtoError *err);
int proto_get_duration(json_object *obj, const char *name, uint64_t *ret_usec, ProtoError *err);
int proto_get_cpus(json_object *obj, const char *name, uint64_t *ret_millicpus, ProtoError *err);
/* An array of at most max_items strings, each valid and without NUL; returns a NULL-terminated
 * vector of borrowed pointers (free the vector only). */
int proto_get_strv(json_object *obj, const char *name, size_t max_items, size_t max_len, const char ***ret,
                   size_t *ret_n, ProtoError *err);

/* ---- Encoding ---------------------------------------------------------------------------- */

json_object *proto_reply_ok(json_object *id);
json_object *proto_reply_error(json_object *id, const ProtoError *err);
json_object *proto_event(json_object *id, const char *kind);
/* Serialises obj as one line including the trailing '\n'; caller frees. */
char *proto_serialize(json_object *obj, size_t *ret_len);

/* Adds "text" or "base64" members for a byte string: data as UTF-8 text when valid, else base64
 * with "<key>_encoding":"base64". */
int proto_add_bytes(json_object *obj, const char *key, const void *data, size_t len);
/* Seconds from microseconds, a JSON number written with at most 6 decimals ("0.008759", not
 * json-c's "0.0087589999999999994"); NULL when out of memory. */
json_object *proto_seconds(uint64_t usec);

void json_object_putp(json_object **o);
#define _cleanup_json_ __attribute__((cleanup(json_object_putp)))
