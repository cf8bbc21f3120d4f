/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "mount-compat.h"
#include "mount-open.h"
#include "run-exec.h"
#include "spawn.h"

static int mount_open_child(int run_helper_fd, const MountSource *m, int tree_fd, int timeout_ms, MountStep *ret_step) {
        SpawnReport r = {};
        int sp[2], pidfd = -EBADF, tree = -EBADF, k;
        pid_t pid;

        *ret_step = MOUNT_STEP_NONE;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return -errno;
        pid = run_helper_fd >= 0 ? run_exec_mount(run_helper_fd, m, tree_fd, sp[1], &pidfd) : clone3_pidfd(0, -1, &pidfd);
        if (pid == 0) {
                MountStep step;
                int keep[] = { 2, sp[1], tree_fd };
                close_all_fds_except(keep, ELEMENTSOF(keep));
                (void) prctl(PR_SET_NAME, "sandboxd-mount");
                tree = tree_fd >= 0 ? mount_tree_open(tree_fd, m, &step) : mount_source_open(m, &step);
                r = (SpawnReport) { .kind = tree < 0 ? REPORT_FAILED : REPORT_READY, .step = (int32_t) step,
                                    .err = tree < 0 ? errno : 0 };
                _exit(report_send(sp[1], &r, tree) < 0 ? 1 : 0);
        }
        close(sp[1]);
        if (pid < 0) {
                close(sp[0]);
                return pid;
        }
        k = poll(&(struct pollfd) { .fd = sp[0], .events = POLLIN }, 1, timeout_ms);
        if (k > 0)
                k = report_recv(sp[0], &r, &tree);
        else
                k = k == 0 ? -ETIMEDOUT : -errno;
        close(sp[0]);
        (void) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        while (waitid(P_PIDFD, (id_t) pidfd, &(siginfo_t) {}, WEXITED) < 0 && errno == EINTR)
                ;
        close(pidfd);
        if (k <= 0) {
                safe_close(tree);
                return k < 0 ? k : -EIO;
        }
        if (r.kind != REPORT_READY || tree < 0) {
                safe_close(tree);
                *ret_step = (MountStep) r.step;
                return r.err > 0 ? -r.err : -EIO;
        }
        return tree;
}

int mount_open(int run_helper_fd, const MountSource *m, int timeout_ms, MountStep *ret_step) {
        return mount_open_child(run_helper_fd, m, -EBADF, timeout_ms, ret_step);
}

int mount_open_tree(int run_helper_fd, int tree_fd, const MountSource *m, int timeout_ms, MountStep *ret_step) {
        if (tree_fd < 0)
                return -EBADF;
        return mount_open_child(run_helper_fd, m, tree_fd, timeout_ms, ret_step);
}

bool mount_idmap_supported(void) {
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t) -1 };
        /* An fd that is no mount: EBADF or EINVAL where the call exists. */
        return mount_setattr(-1, "", AT_EMPTY_PATH, &attr, sizeof(attr)) == 0 || errno != ENOSYS;
}
