/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* file.put and file.get inside the sandbox (file-tar.h). libarchive reads and writes the stream
 * only (archive_read_disk and archive_write_disk are never used: they work by path, and their
 * own documentation says their checks race with a concurrent writer). Every name is checked
 * here, every parent opened with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|
 * RESOLVE_NO_MAGICLINKS) from the root's fd: an entry under a symlink (the sandbox's, or one an
 * earlier entry made) is refused, never followed. */
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
#include <unistd.h>

#include "dir-names.h"
#include "entry-name.h"
#include "open-beneath.h"
#include "file-tar.h"
#include "macro.h"

#define TAR_BUF (1024u * 1024)

static int tar_fail(TarFail *f, int err, TarReason reason, const char *name) {
        f->err = err ? err : EIO;
        f->reason = reason;
        snprintf(f->name, sizeof(f->name), "%s", name ? name : "");
        return -f->err;
}

/* ---- Names -------------------------------------------------------------------------------- */

/* A stream's name, relative and normalised into out ("" for the root itself: "." or "./"). */
static TarReason name_normalise(const char *raw, char *out, size_t size) {
        if (!raw || !*raw)
                return TAR_REASON_EMPTY;
        if (raw[0] == '/')
                return TAR_REASON_ABSOLUTE;
        if (strlen(raw) >= PATH_MAX)
                return TAR_REASON_LONG;
        switch (entry_name_normalise(raw, out, size)) {
        case ENTRY_NAME_OK:
                return TAR_REASON_NONE;
        case ENTRY_NAME_DOTDOT:
                return TAR_REASON_DOTDOT;
        default:
                return TAR_REASON_LONG;
        }
}

/* ---- file.put ------------------------------------------------------------------------------ */

typedef struct DeferredDir {
        char *rel;
        mode_t mode;
        struct timespec mtime;
        bool has_mtime;
} DeferredDir;

typedef struct Put {
        struct archive *a;
        int root;
        bool fresh, overwrite;
        char cached_dir[PATH_MAX];
        int cached_fd;
        DeferredDir *dirs;
        size_t n_dirs, alloc_dirs;
        TarStats *st;
        TarFail *f;
        char *buf;
        TarProgressFn progress;
} Put;

static void put_progress(Put *p) {
        if (p->progress)
                p->progress((uint64_t) archive_filter_bytes(p->a, -1));
}

/* The directory rel (relative, normalised) beneath the root, each component opened with no
 * symlink allowed; missing ones are made (0755: a stream may leave out its directories). */
static int put_walk(Put *p, const char *rel, bool create, TarReason *ret_reason) {
        char comp[NAME_MAX + 1];
        int cur = fcntl(p->root, F_DUPFD_CLOEXEC, 3);

        *ret_reason = TAR_REASON_ENTRY;
        for (const char *s = rel; cur >= 0 && *s;) {
                size_t len = strcspn(s, "/");
                int fd;

                memcpy(comp, s, len);
                comp[len] = '\0';
                fd = open_beneath(cur, comp, O_PATH | O_DIRECTORY);
                if (fd < 0 && errno == ENOENT && create) {
                        if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST) {
                                int e = errno;
                                safe_close(cur);
                                errno = e;
                                return -1;
                        }
                        fd = open_beneath(cur, comp, O_PATH | O_DIRECTORY);
                }
                if (fd < 0) {
                        int e = errno;
                        if (e == ELOOP || e == EXDEV)
                                *ret_reason = TAR_REASON_UNDER_SYMLINK;
                        else if (e == ENOTDIR)
                                *ret_reason = TAR_REASON_NOT_DIR;
                        safe_close(cur);
                        errno = e;
                        return -1;
                }
                safe_close(cur);
                cur = fd;
                s += len;
                while (*s == '/')
                        s++;
        }
        return cur;
}

/* The parent of rel, opened (the last one is kept: a stream lists a directory's files together),
 * and rel's last component. */
static int put_parent(Put *p, char *rel, const char **ret_name, TarReason *ret_reason) {
        char *slash = strrchr(rel, '/');
        const char *dir = slash ? rel : "";

        *ret_name = slash ? slash + 1 : rel;
        if (slash)
                *slash = '\0';
        if (p->cached_fd >= 0 && strcmp(p->cached_dir, dir) == 0) {
                if (slash)
                        *slash = '/';
                return p->cached_fd;
        }
        p->cached_fd = safe_close(p->cached_fd);
        p->cached_fd = put_walk(p, dir, true, ret_reason);
        if (p->cached_fd >= 0)
                snprintf(p->cached_dir, sizeof(p->cached_dir), "%s", dir);
        if (slash)
                *slash = '/';
        return p->cached_fd;
}

static int tmp_name(char *buf, size_t size) {
        static unsigned counter;
        return snprintf(buf, size, ".sbx-tar-%d-%u", (int) getpid(), counter++) < (int) size ? 0 : -1;
}

/* What stands at name: with overwrite false, anything but a directory for a directory is EEXIST. */
static int put_check_existing(Put *p, int dir, const char *name, bool is_dir) {
        struct stat st;

        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (is_dir && S_ISDIR(st.st_mode))
                return 1;
        if (!p->overwrite)
                return -EEXIST;
        if (is_dir && unlinkat(dir, name, 0) < 0)
                return -errno;
        return 0;
}

/* A new name made as tmp is moved over name (RENAME_NOREPLACE unless overwrite). */
static int put_commit(Put *p, int dir, const char *tmp, const char *name) {
        if (renameat2(dir, tmp, dir, name, p->overwrite ? 0 : RENAME_NOREPLACE) == 0)
                return 0;
        int e = errno;
        (void) unlinkat(dir, tmp, 0);
        return -e;
}

static void entry_times(struct archive_entry *e, struct timespec ts[2]) {
        ts[0].tv_sec = 0;
        ts[0].tv_nsec = UTIME_OMIT;
        ts[1].tv_sec = archive_entry_mtime(e);
        ts[1].tv_nsec = archive_entry_mtime_nsec(e);
        if (!archive_entry_mtime_is_set(e))
                ts[1].tv_nsec = UTIME_OMIT;
}

static int put_data(Put *p, int fd) {
        const void *buf;
        size_t size;
        la_int64_t off;
        int r;

        while ((r = archive_read_data_block(p->a, &buf, &size, &off)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
                const char *c = buf;
                while (size > 0) {
                        ssize_t k = pwrite(fd, c, size, (off_t) off);
                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k <= 0)
                                return k < 0 ? -errno : -EIO;
                        c += k;
                        size -= (size_t) k;
                        off += k;
                }
                put_progress(p);
        }
        return r == ARCHIVE_EOF ? 0 : -EPROTO;
}

static int put_file(Put *p, struct archive_entry *e, int dir, const char *name) {
        struct timespec ts[2];
        char tmp[64];
        int fd, r;

        if ((r = put_check_existing(p, dir, name, false)) < 0)
                return r;
        if (tmp_name(tmp, sizeof(tmp)) < 0)
                return -ENAMETOOLONG;
        fd = openat(dir, tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        r = put_data(p, fd);
        entry_times(e, ts);
        if (r == 0 && (ftruncate(fd, (off_t) archive_entry_size(e)) < 0 ||
                       fchmod(fd, archive_entry_perm(e) & 0777) < 0 || futimens(fd, ts) < 0))
                r = -errno;
        safe_close(fd);
        if (r < 0) {
                (void) unlinkat(dir, tmp, 0);
                return r;
        }
        return put_commit(p, dir, tmp, name);
}

/* Symlinks, hard links and FIFOs: made under a temporary name by make(), then moved in. */
static int put_node(Put *p, struct archive_entry *e, int dir, const char *name, int (*make)(Put *, struct archive_entry *, int, const char *)) {
        struct timespec ts[2];
        char tmp[64];
        int r;

        if ((r = put_check_existing(p, dir, name, false)) < 0)
                return r;
        if (tmp_name(tmp, sizeof(tmp)) < 0)
                return -ENAMETOOLONG;
        if ((r = make(p, e, dir, tmp)) < 0)
                return r;
        if ((r = put_commit(p, dir, tmp, name)) < 0)
                return r;
        entry_times(e, ts);
        (void) utimensat(dir, name, ts, AT_SYMLINK_NOFOLLOW);
        return 0;
}

static int make_symlink(Put *p, struct archive_entry *e, int dir, const char *tmp) {
        const char *target = archive_entry_symlink(e);
        if (!target || !*target)
                return -EINVAL;
        return symlinkat(target, dir, tmp) < 0 ? -errno : 0; /* the target as it is: never resolved */
}

static int make_fifo(Put *p, struct archive_entry *e, int dir, const char *tmp) {
        return mkfifoat(dir, tmp, archive_entry_perm(e) & 0777) < 0 ? -errno : 0;
}

/* A hard link to an earlier entry: its target resolved beneath the root the same way. */
static int make_hardlink(Put *p, struct archive_entry *e, int dir, const char *tmp) {
        char rel[PATH_MAX];
        const char *tname;
        char *slash;
        TarReason why;
        int tdir, r;

        if (name_normalise(archive_entry_hardlink(e), rel, sizeof(rel)) != TAR_REASON_NONE || !rel[0])
                return -ENOLINK;
        slash = strrchr(rel, '/');
        tname = slash ? slash + 1 : rel;
        if (slash)
                *slash = '\0';
        tdir = put_walk(p, slash ? rel : "", false, &why);
        if (tdir < 0)
                return -ENOLINK;
        /* linkat without AT_SYMLINK_FOLLOW links a symlink itself, never what it names. */
        r = linkat(tdir, tname, dir, tmp, 0) < 0 ? -errno : 0;
        safe_close(tdir);
        return r == -ENOENT || r == -EPERM ? -ENOLINK : r;
}

static int put_defer(Put *p, const char *rel, struct archive_entry *e) {
        DeferredDir *d;
        if (p->n_dirs == p->alloc_dirs) {
                size_t n = p->alloc_dirs ? 2 * p->alloc_dirs : 64;
                DeferredDir *m = realloc(p->dirs, n * sizeof(*m));
                if (!m)
                        return -ENOMEM;
                p->dirs = m;
                p->alloc_dirs = n;
        }
        d = &p->dirs[p->n_dirs];
        if (!(d->rel = strdup(rel)))
                return -ENOMEM;
        /* setuid and setgid are dropped; the sticky bit is kept on a directory. */
        d->mode = archive_entry_perm(e) & 01777;
        d->mtime.tv_sec = archive_entry_mtime(e);
        d->mtime.tv_nsec = archive_entry_mtime_nsec(e);
        d->has_mtime = archive_entry_mtime_is_set(e);
        p->n_dirs++;
        return 0;
}

/* A directory is made writable for its owner until the end (a 0555 one would refuse its own
 * entries); its mode and mtime are applied last, deepest first. */
static int put_dir(Put *p, struct archive_entry *e, int dir, const char *name, const char *rel) {
        int r = put_check_existing(p, dir, name, true);
        if (r < 0)
                return r;
        if (r == 0 && mkdirat(dir, name, 0700) < 0 && errno != EEXIST)
                return -errno;
        return put_defer(p, rel, e);
}

static void put_finish_dirs(Put *p) {
        for (size_t i = p->n_dirs; i-- > 0;) {
                DeferredDir *d = &p->dirs[i];
                struct timespec ts[2] = { { 0, UTIME_OMIT }, d->mtime };
                TarReason why;
                int dir = put_walk(p, d->rel, false, &why), fd = -1;

                if (dir >= 0)
                        fd = open_beneath(dir, ".", O_RDONLY | O_DIRECTORY);
                if (fd >= 0) {
                        (void) fchmod(fd, d->mode);
                        if (d->has_mtime)
                                (void) futimens(fd, ts);
                }
                safe_close(fd);
                safe_close(dir);
                free(d->rel);
        }
        free(p->dirs);
        p->dirs = NULL;
        p->n_dirs = 0;
}

static int put_entry(Put *p, struct archive_entry *e) {
        char rel[PATH_MAX];
        const char *raw = archive_entry_pathname(e), *name;
        TarReason why = name_normalise(raw, rel, sizeof(rel));
        mode_t type = archive_entry_filetype(e);
        int dir, r;

        if (why != TAR_REASON_NONE)
                return tar_fail(p->f, EINVAL, why, raw);
        if (!rel[0]) { /* "./": the root itself */
                if (type != AE_IFDIR)
                        return tar_fail(p->f, EINVAL, TAR_REASON_EMPTY, raw);
                p->st->entries++;
                return p->fresh ? put_defer(p, "", e) : 0;
        }
        if (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFSOCK) {
                p->st->skipped++;
                return 0;
        }
        dir = put_parent(p, rel, &name, &why);
        if (dir < 0)
                return tar_fail(p->f, errno, why, raw);
        if (archive_entry_hardlink(e))
                r = put_node(p, e, dir, name, make_hardlink);
        else if (type == AE_IFREG)
                r = put_file(p, e, dir, name);
        else if (type == AE_IFDIR)
                r = put_dir(p, e, dir, name, rel);
        else if (type == AE_IFLNK)
                r = put_node(p, e, dir, name, make_symlink);
        else if (type == AE_IFIFO)
                r = put_node(p, e, dir, name, make_fifo);
        else {
                p->st->skipped++;
                return 0;
        }
        if (r == -ENOLINK)
                return tar_fail(p->f, EINVAL, TAR_REASON_LINK, raw);
        if (r == -EPROTO)
                return tar_fail(p->f, EINVAL, TAR_REASON_FORMAT, archive_error_string(p->a));
        if (r < 0)
                return tar_fail(p->f, -r, r == -EEXIST ? TAR_REASON_EXISTS : TAR_REASON_ENTRY, raw);
        p->st->entries++;
        return 0;
}

static int put_loop(Put *p) {
        struct archive_entry *e;
        int r;

        for (;;) {
                r = archive_read_next_header(p->a, &e);
                if (r == ARCHIVE_EOF)
                        return 0;
                p->f->entry++;
                if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
                        int err = archive_errno(p->a);
                        /* The source's own failure (a client's pipe, EIO) is not the stream's fault. */
                        bool io = err == EIO || err == EBADF;
                        return tar_fail(p->f, io ? err : EINVAL, io ? TAR_REASON_ENTRY : TAR_REASON_FORMAT,
                                        archive_error_string(p->a));
                }
                if ((r = put_entry(p, e)) < 0)
                        return r;
                put_progress(p);
        }
}

int tar_put(int src_fd, int root_fd, bool fresh, bool overwrite, TarProgressFn progress, TarStats *st, TarFail *f) {
        Put p = { .root = root_fd, .fresh = fresh, .overwrite = overwrite, .cached_fd = -1, .st = st, .f = f,
                  .progress = progress };
        int r;

        *st = (TarStats) {};
        *f = (TarFail) {};
        p.a = archive_read_new();
        if (!p.a)
                return tar_fail(f, ENOMEM, TAR_REASON_NONE, NULL);
        /* tar (ustar, pax, GNU) and no filter: nothing that could run an external program. */
        if (archive_read_support_format_tar(p.a) != ARCHIVE_OK || archive_read_support_format_empty(p.a) != ARCHIVE_OK ||
            archive_read_support_filter_none(p.a) != ARCHIVE_OK || archive_read_open_fd(p.a, src_fd, 65536) != ARCHIVE_OK) {
                r = tar_fail(f, EINVAL, TAR_REASON_FORMAT, archive_error_string(p.a));
                archive_read_free(p.a);
                return r;
        }
        r = put_loop(&p);
        if (r == 0)
                put_finish_dirs(&p);
        else {
                for (size_t i = 0; i < p.n_dirs; i++)
                        free(p.dirs[i].rel);
                free(p.dirs);
        }
        st->bytes = (uint64_t) archive_filter_bytes(p.a, -1);
        safe_close(p.cached_fd);
        archive_read_free(p.a);
        return r;
}

/* ---- file.get ------------------------------------------------------------------------------ */

typedef struct Seen {
        dev_t dev;
        ino_t ino;
        char *name;
} Seen;

typedef struct Get {
        struct archive *a;
        struct archive_entry *e;
        TarWriteFn w;
        void *userdata;
        char *buf;
        size_t used;
        Seen *seen;
        size_t n_seen, alloc_seen;
        TarStats *st;
        TarFail *f;
        int werr;
} Get;

/* libarchive writes 10 KiB blocks; they are gathered into TAR_BUF before they go out (one DATA
 * record, one data event of up to a chunk). */
static int get_flush(Get *g) {
        if (g->used && g->w(g->buf, g->used, g->userdata) < 0) {
                g->werr = errno ? errno : EPIPE;
                return -1;
        }
        g->used = 0;
        return 0;
}

static la_ssize_t get_write_cb(struct archive *a, void *userdata, const void *buf, size_t n) {
        Get *g = userdata;
        const char *p = buf;
        size_t left = n;

        while (left > 0) {
                size_t k = TAR_BUF - g->used < left ? TAR_BUF - g->used : left;
                memcpy(g->buf + g->used, p, k);
                g->used += k;
                p += k;
                left -= k;
                if (g->used == TAR_BUF && get_flush(g) < 0) {
                        archive_set_error(a, g->werr, "the stream's reader went away");
                        return -1;
                }
        }
        g->st->bytes += n;
        return (la_ssize_t) n;
}

static int get_close_cb(struct archive *a, void *userdata) {
        return get_flush(userdata) < 0 ? ARCHIVE_FATAL : ARCHIVE_OK;
}

static const char *seen_lookup(Get *g, const struct stat *st) {
        for (size_t i = 0; i < g->n_seen; i++)
                if (g->seen[i].dev == st->st_dev && g->seen[i].ino == st->st_ino)
                        return g->seen[i].name;
        return NULL;
}

static void seen_add(Get *g, const struct stat *st, const char *name) {
        if (g->n_seen == g->alloc_seen) {
                size_t n = g->alloc_seen ? 2 * g->alloc_seen : 64;
                Seen *m = realloc(g->seen, n * sizeof(*m));
                if (!m)
                        return; /* archived again as a file: correct, only bigger */
                g->seen = m;
                g->alloc_seen = n;
        }
        if ((g->seen[g->n_seen].name = strdup(name))) {
                g->seen[g->n_seen].dev = st->st_dev;
                g->seen[g->n_seen].ino = st->st_ino;
                g->n_seen++;
        }
}

/* What comes out of a sandbox carries no setuid, setgid or sticky meaning, whoever unpacks it
 * (GNU tar as root keeps them): the stream itself has none. */
#define GET_MODE_MASK ((mode_t) (S_IFMT | 0777))

static int get_header(Get *g, const struct stat *st, const char *arcname) {
        archive_entry_clear(g->e);
        archive_entry_copy_pathname(g->e, arcname);
        archive_entry_set_mode(g->e, st->st_mode & GET_MODE_MASK);
        archive_entry_set_uid(g->e, st->st_uid);
        archive_entry_set_gid(g->e, st->st_gid);
        archive_entry_set_mtime(g->e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
        archive_entry_set_size(g->e, S_ISREG(st->st_mode) ? st->st_size : 0);
        return 0;
}

static int get_write_header(Get *g, const char *arcname) {
        int r = archive_write_header(g->a, g->e);
        if (r == ARCHIVE_OK || r == ARCHIVE_WARN) /* WARN: a name that is not UTF-8 goes as bytes */
                return 0;
        return tar_fail(g->f, g->werr ? g->werr : archive_errno(g->a) > 0 ? archive_errno(g->a) : EIO,
                        TAR_REASON_NONE, arcname);
}

/* At most this many data regions in a sparse map (the helper holds it twice, libarchive's entry
 * and its writer's list). A file more fragmented than that is mapped again with its holes under
 * 64 KiB counted as data (at most 16 times the data it has, each region being at least a 4 KiB
 * block); one still over is skipped: written out whole, it would make the client's disk the
 * sandbox's amplifier. */
#define SPARSE_MAX_REGIONS 65536
#define SPARSE_MERGE_HOLE (64u * 1024)

/* The data regions of fd below size, holes shorter than min_hole merged into the data around
 * them, added to the entry. 1: a map made (the file has a hole); 0: no map (all data, or no
 * SEEK_DATA here); -E2BIG: more than SPARSE_MAX_REGIONS. */
static int get_sparse_walk(Get *g, int fd, uint64_t size, uint64_t min_hole) {
        uint64_t pos = 0, start = 0, end = 0;
        unsigned n = 0;
        bool open_region = false;

        archive_entry_sparse_clear(g->e);
        while (pos < size) {
                off_t d = lseek(fd, (off_t) pos, SEEK_DATA), h;
                if (d < 0 && errno != ENXIO) {
                        archive_entry_sparse_clear(g->e);
                        return 0;
                }
                if (d < 0 || (uint64_t) d >= size)
                        break; /* a hole to the end */
                h = lseek(fd, d, SEEK_HOLE);
                if (h < 0 || (uint64_t) h > size)
                        h = (off_t) size;
                if (open_region && (uint64_t) d - end < min_hole)
                        end = (uint64_t) h; /* a short hole: data */
                else {
                        if (open_region) {
                                if (++n > SPARSE_MAX_REGIONS)
                                        return -E2BIG;
                                archive_entry_sparse_add_entry(g->e, (la_int64_t) start, (la_int64_t) (end - start));
                        }
                        start = (uint64_t) d;
                        end = (uint64_t) h;
                        open_region = true;
                }
                pos = (uint64_t) h;
        }
        if (open_region && start == 0 && end >= size) {
                archive_entry_sparse_clear(g->e); /* all data: no map, the stream as it always was */
                return 0;
        }
        if (open_region) {
                if (++n > SPARSE_MAX_REGIONS)
                        return -E2BIG;
                archive_entry_sparse_add_entry(g->e, (la_int64_t) start, (la_int64_t) (end - start));
        }
        /* It ends in a hole: an empty region at the end says its length (as GNU tar writes it). */
        if (end < size)
                archive_entry_sparse_add_entry(g->e, (la_int64_t) size, 0);
        return 1;
}

/* A file with holes (SEEK_DATA/SEEK_HOLE) gets a sparse map in its header (pax GNU.sparse 1.0):
 * only its data regions travel, and tar -x or tarfile leave the holes as holes, so a sandbox's
 * 1 GiB of nothing never becomes 1 GiB on a client's disk. A file without holes (or a
 * filesystem without SEEK_DATA) gets no map: its stream is as it was. -E2BIG: skip the file. */
static int get_sparse_map(Get *g, int fd, uint64_t size) {
        int r = size ? get_sparse_walk(g, fd, size, 0) : 0;
        if (r == -E2BIG)
                r = get_sparse_walk(g, fd, size, SPARSE_MERGE_HOLE);
        if (r == -E2BIG)
                archive_entry_sparse_clear(g->e);
        return r;
}

/* A walk along the entry's sparse map as get_data() moves forward (once: a map may be long). */
typedef struct SparseCursor {
        bool mapped, more;
        la_int64_t off, len;
} SparseCursor;

static void sparse_start(Get *g, SparseCursor *c) {
        c->mapped = archive_entry_sparse_reset(g->e) > 0;
        c->more = c->mapped && archive_entry_sparse_next(g->e, &c->off, &c->len) == ARCHIVE_OK;
}

/* Whether pos is in a hole; *ret_end: where that hole or data ends. */
static bool sparse_at(Get *g, SparseCursor *c, uint64_t pos, uint64_t size, uint64_t *ret_end) {
        if (!c->mapped) {
                *ret_end = size;
                return false;
        }
        while (c->more && pos >= (uint64_t) (c->off + c->len))
                c->more = archive_entry_sparse_next(g->e, &c->off, &c->len) == ARCHIVE_OK;
        if (!c->more) {
                *ret_end = size;
                return true;
        }
        *ret_end = pos < (uint64_t) c->off ? (uint64_t) c->off : (uint64_t) (c->off + c->len);
        return pos < (uint64_t) c->off;
}

/* Exactly the size in its header: a file that grew is cut there, one that shrank is padded
 * with zeros; either is counted in changed. A hole of the map is handed to libarchive as zeros,
 * which it counts and does not write (nothing is read for it). */
static int get_data(Get *g, int fd, const struct stat *st, const char *arcname) {
        static char buf[TAR_BUF], zeros[TAR_BUF];
        uint64_t pos = 0, size = (uint64_t) st->st_size, region_end = 0;
        bool short_ = false, hole = false;
        SparseCursor cur;
        struct stat after;

        sparse_start(g, &cur);
        while (pos < size) {
                if (pos >= region_end)
                        hole = sparse_at(g, &cur, pos, size, &region_end);
                uint64_t left = region_end - pos;
                size_t want = left < sizeof(buf) ? (size_t) left : sizeof(buf);
                if (hole) {
                        if (archive_write_data(g->a, zeros, want) != (la_ssize_t) want)
                                return tar_fail(g->f, g->werr ? g->werr : EIO, TAR_REASON_NONE, arcname);
                        pos += want;
                        continue;
                }
                ssize_t k = short_ ? 0 : pread(fd, buf, want, (off_t) pos);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) { /* shrank (or unreadable from here on): zeros */
                        short_ = true;
                        memset(buf, 0, want);
                        k = (ssize_t) want;
                }
                if (archive_write_data(g->a, buf, (size_t) k) != k)
                        return tar_fail(g->f, g->werr ? g->werr : EIO, TAR_REASON_NONE, arcname);
                pos += (uint64_t) k;
        }
        if (short_ || fstat(fd, &after) < 0 || after.st_size != st->st_size || after.st_mtim.tv_sec != st->st_mtim.tv_sec ||
            after.st_mtim.tv_nsec != st->st_mtim.tv_nsec)
                g->st->changed++;
        return 0;
}

static int get_entry(Get *g, int dir_fd, const char *name, int data_fd, const char *arcname, dev_t parent_dev);

static int get_dir(Get *g, int fd, const struct stat *st, const char *arcname, dev_t parent_dev) {
        char sub[PATH_MAX + 2];
        size_t n = 0;
        char **names;
        int r = 0;

        snprintf(sub, sizeof(sub), "%s/", arcname);
        get_header(g, st, sub);
        if ((r = get_write_header(g, arcname)) < 0)
                return r;
        g->st->entries++;
        if (parent_dev && st->st_dev != parent_dev)
                return 0; /* a mount point: archived, not entered */
        /* Sorted: two archives of one tree are the same stream. Out of memory ends the get; an
         * unreadable directory is archived empty. */
        names = dir_names_sorted(fd, &n);
        if (!names && errno == ENOMEM)
                return -ENOMEM;
        for (size_t i = 0; names && i < n; i++) {
                int k = snprintf(sub, sizeof(sub), "%s/%s", arcname, names[i]);
                if (r == 0 && k > 0 && (size_t) k < PATH_MAX)
                        r = get_entry(g, fd, names[i], -1, sub, st->st_dev);
                else if (r == 0)
                        g->st->skipped++; /* deeper than PATH_MAX */
                free(names[i]);
        }
        free(names);
        return r;
}

static int get_regular(Get *g, int dir_fd, const char *name, int data_fd, const struct stat *st, const char *arcname) {
        const char *first = st->st_nlink > 1 ? seen_lookup(g, st) : NULL;
        struct stat now;
        int fd = data_fd, r;

        get_header(g, st, arcname);
        if (first) {
                archive_entry_set_size(g->e, 0);
                archive_entry_copy_hardlink(g->e, first);
                if ((r = get_write_header(g, arcname)) < 0)
                        return r;
                g->st->entries++;
                return 0;
        }
        /* Reopened by name beneath the same parent, and checked to be the inode whose O_PATH
         * handle said "regular": one swapped in between is skipped, never read. */
        if (fd < 0)
                fd = open_beneath(dir_fd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        if (fd < 0 || fstat(fd, &now) < 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino) {
                if (fd != data_fd)
                        safe_close(fd);
                g->st->skipped++;
                return 0;
        }
        if (get_sparse_map(g, fd, (uint64_t) st->st_size) == -E2BIG) {
                if (fd != data_fd)
                        safe_close(fd);
                g->st->skipped++;
                return 0;
        }
        if ((r = get_write_header(g, arcname)) == 0 && (r = get_data(g, fd, st, arcname)) == 0) {
                g->st->entries++;
                if (st->st_nlink > 1)
                        seen_add(g, st, arcname);
        }
        if (fd != data_fd)
                safe_close(fd);
        return r;
}

static int get_symlink(Get *g, int h, const struct stat *st, const char *arcname) {
        char target[PATH_MAX];
        ssize_t n = readlinkat(h, "", target, sizeof(target) - 1);
        int r;

        if (n < 0) {
                g->st->skipped++;
                return 0;
        }
        target[n] = '\0';
        get_header(g, st, arcname);
        archive_entry_copy_symlink(g->e, target);
        if ((r = get_write_header(g, arcname)) == 0)
                g->st->entries++;
        return r;
}

/* One entry: an O_PATH handle first (never following it), its type from that handle. */
static int get_entry(Get *g, int dir_fd, const char *name, int data_fd, const char *arcname, dev_t parent_dev) {
        int h = name[0] ? open_beneath(dir_fd, name, O_PATH) : fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        struct stat st;
        int r = 0;

        if (h < 0 || fstat(h, &st) < 0) {
                safe_close(h);
                g->st->skipped++; /* vanished, or swapped for what the walk may not enter */
                return 0;
        }
        if (S_ISDIR(st.st_mode))
                r = get_dir(g, h, &st, arcname, parent_dev);
        else if (S_ISREG(st.st_mode))
                r = get_regular(g, dir_fd, name, data_fd, &st, arcname);
        else if (S_ISLNK(st.st_mode))
                r = get_symlink(g, h, &st, arcname);
        else if (S_ISFIFO(st.st_mode)) { /* an entry, never opened */
                const char *first = st.st_nlink > 1 ? seen_lookup(g, &st) : NULL;
                get_header(g, &st, arcname);
                if (first)
                        archive_entry_copy_hardlink(g->e, first);
                if ((r = get_write_header(g, arcname)) == 0) {
                        g->st->entries++;
                        if (!first && st.st_nlink > 1)
                                seen_add(g, &st, arcname);
                }
        } else
                g->st->skipped++; /* sockets and devices */
        safe_close(h);
        return r;
}

int tar_get(int dir_fd, const char *name, int data_fd, const char *arcname, TarWriteFn w, void *userdata, TarStats *st,
            TarFail *f) {
        Get g = { .w = w, .userdata = userdata, .st = st, .f = f };
        int r;

        *st = (TarStats) {};
        *f = (TarFail) {};
        g.buf = malloc(TAR_BUF);
        g.a = archive_write_new();
        g.e = archive_entry_new();
        if (!g.buf || !g.a || !g.e) {
                r = tar_fail(f, ENOMEM, TAR_REASON_NONE, NULL);
                goto out;
        }
        /* ustar where it can say it, pax where it cannot (long or non-ASCII names); no filter. */
        if (archive_write_set_format_pax_restricted(g.a) != ARCHIVE_OK || archive_write_add_filter_none(g.a) != ARCHIVE_OK ||
            archive_write_open2(g.a, &g, NULL, get_write_cb, get_close_cb, NULL) != ARCHIVE_OK) {
                r = tar_fail(f, EIO, TAR_REASON_NONE, archive_error_string(g.a));
                goto out;
        }
        r = get_entry(&g, dir_fd, name, data_fd, arcname, 0);
        if (archive_write_close(g.a) != ARCHIVE_OK && r == 0)
                r = tar_fail(f, g.werr ? g.werr : EIO, TAR_REASON_NONE, NULL);
out:
        if (g.a)
                archive_write_free(g.a);
        archive_entry_free(g.e);
        for (size_t i = 0; i < g.n_seen; i++)
                free(g.seen[i].name);
        free(g.seen);
        free(g.buf);
        return r;
}
