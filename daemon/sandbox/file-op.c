/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "context.h"
#include "file-helper.h"
#include "file-inflow.h"
#include "file-op.h"
#include "file-proto.h"
#include "launch.h"
#include "log.h"
#include "macro.h"
#include "run-exec.h"
#include "sandbox.h"
#include "util.h"

#define ENTRIES_PER_EVENT 256
#define RECORD_MAX (sizeof(FileRecord) + 2 * FILE_RECORD_TEXT_MAX)
#define PROGRESS_INTERVAL_USEC (200 * 1000) /* between progress events, and before the first */
#define PROGRESS_UNKNOWN UINT64_MAX

typedef struct FileOp {
        Sandbox *sandbox;
        Launch launch;
        SandboxMember member;
        Reply *reply;
        Hook close_hook, writable_hook;
        char op[16];
        char *path;             /* file.write's, for its reply */
        int out_fd;
        sd_event_source *out_source;
        char *buf;              /* what the helper sent, up to one record (a DATA record: 1 MiB) */
        char *line;             /* a data event being formatted (send_data_event()), kept for the next */
        size_t line_size;
        size_t len, buf_size;
        bool sized;             /* file.read: its SIZE came */
        uint64_t data_next, data_end, seq; /* file.read: where the next DATA may start, the end */
        json_object *batch;     /* file.list: entries not yet sent */
        json_object *stat;      /* file.stat: the one entry */
        uint64_t n_entries;
        FileRecord end;         /* DONE or ERROR, once it came */
        FileRecord tar;         /* file.put, file.get: the totals (FILE_RECORD_TAR) */
        char *end_text;         /* file.put's ERROR: the entry's name, or libarchive's words */
        bool ended, bad;        /* bad: the helper sent what no helper sends */
        SpawnReport fail;       /* its setup failed (fail.kind == REPORT_FAILED) */
        bool killed;
        bool accounted;
        FileInflow *inflow;     /* file.write by chunks */
        ProtoError failure;     /* the transfer was ended for this (failed) */
        bool failed;
        bool transfer;          /* counted in the sink's n_transfers */
        uint64_t progress_total; /* PROGRESS_UNKNOWN: a tar stream, a source without size */
        uint64_t progress_bytes; /* the most the helper (or the data) showed so far */
        uint64_t progress_base;  /* file.read: its offset (bytes count from there) */
        uint64_t progress_next;  /* CLOCK_MONOTONIC µs before which no progress event goes */
} FileOp;

static const char *const type_names[] = {
        [FILE_TYPE_FILE] = "file", [FILE_TYPE_DIR] = "dir",   [FILE_TYPE_SYMLINK] = "symlink", [FILE_TYPE_FIFO] = "fifo",
        [FILE_TYPE_SOCKET] = "socket", [FILE_TYPE_CHAR] = "char", [FILE_TYPE_BLOCK] = "block",
};

/* Bytes of a name or a link's target: a string where they are UTF-8, else base64 with
 * NAME_encoding "base64". */
static void add_bytes(json_object *o, const char *key, const char *enc_key, const char *p, size_t n) {
        char *s;

        if (utf8_valid_prefix(p, n) == n && !memchr(p, '\0', n)) {
                json_object_object_add(o, key, json_object_new_string_len(p, (int) n));
                return;
        }
        s = base64_encode(p, n);
        json_object_object_add(o, key, s ? json_object_new_string(s) : NULL);
        json_object_object_add(o, enc_key, json_object_new_string("base64"));
        free(s);
}

static char *format_time(int64_t ns, char *buf, size_t size) {
        time_t t = (time_t) (ns >= 0 ? ns / 1000000000 : (ns - 999999999) / 1000000000);
        struct tm tm;
        if (!gmtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                snprintf(buf, size, "?");
        return buf;
}

static json_object *entry_json(const FileRecord *r, const char *path, const char *target) {
        json_object *o = json_object_new_object();
        const char *slash = memrchr(path, '/', r->path_len);
        char when[32];

        add_bytes(o, "path", "path_encoding", path, r->path_len);
        if (slash)
                add_bytes(o, "name", "name_encoding", slash + 1, r->path_len - (size_t) (slash + 1 - path));
        json_object_object_add(o, "type", json_object_new_string(type_names[r->type]));
        json_object_object_add(o, "size", json_object_new_uint64(r->size));
        json_object_object_add(o, "mode", json_object_new_int((int) r->mode));
        json_object_object_add(o, "uid", json_object_new_int64(r->uid));
        json_object_object_add(o, "gid", json_object_new_int64(r->gid));
        json_object_object_add(o, "mtime", json_object_new_string(format_time(r->mtime_ns, when, sizeof(when))));
        json_object_object_add(o, "mtime_ns", json_object_new_int64(r->mtime_ns));
        json_object_object_add(o, "nlink", json_object_new_uint64(r->nlink));
        json_object_object_add(o, "blocks_bytes", json_object_new_uint64(r->blocks_bytes));
        if (r->type == FILE_TYPE_SYMLINK)
                add_bytes(o, "target", "target_encoding", target, r->target_len);
        else
                json_object_object_add(o, "target", NULL);
        if (r->flags & FILE_RECORD_MOUNT)
                json_object_object_add(o, "mount", json_object_new_boolean(1));
        return o;
}

static void file_op_kill(FileOp *f) {
        if (f->killed)
                return;
        f->killed = true;
        (void) syscall(SYS_pidfd_send_signal, f->launch.pidfd, SIGKILL, NULL, 0);
        (void) cg_kill_at(f->launch.kill_fd, f->launch.cg_fd);
}

static void flush_batch(FileOp *f) {
        json_object *ev;

        if (!f->batch || json_object_array_length(f->batch) == 0)
                return;
        ev = reply_event_new(f->reply, "entries");
        json_object_object_add(ev, "entries", f->batch);
        f->batch = NULL;
        reply_event(f->reply, ev);
}

static bool is_read(const FileOp *f) {
        return strcmp(f->op, FILE_OP_READ) == 0;
}

static bool is_tar(const FileOp *f) {
        return strcmp(f->op, FILE_OP_PUT) == 0 || strcmp(f->op, FILE_OP_GET) == 0;
}

/* A data event of file.read or file.get. With an integer id (every client we ship sends one)
 * the line is formatted here, in the canonical form clients scan without a JSON parse; json-c's
 * serializer, which escapes a string a byte at a time, would be the slowest step of a read. */
static int send_data_event(FileOp *f, uint64_t offset, const char *data, size_t len) {
        json_object *ev;
        int64_t id;
        char *b64;

        if (reply_id_int(f->reply, &id) && len <= SBX_FILE_CHUNK_BYTES) {
                size_t room = file_line_format_max(SBX_FILE_CHUNK_BYTES), n;

                if (!f->line) {
                        f->line = malloc(room);
                        if (!f->line)
                                return -ENOMEM;
                        f->line_size = room;
                }
                n = file_data_event_format(f->line, f->line_size, id, f->seq, offset, data, len);
                if (n > 0) {
                        f->seq++;
                        reply_send_line(f->reply, f->line, n);
                        return 0;
                }
        }
        b64 = base64_encode(data, len);
        if (!b64)
                return -ENOMEM;
        ev = reply_event_new(f->reply, "data");
        json_object_object_add(ev, "seq", json_object_new_uint64(f->seq++));
        json_object_object_add(ev, "offset", json_object_new_uint64(offset));
        json_object_object_add(ev, "data", json_object_new_string_len(b64, (int) base64_encoded_len(len)));
        free(b64);
        reply_event(f->reply, ev);
        return 0;
}

/* {"event":"progress","bytes":N,"total":T} at most every PROGRESS_INTERVAL_USEC, none in the
 * first one: a short transfer gets none. bytes never goes back (a helper that says so lied);
 * past total it is shown as total (a source that grew while it was copied). Skipped while the
 * client does not read: the next one says more anyway, and the queue stays bounded. "Does not
 * read" is more unread than a read by events holds while its client reads (the pause at
 * STREAM_PAUSE_BYTES, plus the data event that crossed it, about 1.4 MB): below that, progress
 * goes out between data events, as sandboxctl draws it. */
#define PROGRESS_SKIP_BACKLOG (STREAM_PAUSE_BYTES + 2u * (SBX_FILE_CHUNK_BYTES * 4 / 3 + 128))
static int file_op_progress(FileOp *f, uint64_t bytes) {
        uint64_t now;
        json_object *ev;

        if (bytes < f->progress_bytes)
                return -EPROTO;
        f->progress_bytes = bytes;
        if (!f->transfer || reply_gone(f->reply) || reply_backlog(f->reply) > PROGRESS_SKIP_BACKLOG ||
            sd_event_now(f->sandbox->ctx->event, CLOCK_MONOTONIC, &now) < 0 || now < f->progress_next)
                return 0;
        f->progress_next = now + PROGRESS_INTERVAL_USEC;
        ev = reply_event_new(f->reply, "progress");
        json_object_object_add(ev, "bytes", json_object_new_uint64(bytes < f->progress_total ? bytes : f->progress_total));
        json_object_object_add(ev, "total",
                               f->progress_total == PROGRESS_UNKNOWN ? NULL : json_object_new_uint64(f->progress_total));
        reply_event(f->reply, ev);
        return 0;
}

static int take_progress_record(FileOp *f, const FileRecord *r) {
        if (!f->transfer || f->inflow || r->path_len || r->target_len || (is_read(f) && !f->sized))
                return -EPROTO;
        return file_op_progress(f, r->offset);
}

/* file.get's stream as data events: no size ahead, offsets in order, as file.read's events. */
static int take_get_record(FileOp *f, const FileRecord *r, const char *data) {
        if (r->kind == FILE_RECORD_TAR) {
                f->tar = *r;
                return 0;
        }
        if (strcmp(f->op, FILE_OP_GET) != 0 || r->kind != FILE_RECORD_DATA || r->length == 0 || r->offset != f->data_next)
                return -EPROTO;
        f->data_next += r->length;
        if (send_data_event(f, r->offset, data, r->length) < 0)
                return -ENOMEM;
        return file_op_progress(f, f->data_next);
}

/* file.read's records: one SIZE first, then DATA in order within what it announced. */
static int take_read_record(FileOp *f, const FileRecord *r, const char *data) {
        json_object *ev;

        if (r->kind == FILE_RECORD_SIZE) {
                if (f->sized || r->offset > r->size || r->length > r->size - r->offset)
                        return -EPROTO;
                f->sized = true;
                f->data_next = r->offset;
                f->data_end = r->offset + r->length;
                f->progress_base = r->offset;
                f->progress_total = r->length;
                ev = reply_event_new(f->reply, "size");
                json_object_object_add(ev, "size", json_object_new_uint64(r->size));
                json_object_object_add(ev, "offset", json_object_new_uint64(r->offset));
                json_object_object_add(ev, "length", json_object_new_uint64(r->length));
                reply_event(f->reply, ev);
                return 0;
        }
        if (!f->sized || r->length == 0 || r->offset < f->data_next || r->offset > f->data_end ||
            r->length > f->data_end - r->offset)
                return -EPROTO;
        f->data_next = r->offset + r->length;
        if (send_data_event(f, r->offset, data, r->length) < 0)
                return -ENOMEM;
        return file_op_progress(f, f->data_next - f->progress_base);
}

/* One record from the helper, its text checked (lengths, type, kind, nothing after the end). */
static int take_record(FileOp *f, const FileRecord *r, const char *text) {
        if (f->ended || r->path_len > FILE_RECORD_TEXT_MAX || r->target_len > FILE_RECORD_TEXT_MAX)
                return -EPROTO;
        if (is_tar(f) && (r->kind == FILE_RECORD_DATA || r->kind == FILE_RECORD_TAR))
                return take_get_record(f, r, text);
        if (r->kind == FILE_RECORD_SIZE || r->kind == FILE_RECORD_DATA)
                return is_read(f) ? take_read_record(f, r, text) : -EPROTO;
        if (r->kind == FILE_RECORD_PROGRESS)
                return take_progress_record(f, r);
        if (r->kind == FILE_RECORD_READY || r->kind == FILE_RECORD_ACK) {
                int k;
                if (!f->inflow || r->path_len || r->target_len)
                        return -EPROTO;
                if (r->kind == FILE_RECORD_READY)
                        return file_inflow_ready(f->inflow);
                k = file_inflow_ack(f->inflow, r->count, r->offset);
                return k < 0 ? k : file_op_progress(f, r->offset);
        }
        if (r->kind == FILE_RECORD_DONE || r->kind == FILE_RECORD_ERROR) {
                f->end = *r;
                f->ended = true;
                if (r->kind == FILE_RECORD_ERROR && r->path_len && !(f->end_text = strndup(text, r->path_len)))
                        return -ENOMEM;
                return 0;
        }
        if (r->kind != FILE_RECORD_ENTRY || r->type < FILE_TYPE_FILE || r->type > FILE_TYPE_BLOCK || r->path_len == 0)
                return -EPROTO;
        if (strcmp(f->op, FILE_OP_STAT) == 0) {
                if (f->stat)
                        return -EPROTO;
                f->stat = entry_json(r, text, text + r->path_len);
                return 0;
        }
        if (!f->batch)
                f->batch = json_object_new_array();
        json_object_array_add(f->batch, entry_json(r, text, text + r->path_len));
        f->n_entries++;
        if (json_object_array_length(f->batch) >= ENTRIES_PER_EVENT)
                flush_batch(f);
        return 0;
}

static int parse_records(FileOp *f) {
        size_t off = 0;

        while (f->len - off >= sizeof(FileRecord)) {
                FileRecord r;
                size_t body;
                memcpy(&r, f->buf + off, sizeof(r));
                if (r.path_len > FILE_RECORD_TEXT_MAX || r.target_len > FILE_RECORD_TEXT_MAX ||
                    (r.kind == FILE_RECORD_DATA && r.length > FILE_DATA_MAX))
                        return -EPROTO;
                body = r.kind == FILE_RECORD_DATA ? (size_t) r.length : (size_t) r.path_len + r.target_len;
                if (f->len - off < sizeof(r) + body)
                        break;
                if (take_record(f, &r, f->buf + off + sizeof(r)) < 0)
                        return -EPROTO;
                off += sizeof(r) + body;
        }
        memmove(f->buf, f->buf + off, f->len - off);
        f->len -= off;
        return 0;
}

/* Reads what is there; 0 at EOF, 1 for more to come, < 0 when the helper misbehaved. */
static int read_out(FileOp *f) {
        for (;;) {
                ssize_t n;
                if (f->len == f->buf_size)
                        return -EPROTO;
                n = read(f->out_fd, f->buf + f->len, f->buf_size - f->len);
                if (n < 0)
                        return errno == EAGAIN || errno == EINTR ? 1 : -errno;
                if (n == 0)
                        return 0;
                f->len += (size_t) n;
                if (parse_records(f) < 0)
                        return -EPROTO;
                /* A client that does not read stalls its own listing, nobody else's. */
                if (reply_backlog(f->reply) > STREAM_PAUSE_BYTES)
                        return 1;
        }
}

static void file_op_set_reading(FileOp *f) {
        bool on = !f->bad && reply_backlog(f->reply) <= STREAM_PAUSE_BYTES;
        if (f->out_source)
                (void) sd_event_source_set_enabled(f->out_source, on ? SD_EVENT_ON : SD_EVENT_OFF);
}

static int on_out(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        FileOp *f = userdata;
        int k = read_out(f);

        if (k < 0) {
                log_warning("file helper of %s: malformed output (%s), killed", f->op, strerror(-k));
                f->bad = true;
                file_op_kill(f);
        }
        if (k <= 0)
                f->out_source = sd_event_source_disable_unref(f->out_source);
        else
                file_op_set_reading(f);
        return 0;
}

static void on_writable(Hook *h, void *userdata) {
        file_op_set_reading(userdata);
}

static void on_client_gone(Hook *h, void *userdata) {
        file_op_kill(userdata);
}

/* ---- The answer -------------------------------------------------------------------------- */

static SbxErrorCode code_of(int err, FileReason reason) {
        switch (err) {
        case ENOENT: return SBX_E_NOT_FOUND;
        case ENOTDIR: return reason == FILE_REASON_NOT_DIR ? SBX_E_INVALID_REQUEST : SBX_E_NOT_FOUND;
        case EACCES: case EPERM: case EROFS: return SBX_E_PERMISSION_DENIED;
        case ENOSPC: case EDQUOT: return SBX_E_NO_SPACE;
        case EFBIG: return SBX_E_TOO_LARGE;
        case EEXIST: case ENOTEMPTY: case EBUSY: return SBX_E_CONFLICT;
        case ENAMETOOLONG: case ELOOP: case EXDEV: case EINVAL: case EISDIR: return SBX_E_INVALID_REQUEST;
        default: return SBX_E_INTERNAL;
        }
}

static const char *reason_words(int err, FileReason reason) {
        switch (reason) {
        case FILE_REASON_NOT_DIR: return "is not a directory";
        case FILE_REASON_IS_DIR: return "is a directory";
        case FILE_REASON_MAGICLINK: return "goes through a /proc magic link";
        case FILE_REASON_PROTECTED: return "is / or /work, which are never removed";
        case FILE_REASON_DOT: return "ends in . or ..";
        case FILE_REASON_EXISTS: return "exists already";
        case FILE_REASON_NOT_EMPTY: return "is a directory that is not empty (\"recursive\": true removes a tree)";
        case FILE_REASON_FIFO: return "is a FIFO";
        case FILE_REASON_DEVICE: return "is a device";
        case FILE_REASON_SOCKET: return "is a socket";
        case FILE_REASON_SYMLINK: return "is a symlink (and nofollow was asked)";
        case FILE_REASON_SWAPPED: return "was replaced while it was opened";
        case FILE_REASON_SHORT: return "the data ended short of size";
        case FILE_REASON_SPACE: return "does not fit in the free space of its filesystem";
        default: return err == ELOOP ? "goes through a /proc magic link, or through too many symlinks" : strerror(err);
        }
}

static const char *tar_reason_words(FileReason reason) {
        switch (reason) {
        case FILE_REASON_TAR_ABSOLUTE: return "an absolute name is refused";
        case FILE_REASON_TAR_DOTDOT: return "a name with a '..' component is refused";
        case FILE_REASON_TAR_EMPTY: return "an empty name is refused";
        case FILE_REASON_TAR_LONG: return "the name is longer than PATH_MAX, or a component longer than NAME_MAX";
        case FILE_REASON_TAR_UNDER_SYMLINK: return "lies under a symlink, which is never followed";
        case FILE_REASON_TAR_NOT_DIR: return "lies under something that is not a directory";
        case FILE_REASON_TAR_LINK: return "a hard link whose target is no earlier entry of the stream beneath the path";
        case FILE_REASON_EXISTS: return "exists already (\"overwrite\": false)";
        default: return NULL;
        }
}

/* An entry's name in a message: printable ASCII as it is, every other byte as \xNN. */
static void escape_name(const char *p, char *out, size_t size) {
        size_t n = 0;
        for (; p && *p && n + 5 < size; p++) {
                unsigned char c = (unsigned char) *p;
                if (c >= 0x20 && c < 0x7f && c != '\\')
                        out[n++] = (char) c;
                else
                        n += (size_t) snprintf(out + n, size - n, "\\x%02x", c);
        }
        out[n] = '\0';
}

/* file.put's errors about one entry: field "tar", the entry's number and name; "entries" says
 * how many were made before it (into an existing directory they stay). */
static bool reply_tar_error(FileOp *f) {
        const char *words = tar_reason_words(f->end.reason);
        SbxErrorCode code = code_of(f->end.err, f->end.reason);
        json_object *extra;
        char name[160];
        ProtoError err;

        if (!is_tar(f) || !(f->end.flags & FILE_RECORD_TAR_ENTRY || f->end.reason == FILE_REASON_TAR_FORMAT))
                return false;
        escape_name(f->end_text, name, sizeof(name));
        if (f->end.reason == FILE_REASON_TAR_FORMAT)
                proto_error_set(&err, SBX_E_INVALID_REQUEST, "tar",
                                "not a tar stream (tar, pax or GNU, uncompressed), or a damaged one, at entry %" PRIu64 ": %s",
                                f->end.offset ? f->end.offset : 1, name);
        else if (code == SBX_E_NO_SPACE)
                proto_error_set(&err, code, "tar", "entry %" PRIu64 " ('%s'): the sandbox's disk is full", f->end.offset, name);
        else if (f->end.err == EFBIG)
                proto_error_set(&err, SBX_E_TOO_LARGE, "tar", "entry %" PRIu64 " ('%s'): larger than the sandbox's file size limit",
                                f->end.offset, name);
        else
                proto_error_set(&err, words && f->end.reason != FILE_REASON_EXISTS ? SBX_E_INVALID_REQUEST : code, "tar",
                                "entry %" PRIu64 " ('%s'): %s", f->end.offset, name, words ? words : strerror(f->end.err));
        extra = json_object_new_object();
        json_object_object_add(extra, "entries", json_object_new_uint64(f->end.count));
        reply_error_extra(f->reply, &err, extra);
        return true;
}

/* The request's path for a message: escaped as entry names are, its middle cut when it would
 * not leave room for the words in ProtoError's message. */
static const char *name_for_message(const char *p, char *buf, size_t size) {
        char full[4 * PATH_MAX + 1];
        size_t n;

        escape_name(p, full, sizeof(full));
        n = strlen(full);
        if (n < size)
                return strcpy(buf, full);
        snprintf(buf, size, "%.*s...%s", (int) (size / 2 - 2), full, full + n - (size / 2 - 2));
        return buf;
}

static const char *path_for_message(const FileOp *f, char *buf, size_t size) {
        return name_for_message(f->path ? f->path : "", buf, size);
}

/* The directory a new name goes in: the path less its last component ("/" for "/x"). */
static const char *dir_for_message(const FileOp *f, char *buf, size_t size) {
        char dir[PATH_MAX];
        size_t n;

        snprintf(dir, sizeof(dir), "%s", f->path ? f->path : "");
        n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/')
                n--;
        while (n > 0 && dir[n - 1] != '/')
                n--;
        while (n > 1 && dir[n - 1] == '/')
                n--;
        dir[n] = '\0';
        return name_for_message(n > 0 ? dir : ".", buf, size);
}

/* Every message names the path, as a shell's "cat: /work/x: No such file or directory" does:
 * a client that sent several requests (a tree, a cp) must not have to guess which one. */
static void reply_helper_error(FileOp *f) {
        int e = f->end.err;
        FileReason reason = f->end.reason;
        SbxErrorCode code = code_of(e, reason);
        ProtoError err;
        char path[120];

        if (reply_tar_error(f))
                return;
        path_for_message(f, path, sizeof(path));
        if (e == ENOTDIR && reason == FILE_REASON_NONE)
                proto_error_set(&err, code, "path", "%s: no such file or directory (a component is not a directory)", path);
        else if (e == ENOENT && reason == FILE_REASON_NONE &&
                 (strcmp(f->op, FILE_OP_WRITE) == 0 || strcmp(f->op, FILE_OP_MKDIR) == 0)) {
                /* The name itself is the one to make: what is missing is its directory. */
                char dir[120];
                proto_error_set(&err, code, "path", "%s: the directory %s does not exist", path,
                                dir_for_message(f, dir, sizeof(dir)));
        } else if (reason == FILE_REASON_SHORT)
                proto_error_set(&err, code, "size",
                                "%s: the data ended after %" PRIu64 " bytes, short of size; the old file is as it was", path,
                                f->end.count);
        else if (reason == FILE_REASON_SPACE || e == EFBIG)
                proto_error_set(&err, code, "size", "%s: %s", path,
                                e == EFBIG ? "larger than the sandbox's file size limit" : reason_words(e, reason));
        else if (code == SBX_E_NO_SPACE)
                proto_error_set(&err, code, "data", "%s: the sandbox's disk is full (%s); the old file is as it was", path,
                                strerror(e));
        else
                proto_error_set(&err, code, code == SBX_E_INTERNAL ? NULL : "path", "%s: %s", path, reason_words(e, reason));
        reply_error(f->reply, &err);
}

static void reply_done(FileOp *f) {
        json_object *o = json_object_new_object();
        const char *count = strcmp(f->op, FILE_OP_MKDIR) == 0 ? "created" : strcmp(f->op, FILE_OP_REMOVE) == 0 ? "removed" : NULL;

        if (strcmp(f->op, FILE_OP_STAT) == 0) {
                json_object_object_add(o, "stat", f->stat);
                f->stat = NULL;
        } else if (strcmp(f->op, FILE_OP_LIST) == 0) {
                flush_batch(f);
                json_object_object_add(o, "entries", json_object_new_uint64(f->n_entries));
                json_object_object_add(o, "truncated", json_object_new_boolean(f->end.truncated != 0));
        } else if (strcmp(f->op, FILE_OP_WRITE) == 0) {
                add_bytes(o, "path", "path_encoding", f->path ? f->path : "", f->path ? strlen(f->path) : 0);
                json_object_object_add(o, "bytes", json_object_new_uint64(f->end.count));
                json_object_object_add(o, "created", json_object_new_boolean(f->end.truncated != 0));
        } else if (is_tar(f)) {
                json_object_object_add(o, "entries", json_object_new_uint64(f->tar.count));
                json_object_object_add(o, "bytes", json_object_new_uint64(f->tar.size));
                json_object_object_add(o, "skipped", json_object_new_uint64(f->tar.offset));
                if (strcmp(f->op, FILE_OP_GET) == 0)
                        json_object_object_add(o, "changed", json_object_new_uint64(f->tar.length));
        } else if (is_read(f)) {
                json_object_object_add(o, "bytes", json_object_new_uint64(f->end.count));
                json_object_object_add(o, "changed", json_object_new_boolean(f->end.truncated != 0));
        } else if (count)
                json_object_object_add(o, count, json_object_new_uint64(f->end.count));
        reply_ok(f->reply, o);
}

static void file_op_free(FileOp *f) {
        sandbox_member_remove(f->sandbox, &f->member);
        f->inflow = file_inflow_free(f->inflow);
        f->out_source = sd_event_source_disable_unref(f->out_source);
        f->out_fd = safe_close(f->out_fd);
        launch_done(&f->launch);
        hook_remove(&f->close_hook);
        hook_remove(&f->writable_hook);
        if (f->accounted)
                reply_account(f->reply, -1, 0);
        if (f->accounted && f->transfer)
                reply_account_transfer(f->reply, -1);
        reply_unref(f->reply);
        json_object_put(f->batch);
        json_object_put(f->stat);
        free(f->buf);
        free(f->line);
        free(f->path);
        free(f->end_text);
        free(f);
}

/* Whether the kernel's OOM killer ended a process of the helper's cgroup (memory.events counts
 * the kills in it): the sandbox's memory limit, which a file's own pages count against where the
 * workspace is in memory (tmpfs). */
static bool file_op_oom_killed(const FileOp *f) {
        uint64_t kills = 0;
        return (f->sandbox->enforced & CG_MEMORY) && f->launch.cg_fd >= 0 &&
               cg_read_keyed(f->launch.cg_fd, "memory.events", "oom_kill", &kills) >= 0 && kills > 0;
}

static void file_op_answer(FileOp *f, const siginfo_t *si) {
        ProtoError err;

        if (f->fail.kind == REPORT_FAILED) {
                proto_error_set_spawn(&err, spawn_step_to_string(f->fail.step), f->fail.err);
                reply_error(f->reply, &err);
        } else if (f->sandbox->state == SANDBOX_DESTROYING) {
                sandbox_gone_error(f->sandbox, &err);
                reply_error(f->reply, &err);
        } else if (f->failed)
                reply_error(f->reply, &f->failure);
        else if (!f->bad && !f->ended && si->si_code == CLD_KILLED && file_op_oom_killed(f)) {
                proto_error_set(&err, SBX_E_RESOURCE_EXHAUSTED, "memory",
                                "the sandbox's memory limit ended the file helper (an OOM kill in its cgroup; a "
                                "workspace in memory holds the file's pages too); a file being replaced is as it was");
                reply_error(f->reply, &err);
        } else if (f->bad || !f->ended) {
                proto_error_set(&err, SBX_E_INTERNAL, NULL, "the file helper %s (%s %d)",
                                f->bad ? "sent malformed output and was killed"
                                : si->si_code == CLD_KILLED ? "was killed"
                                : "ended without an answer",
                                si->si_code == CLD_EXITED ? "status" : "signal", si->si_status);
                reply_error(f->reply, &err);
        } else if (f->end.kind == FILE_RECORD_ERROR)
                reply_helper_error(f);
        else
                reply_done(f);
}

/* ---- Launch and membership ----------------------------------------------------------------- */

static int fo_watch(void *userdata, LaunchFds *fds) {
        FileOp *f = userdata;
        f->out_fd = TAKE_FD(fds->out[0]);
        if (fcntl(f->out_fd, F_SETFL, O_NONBLOCK) < 0)
                return -errno;
        return sd_event_add_io(f->sandbox->ctx->event, &f->out_source, f->out_fd, EPOLLIN, on_out, f);
}

static void fo_report(void *userdata, const SpawnReport *rep, int fd) {
        FileOp *f = userdata;
        safe_close(fd);
        if (rep->kind == REPORT_FAILED && f->fail.kind != REPORT_FAILED)
                f->fail = *rep;
}

static void fo_helper_exit(void *userdata, const siginfo_t *si) {
        FileOp *f = userdata;
        Sandbox *s = f->sandbox;

        launch_collect_reports(&f->launch);
        file_inflow_end(f->inflow); /* its late chunks are dropped from now on */
        while (f->out_fd >= 0 && !f->bad) { /* what it wrote before it ended */
                int k = read_out(f);
                if (k < 0)
                        f->bad = true;
                if (k <= 0)
                        break;
        }
        file_op_answer(f, si);
        if (cg_populated(f->launch.cg_fd) == 0)
                (void) unlinkat(s->cg_fd, f->launch.cg_name, AT_REMOVEDIR);
        file_op_free(f);
}

static const LaunchOps file_op_launch_ops = {
        .watch = fo_watch,
        .report = fo_report,
        .helper_exit = fo_helper_exit,
};

static void fo_member_kill(SandboxMember *m, int sig) {
        file_op_kill(SANDBOX_MEMBER_OF(m, FileOp, member));
}

static void fo_member_answer_stuck(SandboxMember *m, const ProtoError *err) {
}

static bool fo_member_start(SandboxMember *m) {
        return false;
}

static void fo_member_frozen(SandboxMember *m) {
}

static void fo_member_free(SandboxMember *m) {
        file_op_free(SANDBOX_MEMBER_OF(m, FileOp, member));
}

static const SandboxMemberOps file_op_member_ops = {
        .kill = fo_member_kill,
        .answer_stuck = fo_member_answer_stuck,
        .start = fo_member_start,
        .frozen = fo_member_frozen,
        .free = fo_member_free,
};

/* The client's chunks broke the rules or stopped coming: the helper goes, the old file stays. */
static void on_inflow_failed(void *userdata, const ProtoError *err) {
        FileOp *f = userdata;
        f->failure = *err;
        f->failed = true;
        file_op_kill(f);
}

/* The pipe the chunks go down to the helper (its fd 2); *ret_read goes to the launch. */
static int file_op_inflow(FileOp *f, const FileOpSpec *spec, int *ret_read, ProtoError *err) {
        const Config *conf = &f->sandbox->ctx->config;
        size_t line_room = conf->max_line_bytes > 256 ? (conf->max_line_bytes - 256) / 4 * 3 : 0;
        int fds[2];

        if (pipe2(fds, O_CLOEXEC) < 0 || fcntl(fds[1], F_SETFL, O_NONBLOCK) < 0)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "cannot create a pipe: %s", strerror(errno));
        /* Fewer wake-ups; the pipe holds what the window allows anyway. */
        (void) fcntl(fds[1], F_SETPIPE_SZ, (int) (sizeof(FileFrame) + SBX_FILE_CHUNK_BYTES));
        FileInflowParams p = {
                .event = f->sandbox->ctx->event,
                .reply = f->reply,
                .pipe_fd = fds[1],
                .size = spec->size,
                /* A chunk's line must fit in a request line (max_line_bytes). */
                .chunk_bytes = line_room < SBX_FILE_CHUNK_BYTES ? line_room / 1024 * 1024 : SBX_FILE_CHUNK_BYTES,
                .window = SBX_FILE_WINDOW,
                .timeout_usec = conf->request_timeout_usec,
                .failed = on_inflow_failed,
                .userdata = f,
        };
        if (p.chunk_bytes == 0)
                p.chunk_bytes = 1024;
        if (file_inflow_new(&p, &f->inflow, err) < 0) {
                safe_close(fds[0]);
                return -EINVAL;
        }
        *ret_read = fds[0];
        return 0;
}

/* What a progress event's total is: file.write's size, or its source's when that is a file
 * (the client's, or the memfd of inline data); file.read's comes with its SIZE record. */
static uint64_t progress_total_of(const FileOpSpec *spec) {
        struct stat st;
        off_t pos;

        if (strcmp(spec->op, FILE_OP_WRITE) != 0)
                return PROGRESS_UNKNOWN;
        if (spec->size != UINT64_MAX || spec->chunks)
                return spec->size;
        if (spec->data_fd < 0 || fstat(spec->data_fd, &st) < 0 || !S_ISREG(st.st_mode) ||
            (pos = lseek(spec->data_fd, 0, SEEK_CUR)) < 0)
                return PROGRESS_UNKNOWN;
        return st.st_size > pos ? (uint64_t) (st.st_size - pos) : 0;
}

/* The helper's argv after RunParams, filter and cwd: op, the path as hex, the options. */
static char **helper_argv(const FileOpSpec *spec) {
        size_t n = 0;
        char **argv;

        while (spec->options && spec->options[n])
                n++;
        argv = calloc(n + 3, sizeof(char *));
        if (!argv)
                return NULL;
        argv[0] = (char *) spec->op;
        argv[1] = run_exec_hex(spec->path, strlen(spec->path));
        if (!argv[1]) {
                free(argv);
                return NULL;
        }
        for (size_t i = 0; i < n; i++)
                argv[2 + i] = (char *) spec->options[i];
        return argv;
}

int file_op_start(Sandbox *s, const FileOpSpec *spec, Reply *reply, ProtoError *err) {
        char *const envp[] = { NULL };
        char **argv;
        FileOp *f;
        int k, pipe_read = -EBADF;

        if (s->state != SANDBOX_READY)
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox", "sandbox %s is not ready", s->id);
        if (s->ctx->file_helper_fd < 0)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "sandboxd-file-helper was not found at start");
        if (s->user_frozen)
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox", "sandbox %s is frozen (sandbox.thaw resumes it)", s->id);
        if (s->frozen)
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox", "sandbox %s is frozen for a snapshot; try again", s->id);
        argv = helper_argv(spec);
        f = calloc(1, sizeof(*f));
        if (f) {
                f->buf_size = strcmp(spec->op, FILE_OP_READ) == 0 || strcmp(spec->op, FILE_OP_GET) == 0
                                      ? sizeof(FileRecord) + FILE_DATA_MAX : RECORD_MAX;
                f->buf = malloc(f->buf_size);
        }
        if (!argv || !f || !f->buf) {
                if (argv)
                        free(argv[1]);
                free(argv);
                if (f)
                        free(f->buf);
                free(f);
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        }
        RunParams p = {
                .argv = argv,
                .envp = envp,
                .cwd = "/",
                .user = spec->user != SANDBOX_USER_UNSET ? spec->user : s->user,
        };
        LaunchSpec ls = {
                .kind = "file",
                .pipes = true,
                .via_helper = true,
                .file_helper = true,
                .params = &p,
                .what_cgroup = "cannot create the file helper's cgroup",
                .what_fds = "cannot create pipes",
                .what_start = "cannot start the file helper",
                .stderr_fd = spec->data_fd >= 0 ? &spec->data_fd : NULL,
        };
        f->sandbox = s;
        f->path = strdup(spec->path);
        f->out_fd = -EBADF;
        f->reply = reply_ref(reply);
        if (spec->chunks && file_op_inflow(f, spec, &pipe_read, err) < 0) {
                free(argv[1]);
                free(argv);
                reply_unref(f->reply);
                free(f->path);
                free(f->buf);
                free(f);
                return -EINVAL;
        }
        if (spec->chunks)
                ls.stderr_fd = &pipe_read;
        snprintf(f->op, sizeof(f->op), "%s", spec->op);
        f->progress_total = progress_total_of(spec);
        if (sd_event_now(s->ctx->event, CLOCK_MONOTONIC, &f->progress_next) >= 0)
                f->progress_next += PROGRESS_INTERVAL_USEC;
        else
                f->progress_next = UINT64_MAX; /* not before the loop ran once: no progress at all */
        launch_init(&f->launch, s, &file_op_launch_ops, f);
        hook_init(&f->close_hook, on_client_gone, f);
        hook_init(&f->writable_hook, on_writable, f);
        sandbox_member_add(s, &f->member, &file_op_member_ops);
        k = launch_start(&f->launch, &ls, err);
        safe_close(pipe_read); /* the helper has its own */
        free(argv[1]);
        free(argv);
        if (k < 0) {
                launch_abort(&f->launch);
                file_op_free(f);
                return k;
        }
        reply_on_close(f->reply, &f->close_hook);
        reply_on_writable(f->reply, &f->writable_hook);
        reply_account(f->reply, 1, 0); /* counted as a run in flight (max_runs_per_*) */
        f->accounted = true;
        f->transfer = spec->transfer;
        if (f->transfer)
                reply_account_transfer(f->reply, 1);
        return 0;
}
