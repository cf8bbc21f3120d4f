/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fdpass.h"
#include "macro.h"

/* Filesystems whose "regular files" are kernel objects, not content (linux/magic.h; spelled out
 * for the older headers: pidfs is 6.9). */
#define NSFS_MAGIC_ 0x6e736673
#define PIDFS_MAGIC_ 0x50494446
#define ANON_INODE_FS_MAGIC_ 0x09041934
#define BPF_FS_MAGIC_ 0xcafe4a11

int sbx_fds_send(int sock, const void *data, size_t len, const int *fds, size_t n_fds) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * SBX_FDS_PER_MESSAGE)];
        } control;
        const char *p = data;
        bool fds_sent = n_fds == 0;

        if (n_fds > SBX_FDS_PER_MESSAGE || (n_fds > 0 && len == 0))
                return -EINVAL;
        while (len > 0) {
                struct iovec iov = { .iov_base = (void *) p, .iov_len = len };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
                if (!fds_sent) {
                        memset(&control, 0, sizeof(control));
                        mh.msg_control = control.buf;
                        mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                        c->cmsg_level = SOL_SOCKET;
                        c->cmsg_type = SCM_RIGHTS;
                        c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                        memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
                }
                ssize_t k = sendmsg(sock, &mh, MSG_NOSIGNAL);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                /* The kernel attaches the fds to the first byte it took: from here on, none. */
                fds_sent = true;
                p += k;
                len -= (size_t) k;
        }
        return 0;
}

void sbx_fds_close(int *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                fds[i] = safe_close(fds[i]);
}

/* Closes every fd of every SCM_RIGHTS message in mh. */
static void close_received(struct msghdr *mh) {
        for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
                        continue;
                size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < n; i++) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        safe_close(fd);
                }
        }
}

ssize_t sbx_fds_recv(int sock, void *buf, size_t size, int flags, int *fds, size_t max_fds, size_t *ret_n_fds) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * SBX_FDS_PER_MESSAGE)];
        } control;
        struct iovec iov = { .iov_base = buf, .iov_len = size };
        struct msghdr mh = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = control.buf,
                .msg_controllen = sizeof(control.buf),
        };
        size_t n = 0;
        ssize_t k;

        if (max_fds > SBX_FDS_PER_MESSAGE)
                max_fds = SBX_FDS_PER_MESSAGE;
        do
                k = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
        while (k < 0 && errno == EINTR);
        if (k < 0)
                return -errno;
        if (mh.msg_flags & MSG_CTRUNC) {
                close_received(&mh);
                return -EMSGSIZE;
        }
        /* CMSG_SPACE rounds up: a buffer for max_fds may hold one more. Count first, then take. */
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len >= CMSG_LEN(0))
                        n += (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        if (n > max_fds) {
                close_received(&mh);
                return -EMSGSIZE;
        }
        n = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
                        continue;
                size_t m = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                memcpy(fds + n, CMSG_DATA(c), m * sizeof(int));
                n += m;
        }
        *ret_n_fds = n;
        return k;
}

void sbx_fd_queue_init(SbxFdQueue *q) {
        q->n = 0;
}

size_t sbx_fd_queue_clear(SbxFdQueue *q) {
        size_t n = q->n;
        for (size_t i = 0; i < q->n; i++)
                safe_close(q->e[i].fd);
        q->n = 0;
        return n;
}

int sbx_fd_queue_push(SbxFdQueue *q, const int *fds, size_t n, uint64_t at) {
        if (n > SBX_FDS_PER_CONNECTION - q->n) {
                for (size_t i = 0; i < n; i++)
                        safe_close(fds[i]);
                sbx_fd_queue_clear(q);
                return -EMFILE;
        }
        for (size_t i = 0; i < n; i++) {
                q->e[q->n].fd = fds[i];
                q->e[q->n].at = at;
                q->n++;
        }
        return 0;
}

/* Entries are in arrival order, so offsets never decrease: the owned ones are a prefix. */
static size_t owned_prefix(const SbxFdQueue *q, uint64_t end) {
        size_t k = 0;
        while (k < q->n && q->e[k].at <= end)
                k++;
        return k;
}

static void queue_remove_prefix(SbxFdQueue *q, size_t k, bool close_them) {
        for (size_t i = 0; close_them && i < k; i++)
                safe_close(q->e[i].fd);
        memmove(q->e, q->e + k, (q->n - k) * sizeof(q->e[0]));
        q->n -= k;
}

size_t sbx_fd_queue_drop_until(SbxFdQueue *q, uint64_t end) {
        size_t k = owned_prefix(q, end);
        queue_remove_prefix(q, k, true);
        return k;
}

int sbx_fd_queue_take_line(SbxFdQueue *q, uint64_t line_end, int *ret, size_t max, size_t *ret_n) {
        size_t k = owned_prefix(q, line_end);

        if (k > 0 && q->e[0].at != q->e[k - 1].at) {
                queue_remove_prefix(q, k, true);
                return -EPROTO;
        }
        if (k > max) {
                queue_remove_prefix(q, k, true);
                return -EMSGSIZE;
        }
        for (size_t i = 0; i < k; i++)
                ret[i] = q->e[i].fd;
        queue_remove_prefix(q, k, false);
        *ret_n = k;
        return 0;
}

static int refuse(const char **ret_reason, const char *reason, int error) {
        if (ret_reason)
                *ret_reason = reason;
        return -error;
}

/* A regular file's filesystem: kernel objects pass fstat() as S_IFREG (pidfs since 6.9, nsfs,
 * some anon inodes) but are not content to copy. */
static int check_regular_fs(int fd, const char **ret_reason) {
        struct statfs sfs;

        if (fstatfs(fd, &sfs) < 0)
                return refuse(ret_reason, "cannot be examined (fstatfs)", errno);
        switch ((unsigned long) sfs.f_type) {
        case NSFS_MAGIC_:
        case PIDFS_MAGIC_:
        case ANON_INODE_FS_MAGIC_:
        case BPF_FS_MAGIC_:
                return refuse(ret_reason, "is a namespace, pidfd or other kernel object, not a file", EINVAL);
        }
        return 0;
}

static int check_type(int fd, mode_t mode, unsigned allow, const char **ret_reason) {
        switch (mode & S_IFMT) {
        case S_IFREG: {
                if (!(allow & SBX_FD_REGULAR))
                        return refuse(ret_reason, "is a regular file", EINVAL);
                int r = check_regular_fs(fd, ret_reason);
                return r < 0 ? r : SBX_FD_REGULAR;
        }
        case S_IFIFO:
                return allow & SBX_FD_PIPE ? SBX_FD_PIPE : refuse(ret_reason, "is a pipe", EINVAL);
        case S_IFSOCK:
                return allow & SBX_FD_SOCKET ? SBX_FD_SOCKET : refuse(ret_reason, "is a socket", EINVAL);
        case S_IFCHR:
                return allow & SBX_FD_CHAR ? SBX_FD_CHAR : refuse(ret_reason, "is a character device", EINVAL);
        case S_IFDIR:
                /* A directory fd is a way out of any root (openat(fd, ".."), fchdir): never. */
                return refuse(ret_reason, "is a directory", EISDIR);
        case S_IFBLK:
                return refuse(ret_reason, "is a block device", EINVAL);
        default:
                /* anon inodes without a type (eventfd, epoll, signalfd, timerfd) */
                return refuse(ret_reason, "is a namespace, pidfd or other kernel object, not a file", EINVAL);
        }
}

int sbx_fd_check(int fd, unsigned allow, const char **ret_reason) {
        struct stat st;
        int fl = fcntl(fd, F_GETFL);

        if (fl < 0)
                return refuse(ret_reason, "is not open", errno);
        /* Before fstat: an O_PATH handle fstat()s fine but is a reference to whatever it names. */
        if (fl & O_PATH)
                return refuse(ret_reason, "is opened O_PATH", EBADF);
        if (fstat(fd, &st) < 0)
                return refuse(ret_reason, "cannot be examined (fstat)", errno);
        int kind = check_type(fd, st.st_mode, allow, ret_reason);
        if (kind < 0)
                return kind;
        int acc = fl & O_ACCMODE;
        if ((allow & SBX_FD_READ) && acc != O_RDONLY && acc != O_RDWR)
                return refuse(ret_reason, "is not open for reading", EBADF);
        if ((allow & SBX_FD_WRITE) && acc != O_WRONLY && acc != O_RDWR)
                return refuse(ret_reason, "is not open for writing", EBADF);
        return kind;
}
