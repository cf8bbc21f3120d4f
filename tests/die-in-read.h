/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* For the unit tests of the reads that announce themselves (test-ring.c, test-run-capture.c): this
 * program's read(2) and splice(2), the code's under test too, so that a child can die just before
 * or just after its read of die_fd, or just after a splice (the kernel has moved the bytes,
 * nothing after it ran), as a daemon SIGKILLed there would. Included once, by the test's file. */
#pragma once

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int die_fd = -1;
static enum { DIE_NEVER, DIE_BEFORE_READ, DIE_AFTER_READ, DIE_AFTER_SPLICE } die_when;

ssize_t read(int fd, void *buf, size_t n) {
        ssize_t k;

        if (fd == die_fd && die_when == DIE_BEFORE_READ)
                _exit(0);
        k = syscall(SYS_read, fd, buf, n);
        if (fd == die_fd && die_when == DIE_AFTER_READ)
                _exit(0);
        return k;
}

ssize_t splice(int in, loff_t *in_off, int out, loff_t *out_off, size_t len, unsigned flags) {
        ssize_t k = syscall(SYS_splice, in, in_off, out, out_off, len, flags);
        if (k > 0 && die_when == DIE_AFTER_SPLICE)
                _exit(0);
        return k;
}

/* The bytes a pipe (or a pty) holds, -1 on error. */
static inline int fd_holds(int fd) {
        int n = -1;
        return ioctl(fd, FIONREAD, &n) < 0 ? -1 : n;
}
