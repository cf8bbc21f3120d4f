/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "rm-rf.h"

/* One open directory of the descent. Depth is bounded by memory, not by the stack. */
typedef struct Level {
        DIR *dir;
        struct Level *up;
        char name[]; /* in up */
} Level;

static int open_level(int parent, const char *name, dev_t dev, Level *up, Level **ret) {
        struct stat st;
        Level *l;
        int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        /* Never cross into another mount. */
        if (fstat(fd, &st) < 0 || st.st_dev != dev) {
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
        l->up = up;
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

int rm_rf_at(int dir_fd, const char *name) {
        struct stat st;
        Level *top = NULL;
        int r;

        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode))
                return unlinkat(dir_fd, name, 0) < 0 ? -errno : 0;
        r = open_level(dir_fd, name, st.st_dev, NULL, &top);
        if (r < 0)
                return r;
        while (top) {
                struct dirent *de = readdir(top->dir);
                Level *l;
                if (!de) {
                        top = finish_level(top, dir_fd, &r);
                        continue;
                }
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (!is_dir_entry(top->dir, de)) {
                        if (unlinkat(dirfd(top->dir), de->d_name, 0) < 0 && errno != ENOENT && r == 0)
                                r = -errno;
                        continue;
                }
                if (unlinkat(dirfd(top->dir), de->d_name, AT_REMOVEDIR) == 0)
                        continue;
                int k = open_level(dirfd(top->dir), de->d_name, st.st_dev, top, &l);
                if (k < 0) {
                        if (r == 0)
                                r = k;
                        continue;
                }
                top = l;
        }
        return r;
}
