/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzz target for what sandboxd does with the bytes a client sends, up to dispatch: framing
 * through a LineBuffer in chunks of varying size, strict decoding, the envelope, the daemon's own
 * field table of "run" (the largest; daemon/core/request-fields.c) and its typed getters, and the reply.
 *
 * Beyond "no crash, no leak", it checks three properties and aborts when one breaks:
 *  - the LineBuffer yields the same lines as a plain split on '\n' would, whatever the chunking;
 *  - a request that parses serialises back to a line that parses to an equal tree;
 *  - every reply is one line that a client's strict parser accepts. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "macro.h"
#include "proto.h"
#include "request-fields.h"
#include "util.h"

/* Small, so that short inputs reach the over-long line paths. */
#define FUZZ_MAX_LINE 512

static void check(bool cond, const char *what) {
        if (!cond) {
                fprintf(stderr, "fuzz-request: property broken: %s\n", what);
                abort();
        }
}

/* ---- values ----------------------------------------------------------------------------- */

static int check_limits(json_object *req, ProtoError *err) {
        json_object *limits;
        uint64_t u;

        if (!json_object_object_get_ex(req, "limits", &limits) || json_object_is_type(limits, json_type_null))
                return 0;
        if (proto_check_fields(limits, request_limits_fields, "limits.", err) < 0 ||
            proto_get_size(limits, "memory", &u, err) < 0 || proto_get_uint(limits, "pids", 1, UINT32_MAX, &u, err) < 0 ||
            proto_get_cpus(limits, "cpus", &u, err) < 0 || proto_get_duration(limits, "timeout_s", &u, err) < 0 ||
            proto_get_size(limits, "output_bytes", &u, err) < 0 || proto_get_size(limits, "disk", &u, err) < 0)
                return -EINVAL;
        return 0;
}

static int check_stdin(json_object *req, ProtoError *err) {
        const char *in = NULL, *enc = NULL;
        _cleanup_free_ void *bytes = NULL;
        size_t n = 0;

        if (proto_get_string(req, "stdin", 1 << 20, &in, err) < 0 ||
            proto_get_string(req, "stdin_encoding", 16, &enc, err) < 0)
                return -EINVAL;
        if (!in)
                return 0;
        if (enc && strcmp(enc, "base64") == 0) {
                if (base64_decode(in, strlen(in), &bytes, &n) < 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "stdin", "'stdin' is not valid base64");
        }
        /* Echo it the way run output travels, to exercise the encoder on decoded bytes. */
        _cleanup_json_ json_object *echo = json_object_new_object();
        check(proto_add_bytes(echo, "stdin", bytes ? bytes : in, bytes ? n : strlen(in)) == 0, "proto_add_bytes failed");
        return 0;
}

/* create's "sysctls": what is accepted can never be more than one /proc/sys entry once the dots
 * are slashes, nor a value of more than one line. */
static int check_sysctls(json_object *req, ProtoError *err) {
        json_object *o;

        if (!json_object_object_get_ex(req, "sysctls", &o) || !json_object_is_type(o, json_type_object))
                return 0;
        json_object_object_foreach(o, k, v) {
                if (!sysctl_name_valid(k)) {
                        check(!sysctl_name_namespaced(k), "an invalid sysctl name is namespaced");
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "sysctls", "not a sysctl name");
                }
                check(!strchr(k, '/') && !strstr(k, "..") && k[0] != '.' && strlen(k) <= 128,
                      "a valid sysctl name could be more than one /proc/sys entry");
                if (json_object_is_type(v, json_type_string) &&
                    sysctl_value_valid(json_object_get_string(v), (size_t) json_object_get_string_len(v)))
                        check(!memchr(json_object_get_string(v), '\n', (size_t) json_object_get_string_len(v)) &&
                                      !memchr(json_object_get_string(v), '\0', (size_t) json_object_get_string_len(v)),
                              "a valid sysctl value holds a newline or a NUL");
        }
        return 0;
}

static int check_values(json_object *req, ProtoError *err) {
        _cleanup_free_ const char **argv = NULL;
        const char *s;
        uint64_t u;
        bool b;

        if (proto_get_string(req, "sandbox", 64, &s, err) < 0 || proto_get_string(req, "cwd", 4096, &s, err) < 0 ||
            proto_get_string(req, "command", 1 << 16, &s, err) < 0 ||
            proto_get_strv(req, "argv", 4096, 1 << 16, &argv, NULL, err) < 0 ||
            proto_get_duration(req, "timeout_s", &u, err) < 0 || proto_get_duration(req, "cpu_s", &u, err) < 0 ||
            proto_get_size(req, "output_bytes", &u, err) < 0 || proto_get_size(req, "memory", &u, err) < 0 ||
            proto_get_uint(req, "pids", 1, UINT64_MAX, &u, err) < 0 || proto_get_bool(req, "stream", &b, err) < 0 ||
            proto_get_string(req, "user", 16, &s, err) < 0 ||
            /* "network" may be an object (egress), read by egress_parse() against the daemon's deny list. */
            (json_object_is_type(json_object_object_get(req, "network"), json_type_string) &&
             proto_get_string(req, "network", 16, &s, err) < 0) ||
            proto_get_bool(req, "best_effort", &b, err) < 0)
                return -EINVAL;
        if (check_limits(req, err) < 0 || check_stdin(req, err) < 0)
                return -EINVAL;
        return 0;
}

/* ---- lines ------------------------------------------------------------------------------ */

static void reply_must_parse(json_object *reply) {
        size_t len = 0;
        _cleanup_free_ char *s = proto_serialize(reply, &len);
        _cleanup_json_ json_object *back = NULL;
        ProtoError e;

        check(s && len > 0 && s[len - 1] == '\n' && !memchr(s, '\n', len - 1), "a reply is not exactly one line");
        check(proto_parse_line(s, len - 1, SBX_MAX_DEPTH, &back, &e) == 0, "a reply does not parse back strictly");
}

static void request_must_round_trip(json_object *req) {
        size_t len = 0;
        _cleanup_free_ char *s = proto_serialize(req, &len);
        _cleanup_json_ json_object *back = NULL;
        ProtoError e;

        check(s && proto_parse_line(s, len - 1, SBX_MAX_DEPTH, &back, &e) == 0, "a parsed request does not re-parse");
        check(json_object_equal(req, back), "a parsed request re-parses differently");
}

static void handle_line(const char *line, size_t len) {
        _cleanup_json_ json_object *req = NULL, *reply = NULL;
        json_object *id = NULL;
        const char *op = NULL;
        ProtoError err = {};

        check(strlen(line) <= len && line[len] == '\0', "a line is not NUL-terminated");
        if (proto_parse_line(line, len, SBX_MAX_DEPTH, &req, &err) < 0) {
                check(err.code == SBX_E_INVALID_JSON && !req, "a refused line is not invalid_json");
                reply = proto_reply_error(NULL, &err);
        } else {
                request_must_round_trip(req);
                /* create's field, whatever the op: its checks hold alone. */
                ProtoError sysctl_err = {};
                (void) check_sysctls(req, &sysctl_err);
                if (proto_request_envelope(req, &id, &op, &err) < 0 ||
                    proto_check_fields(req, request_run_fields, NULL, &err) < 0 || check_values(req, &err) < 0) {
                        check(err.code == SBX_E_INVALID_REQUEST && err.message[0], "a refused request has no reason");
                        reply = proto_reply_error(id, &err);
                } else
                        reply = proto_reply_ok(id);
        }
        reply_must_parse(reply);
}

/* ---- framing ---------------------------------------------------------------------------- */

/* The reference framing: what splitting the whole input on '\n' gives, one event at a time. */
typedef struct Model {
        const char *data;
        size_t len, pos, max;
} Model;

/* 1 and a line, -E2BIG, or 0 at the end (an unfinished tail counts only when over-long). */
static int model_next(Model *m, const char **ret_line, size_t *ret_len) {
        const char *nl = m->pos < m->len ? memchr(m->data + m->pos, '\n', m->len - m->pos) : NULL;
        if (!nl) {
                bool over = m->len - m->pos > m->max;
                m->pos = m->len;
                return over ? -E2BIG : 0;
        }
        size_t n = (size_t) (nl - (m->data + m->pos));
        *ret_line = m->data + m->pos;
        m->pos += n + 1;
        if (n > m->max)
                return -E2BIG;
        if (n > 0 && (*ret_line)[n - 1] == '\r')
                n--;
        *ret_len = n;
        return 1;
}

static void drain(LineBuffer *b, Model *m) {
        char *line;
        size_t n;
        int r;

        while ((r = line_buffer_next(b, &line, &n)) != 0) {
                const char *want = NULL;
                size_t want_len = 0;
                check(model_next(m, &want, &want_len) == r, "the LineBuffer and a plain split disagree");
                if (r == -E2BIG)
                        continue;
                check(r == 1 && n == want_len && memcmp(line, want, n) == 0, "the LineBuffer changed a line");
                handle_line(line, n);
        }
}

static uint64_t xorshift(uint64_t *s) {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        return *s;
}

/* Chunk sizes come from a hash of the input, so each input replays the same way. */
static uint64_t chunk_seed(const uint8_t *data, size_t size) {
        uint64_t h = UINT64_C(0xcbf29ce484222325);
        for (size_t i = 0; i < size; i++)
                h = (h ^ data[i]) * UINT64_C(0x100000001b3);
        return h | 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        LineBuffer b;
        Model m = { .data = (const char *) data, .len = size, .max = FUZZ_MAX_LINE };
        uint64_t seed = chunk_seed(data, size);
        size_t pos = 0, bound = 1 + (size_t) (xorshift(&seed) % 4 == 0 ? 3 : FUZZ_MAX_LINE * 2);

        line_buffer_init(&b, FUZZ_MAX_LINE);
        while (pos < size) {
                size_t want = 1 + (size_t) (xorshift(&seed) % bound), avail = 0;
                char *p;
                check(line_buffer_reserve(&b, want, &p, &avail) == 0, "line_buffer_reserve failed");
                check(avail > 0 && avail <= want && b.len + avail <= FUZZ_MAX_LINE + 1,
                      "line_buffer_reserve offered no space, or more than max+1 in total");
                if (avail > size - pos)
                        avail = size - pos;
                memcpy(p, data + pos, avail);
                line_buffer_commit(&b, avail);
                pos += avail;
                drain(&b, &m);
        }
        const char *l;
        size_t n;
        check(model_next(&m, &l, &n) == 0, "the LineBuffer missed a line or an over-long tail");
        line_buffer_done(&b);
        return 0;
}
