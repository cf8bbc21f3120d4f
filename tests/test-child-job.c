/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One skeleton for the daemon's children that work off the loop (daemon/host/child-job.h): the
 * function's return is the status the loop gets; the child keeps stderr and what it is told, no
 * other descriptor; its reports come back through the pipe, all before its end is told; a job
 * freed while its child runs leaves no process; a wait past its deadline kills; a child started
 * elsewhere is watched the same way. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child-job.h"
#include "tap.h"

typedef struct Seen {
        sd_event *event;
        int exits, code, status;
        char report[256];
        size_t n_report;
        bool report_before_exit;
        int report_calls;
} Seen;

static void on_exit_seen(ChildJob *j, const siginfo_t *si, void *userdata) {
        Seen *s = userdata;

        s->exits++;
        s->code = si->si_code;
        s->status = si->si_status;
        s->report_before_exit = s->n_report > 0;
        child_job_free(j);
        (void) sd_event_exit(s->event, 0);
}

static int on_report_seen(ChildJob *j, int fd, void *userdata) {
        Seen *s = userdata;
        ssize_t k = -1;

        s->report_calls++;
        while (s->n_report < sizeof(s->report) - 1 &&
               (k = read(fd, s->report + s->n_report, sizeof(s->report) - 1 - s->n_report)) > 0)
                s->n_report += (size_t) k;
        return k == 0 ? 1 : 0;
}

static int returns(void *arg, int report_fd) {
        return *(int *) arg;
}

/* 0 when fd is closed in the child and keep is open, else 1. */
static int fds_as_told(void *arg, int report_fd) {
        int *fds = arg;
        return fcntl(fds[0], F_GETFD) < 0 && errno == EBADF && fcntl(fds[1], F_GETFD) >= 0 ? 0 : 1;
}

static int reports(void *arg, int report_fd) {
        const char *text = arg;
        return write(report_fd, text, strlen(text)) == (ssize_t) strlen(text) ? 0 : 1;
}

static int sleeps(void *arg, int report_fd) {
        pause();
        return 0;
}

static bool gone(pid_t pid) {
        return kill(pid, 0) < 0 && errno == ESRCH;
}

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

static void run_loop(Seen *s) {
        sd_event_source *guard = NULL;
        /* A loop that never ends is a failure, not a hang. */
        (void) sd_event_add_time_relative(s->event, &guard, CLOCK_MONOTONIC, 10 * 1000000, 0, NULL, NULL);
        (void) sd_event_loop(s->event);
        sd_event_source_disable_unref(guard);
}

int main(void) {
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigprocmask(SIG_BLOCK, &mask, NULL);

        /* The function's return is its exit status. */
        {
                Seen s = {};
                int st = 7;
                ChildJob *j = NULL;
                sd_event_new(&s.event);
                is_int(child_job_start(s.event, &(ChildJobSpec) { .name = "t-job", .fn = returns, .arg = &st,
                                                                  .on_exit = on_exit_seen, .userdata = &s }, &j),
                       0, "a job starts");
                ok(child_job_running(j), "... and runs until reaped");
                run_loop(&s);
                is_int(s.exits, 1, "its end comes to on_exit once");
                is_int(s.code, CLD_EXITED, "... as an exit");
                is_int(s.status, 7, "... with what its function returned");
                sd_event_unref(s.event);
        }
        /* Only stderr and what it keeps stay open. */
        {
                Seen s = {};
                int p[2], fds[2];
                ChildJob *j = NULL;
                sd_event_new(&s.event);
                pipe2(p, O_CLOEXEC);
                fds[0] = p[0];
                fds[1] = p[1];
                is_int(child_job_start(s.event, &(ChildJobSpec) { .fn = fds_as_told, .arg = fds, .keep = &p[1], .n_keep = 1,
                                                                  .on_exit = on_exit_seen, .userdata = &s }, &j),
                       0, "a job that keeps one descriptor");
                run_loop(&s);
                is_int(s.status, 0, "... has it open in the child, and another of the daemon's closed");
                close(p[0]);
                close(p[1]);
                sd_event_unref(s.event);
        }
        /* Reports through the pipe, read before its end is told. */
        {
                Seen s = {};
                ChildJob *j = NULL;
                sd_event_new(&s.event);
                is_int(child_job_start(s.event, &(ChildJobSpec) { .fn = reports, .arg = (char *) "step 3 errno 0 value 42\n",
                                                                  .on_exit = on_exit_seen, .on_report = on_report_seen,
                                                                  .userdata = &s }, &j),
                       0, "a job with a report pipe");
                run_loop(&s);
                is_str(s.report, "step 3 errno 0 value 42\n", "its report arrives whole");
                ok(s.report_before_exit, "... before its end is told");
                ok(s.report_calls >= 1 && s.report_calls <= 3, "... read in a few calls, not spun on at its end (%d)", s.report_calls);
                is_int(s.status, 0, "... and it exited 0");
                sd_event_unref(s.event);
        }
        /* Freed while it runs: no process left. */
        {
                sd_event *e = NULL;
                ChildJob *j = NULL;
                siginfo_t si = {};
                pid_t pid;
                sd_event_new(&e);
                is_int(child_job_start(e, &(ChildJobSpec) { .fn = sleeps }, &j), 0, "a job that never ends by itself");
                /* Its pid, to see it gone: the child is ours, WNOWAIT leaves it. */
                pid = waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == 0 ? 0 : -1;
                ok(pid == 0, "... is still running");
                child_job_free(j);
                ok(waitid(P_ALL, 0, &si, WEXITED | WNOHANG) < 0 && errno == ECHILD, "freed, it is killed and reaped: no child left");
                sd_event_unref(e);
        }
        /* A wait past its deadline kills it. */
        {
                sd_event *e = NULL;
                ChildJob *j = NULL;
                siginfo_t si = {};
                uint64_t t0;
                sd_event_new(&e);
                child_job_start(e, &(ChildJobSpec) { .fn = sleeps }, &j);
                t0 = now_usec();
                is_int(child_job_wait(j, t0 + 100000, &si), -ETIME, "a wait past the deadline says so (-ETIME)");
                is_int(si.si_code, CLD_KILLED, "... the child was killed");
                is_int(si.si_status, SIGKILL, "... by SIGKILL");
                ok(!child_job_running(j), "... and reaped");
                child_job_free(j);
                int st = 3;
                child_job_start(e, &(ChildJobSpec) { .fn = returns, .arg = &st }, &j);
                is_int(child_job_wait(j, now_usec() + 5000000, &si), 0, "a wait for one that ends in time");
                is_int(si.si_status, 3, "... gives its status");
                child_job_free(j);
                sd_event_unref(e);
        }
        /* Started elsewhere, watched the same way. */
        {
                Seen s = {};
                ChildJob *j = NULL;
                sd_event_new(&s.event);
                pid_t pid = fork();
                if (pid == 0)
                        _exit(5);
                int pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
                is_int(child_job_watch(s.event, pidfd, on_exit_seen, &s, &j), 0, "a child started elsewhere is watched");
                run_loop(&s);
                is_int(s.status, 5, "... and its end told");
                ok(gone(pid), "... reaped");
                sd_event_unref(s.event);
        }
        /* Without on_exit, it frees itself when reaped. */
        {
                Seen s = {};
                ChildJob *j = NULL;
                sd_event_source *stop = NULL;
                int st = 0;
                siginfo_t si = {};
                sd_event_new(&s.event);
                child_job_start(s.event, &(ChildJobSpec) { .fn = returns, .arg = &st }, &j);
                sd_event_add_time_relative(s.event, &stop, CLOCK_MONOTONIC, 300000, 0, NULL, NULL);
                (void) sd_event_loop(s.event);
                ok(waitid(P_ALL, 0, &si, WEXITED | WNOHANG) < 0 && errno == ECHILD, "a job nobody waits for is reaped by the loop");
                sd_event_source_disable_unref(stop);
                sd_event_unref(s.event);
        }
        return done_testing();
}
