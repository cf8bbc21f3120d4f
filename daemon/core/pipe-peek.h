/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The next byte a pipe holds, left in it: tee(2) into a pipe of the daemon's own, read back. The
 * reads that announce themselves before they take bytes out of a pipe (a run's capture, a
 * session's ring: docs/design/restarts.md sections 4 and 5) need it to tell, after a daemon died,
 * whether the read took place. */
#pragma once

/* The daemon's own pipe for it, made at start so that the daemon's fds are all there from its
 * first request (tests count them); made at the first peek otherwise. 0 or -errno. */
int pipe_peek_init(void);
/* 1 and *ret, 0 at the pipe's end, -1 with errno (EAGAIN: nothing yet; EINVAL: fd is no pipe). fd
 * must be non-blocking or hold a byte. */
int pipe_peek_byte(int fd, unsigned char *ret);
