/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The run helper's first decision (spawn.c run_helper_main): it goes on only while its parent is
 * the daemon that made it, so that a daemon that died before the helper's PR_SET_PDEATHSIG (which
 * then never fires) leaves no command running unsupervised (THREATS DMN-08). Each case runs the
 * helper in a child of this test, which plays the daemon; nothing here needs a sandbox. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawn.h"
#include "tap.h"

typedef struct Outcome {
        int status;   /* the helper's exit status, or -1 */
        bool report;  /* it sent a report (it went on to its next steps) */
        int step;
} Outcome;

static Outcome helper_with(pid_t parent, bool direct) {
        Outcome o = { .status = -1 };
        SpawnReport r;
        int sk[2], fd, st = 0;
        pid_t pid;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sk) < 0)
                return o;
        pid = fork();
        if (pid == 0) {
                RunParams p = {
                        .init_pidfd = -1, /* its setns fails: the first step after the check that reports */
                        .cgroup_fd = -1,
                        .report_fd = sk[1],
                        .stdio = { -1, -1, -1 },
                        .parent = parent == 0 ? getppid() : parent,
                        .direct = direct,
                };
                close(sk[0]);
                run_helper_main(&p);
        }
        close(sk[1]);
        if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st))
                o.status = WEXITSTATUS(st);
        if (report_recv(sk[0], &r, &fd) > 0) {
                o.report = true;
                o.step = r.step;
                if (fd >= 0)
                        close(fd);
        }
        close(sk[0]);
        return o;
}

int main(void) {
        Outcome o;

        /* 0 here: the test's own pid, the helper's real parent. */
        o = helper_with(0, false);
        ok(o.report && (o.step == STEP_SETNS || o.step == STEP_SETUID),
           "with its parent the daemon it made it, the helper goes on (and reports its first failure: %s)",
           o.report ? spawn_step_to_string(o.step) : "none");
        o = helper_with(1, false);
        is_int(o.status, 1, "with any other parent (the daemon died, it was reparented), it exits 1 at once");
        ok(!o.report, "and does nothing else: no report, no setns, no command");
        /* Direct, the helper is born in the sandbox's pid namespace, where its parent has no pid (0);
         * here it sees this test's pid instead: a parent the check must refuse. */
        o = helper_with(0, true);
        is_int(o.status, 1, "direct, a parent it can see is not the daemon: it exits 1");
        ok(!o.report, "and does nothing else");
        return done_testing();
}
