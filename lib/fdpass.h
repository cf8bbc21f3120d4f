/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* File descriptors on the protocol socket (SCM_RIGHTS), shared by sandboxd and its clients: a
 * line sent with its fds in one sendmsg(), fds received with MSG_CMSG_CLOEXEC and refused whole
 * when the kernel truncated them, the queue a connection keeps until a line claims them, and the
 * type check every received fd goes through. docs/design/files.md, section 4. No logging. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What one message may carry (the receiver's control buffer holds this many: more is
 * MSG_CTRUNC) and what a connection may hold unclaimed. */
#define SBX_FDS_PER_MESSAGE 8
#define SBX_FDS_PER_CONNECTION 16

/* Sends all of data; the first sendmsg() carries the fds (at most SBX_FDS_PER_MESSAGE), the
 * rest of the bytes, if the kernel took only part, follow without. MSG_NOSIGNAL; retries EINTR.
 * Returns 0 or -errno (-EINVAL for too many fds). */
int sbx_fds_send(int sock, const void *data, size_t len, const int *fds, size_t n_fds);

/* One recvmsg() of at most size bytes with MSG_CMSG_CLOEXEC (flags are added, e.g.
 * MSG_DONTWAIT). The fds that came (at most max_fds, itself at most SBX_FDS_PER_MESSAGE) go to
 * fds[] and their count to *ret_n_fds. When the kernel truncated the control data (MSG_CTRUNC),
 * or more fds came than max_fds, every fd that did arrive is closed and -EMSGSIZE returned: the
 * pairing of fds and lines is lost, and the caller should drop the connection. Control messages
 * other than SCM_RIGHTS are ignored. Returns the byte count (0 at EOF) or -errno. */
ssize_t sbx_fds_recv(int sock, void *buf, size_t size, int flags, int *fds, size_t max_fds, size_t *ret_n_fds);

/* Closes n fds (those >= 0) and sets each to -EBADF. */
void sbx_fds_close(int *fds, size_t n);

/* ---- The fds a connection received, until the line they came with is complete ----------
 *
 * Which line fds belong to: Linux's stream socket delivers the fds of a sendmsg() with the
 * bytes of that sendmsg's first buffer, and one recvmsg() that returns them may also return
 * bytes sent before (by sendmsg()s without fds) but never bytes sent after: it stops there. So
 * the last byte a recvmsg() returned with fds is a byte of the sendmsg that carried them. A
 * client sends a line that claims fds in one sendmsg() of that line alone (sbx_fds_send()), so
 * the fds belong to **the line that holds the last byte received with them**. The queue keeps
 * each fd with that byte's stream offset (LineBuffer's committed count, less one); a line
 * ending at offset E owns what arrived at offsets up to E (earlier lines took theirs). */

typedef struct SbxFdQueue {
        struct {
                int fd;
                uint64_t at; /* stream offset of the last byte received with it */
        } e[SBX_FDS_PER_CONNECTION];
        size_t n;
} SbxFdQueue;

void sbx_fd_queue_init(SbxFdQueue *q);
/* Queues n fds (taking them) that came with a recvmsg() whose last byte is at stream offset at.
 * -EMFILE when they would pass the cap: then the queue and these fds are all closed (what the
 * design says a connection over its cap gets). */
int sbx_fd_queue_push(SbxFdQueue *q, const int *fds, size_t n, uint64_t at);
/* Takes the fds owned by the line whose '\n' is at stream offset line_end (LineBuffer's
 * line_end) into ret[] (room for max): 0 and their count (0 for a line that came without any).
 * -EPROTO when they came in more than one message (a line's fds come in one sendmsg), -EMSGSIZE
 * when more than max: both close them. The caller compares the count with the line's "fds". */
int sbx_fd_queue_take_line(SbxFdQueue *q, uint64_t line_end, int *ret, size_t max, size_t *ret_n);
/* Closes the fds owned by lines up to offset end (an over-long line skipped: LineBuffer's
 * discarded_end). Returns how many. */
size_t sbx_fd_queue_drop_until(SbxFdQueue *q, uint64_t end);
/* Closes everything queued. Returns how many were closed. */
size_t sbx_fd_queue_clear(SbxFdQueue *q);

/* ---- The type check ---------------------------------------------------------------------- */

typedef enum SbxFdAllow {
        SBX_FD_REGULAR = 1 << 0, /* a regular file (a memfd too) */
        SBX_FD_PIPE = 1 << 1,    /* a pipe or FIFO */
        SBX_FD_SOCKET = 1 << 2,  /* only where a field asks for it (OCI stdio) */
        SBX_FD_CHAR = 1 << 3,    /* a character device (a tty), only where asked */
        SBX_FD_READ = 1 << 8,    /* must be open for reading */
        SBX_FD_WRITE = 1 << 9,   /* must be open for writing */
} SbxFdAllow;

/* What the file operations take: a regular file or a pipe, in the given direction. */
#define SBX_FD_FILE_SOURCE (SBX_FD_REGULAR | SBX_FD_PIPE | SBX_FD_READ)
#define SBX_FD_FILE_SINK (SBX_FD_REGULAR | SBX_FD_PIPE | SBX_FD_WRITE)
/* What a run's "stdio" and "extra_fds" take (the OCI runtime's fds: the engine's pipes, sockets
 * and terminals): any of those kinds, in whatever direction it was opened. */
#define SBX_FD_STDIO (SBX_FD_REGULAR | SBX_FD_PIPE | SBX_FD_SOCKET | SBX_FD_CHAR)

/* Checks fd against allow: never O_PATH, never a directory or a block device; a socket or a
 * character device only when allowed; a "regular file" that is a kernel object (nsfs, pidfs,
 * anon_inodefs, bpf) refused; the access mode must allow the asked direction. Returns the
 * SbxFdAllow bit of its type (> 0), or -errno with *ret_reason set to words for the error
 * message ("is a directory", "is opened O_PATH", "is not open for reading", ...). */
int sbx_fd_check(int fd, unsigned allow, const char **ret_reason);
