/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests for daemon/host/fdstore.c: what the store gave back at start is taken by name, the
 * first of a name in systemd's order first, each fd once (the table is sorted at the first take, a
 * binary search since: thousands of names at a restart); what nobody took is counted and closed;
 * a pidfd's check gives its pid and, for the pid 1 of a pid namespace, 1 as its innermost pid. */

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fdstore.h"
#include "macro.h"
#include "tap.h"

static int devnull(void) {
        return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static ino_t ino_of(int fd) {
        struct stat st;
        return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

static void test_take(void) {
        FdStore st = {};
        char name[FDSTORE_NAME_MAX];
        int first, second, fd, pipefd[2];
        bool all = true;

        /* 300 names added in reverse order, and one name twice (a pipe's two ends, told apart). */
        for (int i = 299; i >= 0; i--) {
                snprintf(name, sizeof(name), "s.sbx-%012d.init", i);
                all = all && fdstore_add(&st, name, devnull()) == 0;
        }
        ok(all && st.n == 300, "300 entries added");
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return;
        ino_t pipe_ino = ino_of(pipefd[0]);
        ok(fdstore_add(&st, "r.run-1.out", pipefd[0]) == 0, "the read end under r.run-1.out");
        ok(fdstore_add(&st, "r.run-1.out", pipefd[1]) == 0, "the write end under the same name");
        ok(fdstore_add(&st, "a.zzz.last", devnull()) == 0, "a name after every other");
        first = fdstore_take(&st, "r.run-1.out");
        second = fdstore_take(&st, "r.run-1.out");
        ok(first >= 0 && ino_of(first) == pipe_ino && (fcntl(first, F_GETFL) & O_ACCMODE) == O_RDONLY,
           "the first take of a name gives the first fd systemd gave of it");
        ok(second >= 0 && (fcntl(second, F_GETFL) & O_ACCMODE) == O_WRONLY, "the second take gives the second");
        is_int(fdstore_take(&st, "r.run-1.out"), -ENOENT, "a third take: -ENOENT");
        safe_close(first);
        safe_close(second);
        all = true;
        for (int i = 0; i < 300; i += 7) {
                snprintf(name, sizeof(name), "s.sbx-%012d.init", i);
                fd = fdstore_take(&st, name);
                all = all && fd >= 0;
                safe_close(fd);
                all = all && fdstore_take(&st, name) == -ENOENT;
        }
        ok(all, "every 7th of the 300 names found once, then no longer");
        fd = fdstore_take(&st, "a.zzz.last");
        ok(fd >= 0, "the name sorted last is found");
        safe_close(fd);
        is_int(fdstore_take(&st, "s.sbx-000000000300.init"), -ENOENT, "a name never stored: -ENOENT");
        is_int(fdstore_take(&st, ""), -ENOENT, "the empty name: -ENOENT");
        /* Added after a take: the table is sorted again at the next. */
        ok(fdstore_add(&st, "a.aaa.new", devnull()) == 0, "an entry added after the takes");
        fd = fdstore_take(&st, "a.aaa.new");
        ok(fd >= 0, "and taken");
        safe_close(fd);
        is_int((long long) fdstore_drop_unclaimed(&st), 300 - 43, "what nobody took is dropped, counted (257)");
        is_int((long long) fdstore_drop_unclaimed(&st), 0, "and only once");
        fdstore_done(&st);
}

static void test_pidfd_ns(void) {
        struct clone_args args = { .flags = CLONE_NEWPID | CLONE_PIDFD, .exit_signal = SIGCHLD };
        int pidfd = -1, pid, inner = -1, k, self;
        long child;

        self = (int) syscall(SYS_pidfd_open, getpid(), 0);
        k = fdstore_check_pidfd_ns(self, &pid, &inner);
        ok(k == 0 && pid == getpid(), "our own pidfd: our pid");
        is_int(inner, 0, "in no pid namespace of its own: 0 as its innermost pid");
        safe_close(self);
        is_int(fdstore_check_pidfd_ns(STDIN_FILENO, &pid, &inner) == 0 ? 0 : -1, -1, "stdin is not a pidfd");
        args.pidfd = (uint64_t) (uintptr_t) &pidfd;
        child = syscall(SYS_clone3, &args, sizeof(args));
        if (child == 0) {
                pause();
                _exit(0);
        }
        if (child < 0) {
                ok(true, "no new pid namespace here (%s): the innermost pid not checked", strerror(errno));
                return;
        }
        k = fdstore_check_pidfd_ns(pidfd, &pid, &inner);
        ok(k == 0 && pid == (int) child, "a pid namespace's init: its pid as we see it");
        is_int(inner, 1, "and 1 as its innermost pid");
        kill((pid_t) child, SIGKILL);
        (void) waitpid((pid_t) child, NULL, 0);
        is_int(fdstore_check_pidfd_ns(pidfd, &pid, &inner), -ESRCH, "once it has ended and been reaped: -ESRCH");
        safe_close(pidfd);
}

int main(void) {
        test_take();
        test_pidfd_ns();
        return done_testing();
}
