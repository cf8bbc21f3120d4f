/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A child of the daemon that does one job off the loop (child-job.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child-job.h"
#include "macro.h"
#include "spawn.h"
#include "util.h"

#define CHILD_JOB_KEEP_MAX 8

struct ChildJob {
        int pidfd;
        bool reaped;
        sd_event_source *child_src;
        int report_fd;              /* the pipe's read end, or -1 */
        sd_event_source *report_src;
        child_job_exit_fn on_exit;
        child_job_report_fn on_report;
        void *userdata;
};

_Noreturn static void child_main(const ChildJobSpec *spec, pid_t parent, int report_fd) {
        int keep[CHILD_JOB_KEEP_MAX + 2];
        size_t n = 0;

        keep[n++] = 2;
        for (size_t i = 0; i < spec->n_keep; i++)
                keep[n++] = spec->keep[i];
        if (report_fd >= 0)
                keep[n++] = report_fd;
        close_all_fds_except(keep, n);
        /* Nobody would wait for its end: it dies with the daemon (the next one redoes or removes
         * what it left). */
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
                _exit(127);
        if (spec->name)
                (void) prctl(PR_SET_NAME, spec->name);
        (void) prctl(PR_SET_DUMPABLE, 0); /* a copy of the daemon's memory */
        _exit(spec->fn(spec->arg, report_fd));
}

static int on_child(sd_event_source *src, const siginfo_t *si, void *userdata) {
        ChildJob *j = userdata;

        j->reaped = true;
        /* What it reported before its end comes first: the child is gone, all it wrote is in the
         * pipe. */
        if (j->report_src)
                (void) j->on_report(j, j->report_fd, j->userdata);
        j->report_src = sd_event_source_disable_unref(j->report_src);
        if (j->on_exit)
                j->on_exit(j, si, j->userdata);
        else
                child_job_free(j);
        return 0;
}

static int on_report(sd_event_source *src, int fd, uint32_t events, void *userdata) {
        ChildJob *j = userdata;

        if (j->on_report(j, fd, j->userdata) != 0)
                j->report_src = sd_event_source_disable_unref(j->report_src);
        return 0;
}

static ChildJob *job_new(int pidfd, child_job_exit_fn on_exit, void *userdata) {
        ChildJob *j = calloc(1, sizeof(*j));

        if (j)
                *j = (ChildJob) { .pidfd = pidfd, .report_fd = -EBADF, .on_exit = on_exit, .userdata = userdata };
        return j;
}

static int job_watch(sd_event *event, ChildJob *j) {
        int r = sd_event_add_child_pidfd(event, &j->child_src, j->pidfd, WEXITED, on_child, j);
        if (r >= 0 && j->report_fd >= 0) {
                r = fcntl(j->report_fd, F_SETFL, O_NONBLOCK) < 0 ? -errno : 0;
                if (r >= 0)
                        r = sd_event_add_io(event, &j->report_src, j->report_fd, EPOLLIN, on_report, j);
        }
        return r;
}

int child_job_start(sd_event *event, const ChildJobSpec *spec, ChildJob **ret) {
        int p[2] = { -EBADF, -EBADF }, pidfd = -EBADF, r;
        pid_t parent = getpid(), pid;
        ChildJob *j;

        if (spec->n_keep > CHILD_JOB_KEEP_MAX || !spec->fn)
                return -EINVAL;
        if (!(j = job_new(-EBADF, spec->on_exit, spec->userdata)))
                return -ENOMEM;
        if (spec->on_report && pipe2(p, O_CLOEXEC) < 0) {
                free(j);
                return -errno;
        }
        pid = clone3_pidfd(0, -1, &pidfd);
        if (pid == 0)
                child_main(spec, parent, p[1]);
        safe_close(p[1]);
        j->report_fd = p[0];
        j->on_report = spec->on_report;
        if (pid < 0) {
                safe_close(j->report_fd);
                free(j);
                return pid;
        }
        j->pidfd = pidfd;
        r = job_watch(event, j);
        if (r < 0) {
                child_job_free(j);
                return r;
        }
        *ret = j;
        return 0;
}

int child_job_watch(sd_event *event, int pidfd, child_job_exit_fn on_exit, void *userdata, ChildJob **ret) {
        ChildJob *j = job_new(pidfd, on_exit, userdata);
        int r;

        if (!j) {
                (void) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                (void) waitid(P_PIDFD, (id_t) pidfd, &(siginfo_t) {}, WEXITED);
                safe_close(pidfd);
                return -ENOMEM;
        }
        r = job_watch(event, j);
        if (r < 0) {
                child_job_free(j);
                return r;
        }
        *ret = j;
        return 0;
}

static void job_reaped(ChildJob *j) {
        j->reaped = true;
        j->child_src = sd_event_source_disable_unref(j->child_src);
}

int child_job_wait(ChildJob *j, uint64_t deadline_usec, siginfo_t *ret_si) {
        siginfo_t si = {};
        int r = 0;

        if (j->reaped)
                return -ECHILD;
        for (;;) {
                struct pollfd pfd = { .fd = j->pidfd, .events = POLLIN };
                uint64_t t = now_usec(CLOCK_MONOTONIC);
                int timeout = !deadline_usec ? -1 : t >= deadline_usec ? 0 : (int) ((deadline_usec - t + 999) / 1000);
                int k = poll(&pfd, 1, timeout);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        (void) syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
                        r = -ETIME;
                }
                break;
        }
        while (waitid(P_PIDFD, (id_t) j->pidfd, &si, WEXITED) < 0 && errno == EINTR)
                ;
        job_reaped(j);
        if (ret_si)
                *ret_si = si;
        return r;
}

void child_job_kill(ChildJob *j) {
        if (j && !j->reaped)
                (void) syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
}

bool child_job_running(const ChildJob *j) {
        return j && !j->reaped;
}

ChildJob *child_job_free(ChildJob *j) {
        if (!j)
                return NULL;
        if (!j->reaped && j->pidfd >= 0) {
                (void) syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
                while (waitid(P_PIDFD, (id_t) j->pidfd, &(siginfo_t) {}, WEXITED) < 0 && errno == EINTR)
                        ;
        }
        sd_event_source_disable_unref(j->child_src);
        sd_event_source_disable_unref(j->report_src);
        safe_close(j->report_fd);
        safe_close(j->pidfd);
        free(j);
        return NULL;
}
