/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* fuse-hang DIR: mounts a FUSE filesystem on DIR that answers the kernel's FUSE_INIT (and
 * FUSE_STATFS) and then reads every other request without ever answering it, so that whoever touches DIR waits in the
 * kernel, uninterruptibly (state D), and SIGKILL cannot end it: the process THREATS DMN-06 asks a
 * sandbox's teardown to survive. Prints "ready" once mounted, and "held PID OPCODE" for each
 * request it keeps, PID being the waiter as the host sees it (the mount's pid namespace), so a
 * test knows when a process really waits here rather than guessing. On SIGTERM or when its stdin
 * closes it closes /dev/fuse, which aborts the connection (the waiters get ENOTCONN and die), and
 * detaches the mount. Written against the kernel's own protocol (<linux/fuse.h>): no libfuse. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_term(int sig) {
        (void) sig;
        stop = 1;
}

static int answer_init(int fd, const struct fuse_in_header *in, const struct fuse_init_in *init) {
        struct {
                struct fuse_out_header h;
                struct fuse_init_out o;
        } out = {
                .h = { .len = sizeof(out), .unique = in->unique },
                .o = { .major = FUSE_KERNEL_VERSION, .minor = init->minor < FUSE_KERNEL_MINOR_VERSION ? init->minor : FUSE_KERNEL_MINOR_VERSION,
                       .max_readahead = init->max_readahead, .max_write = 4096 },
        };
        return write(fd, &out, sizeof(out)) == (ssize_t) sizeof(out) ? 0 : -1;
}

/* statfs is answered (zeros), so that sandboxd can check what filesystem a root_binds entry is
 * (its helper calls fstatfs on every tree it binds) and bind this one into a sandbox. */
static int answer_statfs(int fd, const struct fuse_in_header *in) {
        struct {
                struct fuse_out_header h;
                struct fuse_statfs_out o;
        } out = { .h = { .len = sizeof(out), .unique = in->unique }, .o = { .st = { .bsize = 4096, .namelen = 255 } } };
        return write(fd, &out, sizeof(out)) == (ssize_t) sizeof(out) ? 0 : -1;
}

int main(int argc, char **argv) {
        static char buf[FUSE_MIN_READ_BUFFER + 65536];
        struct sigaction sa = { .sa_handler = on_term };
        char opts[128];
        int fd;

        if (argc != 2) {
                fprintf(stderr, "usage: fuse-hang DIR\n");
                return 2;
        }
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
        if (fd < 0) {
                perror("fuse-hang: /dev/fuse");
                return 1;
        }
        snprintf(opts, sizeof(opts), "fd=%d,rootmode=40755,user_id=0,group_id=0,allow_other", fd);
        if (mount("fuse-hang", argv[1], "fuse", MS_NOSUID | MS_NODEV, opts) < 0) {
                perror("fuse-hang: mount");
                return 1;
        }
        printf("ready\n");
        fflush(stdout);
        while (!stop) {
                struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = 0, .events = POLLIN } };
                const struct fuse_in_header *in = (const void *) buf;
                ssize_t n;

                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (p[1].revents) /* stdin readable: closed (or anything written) means stop */
                        break;
                if (!(p[0].revents & POLLIN))
                        continue;
                n = read(fd, buf, sizeof(buf));
                if (n < 0) {
                        if (errno == EINTR || errno == ENOENT)
                                continue;
                        break;
                }
                if ((size_t) n >= sizeof(*in) && in->opcode == FUSE_INIT &&
                    answer_init(fd, in, (const void *) (buf + sizeof(*in))) < 0)
                        break;
                if ((size_t) n >= sizeof(*in) && in->opcode == FUSE_STATFS && answer_statfs(fd, in) < 0)
                        break;
                /* Anything else is read and never answered. */
                if ((size_t) n >= sizeof(*in) && in->opcode != FUSE_INIT && in->opcode != FUSE_STATFS) {
                        printf("held %u %u\n", (unsigned) in->pid, (unsigned) in->opcode);
                        fflush(stdout);
                }
        }
        close(fd);
        (void) umount2(argv[1], MNT_DETACH);
        return 0;
}
