/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* file.stat, file.list, file.mkdir, file.remove: the request's fields checked here, the work
 * done inside the sandbox by the file helper (file-op.c, docs/protocol.md "Files"). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file-helper.h"
#include "fdpass.h"
#include "file-op.h"
#include "file-proto.h"
#include "macro.h"
#include "ops.h"
#include "run-spec.h"
#include "sandbox.h"
#include "util.h"

/* path (and path_encoding) as file_path_check() wants it: absolute, at most PATH_MAX. */
static int get_path(json_object *req, char **ret, ProtoError *err) {
        _cleanup_free_ void *bytes = NULL;
        const char *path = NULL, *enc = NULL;
        size_t len;
        int r;

        if ((r = proto_get_string(req, "path", 4 * SBX_FILE_PATH_MAX, &path, err)) < 0 ||
            (r = proto_get_string(req, "path_encoding", 16, &enc, err)) < 0)
                return r;
        if (!path)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "path", "missing field 'path'");
        len = strlen(path);
        if (enc && strcmp(enc, "base64") == 0) {
                if (base64_decode(path, len, &bytes, &len) < 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "path", "is not valid base64");
                path = bytes;
        } else if (enc && strcmp(enc, "utf-8") != 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "path_encoding", "must be \"utf-8\" or \"base64\"");
        return file_path_check(path, len, "path", ret, err);
}

static int get_flag(json_object *req, const char *name, char *buf, size_t size, ProtoError *err) {
        bool b = false;
        int r = proto_get_bool(req, name, &b, err);
        if (r < 0)
                return r;
        snprintf(buf, size, "%s=%d", name, b);
        return 0;
}

/* "fd": the index of one of the line's fds, type-checked against what the op does with it; the
 * daemon never reads or writes it (the helper does). 0 when absent. */
static int get_fd(Request *c, json_object *req, unsigned allow, int *ret, ProtoError *err) {
        const char *reason = NULL;
        uint64_t i;
        int r = proto_get_uint(req, "fd", 0, SBX_FDS_PER_MESSAGE - 1, &i, err);

        if (r <= 0)
                return r;
        if (i >= c->n_fds)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "fd", "fd %" PRIu64 " did not come with this request (%zu did)",
                                       i, c->n_fds);
        if (sbx_fd_check(c->fds[i], allow, &reason) < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "fd", "fd %" PRIu64 " %s", i, reason ? reason : "is refused");
        *ret = c->fds[i];
        return 1;
}

/* The common part: sandbox, path, user; then the helper with options (and sink_fd, or -1). */
static int file_op_fd(Request *c, json_object *req, const char *op, const char *const *options, int sink_fd,
                      ProtoError *err) {
        _cleanup_free_ char *path = NULL;
        FileOpSpec spec = { .op = op, .options = options, .sink_fd = sink_fd };
        Sandbox *s;
        int r;

        if ((r = ops_lookup_sandbox(c, req, &s, err)) < 0 || (r = get_path(req, &path, err)) < 0 ||
            (r = sandbox_user_parse(req, &spec.user, err)) < 0)
                return r;
        spec.path = path;
        return file_op_start(s, &spec, c->reply, err);
}

static int file_op(Request *c, json_object *req, const char *op, const char *const *options, ProtoError *err) {
        return file_op_fd(c, req, op, options, -1, err);
}

int op_file_stat(Request *c, json_object *id, json_object *req, ProtoError *err) {
        char follow[16];
        const char *options[] = { follow, NULL };
        int r = get_flag(req, "follow", follow, sizeof(follow), err);
        return r < 0 ? r : file_op(c, req, FILE_OP_STAT, options, err);
}

int op_file_list(Request *c, json_object *id, json_object *req, ProtoError *err) {
        char recursive[16], entries[32], depth[32];
        const char *options[] = { recursive, entries, depth, NULL };
        uint64_t max_entries = 10000, max_depth = 64;
        int r;

        if ((r = get_flag(req, "recursive", recursive, sizeof(recursive), err)) < 0 ||
            (r = proto_get_uint(req, "max_entries", 1, 100000, &max_entries, err)) < 0 ||
            (r = proto_get_uint(req, "max_depth", 1, 64, &max_depth, err)) < 0)
                return r;
        snprintf(entries, sizeof(entries), "max_entries=%" PRIu64, max_entries);
        snprintf(depth, sizeof(depth), "max_depth=%" PRIu64, max_depth);
        return file_op(c, req, FILE_OP_LIST, options, err);
}

int op_file_mkdir(Request *c, json_object *id, json_object *req, ProtoError *err) {
        char parents[16], mode_opt[16];
        const char *options[] = { parents, mode_opt, NULL };
        unsigned mode = 0755;
        int r;

        if ((r = get_flag(req, "parents", parents, sizeof(parents), err)) < 0 ||
            (r = file_mode_get(req, "mode", &mode, err)) < 0)
                return r;
        snprintf(mode_opt, sizeof(mode_opt), "mode=%u", mode);
        return file_op(c, req, FILE_OP_MKDIR, options, err);
}

int op_file_read(Request *c, json_object *id, json_object *req, ProtoError *err) {
        char nofollow[16], offset_opt[40], length_opt[40];
        const char *options[] = { nofollow, offset_opt, length_opt, NULL, NULL };
        uint64_t offset = 0, length = UINT64_MAX;
        int r, sink = -1;

        if ((r = get_flag(req, "nofollow", nofollow, sizeof(nofollow), err)) < 0 ||
            (r = proto_get_size(req, "offset", &offset, err)) < 0 || (r = proto_get_size(req, "length", &length, err)) < 0 ||
            (r = get_fd(c, req, SBX_FD_FILE_SINK, &sink, err)) < 0)
                return r;
        snprintf(offset_opt, sizeof(offset_opt), "offset=%" PRIu64, offset);
        snprintf(length_opt, sizeof(length_opt), "length=%" PRIu64, length);
        if (sink >= 0)
                options[3] = "sink=1";
        return file_op_fd(c, req, FILE_OP_READ, options, sink, err);
}

int op_file_remove(Request *c, json_object *id, json_object *req, ProtoError *err) {
        char recursive[16], missing_ok[16];
        const char *options[] = { recursive, missing_ok, NULL };
        int r;

        if ((r = get_flag(req, "recursive", recursive, sizeof(recursive), err)) < 0 ||
            (r = get_flag(req, "missing_ok", missing_ok, sizeof(missing_ok), err)) < 0)
                return r;
        return file_op(c, req, FILE_OP_REMOVE, options, err);
}
