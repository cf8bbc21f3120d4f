/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "open-beneath.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

int openat2_retry(int dir_fd, const char *path, const struct open_how *how) {
        int fd = -1;
        for (int i = 0; i < 64; i++) {
                fd = (int) syscall(SYS_openat2, dir_fd, path, how, sizeof(*how));
                if (fd >= 0 || errno != EAGAIN)
                        break;
        }
        return fd;
}

int open_beneath(int dir_fd, const char *name, int flags) {
        struct open_how how = {
                .flags = (uint64_t) (flags | O_NOFOLLOW | O_CLOEXEC),
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        return openat2_retry(dir_fd, name, &how);
}
