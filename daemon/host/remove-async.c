/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child-job.h"
#include "log.h"
#include "macro.h"
#include "remove-async.h"
#include "rm-rf.h"
#include "run-exec.h"
#include "util.h"

typedef struct Remover {
        ChildJob *job;
        char *name;
} Remover;

/* The removers still running, for the stop (remove_async_stop()). */
static Remover **running;
static size_t n_running, n_alloc;

static void remover_done(Remover *r, const siginfo_t *si) {
        if (si && (si->si_code != CLD_EXITED || si->si_status != 0))
                log_warning("removal of %s did not complete (status %d); retried at the next start", r->name, si->si_status);
        for (size_t i = 0; i < n_running; i++)
                if (running[i] == r) {
                        running[i] = running[--n_running];
                        break;
                }
        child_job_free(r->job); /* one still running is killed and reaped here */
        free(r->name);
        free(r);
}

static void on_remover_exit(ChildJob *j, const siginfo_t *si, void *userdata) {
        remover_done(userdata, si);
}

typedef struct RemoveArgs {
        int dir_fd;
        const char *name;
} RemoveArgs;

/* In the child (a clone of the daemon, where there is no helper). */
static int remove_child(void *arg, int report_fd) {
        const RemoveArgs *a = arg;

        return rm_rf_at(a->dir_fd, a->name) < 0 ? 1 : 0;
}

int remove_async(sd_event *event, int run_helper_fd, int dir_fd, const char *name) {
        Remover *rm;
        int pidfd = -EBADF, r;

        if (n_running == n_alloc) {
                size_t n = n_alloc ? 2 * n_alloc : 16;
                Remover **a = realloc(running, n * sizeof(*a));
                if (!a)
                        return log_warning_errno(-ENOMEM, "cannot start a remover for %s: %m", name);
                running = a;
                n_alloc = n;
        }
        if (!(rm = calloc(1, sizeof(*rm))) || !(rm->name = strdup(name))) {
                free(rm);
                return log_warning_errno(-ENOMEM, "cannot start a remover for %s: %m", name);
        }
        if (run_helper_fd >= 0) {
                /* The exec'd helper dies with the daemon too (run-helper.c rm_main()). */
                pid_t pid = run_exec_rm(run_helper_fd, dir_fd, name, &pidfd);
                r = pid < 0 ? pid : child_job_watch(event, pidfd, on_remover_exit, rm, &rm->job);
        } else
                r = child_job_start(event, &(ChildJobSpec) { .name = "sandboxd-rm", .keep = &dir_fd, .n_keep = 1,
                                                             .fn = remove_child, .arg = &(RemoveArgs) { dir_fd, name },
                                                             .on_exit = on_remover_exit, .userdata = rm }, &rm->job);
        if (r < 0) {
                free(rm->name);
                free(rm);
                return log_warning_errno(r, "cannot start a remover for %s: %m", name);
        }
        running[n_running++] = rm;
        return 0;
}

unsigned remove_async_stop(uint64_t timeout_usec) {
        uint64_t deadline = now_usec(CLOCK_MONOTONIC) + timeout_usec;
        unsigned unfinished = 0;

        while (n_running > 0) {
                Remover *rm = running[n_running - 1];
                siginfo_t si = {};
                /* Past the deadline, all that is left is killed now. A child already reaped by the
                 * stop's waitpid(-1) (ECHILD) is done either way. */
                int r = child_job_wait(rm->job, deadline, &si);
                if (r == -ETIME)
                        unfinished++;
                remover_done(rm, r == 0 && si.si_pid ? &si : NULL);
        }
        free(running);
        running = NULL;
        n_alloc = 0;
        if (unfinished)
                log_info("%u removal%s unfinished at the stop; the next start removes what is left", unfinished,
                         unfinished == 1 ? "" : "s");
        return unfinished;
}
