/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The start of a run or a session: its child cgroup, its pipes and report socket, the helper that
 * joins the sandbox (the exec'd run helper, or a clone of ours), the watch on both, and the
 * failure report. What comes of it is told to the owner (run.c, session.c) through its LaunchOps. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "launch.h"
#include "log.h"
#include "macro.h"
#include "context.h"
#include "fdstore.h"
#include "pidfd.h"
#include "run-exec.h"
#include "sandbox.h"
#include "spawn.h"
#include "util.h"

#define LAUNCH_FDS_NONE ((LaunchFds) { { -1, -1 }, { -1, -1 }, { -1, -1 }, { -1, -1 } })

void launch_init(Launch *l, Sandbox *s, const LaunchOps *ops, void *userdata) {
        *l = (Launch) {
                .sandbox = s,
                .ops = ops,
                .userdata = userdata,
                .cg_fd = -EBADF,
                .kill_fd = -EBADF,
                .warm = WARM_HELPER_NONE,
                .pidfd = -EBADF,
                .report_fd = -EBADF,
        };
}

void launch_done(Launch *l) {
        warm_helper_kill(&l->warm);
        l->report_source = sd_event_source_disable_unref(l->report_source);
        l->report_fd = safe_close(l->report_fd);
        l->child_source = sd_event_source_disable_unref(l->child_source);
        l->exit_retry = sd_event_source_disable_unref(l->exit_retry);
        l->pidfd = safe_close(l->pidfd);
        l->kill_fd = safe_close(l->kill_fd);
        l->cg_fd = safe_close(l->cg_fd);
}

/* ---- Reports and the helper's end ---------------------------------------------------------- */

void launch_collect_reports(Launch *l) {
        SpawnReport rep;
        int fd, k = -EAGAIN;
        while (l->report_fd >= 0 && (k = report_recv(l->report_fd, &rep, &fd)) > 0)
                l->ops->report(l->userdata, &rep, fd);
        if (k == 0 && l->ops->report_eof)
                l->ops->report_eof(l->userdata);
}

static int on_report(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Launch *l = userdata;
        SpawnReport rep;
        int passed, k = report_recv(fd, &rep, &passed);
        if (k > 0)
                l->ops->report(l->userdata, &rep, passed);
        else if (k == 0 || (k < 0 && k != -EAGAIN && k != -EINTR)) {
                /* First: the owner may end (and free l) on the report's end (an adopted run). */
                l->report_source = sd_event_source_disable_unref(l->report_source);
                if (k == 0 && l->ops->report_eof)
                        l->ops->report_eof(l->userdata);
        }
        return 0;
}

static int on_helper_exit(sd_event_source *src, const siginfo_t *si, void *userdata) {
        Launch *l = userdata;
        l->child_source = sd_event_source_disable_unref(l->child_source);
        l->ops->helper_exit(l->userdata, si);
        return 0;
}

static int on_adopted_helper_exit(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Launch *l = userdata;
        l->child_source = sd_event_source_disable_unref(l->child_source);
        l->ops->helper_exit(l->userdata, &(siginfo_t) {});
        return 0;
}

int launch_adopt(Launch *l, const char *cg_name, int pidfd, int report_fd) {
        sd_event *e = l->sandbox->ctx->event;
        int k, pid = 0;

        l->pidfd = pidfd;
        l->report_fd = report_fd;
        if (pidfd < 0 || report_fd < 0)
                return -EBADF;
        snprintf(l->cg_name, sizeof(l->cg_name), "%s", cg_name);
        l->cg_fd = openat(l->sandbox->cg_fd, cg_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (l->cg_fd < 0)
                return -errno;
        k = cg_open_kill(l->cg_fd);
        if (k < 0 && k != -ENOENT)
                return k;
        l->kill_fd = k;
        if (fdstore_check_pidfd(pidfd, &pid) >= 0)
                l->pid = pid; /* 0 when it has ended already */
        if ((k = sd_event_add_io(e, &l->report_source, report_fd, EPOLLIN, on_report, l)) < 0)
                return k;
        return sd_event_add_io(e, &l->child_source, pidfd, EPOLLIN, on_adopted_helper_exit, l);
}

/* ---- Starting ---------------------------------------------------------------------------- */

const char *launch_next_cgroup_name(Sandbox *s, const char *kind, char *buf, size_t len) {
        const char *spare = sandbox_spare_name(s, kind);
        if (spare)
                snprintf(buf, len, "%s", spare);
        else
                snprintf(buf, len, "%s-%u", kind, s->next_run_no + 1);
        return buf;
}

static int launch_make_cgroup(Launch *l, const LaunchSpec *spec) {
        Sandbox *s = l->sandbox;
        CgLimits lim = sandbox_run_limits(s, spec->memory, spec->pids);
        int k;

        k = sandbox_spare_take(s, spec->kind, &lim, s->enforced, l->cg_name, sizeof(l->cg_name), &l->cg_fd, &l->kill_fd,
                               &l->warm);
        if (k != 0)
                return k < 0 ? k : 0;
        launch_next_cgroup_name(s, spec->kind, l->cg_name, sizeof(l->cg_name));
        s->next_run_no++;
        k = cg_create(s->cg_fd, l->cg_name, &l->cg_fd);
        if (k < 0)
                return k;
        /* A run that could not be killed later (its timeout, say, with the daemon out of fds)
         * does not start. */
        k = cg_open_kill(l->cg_fd);
        if (k < 0 && k != -ENOENT)
                return k;
        l->kill_fd = k;
        return cg_apply_limits_at(l->cg_fd, &s->ctx->cg, &lim, s->enforced);
}

#if defined(__SANITIZE_ADDRESS__)
#  define LAUNCH_SANITIZED 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define LAUNCH_SANITIZED 1
#  endif
#endif
#ifndef LAUNCH_SANITIZED
#  define LAUNCH_SANITIZED 0
#endif

/* rlimits are the second guard where the kernel's cgroup limit is not available (pids and
 * memory: the command's own limits, 0 for the sandbox's). Memory is RLIMIT_DATA, not RLIMIT_AS:
 * since Linux 4.7 it counts private writable mappings (heap, anonymous memory, thread stacks,
 * a reservation made writable later), not PROT_NONE reservations, which Go's runtime (hundreds
 * of MB of arena index at start) and Java's heap make and which RLIMIT_AS refused outright. */
static void launch_params_guard(Sandbox *s, const LaunchSpec *spec, RunParams *p) {
        uint64_t pids = spec->pids, memory = spec->memory;
        uint64_t open_files = spec->open_files ?: s->limits.open_files, file_size = spec->file_size ?: s->limits.file_size;

        if (!(s->enforced & CG_PIDS)) {
                rlim_t n = (rlim_t) (pids ? pids : s->limits.pids);
                p->rl_nproc = (struct rlimit) { n, n };
                p->rl_nproc_set = true;
        }
        if (!(s->enforced & CG_MEMORY)) {
                rlim_t n = (rlim_t) (memory ? memory : s->limits.memory);
                p->rl_data = (struct rlimit) { n, n };
                p->rl_data_set = true;
        }
        /* limits.open_files, soft = hard (the daemon raised its own soft limit, main.c; a sandbox
         * restored from an old record without it has the default); limits.file_size when set. */
        if (open_files && (spec->open_files || !spec->nofile_given)) {
                p->rl_nofile = (struct rlimit) { (rlim_t) open_files, (rlim_t) open_files };
                p->rl_nofile_set = true;
        }
        if (file_size && (spec->file_size || !spec->fsize_given)) {
                p->rl_fsize = (struct rlimit) { (rlim_t) file_size, (rlim_t) file_size };
                p->rl_fsize_set = true;
        }
        /* Signals the daemon ignores stay ignored across exec unless the command resets them. */
        p->reset_signals = s->ctx->ignored_signals;
        p->reset_oom_score = s->ctx->oom_score_negative;
        p->parent = getpid();
        p->filter = &s->ctx->filter;
}

static void launch_fds_close_child(LaunchFds *f) {
        f->in[0] = safe_close(f->in[0]);
        f->out[1] = safe_close(f->out[1]);
        f->err[1] = safe_close(f->err[1]);
        f->rep[1] = safe_close(f->rep[1]);
}

static void launch_fds_close_all(LaunchFds *f) {
        launch_fds_close_child(f);
        f->in[1] = safe_close(f->in[1]);
        f->out[0] = safe_close(f->out[0]);
        f->err[0] = safe_close(f->err[0]);
        f->rep[0] = safe_close(f->rep[0]);
}

/* The report socket, and the pipes unless the helper opens a terminal inside (whose stdio it is). */
static int launch_fds_open(LaunchFds *f, bool pipes, bool report) {
        *f = LAUNCH_FDS_NONE;
        if (pipes && (pipe2(f->in, O_CLOEXEC) < 0 || pipe2(f->out, O_CLOEXEC) < 0 || pipe2(f->err, O_CLOEXEC) < 0))
                return -errno;
        if (report && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, f->rep) < 0)
                return -errno;
        return 0;
}

/* The helper is a vfork-style child (run-exec.c): we wait in clone3 until it has exec'd. Born in a
 * frozen cgroup, it would be frozen before it could, and we with it, until a thaw that only we
 * would do (a snapshot's). So where the command's cgroup is frozen (by the snapshot's freeze of the
 * sandbox, or by anyone's of the sandbox or above: cgroup.events says so at once for a new empty
 * cgroup), the helper is born in ours and moves itself (RunParams.cgroup_fd), then waits there for
 * the thaw while we go on. Unreadable counts as frozen. */
static bool launch_cgroup_frozen(Launch *l) {
        return l->sandbox->frozen || cg_frozen(l->cg_fd) != 0;
}

/* What every start of a helper gives it: the sandbox, the fds, the guards. */
static void launch_fill_params(Launch *l, const LaunchSpec *spec, LaunchFds *f) {
        Sandbox *s = l->sandbox;
        RunParams *p = spec->params;

        p->init_pidfd = s->init_pidfd;
        p->cgroup_fd = -1;
        p->report_fd = f->rep[1];
        p->stdio[0] = f->in[0];
        p->stdio[1] = f->out[1];
        p->stdio[2] = spec->stderr_fd ? *spec->stderr_fd : f->err[1];
        if (spec->stdio)
                memcpy(p->stdio, spec->stdio, sizeof(p->stdio));
        launch_params_guard(s, spec, p);
        p->outlive_daemon = p->outlive_daemon || spec->keep;
#if LAUNCH_SANITIZED
        /* The file helper is our code and runs on after its rlimits (a command execs first): built
         * with ASan, it maps shadow and allocator memory (writable: RLIMIT_DATA counts it) far
         * beyond any limit a sandbox's memory gives. Only that build leaves it out; the pids
         * guard stays. */
        if (spec->file_helper)
                p->rl_data_set = false;
#endif
}

/* The run the warm helper in its cgroup can take (sandbox_spare_take()): one it would start
 * direct the cold way too (launch_spawn()), not a terminal's, as the user the helper already is. */
static bool launch_can_warm(const Launch *l, const LaunchSpec *spec) {
        const Context *m = l->sandbox->ctx;
        const RunParams *p = spec->params;
        return l->warm.sock >= 0 && !spec->file_helper && spec->via_helper && m->run_helper_fd >= 0 &&
               (!spec->keep || m->features.pidfd_exit_info) && !p->own_pidns && !p->pty && p->user == l->warm.user &&
               !p->ids_set && !p->caps_set;
}

/* The warm helper takes the run and becomes its command: what the cold way's exec of a helper and
 * its joining of the sandbox did is done. Its socket is the run's report socket. A frozen
 * sandbox's helper is frozen with it and goes on at the thaw, as a helper that moved itself into
 * a frozen cgroup does. */
static int launch_warm(Launch *l, const LaunchSpec *spec, LaunchFds *f) {
        RunParams *p = spec->params;
        int k;

        launch_fill_params(l, spec, f);
        p->direct = true;
        if ((k = warm_request_send(l->warm.sock, p)) < 0) {
                p->direct = false;
                return k;
        }
        l->pid = l->warm.pid;
        l->inner_pid = l->warm.inner_pid;
        l->pidfd = TAKE_FD(l->warm.pidfd);
        f->rep[0] = TAKE_FD(l->warm.sock);
        l->warm = WARM_HELPER_NONE;
        l->direct = true;
        return 0;
}

static int launch_spawn(Launch *l, const LaunchSpec *spec, LaunchFds *f) {
        Sandbox *s = l->sandbox;
        Context *m = s->ctx;
        RunParams *p = spec->params;
        pid_t pid;

        launch_fill_params(l, spec, f);
        if (spec->file_helper || (spec->via_helper && m->run_helper_fd >= 0)) {
                int helper_fd = spec->file_helper ? m->file_helper_fd : m->run_helper_fd;
                bool born_in = run_exec_into_cgroup() && !launch_cgroup_frozen(l);

                if (!born_in)
                        p->cgroup_fd = l->cg_fd;
                /* Born in the sandbox's pid namespace, the helper can become the command itself:
                 * no fork, and no helper waiting for it. setns(CLONE_NEWPID) only sets where our
                 * children are born; we stay where we are, and set it back at once. One that may
                 * outlive us only where a next daemon can read its end from its pidfd. */
                else if ((!spec->keep || m->features.pidfd_exit_info) && !p->own_pidns && m->self_pidns_fd >= 0 &&
                         setns(s->init_pidfd, CLONE_NEWPID) == 0)
                        p->direct = true;
                pid = run_exec_helper(helper_fd, p, born_in ? l->cg_fd : -1, &l->pidfd);
                /* Our later children (other sandboxes' inits among them) must never be born in
                 * this sandbox: there is no way on if we cannot undo it (and the kernel always
                 * allows a return to our own). */
                if (p->direct && setns(m->self_pidns_fd, CLONE_NEWPID) < 0) {
                        log_error("cannot set our children's pid namespace back to our own: %m");
                        abort();
                }
                l->direct = p->direct;
                if (pid < 0)
                        return pid;
                l->pid = pid;
                return 0;
        }
        pid = clone3_pidfd(0, l->cg_fd, &l->pidfd);
        if (pid == 0) {
                /* As the init is "sandbox-init"; comm keeps 15 characters. */
                spawn_set_name(strcmp(spec->kind, "pty") == 0 ? "sandbox-session" : "sandbox-run");
                run_helper_main(p);
        }
        if (pid < 0)
                return pid;
        l->pid = pid;
        return 0;
}

static int launch_watch(Launch *l, LaunchFds *f) {
        sd_event *e = l->sandbox->ctx->event;
        int k;

        l->report_fd = TAKE_FD(f->rep[0]);
        if ((k = l->ops->watch(l->userdata, f)) < 0)
                return k;
        if ((k = sd_event_add_io(e, &l->report_source, l->report_fd, EPOLLIN, on_report, l)) < 0)
                return k;
        return sd_event_add_child_pidfd(e, &l->child_source, l->pidfd, WEXITED, on_helper_exit, l);
}

static int launch_error(ProtoError *err, const char *what, int k) {
        return proto_error_set(err, SBX_E_SPAWN_FAILED, NULL, "%s: %s", what, strerror(-k));
}

int launch_start(Launch *l, const LaunchSpec *spec, ProtoError *err) {
        LaunchFds f;
        int k;

        bool warm;

        if ((k = launch_make_cgroup(l, spec)) < 0)
                return launch_error(err, spec->what_cgroup, k);
        /* The cold way's helper is born alone in the cgroup. */
        if (!(warm = launch_can_warm(l, spec)))
                warm_helper_kill(&l->warm);
        if ((k = launch_fds_open(&f, spec->pipes, !warm)) < 0) {
                launch_fds_close_all(&f); /* some may have been made before the fds ran out */
                return launch_error(err, spec->what_fds, k);
        }
        if (warm && (k = launch_warm(l, spec, &f)) < 0) {
                /* Gone (-EPIPE), or a request too long for one message: the cold way. */
                log_debug_errno(k, "sandbox %s: the warm helper cannot take the run, started the cold way: %m", l->sandbox->id);
                warm_helper_kill(&l->warm);
                warm = false;
                k = socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, f.rep) < 0 ? -errno : 0;
        }
        if (!warm && k >= 0)
                k = launch_spawn(l, spec, &f);
        launch_fds_close_child(&f);
        if (k >= 0)
                k = launch_watch(l, &f);
        launch_fds_close_all(&f); /* what the watch did not take */
        if (k < 0)
                return launch_error(err, spec->what_start, k);
        /* The next run's cgroup, while this one's helper and command run on another CPU. */
        sandbox_spare_make(l->sandbox);
        return 0;
}

int launch_adopt_reports(Launch *l, const char *cg_name, int cg_fd, int report_fd) {
        int k;

        snprintf(l->cg_name, sizeof(l->cg_name), "%s", cg_name);
        l->cg_fd = cg_fd;
        l->report_fd = report_fd;
        k = cg_open_kill(l->cg_fd);
        if (k < 0 && k != -ENOENT)
                return k;
        l->kill_fd = k;
        (void) fcntl(l->report_fd, F_SETFL, O_NONBLOCK);
        return sd_event_add_io(l->sandbox->ctx->event, &l->report_source, l->report_fd, EPOLLIN, on_report, l);
}

/* Ended, a process that is not our child may not have been reaped yet by its parent now (the
 * host's init), nor be readable as a zombie between our two looks: a few tries, 10 ms apart. */
#define LAUNCH_EXIT_TRIES 300
#define LAUNCH_EXIT_RETRY_USEC (10 * USEC_PER_MSEC)

static int on_adopted_command_exit(sd_event_source *src, int fd, uint32_t revents, void *userdata);

static int on_exit_retry(sd_event_source *src, uint64_t usec, void *userdata) {
        return on_adopted_command_exit(src, -1, 0, userdata);
}

static int on_adopted_command_exit(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Launch *l = userdata;
        siginfo_t si = {};
        int code = 0, status = 0, k = pidfd_exit_status(l->pidfd, &code, &status);

        if (k == 0 && ++l->exit_tries < LAUNCH_EXIT_TRIES) {
                (void) sd_event_source_set_enabled(l->child_source, SD_EVENT_OFF);
                l->exit_retry = sd_event_source_disable_unref(l->exit_retry);
                if (sd_event_add_time_relative(l->sandbox->ctx->event, &l->exit_retry, CLOCK_MONOTONIC,
                                               LAUNCH_EXIT_RETRY_USEC, 0, on_exit_retry, l) >= 0)
                        return 0;
        }
        l->child_source = sd_event_source_disable_unref(l->child_source);
        l->exit_retry = sd_event_source_disable_unref(l->exit_retry);
        if (k > 0) {
                si.si_code = code;
                si.si_status = status;
        } else
                log_warning("%s: how its command ended cannot be read from its pidfd", l->cg_name);
        l->ops->helper_exit(l->userdata, &si);
        return 0;
}

int launch_adopt_direct(Launch *l, const char *cg_name, int cg_fd, int report_fd, int pidfd) {
        int k = launch_adopt_reports(l, cg_name, cg_fd, report_fd);

        l->pidfd = pidfd;
        l->direct = true;
        if (k < 0)
                return k;
        return sd_event_add_io(l->sandbox->ctx->event, &l->child_source, pidfd, EPOLLIN, on_adopted_command_exit, l);
}

void launch_abort(Launch *l) {
        warm_helper_kill(&l->warm);
        if (l->pid > 0) {
                /* The helper is ours and unreaped: kill it and the cgroup (it may not be in it
                 * yet), then wait for it (SIGKILL ends a frozen or stopped process too). */
                (void) syscall(SYS_pidfd_send_signal, l->pidfd, SIGKILL, NULL, 0);
                (void) cg_kill_at(l->kill_fd, l->cg_fd);
                (void) waitid(P_PIDFD, (id_t) l->pidfd, &(siginfo_t) {}, WEXITED);
        }
        if (l->cg_fd >= 0)
                (void) unlinkat(l->sandbox->cg_fd, l->cg_name, AT_REMOVEDIR);
}
