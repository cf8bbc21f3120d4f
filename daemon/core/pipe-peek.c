/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "pipe-peek.h"

static int scratch[2] = { -EBADF, -EBADF };

int pipe_peek_init(void) {
        if (scratch[0] < 0 && pipe2(scratch, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        return 0;
}

int pipe_peek_byte(int fd, unsigned char *ret) {
        ssize_t n;

        if (pipe_peek_init() < 0)
                return -1;
        n = tee(fd, scratch[1], 1, SPLICE_F_NONBLOCK);
        if (n <= 0)
                return (int) n;
        if (read(scratch[0], ret, 1) == 1)
                return 1;
        /* Cannot happen; a byte left in it would be taken for the next pipe's. */
        close(scratch[0]);
        close(scratch[1]);
        scratch[0] = scratch[1] = -EBADF;
        errno = EIO;
        return -1;
}
