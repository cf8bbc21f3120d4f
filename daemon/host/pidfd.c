/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "pidfd.h"
#include "util.h"

int pidfd_pids(int pidfd, int *ret_pid, int *ret_inner_pid) {
        char path[64], info[1024], *p, *nl;
        int pid;

        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
        if (read_small_file(AT_FDCWD, path, false, info, sizeof(info)) < 0)
                return -EBADFD;
        p = strstr(info, "\nPid:\t");
        if (!p || sscanf(p + 6, "%d", &pid) != 1)
                return -EBADFD;
        /* -1: the process has ended; 0: it is not in our pid namespace. */
        if (pid <= 0)
                return -ESRCH;
        if (ret_inner_pid) {
                /* "NSpid:\t<ours>\t...\t<innermost>": only one level is not a namespace's pid. */
                *ret_inner_pid = 0;
                p = strstr(info, "\nNSpid:\t");
                if (p) {
                        p += 8;
                        nl = strchr(p, '\n');
                        if (nl)
                                *nl = '\0';
                        nl = strrchr(p, '\t'); /* none: it is in ours alone */
                        if (!nl || sscanf(nl + 1, "%d", ret_inner_pid) != 1)
                                *ret_inner_pid = 0;
                }
        }
        *ret_pid = pid;
        return 0;
}

/* <linux/pidfd.h> of Linux 6.15; Debian 12's headers are older. */
struct pidfd_exit_info {
        uint64_t mask;
        uint64_t cgroupid;
        uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
        int32_t exit_code;
};
#define PIDFD_GET_INFO_IOCTL _IOWR(0xFF, 11, struct pidfd_exit_info)
#define PIDFD_INFO_EXIT_BIT (UINT64_C(1) << 3)

static void wait_status_decode(int status, int *ret_code, int *ret_status) {
        if (WIFEXITED(status)) {
                *ret_code = CLD_EXITED;
                *ret_status = WEXITSTATUS(status);
        } else {
                *ret_code = WCOREDUMP(status) ? CLD_DUMPED : CLD_KILLED;
                *ret_status = WTERMSIG(status);
        }
}

static int exit_info(int pidfd, int *ret_status) {
        struct pidfd_exit_info info = { .mask = PIDFD_INFO_EXIT_BIT };

        if (ioctl(pidfd, PIDFD_GET_INFO_IOCTL, &info) < 0)
                return errno == ESRCH ? 0 : -errno;
        if (!(info.mask & PIDFD_INFO_EXIT_BIT))
                return 0;
        *ret_status = info.exit_code;
        return 1;
}

bool pidfd_exit_info_supported(void) {
        static int supported = -1;
        int pidfd, status = 0;
        pid_t pid;

        if (supported >= 0)
                return supported;
        supported = 0;
        /* The tests' and benchmarks' way to the helper of older kernels on a kernel that has it. */
        if (getenv("SANDBOXD_TEST_NO_PIDFD_EXIT_INFO"))
                return false;
        pid = fork();
        if (pid == 0)
                _exit(42);
        if (pid < 0)
                return false;
        /* Our child, not reaped yet: its pid cannot be another's. */
        pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        (void) waitpid(pid, NULL, 0);
        if (pidfd >= 0)
                supported = exit_info(pidfd, &status) == 1 && WIFEXITED(status) && WEXITSTATUS(status) == 42;
        safe_close(pidfd);
        return supported;
}

/* Field 3 (the state) and field 52 (the exit status) of /proc/PID/stat. */
static int zombie_status(int pid, int *ret_status) {
        char path[64], buf[2048], *p;
        int field = 3;

        snprintf(path, sizeof(path), "/proc/%d/stat", pid);
        if (read_small_file(AT_FDCWD, path, false, buf, sizeof(buf)) < 0)
                return 0;
        p = strrchr(buf, ')'); /* after the name, which may hold spaces */
        if (!p || p[1] != ' ' || p[2] != 'Z')
                return 0;
        for (p += 2; p && field < 52; field++)
                p = strchr(p + 1, ' ');
        if (!p || sscanf(p + 1, "%d", ret_status) != 1)
                return 0;
        return 1;
}

int pidfd_exit_status(int pidfd, int *ret_code, int *ret_status) {
        int k, pid = 0, again = 0, status = 0;

        if ((k = exit_info(pidfd, &status)) < 0 && k != -ENOTTY && k != -EINVAL)
                return k;
        if (k == 1) {
                wait_status_decode(status, ret_code, ret_status);
                return 1;
        }
        /* A zombie: its pid is its own until it is reaped, so the stat read between two looks at
         * the pidfd that both name that pid is the zombie's. */
        if ((k = pidfd_pids(pidfd, &pid, NULL)) == -ESRCH)
                return 0;
        if (k < 0)
                return k;
        if (zombie_status(pid, &status) <= 0 || pidfd_pids(pidfd, &again, NULL) < 0 || again != pid)
                return 0;
        wait_status_decode(status, ret_code, ret_status);
        return 1;
}
