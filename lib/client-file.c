/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libsandbox: the file operations (docs/design/files.md). The fd-based calls hand the caller's
 * fd to the daemon and wait; the others move bytes as base64 in file.chunk lines (in) or data
 * events (out), within the window the daemon announces. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client-internal.h"
#include "fdpass.h"
#include "file-proto.h"
#include "macro.h"
#include "util.h"

/* Up to this much goes inline in the file.write line itself (one round trip). */
#define INLINE_MAX (48u * 1024)

static json_object *file_request(const char *op, const char *sandbox, const char *path, unsigned flags) {
        json_object *req;

        if (!sandbox || !path)
                return NULL;
        req = json_object_new_object();
        if (!req)
                return NULL;
        json_object_object_add(req, "op", json_object_new_string(op));
        json_object_object_add(req, "sandbox", json_object_new_string(sandbox));
        json_object_object_add(req, "path", json_object_new_string(path));
        if (flags & SBX_FILE_AS_ROOT)
                json_object_object_add(req, "user", json_object_new_string("root"));
        return req;
}

static void add_flag(json_object *req, unsigned flags, unsigned flag, const char *key) {
        if (flags & flag)
                json_object_object_add(req, key, json_object_new_boolean(true));
}

static void add_u64(json_object *req, const char *key, uint64_t v) {
        json_object_object_add(req, key, json_object_new_int64((int64_t) v));
}

static void add_write_options(json_object *req, int mode, unsigned flags) {
        if (mode != SBX_FILE_MODE_DEFAULT)
                json_object_object_add(req, "mode", json_object_new_int(mode));
        add_flag(req, flags, SBX_FILE_PARENTS, "parents");
        add_flag(req, flags, SBX_FILE_EXCLUSIVE, "exclusive");
        add_flag(req, flags, SBX_FILE_SYNC, "sync");
        if (flags & SBX_FILE_IN_PLACE)
                json_object_object_add(req, "atomic", json_object_new_boolean(false));
}

static int call(SbxClient *c, json_object *req, const int *fds, size_t n_fds, sbx_event_fn on_event, void *userdata,
                json_object **ret_reply) {
        if (!req)
                return -ENOMEM;
        return sbx_client_call_fds(c, req, fds, n_fds, on_event, userdata, ret_reply);
}

SBX_CLIENT_EXPORT int sbx_file_stat(SbxClient *c, const char *sandbox, const char *path, unsigned flags,
                                    json_object **ret_reply) {
        json_object *req = file_request("file.stat", sandbox, path, flags);
        if (req)
                add_flag(req, flags, SBX_FILE_FOLLOW, "follow");
        return call(c, req, NULL, 0, NULL, NULL, ret_reply);
}

SBX_CLIENT_EXPORT int sbx_file_list(SbxClient *c, const char *sandbox, const char *path, unsigned flags,
                                    sbx_event_fn on_event, void *userdata, json_object **ret_reply) {
        json_object *req = file_request("file.list", sandbox, path, flags);
        if (req)
                add_flag(req, flags, SBX_FILE_RECURSIVE, "recursive");
        return call(c, req, NULL, 0, on_event, userdata, ret_reply);
}

SBX_CLIENT_EXPORT int sbx_file_mkdir(SbxClient *c, const char *sandbox, const char *path, int mode, unsigned flags,
                                     json_object **ret_reply) {
        json_object *req = file_request("file.mkdir", sandbox, path, flags);
        if (req) {
                if (mode != SBX_FILE_MODE_DEFAULT)
                        json_object_object_add(req, "mode", json_object_new_int(mode));
                add_flag(req, flags, SBX_FILE_PARENTS, "parents");
        }
        return call(c, req, NULL, 0, NULL, NULL, ret_reply);
}

SBX_CLIENT_EXPORT int sbx_file_remove(SbxClient *c, const char *sandbox, const char *path, unsigned flags,
                                      json_object **ret_reply) {
        json_object *req = file_request("file.remove", sandbox, path, flags);
        if (req)
                add_flag(req, flags, SBX_FILE_RECURSIVE, "recursive");
        return call(c, req, NULL, 0, NULL, NULL, ret_reply);
}

/* ---- file.write by chunks ---------------------------------------------------------------- */

/* Where a chunked write's bytes come from: a buffer, or an fd read here (a regular file's holes
 * found with SEEK_DATA/SEEK_HOLE and sent as zeros chunks). */
typedef struct ChunkSource {
        const unsigned char *data; /* a buffer of len bytes, or NULL for fd */
        size_t len, sent;
        int fd;
        bool regular;              /* fd: a regular file, read from base to end (its size then) */
        uint64_t base, end, pos;   /* fd: absolute offsets */
        unsigned char *buf;        /* fd: one chunk */
        bool eof;
} ChunkSource;

typedef struct ChunkedWrite {
        SbxClient *c;
        json_object *id;
        ChunkSource *src;
        size_t chunk_bytes;
        FileWindow w;
        sbx_event_fn on_event;
        void *userdata;
        bool ready;
        char *line; /* room for one canonical chunk line */
        size_t line_size;
} ChunkedWrite;

/* Reads one line for this write: an event is handled (ready, ack, the rest to on_event), the
 * final reply is handed back (1). */
static int chunked_next(ChunkedWrite *cw, json_object **ret_reply) {
        _cleanup_json_ json_object *msg = NULL;
        json_object *ev;
        int64_t v;
        int r = sbx_client_read(cw->c, &msg);

        if (r < 0)
                return r;
        if (!client_answers(msg, cw->id))
                return 0;
        if (!json_object_object_get_ex(msg, "event", &ev)) {
                *ret_reply = TAKE_PTR(msg);
                return 1;
        }
        const char *kind = json_object_get_string(ev);
        if (strcmp(kind, "ready") == 0) {
                json_object *x;
                if (json_object_object_get_ex(msg, "chunk_bytes", &x) && (v = json_object_get_int64(x)) > 0 &&
                    (uint64_t) v < cw->chunk_bytes)
                        cw->chunk_bytes = (size_t) v;
                if (json_object_object_get_ex(msg, "window", &x) && (v = json_object_get_int64(x)) > 0 &&
                    v < cw->w.window)
                        cw->w.window = (unsigned) v;
                cw->ready = true;
        } else if (strcmp(kind, "ack") == 0) {
                json_object *x;
                if (json_object_object_get_ex(msg, "seq", &x) && (v = json_object_get_int64(x)) >= 0)
                        file_window_ack(&cw->w, (uint64_t) v);
        } else if (cw->on_event && (r = cw->on_event(msg, cw->userdata)) < 0)
                return r;
        return 0;
}

/* The next piece of an fd: data (up to max bytes, into s->buf) or a hole (zeros). */
static int source_fd_next(ChunkSource *s, size_t max, size_t *ret_len, uint64_t *ret_zeros) {
        *ret_len = 0;
        *ret_zeros = 0;
        if (s->regular) {
                off_t d = lseek(s->fd, (off_t) s->pos, SEEK_DATA);
                uint64_t data = d < 0 ? s->end : (uint64_t) d; /* ENXIO: a hole to the end */
                if (data > s->end)
                        data = s->end;
                if (data > s->pos) {
                        *ret_zeros = data - s->pos;
                        s->pos = data;
                        s->eof = s->pos == s->end;
                        return 0;
                }
                off_t h = lseek(s->fd, (off_t) s->pos, SEEK_HOLE);
                uint64_t hole = h < 0 || (uint64_t) h > s->end ? s->end : (uint64_t) h;
                if (hole > s->pos && max > hole - s->pos)
                        max = (size_t) (hole - s->pos);
        }
        while (max > 0) {
                ssize_t k = s->regular ? pread(s->fd, s->buf, max, (off_t) s->pos) : read(s->fd, s->buf, max);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0 && s->regular)
                        return -EIO; /* it shrank under us: the size announced cannot be met */
                if (k == 0)
                        s->eof = true;
                s->pos += (uint64_t) k;
                *ret_len = (size_t) k;
                break;
        }
        if (s->regular && s->pos == s->end)
                s->eof = true;
        return 0;
}

static int chunked_send_line(ChunkedWrite *cw, const FileChunk *fc, const unsigned char *data, size_t n) {
        if (cw->line && fc->zeros == 0 && json_object_is_type(cw->id, json_type_int)) {
                /* The canonical line, written directly (lib/file-proto.h: json-c's serialiser
                 * is the slow part of a chunk). */
                size_t k = file_chunk_format(cw->line, cw->line_size, json_object_get_int64(cw->id), fc->seq, data, n,
                                             fc->eof);
                if (k == 0)
                        return -ENOBUFS;
                return sbx_fds_send(cw->c->fd, cw->line, k, NULL, 0);
        }
        json_object *line = file_chunk_new(cw->id, fc->seq, fc->zeros ? NULL : data, n, fc->zeros, fc->eof);
        if (!line)
                return -ENOMEM;
        /* The line has the write's id already: client_send_fds() keeps it. */
        return client_send_fds(cw->c, line, NULL, 0, NULL);
}

static int chunked_send_one(ChunkedWrite *cw) {
        ChunkSource *s = cw->src;
        const unsigned char *data;
        ProtoError err;
        size_t n;
        uint64_t zeros = 0;
        int r;

        if (s->data) {
                n = s->len - s->sent < cw->chunk_bytes ? s->len - s->sent : cw->chunk_bytes;
                data = s->data + s->sent;
                s->sent += n;
                s->eof = s->sent == s->len;
        } else {
                if ((r = source_fd_next(s, cw->chunk_bytes, &n, &zeros)) < 0)
                        return r;
                data = s->buf;
        }
        FileChunk fc = { .seq = cw->w.next_seq, .zeros = zeros, .eof = s->eof };
        if (file_window_take(&cw->w, &fc, n + zeros, &err) < 0)
                return -EPROTO;
        return chunked_send_line(cw, &fc, data, n);
}

static int write_chunked(ChunkedWrite *cw, json_object **ret_reply) {
        int r;

        while (!cw->ready)
                if ((r = chunked_next(cw, ret_reply)) != 0)
                        return r < 0 ? r : 0; /* a reply before ready: refused at once */
        while (!cw->w.eof) {
                if (file_window_room(&cw->w) > 0) {
                        if ((r = chunked_send_one(cw)) < 0)
                                return r;
                        continue;
                }
                if ((r = chunked_next(cw, ret_reply)) != 0)
                        return r < 0 ? r : 0; /* the transfer ended early (an error reply) */
        }
        for (;;)
                if ((r = chunked_next(cw, ret_reply)) != 0)
                        return r < 0 ? r : 0;
}

/* Sends req (taken) without data and the source's bytes after it in file.chunk lines. */
static int write_by_chunks(SbxClient *c, json_object *req, ChunkSource *src, sbx_event_fn on_event, void *userdata,
                           json_object **ret_reply) {
        _cleanup_json_ json_object *id = NULL;
        int r = client_send_fds(c, req, NULL, 0, &id);

        if (r < 0)
                return r;
        _cleanup_free_ char *line = malloc(file_line_format_max(SBX_FILE_CHUNK_BYTES));
        ChunkedWrite cw = {
                .c = c, .id = id, .src = src, .chunk_bytes = SBX_FILE_CHUNK_BYTES,
                .on_event = on_event, .userdata = userdata,
                .line = line, .line_size = line ? file_line_format_max(SBX_FILE_CHUNK_BYTES) : 0,
        };
        file_window_init(&cw.w, SBX_FILE_WINDOW, src->data ? src->len : src->regular ? src->end - src->base : UINT64_MAX);
        return write_chunked(&cw, ret_reply);
}

SBX_CLIENT_EXPORT int sbx_file_write(SbxClient *c, const char *sandbox, const char *path, const void *data,
                                     size_t len, int mode, unsigned flags, sbx_event_fn on_event, void *userdata,
                                     json_object **ret_reply) {
        json_object *req = file_request("file.write", sandbox, path, flags);

        if (!req)
                return -ENOMEM;
        if (!data && len > 0) {
                json_object_put(req);
                return -EINVAL;
        }
        add_write_options(req, mode, flags);
        add_u64(req, "size", len);
        if (len <= INLINE_MAX) {
                _cleanup_free_ char *b = base64_encode(data ? data : "", len);
                if (!b) {
                        json_object_put(req);
                        return -ENOMEM;
                }
                json_object_object_add(req, "data", json_object_new_string(b));
                json_object_object_add(req, "encoding", json_object_new_string("base64"));
                return call(c, req, NULL, 0, on_event, userdata, ret_reply);
        }
        ChunkSource src = { .data = data, .len = len, .fd = -EBADF };
        return write_by_chunks(c, req, &src, on_event, userdata, ret_reply);
}

SBX_CLIENT_EXPORT int sbx_file_write_from(SbxClient *c, const char *sandbox, const char *path, int fd, int mode,
                                          unsigned flags, sbx_event_fn on_event, void *userdata,
                                          json_object **ret_reply) {
        _cleanup_free_ unsigned char *buf = malloc(SBX_FILE_CHUNK_BYTES);
        json_object *req = file_request("file.write", sandbox, path, flags);
        ChunkSource src = { .fd = fd, .buf = buf };
        struct stat st;
        off_t cur;

        if (!req || !buf) {
                json_object_put(req);
                return -ENOMEM;
        }
        if (fstat(fd, &st) < 0) {
                json_object_put(req);
                return -errno;
        }
        cur = S_ISREG(st.st_mode) ? lseek(fd, 0, SEEK_CUR) : -1;
        src.regular = cur >= 0;
        if (src.regular) {
                src.base = src.pos = (uint64_t) cur;
                src.end = (uint64_t) st.st_size > src.base ? (uint64_t) st.st_size : src.base;
                src.eof = src.base == src.end;
                add_u64(req, "size", src.end - src.base);
        }
        add_write_options(req, mode, flags);
        int r = write_by_chunks(c, req, &src, on_event, userdata, ret_reply);
        if (r >= 0 && src.regular)
                (void) lseek(fd, (off_t) src.pos, SEEK_SET);
        return r;
}

SBX_CLIENT_EXPORT int sbx_file_write_fd(SbxClient *c, const char *sandbox, const char *path, int fd, uint64_t size,
                                        int mode, unsigned flags, sbx_event_fn on_event, void *userdata,
                                        json_object **ret_reply) {
        json_object *req = file_request("file.write", sandbox, path, flags);

        if (req) {
                add_write_options(req, mode, flags);
                if (size != UINT64_MAX)
                        add_u64(req, "size", size);
                json_object_object_add(req, "fd", json_object_new_int(0));
        }
        return call(c, req, &fd, 1, on_event, userdata, ret_reply);
}

/* ---- file.read into data events ---------------------------------------------------------- */

typedef struct ReadSink {
        int fd;
        bool seekable;
        off_t base;         /* where offset `start` of the file goes in fd */
        uint64_t start;     /* the request's offset */
        uint64_t written;   /* bytes placed so far (holes included), for a pipe */
        unsigned char *buf; /* one decoded chunk */
        sbx_event_fn on_event;
        void *userdata;
} ReadSink;

static int write_zeros(int fd, uint64_t n) {
        static const unsigned char zeros[4096];
        while (n > 0) {
                size_t k = n < sizeof(zeros) ? (size_t) n : sizeof(zeros);
                int r = write_all(fd, zeros, k);
                if (r < 0)
                        return r;
                n -= k;
        }
        return 0;
}

static int sink_data(ReadSink *s, const FileData *d) {
        size_t n;

        if (d->offset < s->start)
                return -EBADMSG;
        if (base64_decode_into(d->data, d->data_len, s->buf, SBX_FILE_CHUNK_BYTES, &n) < 0)
                return -EBADMSG;
        uint64_t at = d->offset - s->start;
        if (s->seekable) {
                for (size_t done = 0; done < n;) {
                        ssize_t k = pwrite(s->fd, s->buf + done, n - done, s->base + (off_t) (at + done));
                        if (k < 0) {
                                if (errno == EINTR)
                                        continue;
                                return -errno;
                        }
                        done += (size_t) k;
                }
        } else {
                /* A pipe cannot leave a hole: the skipped region is zeros, in order. */
                if (at < s->written)
                        return -EBADMSG;
                int r = write_zeros(s->fd, at - s->written);
                if (r < 0 || (r = write_all(s->fd, s->buf, n)) < 0)
                        return r;
        }
        if (at + n > s->written)
                s->written = at + n;
        return 0;
}

static int on_read_event(json_object *ev, void *userdata) {
        ReadSink *s = userdata;
        json_object *kind;

        if (json_object_object_get_ex(ev, "event", &kind) && strcmp(json_object_get_string(kind), "data") == 0) {
                FileData d;
                ProtoError err;
                if (file_data_event_parse(ev, &d, &err) < 0)
                        return -EBADMSG;
                return sink_data(s, &d);
        }
        return s->on_event ? s->on_event(ev, s->userdata) : 0;
}

/* The file ended in a hole: a regular sink gets its length; a pipe gets the zeros. */
static int sink_finish(ReadSink *s, json_object *reply) {
        json_object *b;
        int64_t bytes;

        if (!sbx_reply_ok(reply) || !json_object_object_get_ex(reply, "bytes", &b) || (bytes = json_object_get_int64(b)) < 0 ||
            (uint64_t) bytes <= s->written)
                return 0;
        if (!s->seekable)
                return write_zeros(s->fd, (uint64_t) bytes - s->written);
        struct stat st;
        if (fstat(s->fd, &st) < 0)
                return -errno;
        if (st.st_size < s->base + bytes && ftruncate(s->fd, s->base + bytes) < 0)
                return -errno;
        return 0;
}

/* Sends the read and takes its lines: data events in the canonical form are scanned without
 * json-c (lib/file-proto.h), every other line is parsed as usual. */
static int read_events(SbxClient *c, json_object *req, ReadSink *s, json_object **ret_reply) {
        _cleanup_json_ json_object *id = NULL;
        int r;

        if (!req)
                return -ENOMEM;
        r = client_send_fds(c, req, NULL, 0, &id);
        if (r < 0)
                return r;
        bool int_id = json_object_is_type(id, json_type_int);
        int64_t want = int_id ? json_object_get_int64(id) : 0;
        for (;;) {
                _cleanup_json_ json_object *msg = NULL;
                ProtoError err;
                char *line;
                size_t len;
                int64_t got;
                FileData d;
                json_object *ev;

                if ((r = client_read_line(c, &line, &len)) < 0)
                        return r;
                if (int_id && file_data_event_scan(line, len, &got, &d) == 1) {
                        if (got == want && (r = sink_data(s, &d)) < 0)
                                return r;
                        continue;
                }
                if (proto_parse_line(line, len, 64, &msg, &err) < 0)
                        return -EBADMSG;
                if (!client_answers(msg, id))
                        continue;
                if (json_object_object_get_ex(msg, "event", &ev)) {
                        if ((r = on_read_event(msg, s)) < 0)
                                return r;
                        continue;
                }
                *ret_reply = TAKE_PTR(msg);
                return 0;
        }
}

static json_object *read_request(const char *op, const char *sandbox, const char *path, uint64_t offset,
                                 uint64_t length, unsigned flags) {
        json_object *req = file_request(op, sandbox, path, flags);
        if (!req)
                return NULL;
        if (offset > 0)
                add_u64(req, "offset", offset);
        if (length != UINT64_MAX)
                add_u64(req, "length", length);
        add_flag(req, flags, SBX_FILE_NOFOLLOW, "nofollow");
        return req;
}

SBX_CLIENT_EXPORT int sbx_file_read(SbxClient *c, const char *sandbox, const char *path, uint64_t offset,
                                    uint64_t length, int out_fd, unsigned flags, sbx_event_fn on_event,
                                    void *userdata, json_object **ret_reply) {
        _cleanup_free_ unsigned char *buf = malloc(SBX_FILE_CHUNK_BYTES);
        struct stat st;
        ReadSink s = { .fd = out_fd, .start = offset, .on_event = on_event, .userdata = userdata };
        int r;

        if (!buf)
                return -ENOMEM;
        if (fstat(out_fd, &st) < 0)
                return -errno;
        s.buf = buf;
        s.base = S_ISREG(st.st_mode) ? lseek(out_fd, 0, SEEK_CUR) : -1;
        s.seekable = s.base >= 0;
        r = read_events(c, read_request("file.read", sandbox, path, offset, length, flags), &s, ret_reply);
        if (r < 0)
                return r;
        r = sink_finish(&s, *ret_reply);
        if (r >= 0 && s.seekable && sbx_reply_ok(*ret_reply))
                (void) lseek(out_fd, s.base + (off_t) s.written, SEEK_SET);
        if (r < 0) {
                json_object_put(*ret_reply);
                *ret_reply = NULL;
        }
        return r;
}

SBX_CLIENT_EXPORT int sbx_file_read_fd(SbxClient *c, const char *sandbox, const char *path, uint64_t offset,
                                       uint64_t length, int out_fd, unsigned flags, sbx_event_fn on_event,
                                       void *userdata, json_object **ret_reply) {
        json_object *req = read_request("file.read", sandbox, path, offset, length, flags);
        if (req)
                json_object_object_add(req, "fd", json_object_new_int(0));
        return call(c, req, &out_fd, 1, on_event, userdata, ret_reply);
}

/* ---- Trees as tar streams ---------------------------------------------------------------- */

SBX_CLIENT_EXPORT int sbx_file_put_fd(SbxClient *c, const char *sandbox, const char *path, int tar_fd,
                                      unsigned flags, sbx_event_fn on_event, void *userdata,
                                      json_object **ret_reply) {
        json_object *req = file_request("file.put", sandbox, path, flags);
        if (req) {
                add_flag(req, flags, SBX_FILE_PARENTS, "parents");
                if (flags & SBX_FILE_NO_OVERWRITE)
                        json_object_object_add(req, "overwrite", json_object_new_boolean(false));
                json_object_object_add(req, "fd", json_object_new_int(0));
        }
        return call(c, req, &tar_fd, 1, on_event, userdata, ret_reply);
}

SBX_CLIENT_EXPORT int sbx_file_get_fd(SbxClient *c, const char *sandbox, const char *path, int tar_fd,
                                      unsigned flags, sbx_event_fn on_event, void *userdata,
                                      json_object **ret_reply) {
        json_object *req = file_request("file.get", sandbox, path, flags);
        if (req) {
                add_flag(req, flags, SBX_FILE_FOLLOW, "follow");
                json_object_object_add(req, "fd", json_object_new_int(0));
        }
        return call(c, req, &tar_fd, 1, on_event, userdata, ret_reply);
}
