/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* file.stat, file.list, file.mkdir, file.remove: the request's fields checked here, the work
 * done inside the sandbox by the file helper (file-op.c, docs/protocol.md "Files"). */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file-helper.h"
#include "fdpass.h"
#include "file-op.h"
#include "file-proto.h"
#include "connection.h"
#include "context.h"
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

/* A transfer (file.write, file.read, file.put, file.get: bytes through the daemon or a client's
 * fd) has caps of its own besides: SBX_FILE_TRANSFERS_PER_CONNECTION, max_file_transfers_per_uid. */
static int file_transfer_caps(Request *c, ProtoError *err) {
        if (reply_transfers(c->reply) >= SBX_FILE_TRANSFERS_PER_CONNECTION)
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "sandbox",
                                       "this connection has its maximum of %u file transfers in flight",
                                       SBX_FILE_TRANSFERS_PER_CONNECTION);
        if (c->peer.uid != 0 &&
            connection_uid_usage(c->conns, c->peer.uid).transfers >= c->ctx->config.max_file_transfers_per_uid)
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "sandbox",
                                       "uid %u has its maximum of %llu file transfers in flight (max_file_transfers_per_uid)",
                                       (unsigned) c->peer.uid, (unsigned long long) c->ctx->config.max_file_transfers_per_uid);
        return 0;
}

/* Each holds a process in the sandbox, as a run does: the same caps, counted together. */
static int file_op_caps(Request *c, bool transfer, ProtoError *err) {
        if (transfer && file_transfer_caps(c, err) < 0)
                return -EINVAL;
        if (reply_runs(c->reply) >= c->ctx->config.max_runs_per_connection)
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "sandbox",
                                       "too many runs and file operations in flight on this connection");
        if (c->peer.uid != 0 && connection_uid_usage(c->conns, c->peer.uid).runs >= c->ctx->config.max_runs_per_uid)
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "sandbox",
                                       "uid %u has its maximum of %llu runs and file operations in flight (max_runs_per_uid)",
                                       (unsigned) c->peer.uid, (unsigned long long) c->ctx->config.max_runs_per_uid);
        return 0;
}

/* The common part: the caps, sandbox, path, user; then the helper as spec says. */
static int file_op_spec(Request *c, json_object *req, FileOpSpec *spec, ProtoError *err) {
        _cleanup_free_ char *path = NULL;
        Sandbox *s;
        int r;

        if ((r = file_op_caps(c, spec->transfer, err)) < 0 || (r = ops_lookup_sandbox(c, req, &s, err)) < 0 ||
            (r = get_path(req, &path, err)) < 0 || (r = sandbox_user_parse(req, &spec->user, err)) < 0)
                return r;
        spec->path = path;
        return file_op_start(s, spec, c->reply, err);
}

/* With options (and data_fd, or -1). */
static int file_op_fd(Request *c, json_object *req, const char *op, const char *const *options, int data_fd,
                      ProtoError *err) {
        FileOpSpec spec = { .op = op, .options = options, .data_fd = data_fd, .size = UINT64_MAX,
                            .transfer = strcmp(op, FILE_OP_READ) == 0 || strcmp(op, FILE_OP_WRITE) == 0 ||
                                        strcmp(op, FILE_OP_PUT) == 0 || strcmp(op, FILE_OP_GET) == 0 };
        return file_op_spec(c, req, &spec, err);
}

/* By chunks: the helper gets a pipe of frames (file-inflow.h) instead of an fd of data. */
static int file_write_chunked(Request *c, json_object *id, json_object *req, const char **options, size_t n,
                              uint64_t size, ProtoError *err) {
        FileOpSpec spec = { .op = FILE_OP_WRITE, .options = options, .data_fd = -1, .chunks = true, .size = size,
                            .transfer = true };

        if (!id || json_object_is_type(id, json_type_null))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "id", "a file.write by chunks needs an id for its chunks");
        options[n++] = "chunks=1";
        options[n] = NULL;
        return file_op_spec(c, req, &spec, err);
}

/* From the client's fd or the memfd of inline data; size (UINT64_MAX: none) is the progress' total. */
static int file_write_fd(Request *c, json_object *req, const char *const *options, int data_fd, uint64_t size,
                         ProtoError *err) {
        FileOpSpec spec = { .op = FILE_OP_WRITE, .options = options, .data_fd = data_fd, .size = size, .transfer = true };
        return file_op_spec(c, req, &spec, err);
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

/* Inline data becomes a sealed memfd: the helper reads it as it reads a passed fd. */
static int data_memfd(const void *data, size_t len, ProtoError *err) {
        int fd = memfd_create("sandboxd-file-data", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        const char *p = data;
        size_t left = len;

        if (fd < 0)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "memfd_create: %s", strerror(errno));
        while (left > 0) {
                ssize_t k = write(fd, p, left);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        safe_close(fd);
                        return proto_error_set(err, SBX_E_INTERNAL, NULL, "cannot hold the data: %s", strerror(errno));
                }
                p += k;
                left -= (size_t) k;
        }
        if (lseek(fd, 0, SEEK_SET) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
                safe_close(fd);
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "cannot seal the data: %s", strerror(errno));
        }
        return fd;
}

static int get_data(json_object *req, bool has_size, uint64_t size, int *ret_fd, ProtoError *err) {
        _cleanup_free_ void *bytes = NULL;
        const char *data = NULL, *enc = NULL;
        size_t len;
        int r;

        if ((r = proto_get_string(req, "data", SIZE_MAX, &data, err)) < 0 || (r = proto_get_string(req, "encoding", 16, &enc, err)) < 0)
                return r;
        if (!data)
                return 0;
        len = strlen(data);
        if (enc && strcmp(enc, "base64") == 0) {
                if (base64_decode(data, len, &bytes, &len) < 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "data", "is not valid base64 (standard, padded, canonical)");
                data = bytes;
        } else if (enc && strcmp(enc, "utf-8") != 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "encoding", "must be \"utf-8\" or \"base64\"");
        if (has_size && size != len)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "size", "is %" PRIu64 ", and data holds %zu bytes", size, len);
        r = data_memfd(data, len, err);
        if (r < 0)
                return r;
        *ret_fd = r;
        return 1;
}

int op_file_write(Request *c, json_object *id, json_object *req, ProtoError *err) {
        char parents[16], exclusive[16], sync[16], mode_opt[24], size_opt[40], offset_opt[40];
        const char *options[10] = { parents, exclusive, sync };
        size_t n = 3;
        unsigned mode = 0;
        uint64_t size = 0, offset = 0;
        bool atomic = true, has_size, has_offset;
        int r, fd = -1, memfd = -1;

        if ((r = get_flag(req, "parents", parents, sizeof(parents), err)) < 0 ||
            (r = get_flag(req, "exclusive", exclusive, sizeof(exclusive), err)) < 0 ||
            (r = get_flag(req, "sync", sync, sizeof(sync), err)) < 0 || (r = proto_get_bool(req, "atomic", &atomic, err)) < 0 ||
            (r = file_mode_get(req, "mode", &mode, err)) < 0)
                return r;
        if (r > 0) {
                snprintf(mode_opt, sizeof(mode_opt), "new_mode=%u", mode);
                options[n++] = mode_opt;
        }
        if ((r = proto_get_size(req, "size", &size, err)) < 0)
                return r;
        has_size = json_object_object_get_ex(req, "size", NULL) && r > 0;
        if ((r = proto_get_size(req, "offset", &offset, err)) < 0)
                return r;
        has_offset = json_object_object_get_ex(req, "offset", NULL) && r > 0;
        if (has_offset && atomic && json_object_object_get_ex(req, "atomic", NULL))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "offset", "writes in place: \"atomic\" must be false");
        if (has_offset || !atomic) {
                snprintf(offset_opt, sizeof(offset_opt), "offset=%" PRIu64, offset);
                options[n++] = offset_opt;
                options[n++] = "in_place=1";
        }
        if (has_size) {
                snprintf(size_opt, sizeof(size_opt), "size=%" PRIu64, size);
                options[n++] = size_opt;
        }
        if ((r = get_fd(c, req, SBX_FD_FILE_SOURCE, &fd, err)) < 0)
                return r;
        if (json_object_object_get_ex(req, "data", NULL) && fd >= 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "data", "\"data\" and \"fd\" together");
        if (fd < 0) {
                if ((r = get_data(req, has_size, size, &memfd, err)) < 0)
                        return r;
                fd = memfd;
        }
        if (fd < 0) /* neither: the data follows in file.chunk lines */
                return file_write_chunked(c, id, req, options, n, has_size ? size : UINT64_MAX, err);
        r = file_write_fd(c, req, options, fd, has_size ? size : UINT64_MAX, err);
        safe_close(memfd); /* the helper has its own */
        return r;
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

/* file.put: a tar stream from "fd" (a pipe or file of the client) or inline "data" (base64: a
 * sealed memfd, as file.write's). A chunked stream (file.chunk lines) would reach the helper the
 * same way, through its fd 2: the place for it is where memfd is made below. */
int op_file_put(Request *c, json_object *id, json_object *req, ProtoError *err) {
        char parents[16], overwrite_opt[16];
        const char *options[] = { parents, overwrite_opt, NULL };
        bool overwrite = true;
        int r, fd = -1, memfd = -1;

        if ((r = get_flag(req, "parents", parents, sizeof(parents), err)) < 0 ||
            (r = proto_get_bool(req, "overwrite", &overwrite, err)) < 0 || (r = get_fd(c, req, SBX_FD_FILE_SOURCE, &fd, err)) < 0)
                return r;
        snprintf(overwrite_opt, sizeof(overwrite_opt), "overwrite=%d", overwrite);
        if (json_object_object_get_ex(req, "data", NULL) && fd >= 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "data", "\"data\" and \"fd\" together");
        if (fd < 0) {
                json_object *enc;
                if (!json_object_object_get_ex(req, "encoding", &enc)) /* a tar is bytes: base64 unless said */
                        json_object_object_add(req, "encoding", json_object_new_string("base64"));
                if ((r = get_data(req, false, 0, &memfd, err)) < 0)
                        return r;
                if (r == 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "fd", "file.put takes \"fd\" or \"data\" (a tar stream)");
                fd = memfd;
        }
        r = file_op_fd(c, req, FILE_OP_PUT, options, fd, err);
        safe_close(memfd); /* the helper has its own */
        return r;
}

/* file.get: the tar stream into "fd", or as data events (bounded by the connection's backlog). */
int op_file_get(Request *c, json_object *id, json_object *req, ProtoError *err) {
        char follow[16];
        const char *options[] = { follow, NULL, NULL };
        int r, sink = -1;

        if ((r = get_flag(req, "follow", follow, sizeof(follow), err)) < 0 || (r = get_fd(c, req, SBX_FD_FILE_SINK, &sink, err)) < 0)
                return r;
        if (sink >= 0)
                options[1] = "sink=1";
        return file_op_fd(c, req, FILE_OP_GET, options, sink, err);
}
