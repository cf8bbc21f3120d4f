/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "disk-usage.h"
#include "macro.h"
#include "util.h"

#define STATX_WANT (STATX_TYPE | STATX_NLINK | STATX_INO | STATX_SIZE | STATX_BLOCKS | STATX_MNT_ID)

/* ---- The set of (dev, ino) of multiply-linked inodes: open addressing, grows to a cap -------- */

typedef struct InodeKey {
        uint64_t dev, ino;
} InodeKey;

typedef struct InodeSet {
        InodeKey *keys; /* ino 0 marks a free slot (no real inode has number 0 here) */
        size_t cap, n;
} InodeSet;

static size_t inode_hash(uint64_t dev, uint64_t ino) {
        uint64_t h = ino * UINT64_C(0x9e3779b97f4a7c15) ^ dev * UINT64_C(0xc2b2ae3d27d4eb4f);
        return (size_t) (h ^ (h >> 29));
}

static bool inode_set_lookup(const InodeSet *s, uint64_t dev, uint64_t ino, size_t *ret_slot) {
        size_t i = inode_hash(dev, ino) & (s->cap - 1);
        while (s->keys[i].ino != 0) {
                if (s->keys[i].ino == ino && s->keys[i].dev == dev)
                        return true;
                i = (i + 1) & (s->cap - 1);
        }
        *ret_slot = i;
        return false;
}

static int inode_set_grow(InodeSet *s) {
        size_t cap = s->cap ? s->cap * 2 : 1024, slot;
        InodeSet n = { .keys = calloc(cap, sizeof(InodeKey)), .cap = cap };
        if (!n.keys)
                return -ENOMEM;
        for (size_t i = 0; i < s->cap; i++)
                if (s->keys[i].ino != 0) {
                        (void) inode_set_lookup(&n, s->keys[i].dev, s->keys[i].ino, &slot);
                        n.keys[slot] = s->keys[i];
                        n.n++;
                }
        free(s->keys);
        *s = n;
        return 0;
}

/* 1 when the inode was seen before, 0 when it is new (and now remembered), -ENOSPC when the set
 * is full (the caller counts it, and says the figure may count some links twice). */
static int inode_set_add(InodeSet *s, uint64_t dev, uint64_t ino) {
        size_t slot;
        if (ino == 0)
                return 0;
        if (s->cap && inode_set_lookup(s, dev, ino, &slot))
                return 1;
        if (s->n >= DISK_USAGE_MAX_LINKED)
                return -ENOSPC;
        if ((s->n + 1) * 2 > s->cap) {
                if (inode_set_grow(s) < 0)
                        return -ENOSPC;
        }
        (void) inode_set_lookup(s, dev, ino, &slot);
        s->keys[slot] = (InodeKey) { dev, ino };
        s->n++;
        return 0;
}

/* ---- The walk --------------------------------------------------------------------------- */

/* One directory on the way down: who it is, and its subdirectories still to visit, packed as
 * (ino, name\0) records. Only the current directory and the top are open. */
typedef struct Level {
        uint64_t dev, ino;
        char *subdirs;
        size_t len, off, alloc;
        struct Level *up;
        char name[]; /* in up */
} Level;

typedef struct Walk {
        DiskUsage *u;
        InodeSet links;
        uint64_t dev, mnt_id; /* of the top: nothing elsewhere is entered or counted */
        int top_fd;
        Level *top, *cur;
        int cur_fd;
        uint64_t deadline_usec; /* CLOCK_MONOTONIC, 0: none */
        unsigned until_check;   /* entries before the clock is read again */
        unsigned delay_usec;    /* SANDBOXD_TEST_SWEEP_DELAY_US: a slow disk, for tests */
} Walk;

/* Past the deadline? The clock is read every 256 entries. */
static bool walk_expired(Walk *w) {
        if (w->delay_usec)
                (void) usleep(w->delay_usec);
        if (!w->deadline_usec || (w->until_check-- > 0 && !w->delay_usec))
                return false;
        w->until_check = 256;
        if (now_usec(CLOCK_MONOTONIC) < w->deadline_usec)
                return false;
        w->u->cut_short = true;
        return true;
}

static Level *level_new(const char *name, uint64_t dev, uint64_t ino, Level *up) {
        Level *l = calloc(1, sizeof(*l) + strlen(name) + 1);
        if (!l)
                return NULL;
        strcpy(l->name, name);
        l->dev = dev;
        l->ino = ino;
        l->up = up;
        return l;
}

static Level *level_free(Level *l) {
        Level *up = l->up;
        free(l->subdirs);
        free(l);
        return up;
}

/* Each queued subdirectory: its device (a btrfs subvolume has one of its own), inode, name. */
static int level_push_subdir(Level *l, uint64_t dev, uint64_t ino, const char *name) {
        size_t need = sizeof(dev) + sizeof(ino) + strlen(name) + 1;
        if (l->len + need > l->alloc) {
                size_t a = l->alloc ? l->alloc * 2 : 256;
                char *p;
                while (a < l->len + need)
                        a *= 2;
                p = realloc(l->subdirs, a);
                if (!p)
                        return -ENOMEM;
                l->subdirs = p;
                l->alloc = a;
        }
        memcpy(l->subdirs + l->len, &dev, sizeof(dev));
        memcpy(l->subdirs + l->len + sizeof(dev), &ino, sizeof(ino));
        strcpy(l->subdirs + l->len + sizeof(dev) + sizeof(ino), name);
        l->len += need;
        return 0;
}

/* By mount id where the kernel has them: a btrfs subvolume below the top (a sandbox's workspace
 * on btrfs storage) has a device number of its own but is the same mount, and counted. */
static bool same_mount(const Walk *w, const struct statx *sx) {
        uint64_t dev = makedev(sx->stx_dev_major, sx->stx_dev_minor);
        if ((sx->stx_mask & STATX_MNT_ID) && w->mnt_id)
                return sx->stx_mnt_id == w->mnt_id;
        return dev == w->dev;
}

static void account(Walk *w, const struct statx *sx) {
        uint64_t dev = makedev(sx->stx_dev_major, sx->stx_dev_minor);
        /* Directories cannot be hard-linked; their link count is about subdirectories. */
        if (!S_ISDIR(sx->stx_mode) && sx->stx_nlink > 1) {
                int r = inode_set_add(&w->links, dev, sx->stx_ino);
                if (r > 0)
                        return;
                if (r < 0)
                        w->u->links_truncated = true;
        }
        w->u->files++;
        w->u->bytes += sx->stx_blocks * 512;
        w->u->apparent_bytes += sx->stx_size;
}

/* Counts every entry of the directory open at fd (a stat, never an open) and queues its
 * subdirectories in l. */
static int read_level(Walk *w, int fd, Level *l) {
        int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d;
        struct dirent *de;
        int r = 0;

        if (dfd < 0 || !(d = fdopendir(dfd))) {
                safe_close(dfd);
                w->u->skipped++;
                return 0;
        }
        while ((de = readdir(d))) {
                struct statx sx;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (walk_expired(w)) {
                        r = -ETIME;
                        break;
                }
                if (statx(fd, de->d_name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_WANT, &sx) < 0) {
                        w->u->skipped++; /* vanished since readdir */
                        continue;
                }
                if (!same_mount(w, &sx)) {
                        w->u->skipped++; /* a mount point: neither counted nor entered, as du -x */
                        continue;
                }
                account(w, &sx);
                if (S_ISDIR(sx.stx_mode) && (r = level_push_subdir(l, makedev(sx.stx_dev_major, sx.stx_dev_minor), sx.stx_ino, de->d_name)) < 0)
                        break;
        }
        closedir(d);
        return r;
}

static bool fd_is(int fd, uint64_t dev, uint64_t ino) {
        struct stat st;
        return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && (uint64_t) st.st_dev == dev && (uint64_t) st.st_ino == ino;
}

/* Opens a subdirectory by name beneath fd, and only if it is still the one readdir saw. */
static int open_subdir(int fd, const char *name, uint64_t dev, uint64_t ino) {
        int c = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (c < 0)
                return -errno;
        if (!fd_is(c, dev, ino)) {
                close(c);
                return -ESTALE;
        }
        return c;
}

/* The parent of cur, to go on with its remaining subdirectories. ".." is cheap; when the tree
 * was rearranged under us (the directory moved), it leads elsewhere, and the way down is walked
 * again from the top, checking each step. Levels that cannot be found again are given up. */
static int reopen_parent(Walk *w) {
        Level *p = w->cur->up;
        _cleanup_free_ Level **path = NULL;
        size_t n = 0, depth = 0;
        int fd = openat(w->cur_fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd >= 0 && fd_is(fd, p->dev, p->ino))
                return fd;
        safe_close(fd);
        for (Level *l = p; l != w->top; l = l->up)
                depth++;
        path = malloc((depth + 1) * sizeof(*path));
        if (!path)
                return -ENOMEM;
        for (Level *l = p; l != w->top; l = l->up)
                path[n++] = l;
        fd = dup(w->top_fd);
        if (fd < 0)
                return -errno;
        while (n > 0) {
                int k = open_subdir(fd, path[n - 1]->name, path[n - 1]->dev, path[n - 1]->ino);
                close(fd);
                if (k < 0)
                        return -ESTALE;
                fd = k;
                n--;
        }
        return fd;
}

static void walk_free(Walk *w) {
        while (w->cur)
                w->cur = level_free(w->cur);
        safe_close(w->cur_fd);
        safe_close(w->top_fd);
        free(w->links.keys);
}

static int walk_descend(Walk *w, uint64_t dev, uint64_t ino, const char *name) {
        Level *l;
        int fd = open_subdir(w->cur_fd, name, dev, ino);
        if (fd < 0) {
                w->u->skipped++;
                return 0;
        }
        l = level_new(name, dev, ino, w->cur);
        if (!l) {
                close(fd);
                return -ENOMEM;
        }
        close(w->cur_fd);
        w->cur_fd = fd;
        w->cur = l;
        return read_level(w, fd, l);
}

/* Goes back up one level; when the parent cannot be found again, up to the top, dropping the
 * levels in between (their remaining subdirectories count as skipped). */
static int walk_ascend(Walk *w) {
        int fd = reopen_parent(w);
        if (fd == -ESTALE) {
                w->u->skipped++;
                while (w->cur != w->top)
                        w->cur = level_free(w->cur);
                close(w->cur_fd);
                w->cur_fd = dup(w->top_fd);
                return w->cur_fd < 0 ? -errno : 0;
        }
        if (fd < 0)
                return fd;
        close(w->cur_fd);
        w->cur_fd = fd;
        w->cur = level_free(w->cur);
        return 0;
}

static int walk_run(Walk *w) {
        int r = read_level(w, w->cur_fd, w->cur);
        while (r >= 0) {
                Level *l = w->cur;
                if (l->off < l->len) {
                        uint64_t dev, ino;
                        const char *name = l->subdirs + l->off + sizeof(dev) + sizeof(ino);
                        memcpy(&dev, l->subdirs + l->off, sizeof(dev));
                        memcpy(&ino, l->subdirs + l->off + sizeof(dev), sizeof(ino));
                        l->off += sizeof(dev) + sizeof(ino) + strlen(name) + 1;
                        r = walk_descend(w, dev, ino, name);
                } else if (l == w->top)
                        break;
                else
                        r = walk_ascend(w);
        }
        return r;
}

int disk_usage_at(int dir_fd, const char *name, uint64_t deadline_usec, DiskUsage *ret) {
        const char *delay = getenv("SANDBOXD_TEST_SWEEP_DELAY_US");
        Walk w = { .u = ret, .top_fd = -EBADF, .cur_fd = -EBADF, .deadline_usec = deadline_usec,
                   .delay_usec = delay ? (unsigned) strtoul(delay, NULL, 10) : 0 };
        struct statx sx;
        int r;

        *ret = (DiskUsage) {};
        if (statx(dir_fd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_WANT, &sx) < 0)
                return -errno;
        w.dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
        w.mnt_id = sx.stx_mask & STATX_MNT_ID ? sx.stx_mnt_id : 0;
        account(&w, &sx);
        if (!S_ISDIR(sx.stx_mode))
                return 0;
        w.top_fd = open_subdir(dir_fd, name, w.dev, sx.stx_ino);
        if (w.top_fd < 0) {
                r = w.top_fd;
                *ret = (DiskUsage) {};
                return r == -ESTALE ? -ENOENT : r;
        }
        w.cur_fd = dup(w.top_fd);
        w.top = w.cur = level_new("", w.dev, sx.stx_ino, NULL);
        if (w.cur_fd < 0 || !w.top) {
                walk_free(&w);
                return -ENOMEM;
        }
        r = walk_run(&w);
        walk_free(&w);
        return r < 0 && r != -ETIME ? r : 0;
}
