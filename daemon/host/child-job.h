/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A child of the daemon that does one job off the loop (an egress teardown, a removal, a disk
 * walk, a copy, an import): started with a function, watched by its pidfd, with a pipe back for
 * its reports when it has any, killed and reaped when it is freed before it ended. One skeleton
 * for every such child, so that each feature writes only what its child does and what its end
 * means.
 *
 * The child closes every descriptor but stderr and those it is told to keep, dies with the daemon
 * (PR_SET_PDEATHSIG: a next daemon redoes or removes what it left) and exits with what its
 * function returns. SIGCHLD must be blocked, as for any sd-event child source. */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

typedef struct ChildJob ChildJob;

/* In the child: what it does; its return is its exit status. report_fd: the pipe's write end
 * (ChildJobSpec.report), else -1. */
typedef int (*child_job_fn)(void *arg, int report_fd);
/* In the loop: the child ended and was reaped (si: how). The job is the callee's to free. */
typedef void (*child_job_exit_fn)(ChildJob *j, const siginfo_t *si, void *userdata);
/* In the loop: the report pipe is readable (fd non-blocking): read to EAGAIN (0), or to its end
 * or an error (1: the pipe is watched no more). Called once more just before on_exit. */
typedef int (*child_job_report_fn)(ChildJob *j, int fd, void *userdata);

typedef struct ChildJobSpec {
        const char *name;           /* the child's comm (PR_SET_NAME) */
        const int *keep;            /* descriptors the child keeps, besides stderr */
        size_t n_keep;
        child_job_fn fn;
        void *arg;
        child_job_exit_fn on_exit;  /* NULL: nobody asks (the job frees itself when reaped) */
        child_job_report_fn on_report; /* non-NULL: a pipe back, fn's report_fd */
        void *userdata;
} ChildJobSpec;

/* Started and watched by event. */
int child_job_start(sd_event *event, const ChildJobSpec *spec, ChildJob **ret);
/* A child started elsewhere (by sandboxd-run-helper), watched the same way; takes pidfd. */
int child_job_watch(sd_event *event, int pidfd, child_job_exit_fn on_exit, void *userdata, ChildJob **ret);
/* Its end waited for here, off the loop, until deadline (CLOCK_MONOTONIC, µs; 0: none), then
 * killed and reaped: 0 with *ret_si, or -ETIME when it had to be killed. on_exit is not called;
 * the job stays the caller's to free. */
int child_job_wait(ChildJob *j, uint64_t deadline_usec, siginfo_t *ret_si);
/* SIGKILL, if it runs: its end comes to on_exit as any other. */
void child_job_kill(ChildJob *j);
/* Freed; a child still running is killed and reaped first. */
ChildJob *child_job_free(ChildJob *j);
/* Whether its child is still unreaped. */
bool child_job_running(const ChildJob *j);
