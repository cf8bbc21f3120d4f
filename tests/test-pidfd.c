/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a pidfd says (daemon/host/pidfd.h): its pids, and how its process ended, read by one that
 * is not its parent:
 * a zombie's status from /proc on any kernel, a reaped one's from the pidfd where the kernel keeps
 * it (PIDFD_INFO_EXIT), and nothing made up while it runs or where neither can be read. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pidfd.h"
#include "tap.h"

/* A child that ends as asked: exit status st, or killed by signal -st. Its pidfd in *ret_pidfd. */
static pid_t child(int st, int *ret_pidfd) {
        pid_t pid = fork();
        if (pid == 0) {
                if (st < 0) {
                        signal(-st, SIG_DFL);
                        raise(-st);
                }
                _exit(st);
        }
        *ret_pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        return pid;
}

static void wait_ended(int pidfd) {
        struct pollfd p = { .fd = pidfd, .events = POLLIN };
        (void) poll(&p, 1, 5000);
}

int main(void) {
        int pidfd, code = -1, status = -1, k;
        bool keeps = pidfd_exit_info_supported();
        pid_t pid;

        diag("this kernel keeps exit statuses with pidfds: %s", keeps ? "yes" : "no");

        /* Running: not known. */
        pid = fork();
        if (pid == 0) {
                pause();
                _exit(0);
        }
        pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        ok(pidfd_exit_status(pidfd, &code, &status) == 0, "a running process: not known (0)");
        int p = -1, inner = -1;
        k = pidfd_pids(pidfd, &p, &inner);
        ok(k == 0 && p == pid, "pidfd_pids: its pid in our namespace (%d, %d)", p, (int) pid);
        ok(inner == 0, "in no pid namespace but ours: 0 as its innermost pid (%d)", inner);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        ok(pidfd_pids(pidfd, &p, NULL) == -ESRCH, "reaped: -ESRCH");
        close(pidfd);

        /* A zombie (nobody reaped it yet): from /proc, on any kernel. */
        pid = child(7, &pidfd);
        wait_ended(pidfd);
        k = pidfd_exit_status(pidfd, &code, &status);
        ok(k == 1 && code == CLD_EXITED && status == 7, "a zombie that exited 7: CLD_EXITED, 7 (k %d, code %d, status %d)", k,
           code, status);
        waitpid(pid, NULL, 0);

        /* Reaped by its parent (us, here; the host's init for a run whose daemon died). */
        k = pidfd_exit_status(pidfd, &code, &status);
        if (keeps)
                ok(k == 1 && code == CLD_EXITED && status == 7, "reaped, exit 7: from the pidfd (k %d, code %d, status %d)", k,
                   code, status);
        else
                ok(k == 0, "reaped, on a kernel that does not keep it: not known (k %d), never made up", k);
        close(pidfd);

        /* Killed by a signal: the signal, as waitid gives it. */
        pid = child(-SIGTERM, &pidfd);
        wait_ended(pidfd);
        k = pidfd_exit_status(pidfd, &code, &status);
        ok(k == 1 && code == CLD_KILLED && status == SIGTERM, "a zombie killed by SIGTERM: CLD_KILLED, 15 (k %d, code %d, status %d)",
           k, code, status);
        waitpid(pid, NULL, 0);
        if (keeps) {
                k = pidfd_exit_status(pidfd, &code, &status);
                ok(k == 1 && code == CLD_KILLED && status == SIGTERM, "reaped, killed by SIGTERM: from the pidfd");
        }
        close(pidfd);

        /* Not a pidfd. */
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        ok(pidfd_exit_status(null, &code, &status) < 0, "/dev/null is no pidfd: an error, not a status");
        close(null);
        done_testing();
}
