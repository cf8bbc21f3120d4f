/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "dev-template.h"
#include "macro.h"

/* The harmless nodes, the same as a host's. */
static const struct {
        const char *name;
        unsigned major, minor;
} nodes[] = {
        { "null", 1, 3 }, { "zero", 1, 5 }, { "full", 1, 7 }, { "random", 1, 8 }, { "urandom", 1, 9 }, { "tty", 5, 0 },
};

/* /dev/shm is the sandbox's /run/shm (a directory of its own tmpfs), as Debian had it once. */
static const char *const links[][2] = {
        { "fd", "/proc/self/fd" },       { "stdin", "/proc/self/fd/0" }, { "stdout", "/proc/self/fd/1" },
        { "stderr", "/proc/self/fd/2" }, { "ptmx", "pts/ptmx" },         { "shm", "/run/shm" },
};

static int make_node(int dir_fd, const char *name, dev_t dev) {
        struct stat st;
        if (mknodat(dir_fd, name, S_IFCHR | 0666, dev) < 0 && errno != EEXIST)
                return -errno;
        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (!S_ISCHR(st.st_mode) || st.st_rdev != dev || st.st_uid != 0)
                return -EEXIST;
        /* mknod obeys the umask. */
        return (st.st_mode & 07777) == 0666 || fchmodat(dir_fd, name, 0666, 0) == 0 ? 0 : -errno;
}

static int make_link(int dir_fd, const char *name, const char *target) {
        char buf[64];
        ssize_t n;
        if (symlinkat(target, dir_fd, name) == 0)
                return 0;
        if (errno != EEXIST)
                return -errno;
        n = readlinkat(dir_fd, name, buf, sizeof(buf) - 1);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        return strcmp(buf, target) == 0 ? 0 : -EEXIST;
}

int dev_template_prepare(const char *state_dir, char **ret) {
        _cleanup_close_ int parent = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int fd = -EBADF;
        struct statvfs sv;
        struct stat st;
        int r;

        if (parent < 0)
                return -errno;
        if (fstatvfs(parent, &sv) < 0)
                return -errno;
        if (sv.f_flag & ST_NODEV)
                return -EPERM;
        if (mkdirat(parent, "dev", 0755) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(parent, "dev", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_uid != 0 || ((st.st_mode & 07777) != 0755 && fchmod(fd, 0755) < 0))
                return -EPERM;
        for (size_t i = 0; i < ELEMENTSOF(nodes); i++)
                if ((r = make_node(fd, nodes[i].name, makedev(nodes[i].major, nodes[i].minor))) < 0)
                        return r;
        for (size_t i = 0; i < ELEMENTSOF(links); i++)
                if ((r = make_link(fd, links[i][0], links[i][1])) < 0)
                        return r;
        if (mkdirat(fd, "pts", 0755) < 0 && errno != EEXIST)
                return -errno;
        if (asprintf(ret, "%s/dev", state_dir) < 0)
                return -ENOMEM;
        return 0;
}
