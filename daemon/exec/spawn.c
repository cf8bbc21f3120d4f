/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "identity.h"
#include "macro.h"
#include "syscall-filter.h"
#include "spawn.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

static const char *const step_names[_STEP_MAX] = {
        [STEP_NONE] = "none",       [STEP_SYNC] = "sync",          [STEP_SETUID] = "setuid",
        [STEP_CGROUPNS] = "cgroupns", [STEP_MOUNT_PRIVATE] = "mount-private", [STEP_ROOT] = "root",
        [STEP_PROC] = "proc",       [STEP_DEV] = "dev",            [STEP_TMP] = "tmp",
        [STEP_WORK] = "work",       [STEP_MASK] = "mask",          [STEP_PIVOT] = "pivot-root",
        [STEP_HOSTNAME] = "hostname", [STEP_LOOPBACK] = "loopback", [STEP_SETNS] = "setns",
        [STEP_FORK] = "fork",       [STEP_SETSID] = "setsid",      [STEP_STDIO] = "stdio",
        [STEP_CWD] = "cwd",         [STEP_RLIMIT] = "rlimit",      [STEP_SIGNALS] = "signals",
        [STEP_EXEC] = "exec",       [STEP_SECCOMP] = "seccomp",     [STEP_TTY] = "tty",
        [STEP_OOM_SCORE] = "oom-score",  [STEP_MOUNTS] = "mounts",   [STEP_SYSCTL] = "sysctl",
};

const char *spawn_step_to_string(int step) {
        if (step < 0 || step >= _STEP_MAX || !step_names[step])
                return "unknown";
        return step_names[step];
}

pid_t clone3_pidfd(uint64_t flags, int cgroup_fd, int *ret_pidfd) {
        int pidfd = -1;
        struct clone_args args = {
                .flags = flags | CLONE_PIDFD,
                .pidfd = (uint64_t) (uintptr_t) &pidfd,
                /* With CLONE_PARENT the kernel takes the caller's own exit signal, and refuses one. */
                .exit_signal = flags & CLONE_PARENT ? 0 : SIGCHLD,
        };
        long pid;

        if (cgroup_fd >= 0) {
                args.flags |= CLONE_INTO_CGROUP;
                args.cgroup = (uint64_t) cgroup_fd;
        }
        pid = syscall(SYS_clone3, &args, sizeof(args));
        if (pid < 0)
                return -errno;
        if (pid > 0)
                *ret_pidfd = pidfd;
        return (pid_t) pid;
}

int report_send(int fd, const SpawnReport *r, int pass_fd) {
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } control = {};
        struct iovec iov = { .iov_base = (void *) r, .iov_len = sizeof(*r) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (pass_fd >= 0) {
                mh.msg_control = control.buf;
                mh.msg_controllen = sizeof(control.buf);
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
        }
        while (sendmsg(fd, &mh, MSG_NOSIGNAL) < 0)
                if (errno != EINTR)
                        return -errno;
        return 0;
}

int init_go_send(int fd, const InitMounts *m) {
        union {
                char buf[CMSG_SPACE(sizeof(int) * INIT_MOUNTS_MAX)];
                struct cmsghdr align;
        } control = {};
        static char msg[INIT_GO_MAX];
        struct iovec iov = { .iov_base = msg, .iov_len = 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        msg[0] = 'g';
        if (m->n > INIT_MOUNTS_MAX)
                return -E2BIG;
        for (unsigned i = 0; i < m->n; i++) {
                size_t len = strlen(m->target[i]) + 1;
                if (len > 4096 || iov.iov_len + len > sizeof(msg))
                        return -ENAMETOOLONG;
                memcpy(msg + iov.iov_len, m->target[i], len);
                iov.iov_len += len;
        }
        if (m->n > 0) {
                mh.msg_control = control.buf;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * m->n);
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int) * m->n);
                memcpy(CMSG_DATA(cm), m->fd, sizeof(int) * m->n);
        }
        while (sendmsg(fd, &mh, MSG_NOSIGNAL) < 0)
                if (errno != EINTR)
                        return -errno;
        return 0;
}

int init_go_recv(int fd, char *buf, InitMounts *ret) {
        union {
                char buf[CMSG_SPACE(sizeof(int) * INIT_MOUNTS_MAX)];
                struct cmsghdr align;
        } control = {};
        struct iovec iov = { .iov_base = buf, .iov_len = INIT_GO_MAX };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                             .msg_controllen = sizeof(control.buf) };
        unsigned nfds = 0;
        ssize_t n;
        size_t off = 1;

        *ret = (InitMounts) {};
        while ((n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC)) < 0)
                if (errno != EINTR)
                        return -1;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                        nfds = (unsigned) ((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                        memcpy(ret->fd, CMSG_DATA(cm), sizeof(int) * nfds);
                }
        if (n < 1 || buf[0] != 'g' || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
                errno = EBADMSG;
                return -1;
        }
        while (off < (size_t) n && ret->n < INIT_MOUNTS_MAX) {
                const char *t = buf + off;
                const char *end = memchr(t, '\0', (size_t) n - off);
                if (!end || t[0] != '/')
                        break;
                ret->target[ret->n++] = t;
                off = (size_t) (end - buf) + 1;
        }
        if (off != (size_t) n || ret->n != nfds) {
                errno = EBADMSG;
                return -1;
        }
        return 0;
}

int report_recv(int fd, SpawnReport *ret, int *ret_fd) {
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } control = {};
        struct iovec iov = { .iov_base = ret, .iov_len = sizeof(*ret) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                             .msg_controllen = sizeof(control.buf) };
        ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);

        *ret_fd = -1;
        if (n < 0)
                return -errno;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
                        memcpy(ret_fd, CMSG_DATA(cm), sizeof(int));
        if (n == 0)
                return 0;
        if ((size_t) n == SPAWN_REPORT_V1_SIZE)
                ret->reserved = 0, ret->end_usec = 0;
        else if ((size_t) n != sizeof(*ret)) {
                *ret_fd = safe_close(*ret_fd), *ret_fd = -1;
                return -EBADMSG;
        }
        return 1;
}

/* Fields 48-51 of /proc/self/stat: where our argv and environment strings are. */
static int proc_args_area(unsigned long area[4]) {
        char buf[1024], *p;
        int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC), field = 2;
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

        if (fd >= 0)
                close(fd);
        if (n <= 0)
                return -1;
        buf[n] = '\0';
        p = strrchr(buf, ')'); /* after the name, which may hold spaces */
        for (; p && field < 48; field++) /* p: the space before field 48 */
                p = strchr(p + 1, ' ');
        if (!p || sscanf(p, " %lu %lu %lu %lu", &area[0], &area[1], &area[2], &area[3]) != 4)
                return -1;
        return 0;
}

void spawn_set_name(const char *name) {
        size_t n = strlen(name) + 1;
        unsigned long a[4];

        (void) prctl(PR_SET_NAME, name);
        if (proc_args_area(a) < 0 || a[1] <= a[0] || a[1] - a[0] < n)
                return;
        if (a[3] > a[2])
                memset((void *) a[2], 0, a[3] - a[2]);
        memset((void *) a[0], 0, a[1] - a[0]);
        memcpy((void *) a[0], name, n); /* NULs pad the rest: nothing is moved (no PR_SET_MM) */
}

/* ---- The command (grandchild) ------------------------------------------------------------ */

_Noreturn static void child_fail(int fd, SpawnStep step) {
        SpawnReport r = { .kind = REPORT_FAILED, .step = step, .err = errno ? errno : EIO };
        (void) !write(fd, &r, sizeof(r));
        _exit(127);
}

/* Signals a C library keeps for itself (glibc 32 and 33, musl 32 to 34): its sigaction() refuses
 * them and cannot even say whether they are ignored, yet an ignored one survives execve like any
 * other (a daemon started where 32 and 33 were ignored gave every command a `kill -32` that did
 * nothing). They are always reset. */
#define LIBC_SIGNALS ((UINT64_C(1) << 31) | (UINT64_C(1) << 32) | (UINT64_C(1) << 33))

/* execve resets caught signals to the default already; only ignored ones survive it, and the
 * daemon tells which those are (one call each instead of one for every signal). The kernel's own
 * rt_sigaction, since libc refuses its signals: all zero is SIG_DFL, no flags and an empty mask
 * whatever the architecture's layout of the struct. */
static int child_reset_signals(uint64_t ignored) {
        static const unsigned long dfl[8] = { 0 };
        sigset_t all;

        ignored |= LIBC_SIGNALS;
        for (int sig = 1; sig <= 64; sig++)
                if ((ignored & (UINT64_C(1) << (sig - 1))) && sig != SIGKILL && sig != SIGSTOP)
                        (void) syscall(SYS_rt_sigaction, sig, dfl, NULL, _NSIG / 8);
        sigemptyset(&all);
        return sigprocmask(SIG_SETMASK, &all, NULL);
}

/* cwd is resolved inside the sandbox (no /proc magic links, CVE-2024-21626), and where it ends
 * up must still be /work or beneath it: a symlink that leads out is refused. */
static int child_chdir(const char *cwd, bool anywhere) {
        struct open_how how = {
                .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                .resolve = RESOLVE_NO_MAGICLINKS,
        };
        char buf[4096];
        int fd = (int) syscall(SYS_openat2, AT_FDCWD, cwd, &how, sizeof(how));

        if (fd < 0)
                return -1;
        if (fchdir(fd) < 0) {
                safe_close(fd);
                return -1;
        }
        safe_close(fd);
        /* In a root of the sandbox's own (an image, a bundle's rootfs) every directory is its. */
        if (anywhere)
                return 0;
        if (!getcwd(buf, sizeof(buf)))
                return -1;
        if (strcmp(buf, "/work") != 0 && strncmp(buf, "/work/", 6) != 0) {
                errno = EXDEV;
                return -1;
        }
        return 0;
}

/* stdio becomes 0..2 and the extra fds 3, 4, ...: each is first copied above all the targets
 * (a source may sit on another's target), and so is the error fd (*errfd may move). What is
 * left at or above the last target is closed at exec (command_main()). */
static int child_stdio(const RunParams *p, int *errfd) {
        int top = 3 + (int) p->n_extra, src[3 + RUN_EXTRA_FDS_MAX];

        if (p->n_extra > RUN_EXTRA_FDS_MAX) {
                errno = EINVAL;
                return -1;
        }
        if (*errfd < top) {
                int e = fcntl(*errfd, F_DUPFD_CLOEXEC, top);
                if (e < 0)
                        return -1;
                *errfd = e;
        }
        for (int i = 0; i < top; i++) {
                src[i] = fcntl(i < 3 ? p->stdio[i] : p->extra_fds[i - 3], F_DUPFD_CLOEXEC, top);
                if (src[i] < 0)
                        return -1;
        }
        /* dup2 leaves the target without CLOEXEC: these, and only these, reach the command. */
        for (int i = 0; i < top; i++)
                if (dup2(src[i], i) < 0)
                        return -1;
        return 0;
}

static void rlimit_lower(struct rlimit *a, const struct rlimit *b) {
        a->rlim_cur = b->rlim_cur < a->rlim_cur ? b->rlim_cur : a->rlim_cur;
        a->rlim_max = b->rlim_max < a->rlim_max ? b->rlim_max : a->rlim_max;
        a->rlim_cur = a->rlim_cur > a->rlim_max ? a->rlim_max : a->rlim_cur;
}

/* A guard of the daemon's over the run's own rlimit of that resource: the lower of both where it
 * is a guard (cpu_s, pids and memory without their controllers), the daemon's where it is the
 * run's explicit open_files or file_size (launch_params_guard() sets those only then). */
static void rlimit_guard(struct rlimit *rl, uint32_t *mask, int r, bool set, const struct rlimit *g, bool lower) {
        if (!set)
                return;
        if (lower && (*mask & (UINT32_C(1) << r)))
                rlimit_lower(&rl[r], g);
        else
                rl[r] = *g;
        *mask |= UINT32_C(1) << r;
}

/* The hard limit is lowered with the soft one in one call: never raised, which an unprivileged
 * command could not. */
static int child_rlimits(const RunParams *p) {
        struct rlimit rl[RUN_RLIMITS_MAX];
        uint32_t mask = p->rl_mask;

        memcpy(rl, p->rl, sizeof(rl));
        rlimit_guard(rl, &mask, RLIMIT_CPU, p->rl_cpu_set, &p->rl_cpu, true);
        rlimit_guard(rl, &mask, RLIMIT_NPROC, p->rl_nproc_set, &p->rl_nproc, true);
        rlimit_guard(rl, &mask, RLIMIT_DATA, p->rl_data_set, &p->rl_data, true);
        rlimit_guard(rl, &mask, RLIMIT_NOFILE, p->rl_nofile_set, &p->rl_nofile, false);
        rlimit_guard(rl, &mask, RLIMIT_FSIZE, p->rl_fsize_set, &p->rl_fsize, false);
        for (int r = 0; r < RUN_RLIMITS_MAX; r++)
                if ((mask & (UINT32_C(1) << r)) && setrlimit(r, &rl[r]) < 0)
                        return -1;
        return 0;
}

static const char *env_get(char *const *envp, const char *key) {
        size_t n = strlen(key);
        for (; envp && *envp; envp++)
                if (strncmp(*envp, key, n) == 0 && (*envp)[n] == '=')
                        return *envp + n + 1;
        return NULL;
}

/* PATH lookup with the run's own PATH (execvpe would use ours). */
static void child_exec(char *const *argv, char *const *envp) {
        const char *path = env_get(envp, "PATH");
        char buf[4096];
        int saved = ENOENT;

        if (strchr(argv[0], '/')) {
                execve(argv[0], argv, envp);
                return;
        }
        for (const char *p = path ? path : "/usr/bin:/bin"; p && *p;) {
                const char *end = strchrnul(p, ':');
                int n = snprintf(buf, sizeof(buf), "%.*s/%s", (int) (end - p), p, argv[0]);
                if (n > 0 && (size_t) n < sizeof(buf)) {
                        execve(buf, argv, envp);
                        if (errno != ENOENT && errno != ENOTDIR)
                                saved = errno;
                }
                p = *end ? end + 1 : end;
        }
        errno = saved;
}

/* Who the command is: the user's own ids, or those the run gave; its capabilities the user's,
 * or exactly the run's sets. */
static int child_identity(const RunParams *p) {
        if (p->caps_set)
                return identity_apply_caps(p->ids_set ? p->uid : p->user == SANDBOX_USER_ROOT ? 0 : SANDBOX_USER_UID,
                                           p->ids_set ? p->gid : p->user == SANDBOX_USER_ROOT ? 0 : SANDBOX_USER_GID,
                                           p->groups, p->ids_set ? p->n_groups : 0, &p->caps);
        if (!p->ids_set)
                return identity_apply(p->user);
        return identity_apply_groups(p->user, p->uid, p->gid, p->groups, p->n_groups);
}

static uid_t child_uid(const RunParams *p) {
        return p->ids_set ? p->uid : p->user == SANDBOX_USER_ROOT ? 0 : SANDBOX_USER_UID;
}

static gid_t child_gid(const RunParams *p) {
        return p->ids_set ? p->gid : p->user == SANDBOX_USER_ROOT ? 0 : SANDBOX_USER_GID;
}

/* prepared: a warm helper's (run_helper_warm()), in its session, its identity and filter set
 * before its run came: the same steps, those three done. */
_Noreturn static void command_main(const RunParams *p, int errfd, bool prepared) {
        if (!prepared && setsid() < 0)
                child_fail(errfd, STEP_SETSID);
        if (child_stdio(p, &errfd) < 0)
                child_fail(errfd, STEP_STDIO);
        /* The new session's leader takes the terminal as its controlling tty. */
        if (p->pty && ioctl(0, TIOCSCTTY, 0) < 0)
                child_fail(errfd, STEP_TTY);
        /* As login does: the terminal belongs to its user, who may open it again by name. */
        if (p->pty && child_uid(p) != 0 && fchown(0, child_uid(p), child_gid(p)) < 0)
                child_fail(errfd, STEP_TTY);
        /* Before anything that resolves a path: the cwd is checked as the user who will run. */
        if (!prepared && child_identity(p) < 0)
                child_fail(errfd, STEP_SETUID);
        if (p->umask_set)
                (void) umask((mode_t) (p->umask & 0777));
        if (child_chdir(p->cwd, p->cwd_anywhere) < 0)
                child_fail(errfd, STEP_CWD);
        if (child_rlimits(p) < 0)
                child_fail(errfd, STEP_RLIMIT);
        if (child_reset_signals(p->reset_signals) < 0)
                child_fail(errfd, STEP_SIGNALS);
        /* Nothing of the daemon's may survive into the sandbox (CVE-2024-21626): only 0..2 and
         * the run's extra fds (child_stdio()). */
        if (syscall(SYS_close_range, 3U + p->n_extra, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                child_fail(errfd, STEP_EXEC);
        /* Last, so that none of the setup above runs under the filter (the daemon compiled it
         * once at start: no allocation here); execve and the error pipe's write stay allowed. */
        if (!prepared && seccomp_apply(p->filter) < 0)
                child_fail(errfd, STEP_SECCOMP);
        child_exec(p->argv, p->envp);
        child_fail(errfd, STEP_EXEC);
}

/* ---- The helper (child of the daemon, parent of the command) ----------------------------- */

static int cmp_int(const void *a, const void *b) {
        return *(const int *) a - *(const int *) b;
}

/* The helper never execs, so it would hold every fd of the daemon: other runs' pipes (their
 * commands would never see EOF), client sockets, the listening socket. Keep only what it uses. */
void close_all_fds_except(int *keep, size_t n) {
        int from = 0;
        qsort(keep, n, sizeof(int), cmp_int);
        for (size_t i = 0; i < n; i++) {
                if (keep[i] < from)
                        continue;
                if (keep[i] > from)
                        (void) syscall(SYS_close_range, (unsigned) from, (unsigned) keep[i] - 1, 0U);
                from = keep[i] + 1;
        }
        (void) syscall(SYS_close_range, (unsigned) from, ~0U, 0U);
}

_Noreturn static void helper_fail(int report_fd, SpawnStep step) {
        SpawnReport r = { .kind = REPORT_FAILED, .step = step, .err = errno ? errno : EIO };
        report_send(report_fd, &r, -1);
        _exit(0);
}

static int helper_join(int init_pidfd) {
        /* One setns for all: joining the user namespace first grants the rights for the rest. */
        if (setns(init_pidfd, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
                                      CLONE_NEWNET | CLONE_NEWCGROUP) < 0)
                return -1;
        return 0;
}

/* The terminal is the sandbox's: /dev/ptmx of its own devpts (after the mount namespace was
 * joined), so that nothing of the host's devpts is ever in reach, and the slave is opened from
 * the master (TIOCGPTPEER) rather than by a path the sandbox could replace. */
static int helper_open_pty(const RunParams *p, int *ret_slave) {
        struct winsize ws = { .ws_row = p->rows, .ws_col = p->cols };
        int unlock = 0, master, slave;
        SpawnReport r = { .kind = REPORT_TERMINAL };

        master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (master < 0)
                return -1;
        if (ioctl(master, TIOCSPTLCK, &unlock) < 0 || (ws.ws_row && ioctl(master, TIOCSWINSZ, &ws) < 0) ||
            (slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
                close(master);
                return -1;
        }
        if (report_send(p->report_fd, &r, master) < 0) {
                close(master);
                close(slave);
                return -1;
        }
        close(master);
        *ret_slave = slave;
        return 0;
}

size_t run_params_fds(const RunParams *p, int ret[static RUN_PARAMS_FDS]) {
        size_t n = 0;
        ret[n++] = p->init_pidfd;
        ret[n++] = p->cgroup_fd;
        ret[n++] = p->report_fd;
        for (int i = 0; i < 3; i++)
                ret[n++] = p->stdio[i];
        for (unsigned i = 0; i < p->n_extra && i < RUN_EXTRA_FDS_MAX; i++)
                ret[n++] = p->extra_fds[i];
        return n;
}

static int write_zero(int dir_fd, const char *path) {
        int fd = openat(dir_fd, path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        if (write(fd, "0", 1) != 1) {
                safe_close(fd);
                return -1;
        }
        safe_close(fd);
        return 0;
}

/* The daemon may be shielded from the OOM killer (the unit's OOMScoreAdjust=); a sandbox's
 * processes must not be (THREATS RES-11). Written as host root: with CAP_SYS_RESOURCE that also
 * makes 0 the least the sandbox may set again. A host that refuses it refuses every run. */
static int helper_reset_oom_score(const RunParams *p) {
        return p->reset_oom_score ? write_zero(AT_FDCWD, "/proc/self/oom_score_adj") : 0;
}

/* A helper exec'd by the daemon's vfork child starts in the daemon's cgroup: it moves itself
 * (the kernel's clone3(CLONE_INTO_CGROUP) cannot be had without copying the daemon's memory). */
static int helper_enter_cgroup(int cgroup_fd) {
        return cgroup_fd >= 0 ? write_zero(cgroup_fd, "cgroup.procs") : 0;
}

int helper_enter_sandbox(const RunParams *p, SpawnStep *ret_step) {
        /* Still host root: the last moment a supplementary group can be dropped (ESC-14a). */
        if ((*ret_step = STEP_SETUID, setgroups(0, NULL) < 0) ||
            (*ret_step = STEP_FORK, helper_enter_cgroup(p->cgroup_fd) < 0) ||
            (*ret_step = STEP_OOM_SCORE, helper_reset_oom_score(p) < 0) ||
            (*ret_step = STEP_SETNS, helper_join(p->init_pidfd) < 0) ||
            (*ret_step = STEP_SETUID, setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0 || identity_apply(p->user) < 0) ||
            (*ret_step = STEP_RLIMIT, child_rlimits(p) < 0) ||
            (*ret_step = STEP_SIGNALS, child_reset_signals(p->reset_signals) < 0))
                return -1;
        *ret_step = STEP_NONE;
        return 0;
}

/* For "pid_namespace": "own": the kernel makes a pid namespace only for a process already in
 * its parent (unshare(CLONE_NEWPID) is EINVAL where our children's namespace, the sandbox's
 * after helper_join(), is not our own). So a child of ours, born in the sandbox's, makes it
 * and returns to do the rest of the helper's work, its next child the namespace's pid 1; we
 * wait for it and end. */
static void helper_nest_pidns(const RunParams *p) {
        siginfo_t si = {};
        int pidfd = -1;
        pid_t pid = clone3_pidfd(0, -1, &pidfd);

        if (pid < 0) {
                errno = -pid;
                helper_fail(p->report_fd, STEP_FORK);
        }
        if (pid == 0) {
                if (unshare(CLONE_NEWPID) < 0)
                        helper_fail(p->report_fd, STEP_FORK);
                return;
        }
        while (waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED) < 0)
                if (errno != EINTR)
                        _exit(1);
        _exit(0);
}

/* The command, as posix_spawn makes a child: vfork, so that the helper's page tables are not
 * copied, nor torn down again at the command's exec (a fork and its exec were a quarter of a
 * run's time, issue 33). We are suspended until it has exec'd or failed; command_main() only
 * makes system calls on its own stack frame, writes its failure to errfd and _exits. Its fd
 * table and signal actions are its own (vfork shares neither); every signal stays blocked until
 * command_main() resets them, so that no handler runs in it on our memory. The pidfd is opened
 * after: an unreaped child of ours cannot be another process. */
static pid_t command_vfork(const RunParams *p, int errfd, int *ret_pidfd) {
        sigset_t all, old;
        pid_t pid;
        int e;

        sigfillset(&all);
        (void) sigprocmask(SIG_SETMASK, &all, &old);
        pid = vfork();
        if (pid == 0)
                command_main(p, errfd, false);
        e = errno;
        (void) sigprocmask(SIG_SETMASK, &old, NULL);
        if (pid < 0) {
                errno = e;
                return -1;
        }
        *ret_pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (*ret_pidfd < 0) { /* out of fds: nobody could watch the command */
                e = errno;
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                errno = e;
                return -1;
        }
        return pid;
}

_Noreturn void run_helper_main(const RunParams *p) {
        int errpipe[2], cmd_pidfd = -1, slave = -1;
        RunParams with_tty;
        SpawnReport r = {};
        siginfo_t si = {};
        struct timespec ts = {};
        pid_t pid;
        int keep[RUN_PARAMS_FDS + 3] = { 0, 1, 2 };
        size_t n_keep = 3 + run_params_fds(p, keep + 3);

        /* The sandbox must not ptrace us or open our /proc/PID/exe (CVE-2019-5736). */
        (void) prctl(PR_SET_DUMPABLE, 0);
        if (!p->outlive_daemon)
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* A daemon that died before the prctl above sends no signal: then our parent is no longer
         * the daemon, and nobody would supervise the command (THREATS DMN-08). Born in the
         * sandbox's pid namespace (direct), we see no parent at all (0) while the daemon lives.
         * One that may outlive the daemon must still have been started by a live one. */
        if (getppid() != (p->direct ? 0 : p->parent))
                _exit(1);
        close_all_fds_except(keep, n_keep);
        /* Still host root: the last moment a supplementary group can be dropped (ESC-14a). */
        if (setgroups(0, NULL) < 0)
                helper_fail(p->report_fd, STEP_SETUID);
        if (helper_enter_cgroup(p->cgroup_fd) < 0)
                helper_fail(p->report_fd, STEP_FORK);
        if (helper_reset_oom_score(p) < 0)
                helper_fail(p->report_fd, STEP_OOM_SCORE);
        if (helper_join(p->init_pidfd) < 0)
                helper_fail(p->report_fd, STEP_SETNS);
        if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
                helper_fail(p->report_fd, STEP_SETUID);
        if (p->pty) {
                if (helper_open_pty(p, &slave) < 0)
                        helper_fail(p->report_fd, STEP_TTY);
                with_tty = *p;
                with_tty.stdio[0] = with_tty.stdio[1] = with_tty.stdio[2] = slave;
                p = &with_tty;
        }
        /* Born in the sandbox's pid namespace already (run-exec.h): we are the command. Its
         * failures go to the daemon as ours would; a successful exec closes the socket. */
        if (p->direct)
                command_main(p, p->report_fd, false);
        if (p->own_pidns)
                helper_nest_pidns(p);
        if (pipe2(errpipe, O_CLOEXEC) < 0)
                helper_fail(p->report_fd, STEP_FORK);
        pid = command_vfork(p, errpipe[1], &cmd_pidfd);
        if (pid < 0)
                helper_fail(p->report_fd, STEP_FORK);
        close(errpipe[1]);
        /* The command has its copies. Ours would hold its output pipes open until we end, and
         * their end is how the daemon knows it has all of the output. */
        for (int i = 0; i < 3; i++)
                if (p->stdio[i] > 2 && p->stdio[i] != p->report_fd)
                        (void) close(p->stdio[i]);
        for (unsigned i = 0; i < p->n_extra && i < RUN_EXTRA_FDS_MAX; i++)
                if (p->extra_fds[i] > 2 && p->extra_fds[i] != p->report_fd)
                        (void) close(p->extra_fds[i]);
        /* The master must see the end of the output when the session's last process is gone. */
        if (slave >= 0)
                close(slave);
        /* EOF on the error pipe means exec succeeded. */
        if (read(errpipe[0], &r, sizeof(r)) == (ssize_t) sizeof(r)) {
                (void) waitid(P_PIDFD, (id_t) cmd_pidfd, &si, WEXITED);
                report_send(p->report_fd, &r, -1);
                _exit(0);
        }
        r = (SpawnReport) { .kind = REPORT_STARTED };
        report_send(p->report_fd, &r, cmd_pidfd);
        while (waitid(P_PIDFD, (id_t) cmd_pidfd, &si, WEXITED) < 0)
                if (errno != EINTR)
                        _exit(1);
        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        r = (SpawnReport) { .kind = REPORT_EXITED, .code = si.si_code, .status = si.si_status,
                            .end_usec = (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000 };
        report_send(p->report_fd, &r, -1);
        _exit(0);
}

/* ---- A warm helper (run-exec.h, run_exec_warm()) ------------------------------------------- */

#define WARM_FDS_MAX (3 + RUN_EXTRA_FDS_MAX)

static int strings_put(char *buf, size_t *n, const char *s) {
        size_t len = strlen(s) + 1;
        if (len > WARM_STRINGS_MAX - *n)
                return -E2BIG;
        memcpy(buf + *n, s, len);
        *n += len;
        return 0;
}

int warm_request_send(int sock, const RunParams *p) {
        static char strings[WARM_STRINGS_MAX];
        union {
                char buf[CMSG_SPACE(sizeof(int) * WARM_FDS_MAX)];
                struct cmsghdr align;
        } control = {};
        WarmHeader h = { .params = *p };
        int fds[WARM_FDS_MAX];
        struct iovec iov[2] = { { &h, sizeof(h) }, { strings, 0 } };
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = control.buf };
        struct cmsghdr *cm;
        size_t n = 0, nfds = 3 + p->n_extra;
        int r;

        if (p->n_extra > RUN_EXTRA_FDS_MAX || !p->cwd || !p->argv || !p->argv[0])
                return -EINVAL;
        if ((r = strings_put(strings, &n, p->cwd)) < 0)
                return r;
        for (char *const *a = p->argv; *a; a++, h.argc++)
                if ((r = strings_put(strings, &n, *a)) < 0)
                        return r;
        for (char *const *e = p->envp; e && *e; e++, h.envc++)
                if ((r = strings_put(strings, &n, *e)) < 0)
                        return r;
        h.len = (uint32_t) n;
        iov[1].iov_len = n;
        for (size_t i = 0; i < nfds; i++)
                if ((fds[i] = i < 3 ? p->stdio[i] : p->extra_fds[i - 3]) < 0)
                        return -EBADF;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
        while (sendmsg(sock, &mh, MSG_NOSIGNAL) < 0)
                if (errno != EINTR)
                        return -errno;
        return 0;
}

int warm_request_recv(int sock, WarmRequest *ret) {
        union {
                char buf[CMSG_SPACE(sizeof(int) * WARM_FDS_MAX)];
                struct cmsghdr align;
        } control;
        WarmHeader h;
        struct iovec iov[2] = { { &h, sizeof(h) }, { ret->strings, sizeof(ret->strings) } };
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = control.buf, .msg_controllen = sizeof(control.buf) };
        struct cmsghdr *cm;
        char *buf = ret->strings;
        int fds[WARM_FDS_MAX];
        size_t nfds = 0, k = 0;
        ssize_t n;

        while ((n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC)) < 0)
                if (errno != EINTR)
                        return -1;
        cm = CMSG_FIRSTHDR(&mh);
        if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                nfds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                memcpy(fds, CMSG_DATA(cm), sizeof(int) * (nfds < WARM_FDS_MAX ? nfds : WARM_FDS_MAX));
        }
        if (n < (ssize_t) sizeof(h) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || h.params.n_extra > RUN_EXTRA_FDS_MAX ||
            nfds != 3 + h.params.n_extra || (size_t) n - sizeof(h) != h.len || h.len == 0 || buf[h.len - 1] != '\0' ||
            (size_t) h.argc + h.envc + 2 > ELEMENTSOF(ret->ptrs) || h.argc == 0)
                goto fail;
        /* cwd, then argc and envc strings: each found, none past the end. */
        for (char *s = buf + strlen(buf) + 1; k < (size_t) h.argc + h.envc; s += strlen(s) + 1, k++) {
                if (s >= buf + h.len)
                        goto fail;
                ret->ptrs[k < h.argc ? k : k + 1] = s;
        }
        ret->ptrs[h.argc] = NULL;
        ret->ptrs[h.argc + 1 + h.envc] = NULL;
        ret->params = h.params;
        ret->params.cwd = buf;
        ret->params.argv = ret->ptrs;
        ret->params.envp = ret->ptrs + h.argc + 1;
        ret->params.filter = NULL;
        ret->params.init_pidfd = ret->params.cgroup_fd = ret->params.report_fd = -1;
        for (unsigned i = 0; i < 3 + h.params.n_extra; i++)
                *(i < 3 ? &ret->params.stdio[i] : &ret->params.extra_fds[i - 3]) = fds[i];
        return 0;
fail:
        for (size_t i = 0; i < nfds && i < WARM_FDS_MAX; i++)
                (void) close(fds[i]);
        return -1;
}

_Noreturn void run_helper_warm(const RunParams *w) {
        static WarmRequest req;
        int keep[] = { 0, 1, 2, w->init_pidfd, w->report_fd };
        RunParams *p = &req.params;

        /* As run_helper_main(), direct: not ptraceable by the sandbox, ends with the daemon, and
         * gone when it is (we were born in the sandbox's pid namespace: no parent seen while it
         * lives). A step that fails ends us: the run that comes finds our socket closed and goes
         * the cold way, which reports the step. */
        (void) prctl(PR_SET_NAME, "sandboxd-warm"); /* first: what it is, as soon as it can be seen */
        (void) prctl(PR_SET_DUMPABLE, 0);
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != 0)
                _exit(1);
        close_all_fds_except(keep, ELEMENTSOF(keep));
        if (setgroups(0, NULL) < 0 || helper_reset_oom_score(w) < 0 || helper_join(w->init_pidfd) < 0 ||
            setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
                _exit(1);
        (void) close(w->init_pidfd);
        /* What command_main() would do first for a run as w->user with neither its own ids nor
         * capabilities, the only runs the daemon gives us (launch.c): then what is left after the
         * request is what any process may do for itself. The filter is on before the wait. */
        if (setsid() < 0 || identity_apply(w->user) < 0 || seccomp_apply(w->filter) < 0)
                _exit(1);
        if (warm_request_recv(w->report_fd, &req) < 0)
                _exit(0);
        p->report_fd = w->report_fd;
        p->filter = w->filter;
        p->direct = true;
        p->pty = p->own_pidns = false;
        /* Another identity cannot be had any more: never run as the wrong one. */
        if (p->user != w->user || p->ids_set || p->caps_set) {
                errno = EPERM;
                child_fail(p->report_fd, STEP_SETUID);
        }
        /* A kept run outlives the daemon (RunParams.outlive_daemon). */
        if (p->outlive_daemon)
                (void) prctl(PR_SET_PDEATHSIG, 0);
        command_main(p, p->report_fd, true);
}

void warm_helper_kill(WarmHelper *w) {
        if (w->pidfd >= 0) {
                (void) syscall(SYS_pidfd_send_signal, w->pidfd, SIGKILL, NULL, 0);
                (void) waitid(P_PIDFD, (id_t) w->pidfd, &(siginfo_t) {}, WEXITED);
        }
        w->pidfd = safe_close(w->pidfd);
        w->sock = safe_close(w->sock);
        w->pid = 0;
}
