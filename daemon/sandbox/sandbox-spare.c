/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The cgroup of a sandbox's next run, made ahead: when a pooled sandbox is ready, and by each run
 * once its helper is started (launch.c), while the command runs on another CPU. A run then starts
 * without the mkdir of its cgroup and its limit writes on its path (the kernel fills a new
 * cgroup's directory with every controller's files: 45 us on a host without the memory
 * controller, more with it). Only "run" cgroups are made ahead; sessions and file operations make
 * theirs as before. A daemon that stops removes its sandboxes' spares (sandbox_spare_drop()); one
 * that crashed leaves an empty cgroup, which the next daemon removes once the runs it takes back
 * have claimed theirs (sandbox_clear_unclaimed_runs()). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cgroup.h"
#include "context.h"
#include "fdstore.h"
#include "log.h"
#include "macro.h"
#include "pidfd.h"
#include "run-exec.h"
#include "sandbox-internal.h"
#include "sandbox.h"

#define SPARE_KIND "run"
/* Under this many pids for the whole sandbox, none goes to a warm helper. */
#define WARM_PIDS_MIN 64

CgLimits sandbox_run_limits(const Sandbox *s, uint64_t memory, uint64_t pids) {
        return (CgLimits) {
                .memory = memory ? memory : s->limits.memory,
                .swap = s->ctx->config.swap_max,
                .pids = pids,
                .oom_group = true, /* an OOM kill takes the whole run, never half of it */
        };
}

void sandbox_spare_init(SandboxSpare *sp) {
        *sp = (SandboxSpare) { .cg_fd = -EBADF, .kill_fd = -EBADF, .warm = WARM_HELPER_NONE };
}

static bool limits_same(const CgLimits *a, const CgLimits *b) {
        return a->memory == b->memory && a->swap == b->swap && a->pids == b->pids && a->millicpus == b->millicpus &&
               a->oom_group == b->oom_group;
}

static void spare_warm_end(SandboxSpare *sp) {
        sp->warm_exit = sd_event_source_disable_unref(sp->warm_exit);
        warm_helper_kill(&sp->warm);
}

static void spare_close(SandboxSpare *sp) {
        spare_warm_end(sp);
        sp->name[0] = '\0';
        sp->cg_fd = safe_close(sp->cg_fd);
        sp->kill_fd = safe_close(sp->kill_fd);
}

/* As launch_make_cgroup() makes a run's, with the sandbox's own limits (a run that asks for others
 * has them written when it takes it). */
static int spare_make(Sandbox *s) {
        SandboxSpare *sp = &s->spare;
        CgLimits lim = sandbox_run_limits(s, 0, 0);
        int k;

        snprintf(sp->name, sizeof(sp->name), SPARE_KIND "-%u", s->next_run_no + 1);
        k = cg_create(s->cg_fd, sp->name, &sp->cg_fd);
        if (k < 0) {
                sp->name[0] = '\0';
                return k;
        }
        s->next_run_no++;
        k = cg_open_kill(sp->cg_fd);
        if (k < 0 && k != -ENOENT)
                goto fail;
        sp->kill_fd = k;
        if ((k = cg_apply_limits_at(sp->cg_fd, &s->ctx->cg, &lim, s->enforced)) < 0)
                goto fail;
        sp->lim = lim;
        sp->mask = s->enforced;
        return 0;
fail:
        (void) unlinkat(s->cg_fd, sp->name, AT_REMOVEDIR);
        spare_close(sp);
        return k;
}

bool sandbox_keeps_runs(const Sandbox *s) {
        return !(s->ephemeral || s->pooled || s->transient || s->ctx->config.stop_sandboxes) && fdstore_enabled();
}

/* Killed from inside (it is root of the sandbox's user namespace there), or with the whole
 * sandbox: reaped at once, for a zombie of ours in its pid namespace would keep the sandbox's init
 * from ending. The next run goes the cold way. */
static int on_warm_exit(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Sandbox *s = userdata;
        spare_warm_end(&s->spare);
        return 0;
}

/* A warm helper for the run to come, born in the spare, in the sandbox's pid namespace (as a
 * direct run's helper is: launch.c), the sandbox joined, waiting for its run (spawn.h). Where it
 * cannot be had the run goes the cold way: nothing is said. Never into a frozen cgroup: we would
 * wait in vfork for a child that cannot exec until a thaw that only we would do. */
static void spare_warm(Sandbox *s) {
        Context *m = s->ctx;
        SandboxSpare *sp = &s->spare;
        int pair[2], pidfd = -EBADF, inner = 0;
        RunParams w;
        pid_t pid;

        /* A kept run is started direct (and so warm) only where the kernel keeps a process's end
         * with its pidfd (launch.c): elsewhere a warm helper would only be killed again. It takes
         * one of the sandbox's pids: not where there are few. */
        if (m->run_helper_fd < 0 || !run_exec_into_cgroup() || m->self_pidns_fd < 0 || s->init_pidfd < 0 || s->frozen ||
            (sandbox_keeps_runs(s) && !m->features.pidfd_exit_info) || (s->limits.pids && s->limits.pids < WARM_PIDS_MIN) ||
            cg_frozen(sp->cg_fd) != 0)
                return;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return;
        w = (RunParams) {
                .init_pidfd = s->init_pidfd,
                .cgroup_fd = -1,
                .report_fd = pair[1],
                .stdio = { -1, -1, -1 },
                .reset_signals = m->ignored_signals,
                .reset_oom_score = m->oom_score_negative,
                .user = s->user,
                .parent = getpid(),
                .direct = true,
                .filter = &m->filter,
        };
        if (setns(s->init_pidfd, CLONE_NEWPID) < 0) {
                safe_close(pair[0]);
                safe_close(pair[1]);
                return;
        }
        pid = run_exec_warm(m->run_helper_fd, &w, sp->cg_fd, &pidfd);
        /* As launch.c: none of our later children may be born in this sandbox. */
        if (setns(m->self_pidns_fd, CLONE_NEWPID) < 0) {
                log_error("cannot set our children's pid namespace back to our own: %m");
                abort();
        }
        safe_close(pair[1]);
        if (pid < 0) {
                safe_close(pair[0]);
                return;
        }
        sp->warm = (WarmHelper) { .pid = pid, .pidfd = pidfd, .sock = pair[0], .user = s->user };
        /* Read now, not on the run's path ("started" tells it). */
        if (pidfd_pids(pidfd, &(int) { 0 }, &inner) >= 0 && inner > 0)
                sp->warm.inner_pid = inner;
        if (sd_event_add_io(m->event, &sp->warm_exit, pidfd, EPOLLIN, on_warm_exit, s) < 0)
                spare_warm_end(sp);
}

void sandbox_spare_make(Sandbox *s) {
        int k;

        if (s->spare.name[0] || s->state != SANDBOX_READY || (s->ephemeral && !s->pooled) || s->cg_fd < 0)
                return;
        /* Not made: the next run makes its own, and says why if it cannot. */
        if ((k = spare_make(s)) < 0) {
                log_debug_errno(k, "sandbox %s: cannot make the next run's cgroup ahead: %m", s->id);
                return;
        }
        spare_warm(s);
}

bool sandbox_is_member_cgroup(Sandbox *s, const char *name) {
        return name[0] != '.' && strcmp(name, "init") != 0 && !(s->spare.name[0] && strcmp(name, s->spare.name) == 0);
}

const char *sandbox_spare_name(Sandbox *s, const char *kind) {
        return s->spare.name[0] && strcmp(kind, SPARE_KIND) == 0 ? s->spare.name : NULL;
}

int sandbox_spare_take(Sandbox *s, const char *kind, const CgLimits *lim, unsigned mask, char *name, size_t len,
                       int *ret_cg_fd, int *ret_kill_fd, WarmHelper *ret_warm) {
        SandboxSpare *sp = &s->spare;
        bool same;

        if (!sandbox_spare_name(s, kind) || strlen(sp->name) >= len)
                return 0;
        same = mask == sp->mask && limits_same(lim, &sp->lim);
        strcpy(name, sp->name);
        *ret_cg_fd = TAKE_FD(sp->cg_fd);
        *ret_kill_fd = TAKE_FD(sp->kill_fd);
        sp->warm_exit = sd_event_source_disable_unref(sp->warm_exit);
        *ret_warm = sp->warm;
        sp->warm = WARM_HELPER_NONE;
        sp->name[0] = '\0';
        if (!same) {
                int k = cg_apply_limits_at(*ret_cg_fd, &s->ctx->cg, lim, mask);
                if (k < 0)
                        return k;
        }
        return 1;
}

void sandbox_spare_drop(Sandbox *s) {
        spare_warm_end(&s->spare); /* out of the cgroup first */
        if (s->spare.name[0] && s->cg_fd >= 0)
                (void) unlinkat(s->cg_fd, s->spare.name, AT_REMOVEDIR);
        spare_close(&s->spare);
}

static bool claimed(Sandbox *s, const char *name) {
        for (SandboxMember *m = s->members; m; m = m->next) {
                const char *c = m->ops->cgroup ? m->ops->cgroup(m) : NULL;
                if (c && strcmp(c, name) == 0)
                        return true;
        }
        return s->spare.name[0] && strcmp(s->spare.name, name) == 0;
}

void sandbox_clear_unclaimed_runs(Sandbox *s) {
        int fd = s->cg_fd >= 0 ? openat(s->cg_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -EBADF;
        struct dirent *de;
        DIR *d;

        if (fd < 0 || !(d = fdopendir(fd))) {
                safe_close(fd);
                return;
        }
        while ((de = readdir(d))) {
                _cleanup_close_ int c = -EBADF;

                if (de->d_type != DT_DIR || strncmp(de->d_name, SPARE_KIND "-", strlen(SPARE_KIND) + 1) != 0 ||
                    claimed(s, de->d_name))
                        continue;
                c = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                /* A process still in it (a lost run's, killed: runs.log) keeps it for now. */
                if (c >= 0 && cg_populated(c) == 0 && unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) == 0)
                        log_debug("sandbox %s: removed %s, an earlier daemon's that no run claims", s->id, de->d_name);
        }
        closedir(d);
}
