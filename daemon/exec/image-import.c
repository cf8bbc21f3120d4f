/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* image.import's archive side (image-import.h). */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "entry-name.h"
#include "open-beneath.h"
#include "image-import.h"
#include "macro.h"
#include "rm-rf.h"
#include "util.h"

#define IMPORT_BUF (256u * 1024)
#define NOBODY_ID 65534

const char *image_reason_to_string(ImageReason r) {
        static const char *const names[_IMAGE_REASON_MAX] = {
                [IMAGE_REASON_NONE] = "none",
                [IMAGE_REASON_DOTDOT] = "a name with '..'",
                [IMAGE_REASON_UNDER_SYMLINK] = "a name through a symlink (or a non-directory)",
                [IMAGE_REASON_LINK] = "a hard link to no regular file of the image",
                [IMAGE_REASON_TOO_BIG] = "over image_max_size",
                [IMAGE_REASON_TOO_MANY] = "over image_max_files",
                [IMAGE_REASON_FORMAT] = "not a tar archive (plain, gzip, xz, bzip2 or zstd), or a damaged one",
                [IMAGE_REASON_ENTRY] = "cannot make the entry",
                [IMAGE_REASON_DIGEST] = "a blob whose sha256 differs from its descriptor's digest",
                [IMAGE_REASON_SIZE] = "a blob whose size differs from its descriptor's",
                [IMAGE_REASON_TOO_SLOW] = "over the import's time cap",
                [IMAGE_REASON_UNREADABLE] = "a file its caller may not read",
        };
        return r >= 0 && r < _IMAGE_REASON_MAX && names[r] ? names[r] : "unknown";
}

/* The names this layer made (relative, normalised): an opaque directory hides the layers below
 * only, whichever order the layer lists its entries in (containerd keeps the same set). */
typedef struct NameSet {
        char **slot;
        size_t n, alloc; /* alloc: a power of two, or 0 */
} NameSet;

static uint64_t name_hash(const char *s) {
        uint64_t h = UINT64_C(1469598103934665603);
        for (; *s; s++)
                h = (h ^ (unsigned char) *s) * UINT64_C(1099511628211);
        return h;
}

static char **name_slot(const NameSet *set, const char *name) {
        size_t mask = set->alloc - 1;
        for (size_t i = name_hash(name) & mask;; i = (i + 1) & mask)
                if (!set->slot[i] || strcmp(set->slot[i], name) == 0)
                        return &set->slot[i];
}

static bool name_set_has(const NameSet *set, const char *name) {
        return set->alloc && *name_slot(set, name);
}

static int name_set_grow(NameSet *set) {
        NameSet bigger = { .alloc = set->alloc ? set->alloc * 2 : 1024 };
        bigger.slot = calloc(bigger.alloc, sizeof(char *));
        if (!bigger.slot)
                return -1;
        for (size_t i = 0; i < set->alloc; i++)
                if (set->slot[i])
                        *name_slot(&bigger, set->slot[i]) = set->slot[i];
        bigger.n = set->n;
        free(set->slot);
        *set = bigger;
        return 0;
}

static int name_set_add(NameSet *set, const char *name) {
        char **s;
        if ((set->n + 1) * 2 > set->alloc && name_set_grow(set) < 0)
                return -1;
        s = name_slot(set, name);
        if (*s)
                return 0;
        if (!(*s = strdup(name)))
                return -1;
        set->n++;
        return 0;
}

static void name_set_done(NameSet *set) {
        for (size_t i = 0; i < set->alloc; i++)
                free(set->slot[i]);
        free(set->slot);
        *set = (NameSet) {};
}

typedef struct Import {
        struct archive *a;
        int root;
        bool whiteouts;
        const ImageCaps *caps;
        ImageCounts *c;
        ImageFail *f;
        ImageProgressFn progress;
        void *userdata;
        NameSet made; /* with whiteouts: what this layer made */
} Import;

static int import_fail(Import *im, int err, ImageReason reason, const char *name) {
        im->f->err = err > 0 ? err : EIO;
        im->f->reason = reason;
        snprintf(im->f->name, sizeof(im->f->name), "%s", name ? name : "");
        return -im->f->err;
}

/* raw relative and normalised into out ("" for the root); false for a '..' component. */
static bool name_normalise(const char *raw, char *out, size_t size) {
        return entry_name_normalise(raw, out, size) == ENTRY_NAME_OK;
}

/* The parent directory of rel, made (0755, root's) where missing, each component opened beneath
 * the root with no symlink allowed. *ret_base points into rel. */
static int open_parent(Import *im, char *rel, const char **ret_base) {
        char *slash = strrchr(rel, '/');
        int cur = fcntl(im->root, F_DUPFD_CLOEXEC, 3);

        *ret_base = slash ? slash + 1 : rel;
        if (!slash || cur < 0)
                return cur;
        *slash = '\0';
        for (char *s = rel; *s;) {
                size_t len = strcspn(s, "/");
                char save = s[len];
                int next;
                s[len] = '\0';
                if (mkdirat(cur, s, 0755) < 0 && errno != EEXIST)
                        next = -1;
                else
                        next = open_beneath(cur, s, O_RDONLY | O_DIRECTORY);
                s[len] = save;
                safe_close(cur);
                cur = next;
                if (cur < 0)
                        break;
                s += len;
                while (*s == '/')
                        s++;
        }
        *slash = '/';
        return cur;
}

static uid_t entry_id(const Import *im, int64_t id) {
        return id < 0 || (uint64_t) id >= im->caps->id_count ? NOBODY_ID : (uid_t) id;
}

static mode_t entry_mode(Import *im, struct archive_entry *e) {
        mode_t mode = archive_entry_perm(e) & 07777;
        if (mode & (S_ISUID | S_ISGID)) {
                im->c->setid_dropped++;
                mode &= (mode_t) ~(S_ISUID | S_ISGID);
        }
        return mode;
}

/* The owner, mode and times of a new entry (not for a symlink's mode). */
static int apply_attrs(Import *im, struct archive_entry *e, int dir, const char *name, bool is_link) {
        struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT } };

        if (fchownat(dir, name, entry_id(im, archive_entry_uid(e)), entry_id(im, archive_entry_gid(e)), AT_SYMLINK_NOFOLLOW) < 0)
                return -1;
        if (!is_link && fchmodat(dir, name, entry_mode(im, e), 0) < 0)
                return -1;
        if (archive_entry_mtime_is_set(e)) {
                ts[1] = (struct timespec) { .tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e) };
                ts[0] = ts[1];
        }
        return utimensat(dir, name, ts, AT_SYMLINK_NOFOLLOW);
}

/* Whatever is at name goes (a later layer replaces an earlier one's entry of another kind). */
static int remove_existing(int dir, const char *name, bool keep_dir) {
        struct stat st;

        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -1;
        if (S_ISDIR(st.st_mode)) {
                if (keep_dir)
                        return 0;
                return rm_rf_at(dir, name) < 0 ? -1 : 0;
        }
        return unlinkat(dir, name, 0);
}

static int write_data(Import *im, int fd, uint64_t size) {
        uint64_t written = 0;

        for (;;) {
                const void *block;
                size_t len;
                la_int64_t off;
                int r = archive_read_data_block(im->a, &block, &len, &off);
                if (r == ARCHIVE_EOF)
                        break;
                if (r != ARCHIVE_OK) {
                        errno = EBADMSG;
                        return -1;
                }
                /* A block beyond the size the header claimed (a lying sparse map) is refused. */
                if (off < 0 || (uint64_t) off + len > size) {
                        errno = E2BIG;
                        return -1;
                }
                for (size_t done = 0; done < len;) {
                        ssize_t n = pwrite(fd, (const char *) block + done, len - done, off + (off_t) done);
                        if (n < 0)
                                return -1;
                        done += (size_t) n;
                }
                written += len;
        }
        (void) written;
        return ftruncate(fd, (off_t) size);
}

static int make_regular(Import *im, struct archive_entry *e, int dir, const char *name) {
        uint64_t size = archive_entry_size_is_set(e) && archive_entry_size(e) > 0 ? (uint64_t) archive_entry_size(e) : 0;
        _cleanup_close_ int fd = -EBADF;

        if (size > im->caps->max_bytes || im->c->bytes + size > im->caps->max_bytes) {
                errno = E2BIG;
                return -1;
        }
        im->c->bytes += size;
        if (remove_existing(dir, name, false) < 0)
                return -1;
        fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 || write_data(im, fd, size) < 0)
                return -1;
        return apply_attrs(im, e, dir, name, false);
}

static int make_hardlink(Import *im, struct archive_entry *e, int dir, const char *name) {
        char target[PATH_MAX];
        const char *tbase;
        struct stat st;
        _cleanup_close_ int tdir = -EBADF;

        if (!name_normalise(archive_entry_hardlink(e), target, sizeof(target)) || !*target) {
                errno = EXDEV;
                return -1;
        }
        tdir = open_parent(im, target, &tbase);
        if (tdir < 0 || fstatat(tdir, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)) {
                errno = EXDEV;
                return -1;
        }
        if (remove_existing(dir, name, false) < 0)
                return -1;
        return linkat(tdir, tbase, dir, name, 0);
}

static int make_node(Import *im, struct archive_entry *e, int dir, const char *name, mode_t type) {
        if (remove_existing(dir, name, false) < 0)
                return -1;
        if (type == S_IFLNK) {
                if (symlinkat(archive_entry_symlink(e), dir, name) < 0)
                        return -1;
                return apply_attrs(im, e, dir, name, true);
        }
        if (mknodat(dir, name, type | 0600, type == S_IFIFO ? 0 : archive_entry_rdev(e)) < 0)
                return -1;
        return apply_attrs(im, e, dir, name, false);
}

static int make_dir(Import *im, struct archive_entry *e, int dir, const char *name) {
        if (remove_existing(dir, name, true) < 0)
                return -1;
        if (mkdirat(dir, name, 0700) < 0 && errno != EEXIST)
                return -1;
        /* What is there must be a directory of ours, reached without a symlink. */
        _cleanup_close_ int fd = open_beneath(dir, name, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return -1;
        return apply_attrs(im, e, dir, name, false);
}

/* Everything in the directory dir (rel beneath the root) goes but what this layer made: an
 * opaque directory of a layer. */
static int empty_dir(Import *im, int dir, const char *rel) {
        _cleanup_close_ int fd = fcntl(dir, F_DUPFD_CLOEXEC, 3);
        char path[PATH_MAX];
        int dup_fd;
        DIR *d;
        struct dirent *de;
        int r = 0;

        if (fd < 0)
                return errno == ENOENT ? 0 : -1;
        dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (dup_fd < 0 || !(d = fdopendir(dup_fd))) {
                safe_close(dup_fd);
                return -1;
        }
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (snprintf(path, sizeof(path), "%s%s%s", rel, rel[0] ? "/" : "", de->d_name) >= (int) sizeof(path))
                        continue; /* longer than any name an entry of this layer can have */
                if (!name_set_has(&im->made, path) && rm_rf_at(fd, de->d_name) < 0)
                        r = -1;
        }
        closedir(d);
        return r;
}

/* ".wh..wh..opq" empties its directory, ".wh.NAME" removes NAME: 1 when base was a whiteout. */
static int apply_whiteout(Import *im, int dir, char *rel, const char *base) {
        if (strncmp(base, ".wh.", 4) != 0)
                return 0;
        im->c->whiteouts++;
        if (strcmp(base, ".wh..wh..opq") == 0) {
                char *slash = strrchr(rel, '/');
                int r;
                if (slash)
                        *slash = '\0';
                r = empty_dir(im, dir, slash ? rel : "");
                if (slash)
                        *slash = '/';
                return r < 0 ? -1 : 1;
        }
        if (!base[4] || strcmp(base + 4, ".") == 0 || strcmp(base + 4, "..") == 0 || strchr(base + 4, '/')) {
                errno = EINVAL;
                return -1;
        }
        if (remove_existing(dir, base + 4, false) < 0)
                return -1;
        return 1;
}

static int import_entry(Import *im, struct archive_entry *e) {
        const char *raw = archive_entry_pathname(e);
        char rel[PATH_MAX];
        const char *base;
        mode_t type = archive_entry_filetype(e);
        _cleanup_close_ int dir = -EBADF;
        int r;

        /* Every header counts, whatever becomes of it (a skipped device, the root, a whiteout):
         * a stream of entries that make nothing must not be endless work. */
        if (++im->c->entries > im->caps->max_files)
                return import_fail(im, E2BIG, IMAGE_REASON_TOO_MANY, raw);
        if (im->caps->deadline_usec && now_usec(CLOCK_MONOTONIC) > im->caps->deadline_usec)
                return import_fail(im, ETIMEDOUT, IMAGE_REASON_TOO_SLOW, raw);
        if (!raw || !name_normalise(raw, rel, sizeof(rel)))
                return import_fail(im, EXDEV, IMAGE_REASON_DOTDOT, raw);
        if (!*rel) /* "./": the root, which stays root's, 0755 */
                return 0;
        im->c->files++;
        dir = open_parent(im, rel, &base);
        if (dir < 0)
                return import_fail(im, errno, errno == ELOOP || errno == ENOTDIR || errno == EXDEV ? IMAGE_REASON_UNDER_SYMLINK
                                                                                                  : IMAGE_REASON_ENTRY, raw);
        if (im->whiteouts && (r = apply_whiteout(im, dir, rel, base)) != 0)
                return r < 0 ? import_fail(im, errno, IMAGE_REASON_ENTRY, raw) : 0;
        if (im->whiteouts && name_set_add(&im->made, rel) < 0)
                return import_fail(im, ENOMEM, IMAGE_REASON_ENTRY, raw);
        if (archive_entry_hardlink(e))
                r = make_hardlink(im, e, dir, base);
        else if (type == S_IFREG)
                r = make_regular(im, e, dir, base);
        else if (type == S_IFDIR)
                r = make_dir(im, e, dir, base);
        else if (type == S_IFLNK || type == S_IFIFO || ((type == S_IFCHR || type == S_IFBLK) && im->caps->allow_devices))
                r = make_node(im, e, dir, base, type);
        else {
                im->c->skipped++;
                im->c->files--; /* made nothing; its header counted in entries */
                return 0;
        }
        if (r < 0)
                return import_fail(im, errno, errno == E2BIG ? IMAGE_REASON_TOO_BIG : errno == EXDEV ? IMAGE_REASON_LINK
                                                                                               : IMAGE_REASON_ENTRY, raw);
        return 0;
}

static int import_loop(Import *im) {
        for (;;) {
                struct archive_entry *e;
                int r = archive_read_next_header(im->a, &e);
                if (r == ARCHIVE_EOF)
                        return 0;
                if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
                        return import_fail(im, EBADMSG, IMAGE_REASON_FORMAT, archive_error_string(im->a));
                r = import_entry(im, e);
                if (r < 0)
                        return r;
                im->c->stream_bytes = (uint64_t) archive_filter_bytes(im->a, -1);
                if (im->progress)
                        im->progress(im->c, im->userdata);
        }
}

/* The layer's bytes as libarchive asks for them, hashed on the way when there is a descriptor. */
typedef struct BlobReader {
        int fd;
        const ImageBlob *blob; /* NULL: nothing to check (a rootfs tarball) */
        BlobHash *hash;
        uint64_t read;
        char *buf;
} BlobReader;

static ssize_t blob_fill(BlobReader *b) {
        for (;;) {
                ssize_t n = read(b->fd, b->buf, IMPORT_BUF);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (b->hash && blob_hash_update(b->hash, b->buf, (size_t) n) < 0)
                        return -EIO;
                b->read += (uint64_t) n;
                /* Never more than the descriptor said (a blob that grows while it is read). */
                if (b->blob && b->read > b->blob->size)
                        return -EFBIG;
                return n;
        }
}

static la_ssize_t blob_read_cb(struct archive *a, void *userdata, const void **ret) {
        BlobReader *b = userdata;
        ssize_t n = blob_fill(b);
        if (n < 0) {
                archive_set_error(a, (int) -n, "reading the layer: %s", strerror((int) -n));
                return -1;
        }
        *ret = b->buf;
        return n;
}

/* The rest of the blob (a tar's trailing padding) through the hash, then the verdict. */
static int blob_verify(Import *im, BlobReader *b) {
        uint8_t got[SHA256_LEN];
        ssize_t n;

        while ((n = blob_fill(b)) > 0)
                ;
        if (n == -EFBIG || (n == 0 && b->read != b->blob->size))
                return import_fail(im, EBADMSG, IMAGE_REASON_SIZE, b->blob->path);
        if (n < 0)
                return import_fail(im, (int) -n, IMAGE_REASON_ENTRY, b->blob->path);
        if (blob_hash_final(b->hash, got) < 0)
                return import_fail(im, EIO, IMAGE_REASON_ENTRY, b->blob->path);
        if (memcmp(got, b->blob->sha256, SHA256_LEN) != 0)
                return import_fail(im, EBADMSG, IMAGE_REASON_DIGEST, b->blob->path);
        return 0;
}

static int blob_reader_init(BlobReader *b, int fd, const ImageBlob *blob) {
        struct stat st;

        *b = (BlobReader) { .fd = fd, .blob = blob };
        if (blob && (fstat(fd, &st) < 0 || (uint64_t) st.st_size != blob->size))
                return -EFBIG;
        b->buf = malloc(IMPORT_BUF);
        if (!b->buf || (blob && !(b->hash = blob_hash_new())))
                return -ENOMEM;
        return 0;
}

/* Whether libarchive decodes a filter itself: ARCHIVE_WARN means it would run an outside
 * program of that name from PATH (as root), which an import never does. Tried on an archive of
 * its own, since a filter once enabled cannot be taken back. */
static bool filter_built_in(int (*enable)(struct archive *)) {
        struct archive *probe = archive_read_new();
        bool ok = probe && enable(probe) == ARCHIVE_OK;
        archive_read_free(probe);
        return ok;
}

/* Exactly the filters the documentation lists, each only built in: never
 * archive_read_support_filter_all(), whose lrzip, lzop, grzip, lz4 ... run programs. */
static void enable_filters(struct archive *a) {
        static int (*const filters[])(struct archive *) = {
                archive_read_support_filter_gzip,
                archive_read_support_filter_xz,
                archive_read_support_filter_bzip2,
                archive_read_support_filter_zstd,
        };
        for (size_t i = 0; i < ELEMENTSOF(filters); i++)
                if (filter_built_in(filters[i]))
                        filters[i](a);
}

static int import_archive(Import *im, BlobReader *b) {
        int r;

        enable_filters(im->a);
        archive_read_support_format_tar(im->a);
        archive_read_support_format_gnutar(im->a);
        if (archive_read_open(im->a, b, NULL, blob_read_cb, NULL) != ARCHIVE_OK)
                r = import_fail(im, EBADMSG, IMAGE_REASON_FORMAT, archive_error_string(im->a));
        else
                r = import_loop(im);
        /* A blob that is not what its descriptor says is that, whatever else its bytes made fail. */
        if (b->blob) {
                ImageFail first = *im->f;
                int v = blob_verify(im, b);
                if (v >= 0 && r < 0)
                        *im->f = first;
                else
                        r = v;
        }
        return r;
}

int image_layer_apply(int src_fd, const ImageBlob *blob, int root_fd, bool whiteouts, const ImageCaps *caps, ImageCounts *c,
                      ImageProgressFn progress, void *userdata, ImageFail *f) {
        Import im = { .root = root_fd, .whiteouts = whiteouts, .caps = caps, .c = c, .f = f, .progress = progress,
                      .userdata = userdata };
        BlobReader b;
        uint64_t before = c->stream_bytes;
        int r;

        *f = (ImageFail) {};
        r = blob_reader_init(&b, src_fd, blob);
        if (r == -EFBIG)
                r = import_fail(&im, EBADMSG, IMAGE_REASON_SIZE, blob->path);
        else if (r < 0 || !(im.a = archive_read_new()))
                r = import_fail(&im, ENOMEM, IMAGE_REASON_ENTRY, NULL);
        else {
                r = import_archive(&im, &b);
                im.c->stream_bytes = before + (uint64_t) archive_filter_bytes(im.a, -1);
        }
        archive_read_free(im.a);
        blob_hash_free(b.hash);
        free(b.buf);
        name_set_done(&im.made);
        return r;
}

int image_root_finish(int root_fd) {
        static const struct {
                const char *name;
                mode_t mode;
        } dirs[] = {
                { "proc", 0555 }, { "dev", 0755 }, { "sys", 0555 }, { "tmp", 01777 }, { "run", 0755 },
                { "work", 0755 }, { "home", 0755 }, { "root", 0700 }, { "var", 0755 }, { "etc", 0755 },
        };
        struct stat st;

        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                if (fstatat(root_fd, dirs[i].name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                        /* The sandbox mounts its own there: a symlink or a file in its place goes. */
                        if (S_ISDIR(st.st_mode) || i >= 6)
                                continue;
                        if (unlinkat(root_fd, dirs[i].name, 0) < 0)
                                return -errno;
                } else if (errno != ENOENT)
                        return -errno;
                if (mkdirat(root_fd, dirs[i].name, dirs[i].mode) < 0 || fchmodat(root_fd, dirs[i].name, dirs[i].mode, 0) < 0 ||
                    fchownat(root_fd, dirs[i].name, 0, 0, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
        }
        return fchmodat(root_fd, ".", 0755, 0) < 0 ? -errno : 0;
}
