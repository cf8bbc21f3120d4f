/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "btrfs.h"
#include "macro.h"
#include "mount-compat.h"
#include "rm-rf.h"

/* At most this many directories of one descent are open at once. A subtree found deeper is
 * renamed up into the top directory and removed by a later pass, so any depth costs bounded fds
 * and memory (a directory stream holds a 32 KiB buffer). */
#define RM_RF_MAX_OPEN 64

/* One open directory of the descent. */
typedef struct Level {
        DIR *dir;
        dev_t dev; /* a btrfs subvolume below the top has a device number of its own */
        struct Level *up;
        unsigned depth;
        char name[]; /* in up */
} Level;

/* From /proc/self/fdinfo: the run helper's C library (musl) may have no statx(). 0: unknown. */
static unsigned long mount_id_of(int fd) {
        char path[64], buf[256];
        unsigned long id = 0;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
        f = fopen(path, "re");
        if (!f)
                return 0;
        while (fgets(buf, sizeof(buf), f))
                if (sscanf(buf, "mnt_id: %lu", &id) == 1)
                        break;
        fclose(f);
        return id;
}

/* A btrfs subvolume's top directory in the same mount as its parent (a subvolume's st_dev is
 * its own): not another mount, so the walk may go on into it. */
static bool is_subvol_below(int parent, int fd) {
        unsigned long a = mount_id_of(parent);
        return a && a == mount_id_of(fd) && btrfs_is_subvol(fd);
}

static int open_level(int parent, const char *name, dev_t dev, Level *up, Level **ret) {
        struct stat st;
        Level *l;
        int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        /* Never cross into another mount. */
        if (fstat(fd, &st) < 0 || (st.st_dev != dev && !is_subvol_below(parent, fd))) {
                close(fd);
                return -EXDEV;
        }
        l = calloc(1, sizeof(*l) + strlen(name) + 1);
        if (!l || !(l->dir = fdopendir(fd))) {
                free(l);
                close(fd);
                return -ENOMEM;
        }
        strcpy(l->name, name);
        l->dev = st.st_dev;
        l->up = up;
        l->depth = up ? up->depth + 1 : 0;
        *ret = l;
        return 0;
}

/* Closes the finished level and removes it from its parent. */
static Level *finish_level(Level *l, int top_parent, int *r) {
        Level *up = l->up;
        int parent = up ? dirfd(up->dir) : top_parent;
        closedir(l->dir);
        if (unlinkat(parent, l->name, AT_REMOVEDIR) < 0 && errno != ENOENT && *r == 0)
                *r = -errno;
        free(l);
        return up;
}

static bool is_dir_entry(DIR *d, struct dirent *de) {
        struct stat st;
        if (de->d_type != DT_UNKNOWN)
                return de->d_type == DT_DIR;
        return fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* Moves a too-deep subtree up into the top directory under a fresh name. */
static int hoist(Level *at, const char *name, Level *top, unsigned *serial) {
        char to[64];
        for (;;) {
                snprintf(to, sizeof(to), ".rm-rf-deep-%u", (*serial)++);
                if (renameat2(dirfd(at->dir), name, dirfd(top->dir), to, RENAME_NOREPLACE) == 0)
                        return 0;
                if (errno != EEXIST)
                        return -errno;
        }
}

/* A btrfs subvolume (a sandbox's workspace, a snapshot of it) goes in one call, read-only
 * snapshots included, whatever it holds; false where it is none or the call is refused (a
 * subvolume nested in it: then its content is walked, as any directory's). */
static bool subvol_delete(int parent, const char *name, dev_t parent_dev) {
        struct stat st;
        _cleanup_close_ int fd = -EBADF;

        if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) || st.st_dev == parent_dev)
                return false;
        fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || !is_subvol_below(parent, fd))
                return false;
        return btrfs_subvol_delete(parent, name) == 0;
}

/* One walk over the tree; *hoisted counts the subtrees moved up for another pass. */
static int rm_rf_pass(int dir_fd, const char *name, dev_t dev, unsigned *serial, unsigned *hoisted) {
        Level *cur = NULL, *top;
        int r = open_level(dir_fd, name, dev, NULL, &cur);

        if (r < 0)
                return r;
        top = cur;
        while (cur) {
                struct dirent *de = readdir(cur->dir);
                Level *l;
                if (!de) {
                        cur = finish_level(cur, dir_fd, &r);
                        continue;
                }
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (!is_dir_entry(cur->dir, de)) {
                        if (unlinkat(dirfd(cur->dir), de->d_name, 0) < 0 && errno != ENOENT && r == 0)
                                r = -errno;
                        continue;
                }
                if (unlinkat(dirfd(cur->dir), de->d_name, AT_REMOVEDIR) == 0 ||
                    subvol_delete(dirfd(cur->dir), de->d_name, cur->dev))
                        continue;
                if (cur->depth + 1 >= RM_RF_MAX_OPEN) {
                        if (hoist(cur, de->d_name, top, serial) == 0)
                                (*hoisted)++;
                        continue;
                }
                int k = open_level(dirfd(cur->dir), de->d_name, cur->dev, cur, &l);
                if (k < 0) {
                        if (r == 0)
                                r = k;
                        continue;
                }
                cur = l;
        }
        return r;
}

int rm_rf_at(int dir_fd, const char *name) {
        unsigned serial = 0;
        struct stat st;

        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode))
                return unlinkat(dir_fd, name, 0) < 0 ? -errno : 0;
        if (btrfs_is_fs(dir_fd)) {
                struct stat parent;
                if (fstat(dir_fd, &parent) == 0 && subvol_delete(dir_fd, name, parent.st_dev))
                        return 0;
        }
        for (;;) {
                unsigned hoisted = 0;
                int r = rm_rf_pass(dir_fd, name, st.st_dev, &serial, &hoisted);
                /* Subtrees hoisted after the top's listing went past them keep it non-empty. */
                if (hoisted == 0 || r == -ENOENT)
                        return r;
        }
}
