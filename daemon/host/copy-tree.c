/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "copy-tree.h"
#include "macro.h"
#include "util.h"

#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif

/* One directory of the descent: its remaining names are read up front, so that its fds can be
 * closed while deeper levels are worked on and reopened later without losing the position. */
typedef struct Level {
        int src, dst;      /* -EBADF while closed */
        char *name;        /* in the parent (NULL for the root) */
        struct stat st;    /* the source directory: identity for reopening, attributes to copy */
        char **names;
        size_t n_names, next;
} Level;

/* Inodes with more than one link already copied: where their first copy lives in dst. */
typedef struct LinkEntry {
        bool used;
        dev_t dev;
        ino_t ino;
        char *path; /* relative to the destination root; NULL: too long to link to */
} LinkEntry;

typedef struct Copier {
        const CopyOptions *o;
        CopyStats st;
        Level **stack;
        size_t depth, alloc;
        LinkEntry *links;
        size_t n_links, links_alloc;
        uint64_t root_mnt_id;
        uint64_t last_progress;
        bool no_openat2;
} Copier;

/* ---- Resolving one component ------------------------------------------------------------- */

static int mnt_id_of(int fd, uint64_t *ret) {
        struct statx sx;
        if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &sx) < 0)
                return -errno;
        if (!(sx.stx_mask & STATX_MNT_ID))
                return -EOPNOTSUPP;
        *ret = sx.stx_mnt_id;
        return 0;
}

/* The fallback: O_NOFOLLOW on the one component, then refuse what lies on another mount. */
static int open_entry_fallback(Copier *c, int dirfd, const char *name) {
        _cleanup_close_ int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        uint64_t mnt;
        int r;

        if (fd < 0)
                return -errno;
        r = mnt_id_of(fd, &mnt);
        if (r < 0)
                return r;
        if (mnt != c->root_mnt_id)
                return -EXDEV;
        return TAKE_FD(fd);
}

/* An O_PATH fd of dirfd/name itself (a symlink is not followed). */
static int open_entry(Copier *c, int dirfd, const char *name) {
        struct open_how how = {
                .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        int fd;

        if (strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                return -EINVAL;
        if (c->no_openat2)
                return open_entry_fallback(c, dirfd, name);
        fd = (int) syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
        if (fd >= 0)
                return fd;
        if (errno == ENOSYS) {
                c->no_openat2 = true;
                return open_entry_fallback(c, dirfd, name);
        }
        return -errno;
}

/* A readable fd of the very inode an O_PATH fd holds: no path is resolved again. */
static int reopen_fd(int path_fd, int flags) {
        char p[64];
        int fd;
        snprintf(p, sizeof(p), "/proc/self/fd/%d", path_fd);
        fd = open(p, flags | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
        if (fd < 0 && errno == ELOOP)
                /* O_NOFOLLOW refuses the magic link itself on some kernels; it still names the
                 * inode the fd holds, not a path anyone can change. */
                fd = open(p, flags | O_CLOEXEC | O_NOCTTY);
        return fd < 0 ? -errno : fd;
}

/* ---- Owners, modes, times ---------------------------------------------------------------- */

static uid_t map_id(const CopyOptions *o, uid_t id) {
        if (!o->shift_ids)
                return id;
        if (id >= o->id_from && (uint64_t) (id - o->id_from) < o->id_count)
                return (uid_t) (o->id_to + (id - o->id_from));
        return o->id_to;
}

static void times_of(const struct stat *st, struct timespec ts[2]) {
        ts[0] = st->st_atim;
        ts[1] = st->st_mtim;
}

/* Owner first: chown clears setuid/setgid, and the mode written after it must be the last word. */
static int apply_fd_attrs(const CopyOptions *o, int fd, const struct stat *st, mode_t mode) {
        struct timespec ts[2];
        times_of(st, ts);
        if (fchown(fd, map_id(o, st->st_uid), map_id(o, st->st_gid)) < 0 || fchmod(fd, mode) < 0 ||
            futimens(fd, ts) < 0)
                return -errno;
        return 0;
}

static int apply_at_attrs(const CopyOptions *o, int dirfd, const char *name, const struct stat *st, bool chmod_too) {
        struct timespec ts[2];
        times_of(st, ts);
        if (fchownat(dirfd, name, map_id(o, st->st_uid), map_id(o, st->st_gid), AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        /* The destination is ours alone, so fchmodat may follow: it only ever meets a FIFO. */
        if (chmod_too && fchmodat(dirfd, name, st->st_mode & 07777 & ~(mode_t) (S_ISUID | S_ISGID), 0) < 0)
                return -errno;
        if (utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        return 0;
}

/* ---- File data --------------------------------------------------------------------------- */

static int copy_range_rw(int in, int out, off_t off, off_t end) {
        char buf[65536];
        while (off < end) {
                size_t want = (size_t) (end - off) < sizeof(buf) ? (size_t) (end - off) : sizeof(buf);
                ssize_t n = pread(in, buf, want, off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                for (ssize_t w = 0; w < n;) {
                        ssize_t k = pwrite(out, buf + w, (size_t) (n - w), off + w);
                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k < 0)
                                return -errno;
                        w += k;
                }
                off += n;
        }
        return 0;
}

static int copy_range(int in, int out, off_t off, off_t end) {
        while (off < end) {
                loff_t a = off, b = off;
                ssize_t n = copy_file_range(in, &a, out, &b, (size_t) (end - off), 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP || errno == ENOSYS))
                        return copy_range_rw(in, out, off, end);
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break; /* shrunk meanwhile */
                off += n;
        }
        return 0;
}

/* The first size bytes, segment by data segment so that holes stay holes. */
static int copy_data(int in, int out, off_t size) {
        off_t off = 0;
        int r;

        /* The clone has the source's size now; only a file that changed since it was stat'ed
         * needs cutting back (a truncate is one more transaction per file on XFS). */
        if (size > 0 && ioctl(out, FICLONE, in) == 0) {
                struct stat st;
                if (fstat(out, &st) == 0 && st.st_size == size)
                        return 0;
                return ftruncate(out, size) < 0 ? -errno : 0;
        }
        while (off < size) {
                off_t data = lseek(in, off, SEEK_DATA), hole;
                if (data < 0 && errno == ENXIO)
                        break;
                if (data < 0) /* no SEEK_DATA here: copy it all */
                        data = off, hole = size;
                else {
                        hole = lseek(in, data, SEEK_HOLE);
                        if (hole < 0 || hole > size)
                                hole = size;
                }
                if (data >= size)
                        break;
                r = copy_range(in, out, data, hole);
                if (r < 0)
                        return r;
                off = hole;
        }
        return ftruncate(out, size) < 0 ? -errno : 0;
}

/* ---- Hard links -------------------------------------------------------------------------- */

static LinkEntry *link_find(Copier *c, dev_t dev, ino_t ino) {
        if (c->links_alloc == 0)
                return NULL;
        for (size_t i = (size_t) (ino ^ dev) % c->links_alloc;; i = (i + 1) % c->links_alloc) {
                LinkEntry *e = &c->links[i];
                if (!e->used || (e->ino == ino && e->dev == dev))
                        return e;
        }
}

static int link_grow(Copier *c) {
        size_t n = c->links_alloc ? c->links_alloc * 2 : 256;
        LinkEntry *old = c->links, *nl = calloc(n, sizeof(*nl));
        size_t old_n = c->links_alloc;

        if (!nl)
                return -ENOMEM;
        c->links = nl;
        c->links_alloc = n;
        for (size_t i = 0; i < old_n; i++)
                if (old[i].used) {
                        LinkEntry *e = link_find(c, old[i].dev, old[i].ino);
                        if (e)
                                *e = old[i];
                }
        free(old);
        return 0;
}

/* The destination path of the entry name in the current directory, relative to the root. */
static char *dst_path(Copier *c, const char *name) {
        size_t len = strlen(name) + 1;
        char *p, *w;

        for (size_t i = 1; i < c->depth; i++)
                len += strlen(c->stack[i]->name) + 1;
        if (len >= PATH_MAX)
                return NULL;
        p = w = malloc(len);
        if (!p)
                return NULL;
        for (size_t i = 1; i < c->depth; i++)
                w = stpcpy(stpcpy(w, c->stack[i]->name), "/");
        strcpy(w, name);
        return p;
}

static int link_remember(Copier *c, const struct stat *st, const char *name) {
        LinkEntry *e;
        int r;

        if ((c->n_links + 1) * 2 > c->links_alloc && (r = link_grow(c)) < 0)
                return r;
        e = link_find(c, st->st_dev, st->st_ino);
        if (!e)
                return -ENOMEM;
        if (e->used) { /* its first name was too deep to link to: perhaps this one is not */
                free(e->path);
                e->path = dst_path(c, name);
                return 0;
        }
        *e = (LinkEntry) { .used = true, .dev = st->st_dev, .ino = st->st_ino, .path = dst_path(c, name) };
        c->n_links++;
        return 0;
}

/* 1 when name was made as a link to an inode copied before, 0 when it must be copied. */
static int link_existing(Copier *c, int dst, const struct stat *st, const char *name) {
        LinkEntry *e;
        if (st->st_nlink < 2 || S_ISDIR(st->st_mode))
                return 0;
        e = link_find(c, st->st_dev, st->st_ino);
        if (!e || !e->used || !e->path)
                return 0;
        if (linkat(c->stack[0]->dst, e->path, dst, name, 0) < 0)
                return errno == EMLINK ? 0 : -errno;
        c->st.links++;
        return 1;
}

/* ---- Entries ----------------------------------------------------------------------------- */

static int copy_regular(Copier *c, int path_fd, const struct stat *st, int dst, const char *name) {
        _cleanup_close_ int in = reopen_fd(path_fd, O_RDONLY | O_NONBLOCK);
        _cleanup_close_ int out = -EBADF;
        struct stat now;
        int r;

        if (in < 0)
                return in;
        /* The inode is the one stat'ed (an O_PATH fd pins it); it cannot have become a FIFO. */
        if (fstat(in, &now) < 0 || !S_ISREG(now.st_mode) || now.st_ino != st->st_ino)
                return -ESTALE;
        out = openat(dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return -errno;
        r = copy_data(in, out, st->st_size);
        if (r < 0)
                return r;
        c->st.bytes += (uint64_t) st->st_size;
        return apply_fd_attrs(c->o, out, st, st->st_mode & 07777 & ~(mode_t) (S_ISUID | S_ISGID));
}

static int copy_symlink(Copier *c, int path_fd, const struct stat *st, int dst, const char *name) {
        char target[PATH_MAX];
        ssize_t n = readlinkat(path_fd, "", target, sizeof(target) - 1);

        if (n < 0)
                return -errno;
        target[n] = '\0';
        if (symlinkat(target, dst, name) < 0)
                return -errno;
        return apply_at_attrs(c->o, dst, name, st, false);
}

static int copy_fifo(Copier *c, const struct stat *st, int dst, const char *name) {
        if (mkfifoat(dst, name, 0600) < 0)
                return -errno;
        return apply_at_attrs(c->o, dst, name, st, true);
}

static int push_level(Copier *c, int src, int dst, const char *name, const struct stat *st);

/* An overlayfs whiteout: the character device 0:0 (harmless: no driver answers it), which
 * overlayfs itself made in an upper layer for a name removed from the lower. */
static bool is_whiteout(const CopyOptions *o, const struct stat *st) {
        return o->overlay_upper && S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

static int copy_whiteout(Copier *c, const struct stat *st, int dst, const char *name) {
        if (mknodat(dst, name, S_IFCHR | 0600, makedev(0, 0)) < 0)
                return -errno;
        return apply_at_attrs(c->o, dst, name, st, true);
}

/* An upper layer's directory that hides the lower one's entries (made again after a removal),
 * or that is a lower directory renamed (redirect_dir), says so in these xattrs, which only host
 * root may set (overlayfs, mounted by host root, does); nothing else of the xattrs is copied. */
static int copy_overlay_xattrs(const CopyOptions *o, int path_fd, int dst_fd) {
        static const char *const names[] = { "trusted.overlay.opaque", "trusted.overlay.redirect" };
        char path[32], v[PATH_MAX];

        if (!o->overlay_upper)
                return 0;
        snprintf(path, sizeof(path), "/proc/self/fd/%d", path_fd);
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                ssize_t n = getxattr(path, names[i], v, sizeof(v));
                if (n < 0 && (errno == ENODATA || errno == EOPNOTSUPP || errno == ERANGE))
                        continue;
                if (n < 0 || fsetxattr(dst_fd, names[i], v, (size_t) n, 0) < 0)
                        return -errno;
        }
        return 0;
}

static int copy_dir(Copier *c, int path_fd, const struct stat *st, int dst, const char *name) {
        _cleanup_close_ int src = openat(path_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int d = -EBADF;
        int r;

        if (src < 0)
                return -errno;
        if (mkdirat(dst, name, 0700) < 0)
                return -errno;
        d = openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (d < 0)
                return -errno;
        r = copy_overlay_xattrs(c->o, path_fd, d);
        if (r < 0)
                return r;
        c->st.dirs++;
        return push_level(c, TAKE_FD(src), TAKE_FD(d), name, st);
}

static int copy_entry(Copier *c, Level *l, const char *name) {
        _cleanup_close_ int fd = open_entry(c, l->src, name);
        struct stat st;
        int r;

        if (fd == -EXDEV) { /* a mount point: never crossed */
                c->st.skipped++;
                return 0;
        }
        if (fd == -ENOENT) /* gone since readdir */
                return 0;
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (c->o->may_read && (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) && (r = c->o->may_read(fd, &st, c->o->userdata)) < 0)
                return r;
        if (S_ISDIR(st.st_mode))
                return copy_dir(c, fd, &st, l->dst, name);
        if (is_whiteout(c->o, &st)) {
                r = copy_whiteout(c, &st, l->dst, name);
                if (r == 0)
                        c->st.files++;
                return r;
        }
        if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode) && !S_ISFIFO(st.st_mode)) {
                c->st.skipped++; /* socket or device node: never opened, not copied */
                return 0;
        }
        r = link_existing(c, l->dst, &st, name);
        if (r != 0)
                return r < 0 ? r : 0;
        r = S_ISREG(st.st_mode) ? copy_regular(c, fd, &st, l->dst, name)
          : S_ISLNK(st.st_mode) ? copy_symlink(c, fd, &st, l->dst, name)
                                : copy_fifo(c, &st, l->dst, name);
        if (r < 0)
                return r;
        c->st.files++;
        return st.st_nlink > 1 ? link_remember(c, &st, name) : 0;
}

/* ---- The stack ----------------------------------------------------------------------------- */

static int read_names(int src, Level *l) {
        _cleanup_close_ int fd = openat(src, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d;
        struct dirent *de;
        size_t alloc = 0;
        int r = 0;

        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d)
                return -errno;
        TAKE_FD(fd);
        while ((errno = 0, de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (l->n_names == alloc) {
                        char **n = realloc(l->names, (alloc = alloc ? alloc * 2 : 16) * sizeof(char *));
                        if (!n) {
                                r = -ENOMEM;
                                break;
                        }
                        l->names = n;
                }
                if (!(l->names[l->n_names] = strdup(de->d_name))) {
                        r = -ENOMEM;
                        break;
                }
                l->n_names++;
        }
        if (r == 0 && errno != 0)
                r = -errno;
        closedir(d);
        return r;
}

static Level *level_free(Level *l) {
        if (!l)
                return NULL;
        safe_close(l->src);
        safe_close(l->dst);
        for (size_t i = 0; i < l->n_names; i++)
                free(l->names[i]);
        free(l->names);
        free(l->name);
        free(l);
        return NULL;
}

static int stack_reserve(Copier *c) {
        size_t n;
        Level **s;
        if (c->depth < c->alloc)
                return 0;
        n = c->alloc ? c->alloc * 2 : 64;
        s = realloc(c->stack, n * sizeof(*s));
        if (!s)
                return -ENOMEM;
        c->stack = s;
        c->alloc = n;
        return 0;
}

/* Takes src and dst, except for the root (name NULL), whose fds stay the caller's. */
static int push_level(Copier *c, int src, int dst, const char *name, const struct stat *st) {
        Level *l = calloc(1, sizeof(*l));
        int r;

        if (!l) {
                if (name) {
                        safe_close(src);
                        safe_close(dst);
                }
                return -ENOMEM;
        }
        *l = (Level) { .src = src, .dst = dst, .st = *st };
        r = name && !(l->name = strdup(name)) ? -ENOMEM : 0;
        if (r >= 0)
                r = read_names(src, l);
        if (r >= 0)
                r = stack_reserve(c);
        if (r < 0) {
                if (!name)
                        l->src = l->dst = -EBADF;
                level_free(l);
                return r;
        }
        c->stack[c->depth++] = l;
        /* Bound the fds: the directory COPY_TREE_MAX_OPEN levels up is closed until needed. */
        if (c->depth > COPY_TREE_MAX_OPEN + 1) {
                Level *far = c->stack[c->depth - 1 - COPY_TREE_MAX_OPEN];
                far->src = safe_close(far->src);
                far->dst = safe_close(far->dst);
        }
        return 0;
}

/* Reopens stack[i] from its parent (open) by name, and insists on the same directory. */
static int reopen_level(Copier *c, size_t i) {
        Level *l = c->stack[i], *up = c->stack[i - 1];
        _cleanup_close_ int fd = open_entry(c, up->src, l->name);
        struct stat st;

        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode) || st.st_ino != l->st.st_ino || st.st_dev != l->st.st_dev)
                return -ESTALE; /* the tree changed under the copy */
        l->src = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (l->src < 0)
                return -errno;
        l->dst = openat(up->dst, l->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return l->dst < 0 ? -errno : 0;
}

static int ensure_open(Copier *c) {
        size_t j = c->depth - 1;
        int r;
        while (c->stack[j]->src < 0)
                j--; /* the root is never closed */
        for (size_t k = j + 1; k < c->depth; k++)
                if ((r = reopen_level(c, k)) < 0)
                        return r;
        return 0;
}

static int pop_level(Copier *c) {
        Level *l = c->stack[c->depth - 1];
        /* Directories keep setgid (group inheritance) and sticky; setuid on one means nothing. */
        int r = apply_fd_attrs(c->o, l->dst, &l->st, l->st.st_mode & 07777 & ~(mode_t) S_ISUID);
        if (c->depth == 1) /* the root's fds belong to the caller */
                l->src = l->dst = -EBADF;
        level_free(l);
        c->depth--;
        return r;
}

static int maybe_progress(Copier *c) {
        uint64_t now;
        if (!c->o->progress)
                return 0;
        now = now_usec(CLOCK_MONOTONIC);
        if (now - c->last_progress < c->o->progress_usec)
                return 0;
        c->last_progress = now;
        return c->o->progress(&c->st, c->o->userdata);
}

static int copy_walk(Copier *c) {
        int r;
        while (c->depth > 0) {
                Level *l = c->stack[c->depth - 1];
                if (l->src < 0 && (r = ensure_open(c)) < 0)
                        return r;
                if (l->next == l->n_names) {
                        if ((r = pop_level(c)) < 0)
                                return r;
                        continue;
                }
                if ((r = copy_entry(c, l, l->names[l->next++])) < 0 || (r = maybe_progress(c)) < 0)
                        return r;
        }
        return 0;
}

int copy_tree(int src_fd, int dst_fd, const CopyOptions *o, CopyStats *ret_stats) {
        Copier c = { .o = o, .no_openat2 = o->no_openat2, .last_progress = now_usec(CLOCK_MONOTONIC) };
        struct stat st;
        int r;

        if (fstat(src_fd, &st) < 0)
                r = -errno;
        else if (!S_ISDIR(st.st_mode))
                r = -ENOTDIR;
        else if ((r = mnt_id_of(src_fd, &c.root_mnt_id)) >= 0 && (r = push_level(&c, src_fd, dst_fd, NULL, &st)) >= 0)
                r = copy_walk(&c);
        while (c.depth > 0) {
                Level *l = c.stack[--c.depth];
                if (c.depth == 0)
                        l->src = l->dst = -EBADF;
                level_free(l);
        }
        free(c.stack);
        for (size_t i = 0; i < c.links_alloc; i++)
                free(c.links[i].path);
        free(c.links);
        if (ret_stats)
                *ret_stats = c.st;
        return r;
}
