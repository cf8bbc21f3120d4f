/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "json-check.h"
#include "macro.h"
#include "proto.h"
#include "util.h"

static const char *const error_codes[_SBX_E_MAX] = {
        [SBX_OK] = "ok",
        [SBX_E_INVALID_JSON] = "invalid_json",
        [SBX_E_INVALID_REQUEST] = "invalid_request",
        [SBX_E_UNKNOWN_OP] = "unknown_op",
        [SBX_E_TOO_LARGE] = "too_large",
        [SBX_E_NOT_FOUND] = "not_found",
        [SBX_E_PERMISSION_DENIED] = "permission_denied",
        [SBX_E_LIMIT_UNENFORCEABLE] = "limit_unenforceable",
        [SBX_E_RESOURCE_EXHAUSTED] = "resource_exhausted",
        [SBX_E_SPAWN_FAILED] = "spawn_failed",
        [SBX_E_CONFLICT] = "conflict",
        [SBX_E_INTERNAL] = "internal",
        [SBX_E_SESSION_LOST] = "session_lost",
        [SBX_E_TEARDOWN_STUCK] = "teardown_stuck",
        [SBX_E_NO_SPACE] = "no_space",
};

const char *sbx_error_code_to_string(SbxErrorCode code) {
        if ((unsigned) code >= _SBX_E_MAX)
                return "internal";
        return error_codes[code];
}

SbxErrorCode sbx_error_code_from_string(const char *s) {
        for (unsigned i = 0; s && i < _SBX_E_MAX; i++)
                if (strcmp(s, error_codes[i]) == 0)
                        return (SbxErrorCode) i;
        return SBX_E_INTERNAL;
}

int proto_error_set(ProtoError *e, SbxErrorCode code, const char *field, const char *fmt, ...) {
        va_list ap;

        e->code = code;
        e->step[0] = e->errno_name[0] = '\0';
        snprintf(e->field, sizeof(e->field), "%s", field ? field : "");
        va_start(ap, fmt);
        vsnprintf(e->message, sizeof(e->message), fmt, ap);
        va_end(ap);
        /* Quoted client text may have been cut inside a character: replies stay valid UTF-8. */
        e->field[utf8_valid_prefix(e->field, strlen(e->field))] = '\0';
        e->message[utf8_valid_prefix(e->message, strlen(e->message))] = '\0';
        return -EINVAL;
}

void proto_error_set_spawn(ProtoError *e, const char *step, int err) {
        const char *name = err > 0 ? strerrorname_np(err) : NULL;
        snprintf(e->step, sizeof(e->step), "%s", step);
        snprintf(e->errno_name, sizeof(e->errno_name), "%s", name ? name : "EIO");
}

/* ---- Line framing ------------------------------------------------------------------------ */

void line_buffer_init(LineBuffer *b, size_t max) {
        *b = (LineBuffer) { .max = max, .line_end = UINT64_MAX, .discarded_end = UINT64_MAX };
}

void line_buffer_done(LineBuffer *b) {
        free(b->data);
        *b = (LineBuffer) { .max = b->max };
}

static void line_buffer_compact(LineBuffer *b) {
        if (b->start == 0)
                return;
        memmove(b->data, b->data + b->start, b->len - b->start);
        b->len -= b->start;
        b->scanned -= b->start;
        b->start = 0;
}

int line_buffer_reserve(LineBuffer *b, size_t want, char **ret_ptr, size_t *ret_avail) {
        /* Never hold more than one maximal line plus its newline. */
        size_t cap = b->max + 1, need;

        line_buffer_compact(b);
        need = b->len + want;
        if (need > cap)
                need = cap;
        if (need > b->alloc || !b->data) {
                size_t na = b->alloc ? b->alloc : 4096;
                while (na < need)
                        na *= 2;
                if (na > cap)
                        na = cap;
                char *nd = realloc(b->data, na + 1);
                if (!nd)
                        return -ENOMEM;
                b->data = nd;
                b->alloc = na;
        }
        *ret_ptr = b->data + b->len;
        *ret_avail = need - b->len;
        return 0;
}

void line_buffer_commit(LineBuffer *b, size_t n) {
        b->len += n;
        b->committed += n;
}

/* The stream offset of the byte at p in the buffer. */
static uint64_t line_buffer_offset(const LineBuffer *b, const char *p) {
        return b->committed - (uint64_t) (b->len - (size_t) (p - b->data));
}

static void line_buffer_drop(LineBuffer *b) {
        b->start = b->len = b->scanned = 0;
}

int line_buffer_next(LineBuffer *b, char **ret_line, size_t *ret_len) {
        for (;;) {
                char *nl = b->len > b->scanned ? memchr(b->data + b->scanned, '\n', b->len - b->scanned) : NULL;

                if (!nl) {
                        b->scanned = b->len;
                        if (b->discarding)
                                line_buffer_drop(b);
                        else if (b->len - b->start > b->max) {
                                /* Drop what we hold and skip the rest of this line as it arrives. */
                                line_buffer_drop(b);
                                b->discarding = true;
                                return -E2BIG;
                        }
                        return 0;
                }

                char *line = b->data + b->start;
                size_t n = (size_t) (nl - line);
                uint64_t end = line_buffer_offset(b, nl);
                b->start += n + 1;
                b->scanned = b->start;
                if (b->discarding) {
                        b->discarding = false;
                        b->discarded_end = end;
                        continue;
                }
                if (n > b->max) {
                        b->discarded_end = end;
                        return -E2BIG;
                }
                b->line_end = end;
                *nl = '\0';
                if (n > 0 && line[n - 1] == '\r')
                        line[--n] = '\0';
                *ret_line = line;
                *ret_len = n;
                return 1;
        }
}

bool line_buffer_has_partial(const LineBuffer *b) {
        return b->len > b->start || b->discarding;
}
/* ---- Decoding ---------------------------------------------------------------------------- */

int proto_parse_line(const char *line, size_t len, unsigned max_depth, json_object **ret, ProtoError *err) {
        _cleanup_(freep) unsigned *counts_v = NULL;
        JsonKeyCounts counts = {};
        const char *why = NULL;
        json_tokener *tok;
        json_object *o;
        int r;

        r = json_check(line, len, max_depth, &counts, &why);
        counts_v = counts.v;
        if (r < 0)
                return proto_error_set(err, SBX_E_INVALID_JSON, NULL, "malformed JSON: %s", why ? why : "syntax error");

        /* json_tokener_free(NULL) crashes in json-c 0.16: only free what was made. */
        tok = json_tokener_new_ex((int) max_depth + 1);
        if (!tok)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
        o = json_tokener_parse_ex(tok, line, (int) len);
        /* A top-level number may still be growing as far as json-c knows: a NUL ends it. */
        if (!o && json_tokener_get_error(tok) == json_tokener_continue)
                o = json_tokener_parse_ex(tok, "", 1);
        /* A valid "null" parses to NULL. */
        r = json_tokener_get_error(tok) == json_tokener_success;
        json_tokener_free(tok);
        if (!r) {
                json_object_put(o);
                return proto_error_set(err, SBX_E_INVALID_JSON, NULL, "malformed JSON");
        }
        if (json_check_no_duplicates(o, &counts) < 0) {
                json_object_put(o);
                return proto_error_set(err, SBX_E_INVALID_JSON, NULL, "duplicate key in object");
        }
        *ret = o;
        return 0;
}

int proto_request_envelope(json_object *req, json_object **ret_id, const char **ret_op, ProtoError *err) {
        json_object *id, *op;

        if (!json_object_is_type(req, json_type_object))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, NULL, "a request must be a JSON object");
        if (!json_object_object_get_ex(req, "id", &id))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "id", "missing field 'id'");
        if (json_object_is_type(id, json_type_string)) {
                size_t n = (size_t) json_object_get_string_len(id);
                if (n == 0 || n > SBX_MAX_ID_LEN)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "id",
                                               "field 'id' must be 1 to %d bytes long", SBX_MAX_ID_LEN);
        } else if (!json_object_is_type(id, json_type_int))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "id", "field 'id' must be an integer or a string");
        *ret_id = id;
        if (!json_object_object_get_ex(req, "op", &op) || !json_object_is_type(op, json_type_string))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "op", "field 'op' must be a string");
        *ret_op = json_object_get_string(op);
        return 0;
}

static bool is_integer(json_object *v) {
        return json_object_is_type(v, json_type_int);
}

static bool field_type_ok(json_object *v, FieldType t) {
        switch (t) {
        case FIELD_STRING:
                return json_object_is_type(v, json_type_string);
        case FIELD_INT:
                return is_integer(v);
        case FIELD_NUMBER:
                return is_integer(v) || json_object_is_type(v, json_type_double);
        case FIELD_BOOL:
                return json_object_is_type(v, json_type_boolean);
        case FIELD_OBJECT:
                return json_object_is_type(v, json_type_object);
        case FIELD_ARRAY:
                return json_object_is_type(v, json_type_array);
        case FIELD_SIZE:
        case FIELD_DURATION:
        case FIELD_DECIMAL:
                return is_integer(v) || json_object_is_type(v, json_type_double) ||
                       json_object_is_type(v, json_type_string);
        case FIELD_STRING_OR_ARRAY:
                return json_object_is_type(v, json_type_string) || json_object_is_type(v, json_type_array);
        case FIELD_STRING_OR_OBJECT:
                return json_object_is_type(v, json_type_string) || json_object_is_type(v, json_type_object);
        case FIELD_ID:
                return is_integer(v) || json_object_is_type(v, json_type_string);
        }
        return false;
}

static const char *field_type_name(FieldType t) {
        switch (t) {
        case FIELD_STRING: return "a string";
        case FIELD_INT: return "an integer";
        case FIELD_NUMBER: return "a number";
        case FIELD_BOOL: return "a boolean";
        case FIELD_OBJECT: return "an object";
        case FIELD_ARRAY: return "an array";
        case FIELD_SIZE: return "a size (bytes or a string like \"256M\")";
        case FIELD_DURATION: return "a duration (seconds or a string like \"30s\")";
        case FIELD_STRING_OR_ARRAY: return "a string or an array";
        case FIELD_STRING_OR_OBJECT: return "a string or an object";
        case FIELD_ID: return "an integer or a string";
        case FIELD_DECIMAL: return "a number (or a numeric string like \"0.5\")";
        }
        return "?";
}

int proto_check_fields(json_object *obj, const FieldSpec *spec, const char *prefix, ProtoError *err) {
        const char *p = prefix ? prefix : "";
        char name[64];

        if (!json_object_is_type(obj, json_type_object))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, p, "'%s' must be an object", p);
        json_object_object_foreach(obj, key, val) {
                const FieldSpec *f = spec;
                while (f->name && strcmp(f->name, key) != 0)
                        f++;
                snprintf(name, sizeof(name), "%s%.40s", p, key);
                if (!f->name)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, name, "unknown field '%s'", name);
                if (json_object_is_type(val, json_type_null) && !f->required)
                        continue;
                if (!field_type_ok(val, f->type))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, name, "field '%s' must be %s", name,
                                               field_type_name(f->type));
        }
        for (const FieldSpec *f = spec; f->name; f++) {
                json_object *v;
                if (f->required && !json_object_object_get_ex(obj, f->name, &v)) {
                        snprintf(name, sizeof(name), "%s%s", p, f->name);
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, name, "missing field '%s'", name);
                }
        }
        return 0;
}

/* Present and not null. */
static json_object *get_field(json_object *obj, const char *name) {
        json_object *v;
        if (!obj || !json_object_object_get_ex(obj, name, &v) || json_object_is_type(v, json_type_null))
                return NULL;
        return v;
}

int proto_get_string(json_object *obj, const char *name, size_t max_len, const char **ret, ProtoError *err) {
        json_object *v = get_field(obj, name);
        if (!v)
                return 0;
        if (!json_object_is_type(v, json_type_string))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, name, "field '%s' must be a string", name);
        if ((size_t) json_object_get_string_len(v) > max_len)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, name, "field '%s' is longer than %zu bytes", name,
                                       max_len);
        *ret = json_object_get_string(v);
        return 1;
}

int proto_get_uint(json_object *obj, const char *name, uint64_t min, uint64_t max, uint64_t *ret, ProtoError *err) {
        json_object *v = get_field(obj, name);
        int64_t x;
        if (!v)
                return 0;
        if (!is_integer(v))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, name, "field '%s' must be an integer", name);
        x = json_object_get_int64(v);
        /* Integers past INT64_MAX are held as unsigned by json-c; past UINT64_MAX json_check()
         * has refused them already, since json-c would saturate them silently. */
        uint64_t u = x == INT64_MAX ? json_object_get_uint64(v) : (uint64_t) x;
        if (x < 0 || u < min || u > max)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, name,
                                       "field '%s' is out of range: it must be between %llu and %llu", name, (unsigned long long) min,
                                       (unsigned long long) max);
        *ret = u;
        return 1;
}

int proto_get_bool(json_object *obj, const char *name, bool *ret, ProtoError *err) {
        json_object *v = get_field(obj, name);
        if (!v)
                return 0;
        if (!json_object_is_type(v, json_type_boolean))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, name, "field '%s' must be a boolean", name);
        *ret = json_object_get_boolean(v);
        return 1;
}

/* Numbers and strings both go through the text parser so that "1.5" and 1.5 mean the same. */
static int get_unit_value(json_object *obj, const char *name, int (*parse)(const char *, uint64_t *),
                          const char *what, uint64_t *ret, ProtoError *err) {
        json_object *v = get_field(obj, name);
        const char *s;
        char buf[64];
        int k;
        if (!v)
                return 0;
        if (is_integer(v)) {
                int64_t x = json_object_get_int64(v);
                /* json-c saturates an integer past INT64_MAX to INT64_MAX here. */
                if (x < 0 || (x == INT64_MAX && json_object_get_uint64(v) > (uint64_t) INT64_MAX))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, name, "field '%s' is out of range%s", name,
                                               x < 0 ? " (negative)" : "");
                snprintf(buf, sizeof(buf), "%lld", (long long) x);
                s = buf;
        } else if (json_object_is_type(v, json_type_double)) {
                double d = json_object_get_double(v);
                if (!(d >= 0 && d < 1e15))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, name, "field '%s' is out of range%s", name,
                                               d < 0 ? " (negative)" : "");
                snprintf(buf, sizeof(buf), "%.6f", d == 0 ? 0.0 : d); /* -0.0 is 0 */
                s = buf;
        } else if (json_object_is_type(v, json_type_string))
                s = json_object_get_string(v);
        else
                return proto_error_set(err, SBX_E_INVALID_REQUEST, name, "field '%s' must be %s", name, what);
        if ((k = parse(s, ret)) == -ERANGE)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, name, "field '%s' is out of range: '%.32s'", name, s);
        if (k < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, name, "field '%s': cannot parse '%.32s' as %s", name,
                                       s, what);
        return 1;
}

static int parse_size_truncating(const char *s, uint64_t *ret) {
        /* A size given as a JSON fraction ("1.5" bytes) is rounded down by parse_size's scaling. */
        return parse_size(s, ret);
}

int proto_get_size(json_object *obj, const char *name, uint64_t *ret, ProtoError *err) {
        return get_unit_value(obj, name, parse_size_truncating, "a size", ret, err);
}

int proto_get_duration(json_object *obj, const char *name, uint64_t *ret_usec, ProtoError *err) {
        return get_unit_value(obj, name, parse_duration, "a duration", ret_usec, err);
}

int proto_get_cpus(json_object *obj, const char *name, uint64_t *ret_millicpus, ProtoError *err) {
        return get_unit_value(obj, name, parse_cpus, "a number of CPUs", ret_millicpus, err);
}

int proto_get_strv(json_object *obj, const char *name, size_t max_items, size_t max_len, const char ***ret,
                   size_t *ret_n, ProtoError *err) {
        json_object *v = get_field(obj, name);
        const char **strv;
        size_t n;
        if (!v)
                return 0;
        if (!json_object_is_type(v, json_type_array))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, name, "field '%s' must be an array of strings", name);
        n = json_object_array_length(v);
        if (n > max_items)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, name, "field '%s' has more than %zu items", name,
                                       max_items);
        strv = calloc(n + 1, sizeof(char *));
        if (!strv)
                return proto_error_set(err, SBX_E_INTERNAL, name, "out of memory");
        for (size_t i = 0; i < n; i++) {
                json_object *s = json_object_array_get_idx(v, i);
                if (!json_object_is_type(s, json_type_string) || (size_t) json_object_get_string_len(s) > max_len ||
                    strlen(json_object_get_string(s)) != (size_t) json_object_get_string_len(s)) {
                        free(strv);
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, name,
                                               "field '%s' must hold strings of at most %zu bytes, without NUL", name,
                                               max_len);
                }
                strv[i] = json_object_get_string(s);
        }
        *ret = strv;
        if (ret_n)
                *ret_n = n;
        return 1;
}

/* ---- Encoding ---------------------------------------------------------------------------- */

json_object *proto_reply_ok(json_object *id) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "id", id ? json_object_get(id) : NULL);
        json_object_object_add(o, "ok", json_object_new_boolean(1));
        return o;
}

json_object *proto_reply_error(json_object *id, const ProtoError *err) {
        json_object *o = json_object_new_object(), *e = json_object_new_object();
        json_object_object_add(o, "id", id ? json_object_get(id) : NULL);
        json_object_object_add(o, "ok", json_object_new_boolean(0));
        json_object_object_add(e, "code", json_object_new_string(sbx_error_code_to_string(err->code)));
        json_object_object_add(e, "message", json_object_new_string(err->message));
        if (err->field[0])
                json_object_object_add(e, "field", json_object_new_string(err->field));
        if (err->step[0])
                json_object_object_add(e, "step", json_object_new_string(err->step));
        if (err->errno_name[0])
                json_object_object_add(e, "errno", json_object_new_string(err->errno_name));
        json_object_object_add(o, "error", e);
        return o;
}

json_object *proto_event(json_object *id, const char *kind) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "id", id ? json_object_get(id) : NULL);
        json_object_object_add(o, "event", json_object_new_string(kind));
        return o;
}

char *proto_serialize(json_object *obj, size_t *ret_len) {
        size_t n;
        const char *s = json_object_to_json_string_length(obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE,
                                                          &n);
        char *out;
        if (!s)
                return NULL;
        out = malloc(n + 2);
        if (!out)
                return NULL;
        memcpy(out, s, n);
        out[n] = '\n';
        out[n + 1] = '\0';
        if (ret_len)
                *ret_len = n + 1;
        return out;
}

int proto_add_bytes(json_object *obj, const char *key, const void *data, size_t len) {
        char enc_key[64];
        bool text = len == 0 || (utf8_is_valid(data, len) && !memchr(data, '\0', len));

        snprintf(enc_key, sizeof(enc_key), "%s_encoding", key);
        if (text)
                json_object_object_add(obj, key, json_object_new_string_len(data, (int) len));
        else {
                _cleanup_free_ char *b = base64_encode(data, len);
                if (!b)
                        return -ENOMEM;
                json_object_object_add(obj, key, json_object_new_string(b));
        }
        json_object_object_add(obj, enc_key, json_object_new_string(text ? "utf-8" : "base64"));
        return 0;
}

void json_object_putp(json_object **o) {
        if (*o)
                json_object_put(*o);
}

json_object *proto_seconds(uint64_t usec) {
        char buf[40];
        size_t n;

        /* Exact: integer arithmetic, then the trailing zeros of the fraction dropped (one kept). */
        snprintf(buf, sizeof(buf), "%llu.%06llu", (unsigned long long) (usec / 1000000),
                 (unsigned long long) (usec % 1000000));
        n = strlen(buf);
        while (n > 0 && buf[n - 1] == '0' && buf[n - 2] != '.')
                buf[--n] = '\0';
        return json_object_new_double_s((double) usec / 1e6, buf);
}
