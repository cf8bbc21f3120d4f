/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Small helpers shared by every part of sandboxd: cleanup attributes and ownership transfer. */
#pragma once

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _noreturn_ __attribute__((noreturn))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

#define TAKE_PTR(p)                      \
        ({                               \
                __typeof__(p) _p_ = (p); \
                (p) = NULL;              \
                _p_;                     \
        })

#define TAKE_FD(fd)                \
        ({                         \
                int _fd_ = (fd);   \
                (fd) = -EBADF;     \
                _fd_;              \
        })

static inline void freep(void *p) {
        free(*(void **) p);
}

static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                close(fd);
                errno = saved;
        }
        return -EBADF;
}

static inline void closep(int *fd) {
        safe_close(*fd);
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)

/* Negative errno from the last failing libc call, never 0. */
static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}
