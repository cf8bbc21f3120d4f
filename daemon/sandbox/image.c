/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The image store and its imports (image.h). */
#include <dirent.h>
#include <grp.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caller.h"
#include "child-job.h"
#include "context.h"
#include "copy-tree.h"
#include "image-import.h"
#include "image-internal.h"
#include "log.h"
#include "mount-open.h"
#include "oci-index.h"
#include "macro.h"
#include "remove-async.h"
#include "rm-rf.h"
#include "spawn.h"
#include "util.h"

#define IMAGE_JSON "image.json"
#define IMAGE_JSON_MAX (64u * 1024)
#define OCI_JSON_MAX (4u << 20)
#define TMP_PREFIX ".tmp-"

/* ---- Records ------------------------------------------------------------------------------- */

bool image_name_valid(const char *n) {
        size_t len = n ? strlen(n) : 0;
        if (len == 0 || len > IMAGE_NAME_MAX || n[0] == '.' || n[0] == '-')
                return false;
        return strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == len;
}

static Image *image_free(Image *img) {
        if (img) {
                free(img->name);
                free(img->kind);
                free(img->source);
                free(img->digest);
                free(img);
        }
        return NULL;
}

Image *image_find(ImageStore *st, const char *name) {
        for (Image *i = st ? st->images : NULL; i; i = i->next)
                if (strcmp(i->name, name) == 0)
                        return i;
        return NULL;
}

void image_hold(Image *img) {
        img->users++;
}

void image_release(ImageStore *st, const char *name) {
        Image *img = name ? image_find(st, name) : NULL;
        if (img && img->users > 0)
                img->users--;
}

static void iso_time(uint64_t usec, char *buf, size_t len) {
        time_t t = (time_t) (usec / USEC_PER_SEC);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static json_object *string_or_null(const char *s) {
        return s ? json_object_new_string(s) : NULL;
}

bool image_usable_by(const Image *img, uid_t uid, bool admin) {
        return !img->owner_only || admin || uid == img->importer;
}

json_object *image_to_json(const Image *img, long users, json_object *used_by) {
        json_object *o = json_object_new_object();
        char when[32];

        iso_time(img->imported_usec, when, sizeof(when));
        json_object_object_add(o, "name", json_object_new_string(img->name));
        json_object_object_add(o, "kind", json_object_new_string(img->kind));
        json_object_object_add(o, "source", string_or_null(img->source));
        json_object_object_add(o, "digest", string_or_null(img->digest));
        json_object_object_add(o, "size", json_object_new_int64((int64_t) img->bytes));
        json_object_object_add(o, "files", json_object_new_int64((int64_t) img->files));
        json_object_object_add(o, "imported_at", json_object_new_string(when));
        json_object_object_add(o, "owner_only", json_object_new_boolean(img->owner_only));
        json_object_object_add(o, "users", json_object_new_int64(users < 0 ? (int64_t) img->users : users));
        if (used_by)
                json_object_object_add(o, "used_by", used_by);
        return o;
}

/* The record as image.json has it (no users: that is the running daemon's count). */
static json_object *image_record_json(const Image *img) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "name", json_object_new_string(img->name));
        json_object_object_add(o, "kind", json_object_new_string(img->kind));
        json_object_object_add(o, "source", string_or_null(img->source));
        json_object_object_add(o, "digest", string_or_null(img->digest));
        json_object_object_add(o, "size", json_object_new_int64((int64_t) img->bytes));
        json_object_object_add(o, "files", json_object_new_int64((int64_t) img->files));
        json_object_object_add(o, "imported_usec", json_object_new_int64((int64_t) img->imported_usec));
        json_object_object_add(o, "owner_only", json_object_new_boolean(img->owner_only));
        json_object_object_add(o, "importer", json_object_new_int64(img->importer));
        return o;
}

/* A small file beneath dir_fd, no symlink followed, NUL-terminated: 0 or -errno. want_size:
 * the size it must have (UINT64_MAX: any up to max); another is -EMSGSIZE, before reading. */
/* Whether who may read (and with a directory, search) what st describes, by its mode bits: the
 * daemon's own reads of a caller's source (an OCI layout's JSON files), where it cannot take the
 * caller's ids. An ACL grants nothing here; one that denies is honoured as far as the mode bits
 * (its mask) say. NULL or root: yes. */
static bool caller_may_read(const SandboxCaller *who, const struct stat *st) {
        mode_t need = S_ISDIR(st->st_mode) ? 05 : 04, bits;
        bool in_group = who && st->st_gid == who->gid;

        if (!who || who->uid == 0)
                return true;
        for (unsigned i = 0; who && i < who->n_groups && !in_group; i++)
                in_group = who->groups[i] == st->st_gid;
        bits = st->st_uid == who->uid ? (st->st_mode >> 6) & 07 : in_group ? (st->st_mode >> 3) & 07 : st->st_mode & 07;
        return (bits & need) == need;
}

static int read_file_beneath(int dir_fd, const char *path, const SandboxCaller *who, size_t max, uint64_t want_size, char **ret,
                             size_t *ret_len) {
        struct open_how how = { .flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        _cleanup_close_ int fd = (int) syscall(SYS_openat2, dir_fd, path, &how, sizeof(how));
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        size_t len = 0;

        if (fd < 0 || fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        if (!caller_may_read(who, &st))
                return -EACCES;
        if (want_size != UINT64_MAX && (uint64_t) st.st_size != want_size)
                return -EMSGSIZE;
        if ((uint64_t) st.st_size > max)
                return -EFBIG;
        buf = malloc((size_t) st.st_size + 1);
        if (!buf)
                return -ENOMEM;
        while (len < (size_t) st.st_size) {
                ssize_t n = read(fd, buf + len, (size_t) st.st_size - len);
                if (n <= 0) {
                        if (n == 0)
                                break;
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                len += (size_t) n;
        }
        if (want_size != UINT64_MAX && len != want_size)
                return -EMSGSIZE;
        buf[len] = '\0';
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

static json_object *parse_json_object(const char *buf) {
        json_object *o = json_tokener_parse(buf);
        if (!o || !json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                errno = EBADMSG;
                return NULL;
        }
        return o;
}

/* A small JSON file beneath dir_fd, no symlink followed; NULL with errno. */
static json_object *read_json_beneath(int dir_fd, const char *path, const SandboxCaller *who, size_t max) {
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int r = read_file_beneath(dir_fd, path, who, max, UINT64_MAX, &buf, &len);
        if (r < 0) {
                errno = -r;
                return NULL;
        }
        return parse_json_object(buf);
}

static const char *json_str(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string) ? json_object_get_string(v)
                                                                                                   : NULL;
}

static uint64_t json_u64(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_int) && json_object_get_int64(v) >= 0
                       ? (uint64_t) json_object_get_int64(v)
                       : 0;
}

static bool json_flag(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v);
}

static int strdup_or_null(const char *s, char **ret) {
        *ret = s ? strdup(s) : NULL;
        return s && !*ret ? -ENOMEM : 0;
}

static int image_load(ImageStore *st, const char *name) {
        char path[NAME_MAX + 16];
        json_object *o;
        Image *img;
        int r;

        snprintf(path, sizeof(path), "%s/" IMAGE_JSON, name);
        o = read_json_beneath(st->dir_fd, path, NULL, IMAGE_JSON_MAX);
        if (!o)
                return -errno;
        img = calloc(1, sizeof(*img));
        if (!img) {
                json_object_put(o);
                return -ENOMEM;
        }
        img->bytes = json_u64(o, "size");
        img->files = json_u64(o, "files");
        img->imported_usec = json_u64(o, "imported_usec");
        img->owner_only = json_flag(o, "owner_only");
        /* A record without an importer (or a broken one) leaves an owner-only image to admins. */
        img->importer = json_u64(o, "importer") < UINT32_MAX ? (uid_t) json_u64(o, "importer") : 0;
        if (!(img->name = strdup(name)) || (r = strdup_or_null(json_str(o, "kind") ?: "directory", &img->kind)) < 0 ||
            (r = strdup_or_null(json_str(o, "source"), &img->source)) < 0 ||
            (r = strdup_or_null(json_str(o, "digest"), &img->digest)) < 0) {
                json_object_put(o);
                image_free(img);
                return -ENOMEM;
        }
        json_object_put(o);
        img->next = st->images;
        st->images = img;
        return 0;
}

/* What an earlier daemon's unfinished imports left goes; every complete image is read. */
static int image_store_scan(ImageStore *st) {
        int fd = fcntl(st->dir_fd, F_DUPFD_CLOEXEC, 3);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;

        if (!d) {
                safe_close(fd);
                return -errno;
        }
        while ((de = readdir(d))) {
                int r;
                if (strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0) {
                        if (rm_rf_at(st->dir_fd, de->d_name) < 0)
                                log_warning_errno(errno, "images: cannot remove the unfinished import %s: %m", de->d_name);
                        continue;
                }
                if (!image_name_valid(de->d_name))
                        continue;
                r = image_load(st, de->d_name);
                if (r < 0)
                        log_warning_errno(r, "images: %s has no readable " IMAGE_JSON " (%m): left out", de->d_name);
        }
        closedir(d);
        return 0;
}

/* The store itself cloned and idmapped as a sandbox's root would be (sandbox_open_root()). */
static void image_store_probe(ImageStore *st) {
        const Config *c = &st->ctx->config;
        MountSource src = { .root = st->dir, .rest = ".", .read_only = true, .map_uid = (uid_t) c->uid_base,
                            .map_gid = (gid_t) c->uid_base, .map_count = (unsigned) c->uid_range };
        MountStep step;
        int fd = st->ctx->features.mount_idmap ? mount_open(st->ctx->run_helper_fd, &src, 10000, &step) : -ENOSYS;

        st->idmap = fd >= 0;
        st->idmap_error = fd < 0 ? -fd : 0;
        safe_close(fd);
        if (fd < 0)
                log_warning("images: the image store %s cannot be idmapped here (%s): sandboxes with an image are refused",
                            st->dir, strerror(-fd));
}

json_object *image_store_capabilities(const ImageStore *st) {
        json_object *o = json_object_new_object();
        unsigned n = 0;
        for (const Image *i = st ? st->images : NULL; i; i = i->next)
                n++;
        json_object_object_add(o, "idmap", json_object_new_boolean(st && st->idmap));
        json_object_object_add(o, "error", st && !st->idmap ? json_object_new_string(strerror(st->idmap_error)) : NULL);
        json_object_object_add(o, "store", st && st->dir ? json_object_new_string(st->dir) : NULL);
        json_object_object_add(o, "images", json_object_new_int64(n));
        return o;
}

int image_store_open(ImageStore *st, Context *ctx) {
        *st = (ImageStore) { .ctx = ctx, .dir_fd = -EBADF };
        if (asprintf(&st->dir, "%s/images", ctx->config.state_dir) < 0) {
                st->dir = NULL;
                return -ENOMEM;
        }
        if (mkdir(st->dir, 0700) < 0 && errno != EEXIST)
                return -errno;
        st->dir_fd = open(st->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (st->dir_fd < 0)
                return -errno;
        image_store_probe(st);
        return image_store_scan(st);
}

static ImageJob *image_job_free(ImageJob *j);

void image_store_done(ImageStore *st) {
        while (st->jobs)
                image_job_free(st->jobs);
        while (st->images) {
                Image *next = st->images->next;
                image_free(st->images);
                st->images = next;
        }
        st->dir_fd = safe_close(st->dir_fd);
        free(st->dir);
        st->dir = NULL;
}

/* ---- The import, in the daemon --------------------------------------------------------------- */

struct ImageJob {
        ImageStore *st;
        ImageJob *next;
        Reply *reply;
        char *name, *source, *kind, *digest;
        char tmp[IMAGE_NAME_MAX + 32];
        ImageBlob *layers;
        size_t n_layers;
        int src_fd;
        ChildJob *child;      /* the import, its records on the report pipe */
        ImportRecord last;
        bool have_last;
        char buf[sizeof(ImportRecord)];
        size_t have;
        uint64_t progress_usec;
        uint64_t start_usec;
        bool owner_only;
        uid_t importer;
        SandboxCaller caller; /* whose rights the source is read with */
};

static ImageJob *image_job_free(ImageJob *j) {
        if (!j)
                return NULL;
        for (ImageJob **p = &j->st->jobs; *p; p = &(*p)->next)
                if (*p == j) {
                        *p = j->next;
                        break;
                }
        /* One still running is killed and reaped; the next start removes the temporary tree (the
         * daemon is stopping). */
        child_job_free(j->child);
        safe_close(j->src_fd);
        free(j->layers);
        reply_unref(j->reply);
        free(j->name);
        free(j->source);
        free(j->kind);
        free(j->digest);
        free(j);
        return NULL;
}

bool image_importing(ImageStore *st, const char *name) {
        for (ImageJob *j = st->jobs; j; j = j->next)
                if (strcmp(j->name, name) == 0)
                        return true;
        return false;
}

static json_object *counts_json(const ImageCounts *c) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "bytes", json_object_new_int64((int64_t) c->bytes));
        json_object_object_add(o, "files", json_object_new_int64((int64_t) c->files));
        json_object_object_add(o, "read_bytes", json_object_new_int64((int64_t) c->stream_bytes));
        json_object_object_add(o, "skipped", json_object_new_int64((int64_t) c->skipped));
        json_object_object_add(o, "setid_dropped", json_object_new_int64((int64_t) c->setid_dropped));
        json_object_object_add(o, "whiteouts", json_object_new_int64((int64_t) c->whiteouts));
        return o;
}

static void job_progress(ImageJob *j, const ImportRecord *rec) {
        json_object *ev = reply_event_new(j->reply, "progress");
        json_object_object_add(ev, "image", json_object_new_string(j->name));
        if (rec->n_layers > 1 || strcmp(j->kind, "oci") == 0) {
                json_object_object_add(ev, "layer", json_object_new_int64(rec->layer));
                json_object_object_add(ev, "layers", json_object_new_int64(rec->n_layers));
        }
        json_object_object_add(ev, "imported", counts_json(&rec->counts));
        reply_event(j->reply, ev);
}

/* 0 at EAGAIN, 1 at the pipe's end or an error. */
static int job_read(ImageJob *j, int fd) {
        for (;;) {
                ssize_t n = read(fd, j->buf + j->have, sizeof(j->buf) - j->have);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n == 0 || errno != EAGAIN;
                j->have += (size_t) n;
                if (j->have < sizeof(j->buf))
                        continue;
                memcpy(&j->last, j->buf, sizeof(j->last));
                j->have = 0;
                j->have_last = true;
                if (j->last.kind == RECORD_PROGRESS &&
                    now_usec(CLOCK_MONOTONIC) - j->progress_usec >= 200 * USEC_PER_MSEC) {
                        j->progress_usec = now_usec(CLOCK_MONOTONIC);
                        job_progress(j, &j->last);
                }
        }
}

static int on_job_io(ChildJob *c, int fd, void *userdata) {
        return job_read(userdata, fd);
}

static int write_record(ImageStore *st, const char *tmp, const Image *img) {
        char path[IMAGE_NAME_MAX + 48];
        json_object *o = image_record_json(img);
        const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        _cleanup_close_ int fd = -EBADF;
        size_t len = strlen(text);
        int r = 0;

        snprintf(path, sizeof(path), "%s/" IMAGE_JSON, tmp);
        fd = openat(st->dir_fd, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, text, len) != (ssize_t) len || write(fd, "\n", 1) != 1 || fsync(fd) < 0)
                r = negative_errno();
        json_object_put(o);
        return r;
}

static Image *job_image(ImageJob *j) {
        Image *img = calloc(1, sizeof(*img));
        if (!img)
                return NULL;
        *img = (Image) { .bytes = j->last.counts.bytes, .files = j->last.counts.files, .imported_usec = now_usec(CLOCK_REALTIME),
                         .name = TAKE_PTR(j->name), .kind = TAKE_PTR(j->kind), .source = TAKE_PTR(j->source),
                         .digest = TAKE_PTR(j->digest), .owner_only = j->owner_only, .importer = j->importer };
        return img;
}

/* The complete tree becomes the image: its record written in it, then renamed into place. */
static int job_commit(ImageJob *j, ProtoError *err) {
        ImageStore *st = j->st;
        json_object *o;
        Image *img;
        int r;

        if (image_find(st, j->name))
                return proto_error_set(err, SBX_E_CONFLICT, "name", "an image named '%s' exists already", j->name);
        img = job_image(j);
        if (!img)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        r = write_record(st, j->tmp, img);
        if (r >= 0 && renameat2(st->dir_fd, j->tmp, st->dir_fd, img->name, RENAME_NOREPLACE) < 0)
                r = -errno;
        if (r < 0) {
                j->name = TAKE_PTR(img->name); /* for the error's message */
                image_free(img);
                return proto_error_set(err, r == -ENOSPC || r == -EDQUOT ? SBX_E_RESOURCE_EXHAUSTED : SBX_E_INTERNAL, NULL,
                                       "cannot record image '%s': %s", j->name, strerror(-r));
        }
        img->next = st->images;
        st->images = img;
        if (st->imported)
                st->imported(st->ctx); /* its pool_images entry, if it has one */
        log_info("image %s imported (%s, %" PRIu64 " bytes, %" PRIu64 " files)", img->name, img->kind, img->bytes, img->files);
        o = json_object_new_object();
        json_object_object_add(o, "image", image_to_json(img, -1, NULL));
        reply_ok(j->reply, o);
        return 0;
}

static int import_error(ImageJob *j, ProtoError *err) {
        const ImportRecord *rec = &j->last;
        const char *why = image_reason_to_string((ImageReason) rec->reason);

        if (!j->have_last || rec->kind != RECORD_FAILED)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "the import of '%s' ended without a result (killed?)", j->name);
        switch ((ImageReason) rec->reason) {
        case IMAGE_REASON_TOO_BIG:
        case IMAGE_REASON_TOO_MANY:
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "source",
                                       "'%s': %s (%" PRIu64 " of image_max_size, %" PRIu64 " of image_max_files)%s%s",
                                       j->source, why, j->st->ctx->config.image_max_size, j->st->ctx->config.image_max_files,
                                       rec->name[0] ? " at " : "", rec->name);
        case IMAGE_REASON_UNREADABLE:
                return proto_error_set(err, SBX_E_PERMISSION_DENIED, "source", "'%s': refused: %s (uid %u): %s", j->source, why,
                                       (unsigned) j->caller.uid, rec->name);
        case IMAGE_REASON_TOO_SLOW:
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "source", "'%s': %s (%d s)%s%s", j->source, why,
                                       (int) (IMPORT_MAX_USEC / USEC_PER_SEC), rec->name[0] ? " at " : "", rec->name);
        case IMAGE_REASON_DIGEST:
        case IMAGE_REASON_SIZE:
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "source", "'%s': refused: layer %" PRIu32 " of %" PRIu32 ", %s: %s",
                                       j->source, rec->layer, rec->n_layers, rec->name, why);
        case IMAGE_REASON_ENTRY:
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "source", "'%s': %s %s: %s", j->source, why,
                                       rec->name[0] ? rec->name : "", strerror(rec->err));
        default:
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "source", "'%s': refused: %s%s%s", j->source, why,
                                       rec->name[0] ? ": " : "", rec->name);
        }
}

/* What it wrote was read before this (child-job.h). */
static void on_job_exit(ChildJob *c, const siginfo_t *si, void *userdata) {
        ImageJob *j = userdata;
        ProtoError err = {};
        bool ok;

        j->child = child_job_free(j->child);
        ok = si->si_code == CLD_EXITED && si->si_status == 0 && j->have_last && j->last.kind == RECORD_DONE;
        if (ok && job_commit(j, &err) >= 0) {
                image_job_free(j);
                return;
        }
        if (ok)
                ; /* err is set */
        else
                import_error(j, &err);
        log_info("image %s: import failed: %s", j->name ? j->name : "?", err.message);
        (void) remove_async(j->st->ctx->event, j->st->ctx->run_helper_fd, j->st->dir_fd, j->tmp);
        reply_error(j->reply, &err);
        image_job_free(j);
}

/* ---- OCI image layouts ----------------------------------------------------------------------- */

/* A small blob (a manifest, an index, a config), read whole: its size and sha256 checked, then parsed. */
static json_object *oci_read_blob(int dir_fd, const SandboxCaller *who, json_object *d, const char *what, ProtoError *err) {
        _cleanup_free_ char *buf = NULL;
        uint8_t got[SHA256_LEN];
        ImageBlob b;
        size_t len;
        json_object *o;
        int r;

        if (oci_descriptor_parse(d, what, &b, err) < 0)
                return NULL;
        r = read_file_beneath(dir_fd, b.path, who, OCI_JSON_MAX, b.size, &buf, &len);
        if (r == -EMSGSIZE) {
                proto_error_set(err, SBX_E_INVALID_REQUEST, "source", "%s %s: %s", what, b.path,
                                image_reason_to_string(IMAGE_REASON_SIZE));
                return NULL;
        }
        if (r >= 0 && (r = blob_hash_buf(buf, len, got)) >= 0 && memcmp(got, b.sha256, SHA256_LEN) != 0) {
                proto_error_set(err, SBX_E_INVALID_REQUEST, "source", "%s %s: %s", what, b.path,
                                image_reason_to_string(IMAGE_REASON_DIGEST));
                return NULL;
        }
        o = r < 0 ? NULL : parse_json_object(buf);
        if (!o)
                proto_error_set(err, SBX_E_INVALID_REQUEST, "source", "cannot read %s %s of the layout: %s", what, b.path,
                                strerror(r < 0 ? -r : errno));
        return o;
}

static int oci_layers(ImageJob *j, json_object *manifest, ProtoError *err) {
        json_object *config;
        int r = oci_manifest_layers(manifest, &config, &j->layers, &j->n_layers, err);

        if (r < 0)
                return r;
        /* Nothing of the config is used yet; it is part of what the manifest's digest vouches for. */
        config = oci_read_blob(j->src_fd, &j->caller, config, "the config", err);
        if (!config)
                return -EINVAL;
        json_object_put(config);
        return 0;
}

/* index.json -> (an index ->) the manifest -> its layers, in order. Small files, read here. */
static int oci_resolve(ImageJob *j, const char *tag, ProtoError *err) {
        json_object *index = read_json_beneath(j->src_fd, "index.json", &j->caller, OCI_JSON_MAX), *manifest = NULL, *d;
        const char *digest;
        int r = -EINVAL;

        if (!index)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "source", "cannot read index.json of %s: %s", j->source,
                                       strerror(errno));
        d = oci_index_pick(index, tag, false, oci_host_arch(), err);
        for (int depth = 0; d && depth < 2; depth++) {
                digest = json_str(d, "digest");
                json_object_put(manifest);
                manifest = oci_read_blob(j->src_fd, &j->caller, d, oci_media_is_index(json_str(d, "mediaType")) ? "the image index" : "the manifest",
                                         err);
                if (!manifest)
                        break;
                if (!oci_media_is_index(json_str(d, "mediaType")) && !oci_media_is_index(json_str(manifest, "mediaType"))) {
                        if ((j->digest = strdup(digest)))
                                r = oci_layers(j, manifest, err);
                        else
                                r = proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
                        break;
                }
                d = oci_index_pick(manifest, NULL, true, oci_host_arch(), err);
        }
        if (r == -EINVAL && !err->code)
                r = proto_error_set(err, SBX_E_INVALID_REQUEST, "source", "the layout's index nests too deep");
        json_object_put(manifest);
        json_object_put(index);
        return r < 0 ? r : 0;
}

/* ---- Starting an import ---------------------------------------------------------------------- */

/* The source opened as its caller opens it (mount-source.h): with the caller's own ids, beneath
 * a mount_roots entry unless root, no symlink followed, no kernel filesystem; an O_PATH fd. Root
 * reading a host directory for an admin who is not root would hand over every file of it. */
static int job_open_as_caller(ImageJob *j, ProtoError *err) {
        Context *m = j->st->ctx;
        MountSource src = { .uid = j->caller.uid, .gid = j->caller.gid, .read_only = true, .path_only = true,
                            .n_groups = j->caller.n_groups < MOUNT_GROUPS_MAX ? j->caller.n_groups : MOUNT_GROUPS_MAX };
        MountStep step;
        int fd;

        memcpy(src.groups, j->caller.groups, sizeof(gid_t) * src.n_groups);
        src.root = caller_mount_root(m, j->caller.uid, j->source, &src.rest);
        if (!src.root)
                return proto_error_set(err, SBX_E_PERMISSION_DENIED, "source", "%s is not beneath any of mount_roots (%s)", j->source,
                                       m->config.mount_roots ? "see hello's capabilities.mount_roots" : "none configured");
        fd = mount_open(m->run_helper_fd, &src, 10000, &step);
        if (fd == -ELOOP || fd == -EXDEV)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "source",
                                       "%s goes through a symlink (or leaves its mount root): refused, never followed", j->source);
        if (fd == -ENOENT || fd == -ENOTDIR)
                return proto_error_set(err, SBX_E_NOT_FOUND, "source", "%s: %s", j->source, strerror(-fd));
        if (fd == -EACCES || fd == -EPERM)
                return proto_error_set(err, SBX_E_PERMISSION_DENIED, "source", "%s: not readable by uid %u: %s", j->source,
                                       (unsigned) j->caller.uid, strerror(-fd));
        if (fd < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "source", "%s: cannot be opened (%s): %s", j->source,
                                       mount_step_to_string(step), strerror(-fd));
        return fd;
}

/* The source: a directory (an OCI layout when it has index.json) or a file. */
static int job_open_source(ImageJob *j, const char *tag, ProtoError *err) {
        _cleanup_close_ int path_fd = job_open_as_caller(j, err);
        struct stat st;
        char proc[64];
        const char *kind;

        if (path_fd < 0)
                return path_fd;
        if (fstat(path_fd, &st) < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "source", "%s: %s", j->source, strerror(errno));
        if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "source",
                                       "%s is neither a directory nor a regular file (a tar archive)", j->source);
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", path_fd);
        j->src_fd = open(proc, (S_ISDIR(st.st_mode) ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
        if (j->src_fd < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "source", "%s: %s", j->source, strerror(errno));
        kind = !S_ISDIR(st.st_mode) ? "tar" : faccessat(j->src_fd, "index.json", F_OK, AT_SYMLINK_NOFOLLOW) == 0 ? "oci" : "directory";
        if (!(j->kind = strdup(kind)))
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        if (tag && strcmp(kind, "oci") != 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "tag", "'tag' is for an OCI image layout; %s is a %s", j->source,
                                       kind);
        return strcmp(kind, "oci") == 0 ? oci_resolve(j, tag, err) : 0;
}

static int job_make_tmp(ImageJob *j) {
        uint64_t rnd;
        if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                return -EIO;
        snprintf(j->tmp, sizeof(j->tmp), TMP_PREFIX "%s-%016" PRIx64, j->name, rnd);
        return mkdirat(j->st->dir_fd, j->tmp, 0755) < 0 ? -errno : 0;
}

static int job_spawn(ImageJob *j) {
        const Config *c = &j->st->ctx->config;
        ImportArgs a = { .images_fd = j->st->dir_fd, .tmp = j->tmp, .kind = j->kind, .src_fd = j->src_fd,
                         .layers = j->layers, .n_layers = j->n_layers, .caller = &j->caller,
                         .caps = { .max_bytes = c->image_max_size, .max_files = c->image_max_files, .id_count = c->uid_range,
                                   .allow_devices = c->image_devices != 0,
                                   .deadline_usec = now_usec(CLOCK_MONOTONIC) + IMPORT_MAX_USEC } };
        int keep[] = { j->st->dir_fd, j->src_fd };
        int r;

        r = child_job_start(j->st->ctx->event, &(ChildJobSpec) { .name = "sandboxd-import", .keep = keep,
                                                                 .n_keep = ELEMENTSOF(keep), .fn = image_import_main, .arg = &a,
                                                                 .on_exit = on_job_exit, .on_report = on_job_io,
                                                                 .userdata = j }, &j->child);
        j->src_fd = safe_close(j->src_fd);
        return r;
}

int image_import_start(ImageStore *st, const ImageImportRequest *rq, Reply *reply, ProtoError *err) {
        ImageJob *j;
        int r;

        if (image_find(st, rq->name) || image_importing(st, rq->name))
                return proto_error_set(err, SBX_E_CONFLICT, "name", "an image named '%s' exists already%s", rq->name,
                                       image_find(st, rq->name) ? "" : " (being imported)");
        j = calloc(1, sizeof(*j));
        if (!j)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        *j = (ImageJob) { .st = st, .src_fd = -EBADF, .start_usec = now_usec(CLOCK_MONOTONIC),
                          .owner_only = rq->owner_only, .importer = rq->importer, .caller = *rq->caller };
        j->next = st->jobs;
        st->jobs = j;
        if (!(j->name = strdup(rq->name)) || !(j->source = strdup(rq->source))) {
                image_job_free(j);
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        }
        r = job_open_source(j, rq->tag, err);
        if (r < 0) {
                image_job_free(j);
                return r;
        }
        r = job_make_tmp(j);
        if (r < 0) {
                image_job_free(j);
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "cannot make a directory in %s: %s", st->dir, strerror(-r));
        }
        r = job_spawn(j);
        if (r < 0) {
                (void) rm_rf_at(st->dir_fd, j->tmp);
                image_job_free(j);
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "cannot start the import: %s", strerror(-r));
        }
        j->reply = reply_ref(reply);
        return 0;
}

/* ---- What an image has ---------------------------------------------------------------------- */

int image_dir_exists(ImageStore *st, const char *name, const char *path) {
        struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        _cleanup_free_ char *rel = NULL;
        int fd;

        if (asprintf(&rel, "%s/rootfs%s", name, path) < 0)
                return -ENOMEM;
        fd = (int) syscall(SYS_openat2, st->dir_fd, rel, &how, sizeof(how));
        if (fd < 0)
                return -errno;
        close(fd);
        return 0;
}

/* ---- Removal --------------------------------------------------------------------------------- */

int image_remove(ImageStore *st, const char *name) {
        char trash[IMAGE_NAME_MAX + 32];
        uint64_t rnd = 0;
        int r;

        for (Image **p = &st->images; *p; p = &(*p)->next) {
                Image *img = *p;
                if (strcmp(img->name, name) != 0)
                        continue;
                if (img->users > 0)
                        return -EBUSY;
                (void) !getrandom(&rnd, sizeof(rnd), 0);
                /* Renamed first: a crash before the removal ends leaves a .tmp-* the next start removes. */
                snprintf(trash, sizeof(trash), TMP_PREFIX "rm-%s-%016" PRIx64, name, rnd);
                if (renameat(st->dir_fd, name, st->dir_fd, trash) < 0)
                        return -errno;
                r = remove_async(st->ctx->event, st->ctx->run_helper_fd, st->dir_fd, trash);
                if (r < 0)
                        log_warning_errno(r, "images: cannot start removing %s (%m); the next start removes it", trash);
                *p = img->next;
                image_free(img);
                return 0;
        }
        return -ENOENT;
}
