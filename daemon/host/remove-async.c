/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "remove-async.h"
#include "rm-rf.h"
#include "run-exec.h"
#include "spawn.h"

/* The removers still running, for the stop (remove_async_stop()). */
static sd_event_source **running;
static size_t n_running, n_alloc;

static void running_forget(sd_event_source *src) {
        for (size_t i = 0; i < n_running; i++)
                if (running[i] == src) {
                        running[i] = running[--n_running];
                        return;
                }
}

static void remover_done(sd_event_source *src, const siginfo_t *si) {
        char *tag = sd_event_source_get_userdata(src);

        if (si && (si->si_code != CLD_EXITED || si->si_status != 0))
                log_warning("removal of %s did not complete (status %d); retried at the next start", tag, si->si_status);
        running_forget(src);
        free(tag);
        /* Owned: one still running is killed and reaped here (sd_event_source_set_child_process_own). */
        sd_event_source_disable_unref(src);
}

static int on_remover_exit(sd_event_source *src, const siginfo_t *si, void *userdata) {
        remover_done(src, si);
        return 0;
}

int remove_async(sd_event *event, int run_helper_fd, int dir_fd, const char *name) {
        sd_event_source *src = NULL;
        int pidfd = -EBADF, r;
        char *tag;
        pid_t parent = getpid(), pid;

        if (n_running == n_alloc) {
                size_t n = n_alloc ? 2 * n_alloc : 16;
                sd_event_source **a = realloc(running, n * sizeof(*a));
                if (!a)
                        return log_warning_errno(-ENOMEM, "cannot start a remover for %s: %m", name);
                running = a;
                n_alloc = n;
        }
        pid = run_helper_fd >= 0 ? run_exec_rm(run_helper_fd, dir_fd, name, &pidfd) : clone3_pidfd(0, -1, &pidfd);
        if (pid == 0) {
                int keep[] = { 2, dir_fd };
                close_all_fds_except(keep, ELEMENTSOF(keep));
                /* Dies with the daemon, as the exec'd one does (run-helper.c rm_main()). */
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(1);
                (void) prctl(PR_SET_NAME, "sandboxd-rm");
                _exit(rm_rf_at(dir_fd, name) < 0 ? 1 : 0);
        }
        if (pid < 0)
                return log_warning_errno(pid, "cannot start a remover for %s: %m", name);
        tag = strdup(name);
        r = sd_event_add_child_pidfd(event, &src, pidfd, WEXITED, on_remover_exit, tag);
        if (r < 0) {
                free(tag);
                close(pidfd);
                return r;
        }
        (void) sd_event_source_set_child_pidfd_own(src, true);
        (void) sd_event_source_set_child_process_own(src, true);
        running[n_running++] = src;
        return 0;
}

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

unsigned remove_async_stop(uint64_t timeout_usec) {
        uint64_t deadline = now_usec() + timeout_usec;
        unsigned unfinished = 0;

        while (n_running > 0) {
                uint64_t t = now_usec();
                struct pollfd pfd = { .events = POLLIN };
                sd_event_source *src = running[n_running - 1];
                siginfo_t si = {};

                int k;

                pfd.fd = sd_event_source_get_child_pidfd(src);
                k = pfd.fd < 0 || t >= deadline ? 0 : poll(&pfd, 1, (int) ((deadline - t + 999) / 1000));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        /* Past the deadline (or no pidfd): all that is left is ended now. */
                        unfinished = (unsigned) n_running;
                        while (n_running > 0)
                                remover_done(running[n_running - 1], NULL);
                        break;
                }
                /* Reaped here, or already by the stop's waitpid(-1) (ECHILD): done either way. */
                if (waitid(P_PIDFD, (id_t) pfd.fd, &si, WEXITED) == 0)
                        remover_done(src, &si);
                else
                        remover_done(src, NULL);
        }
        free(running);
        running = NULL;
        n_alloc = 0;
        if (unfinished)
                log_info("%u removal%s unfinished at the stop; the next start removes what is left", unfinished,
                         unfinished == 1 ? "" : "s");
        return unfinished;
}
