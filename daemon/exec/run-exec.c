/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "macro.h"
#include "mount-source.h"
#include "run-exec.h"

#ifndef LIBEXECDIR
#define LIBEXECDIR "/usr/libexec"
#endif

/* The vfork child runs here while the daemon waits in clone(); one at a time, so one stack. */
#define HELPER_STACK_SIZE (64 * 1024)
static char helper_stack[HELPER_STACK_SIZE] __attribute__((aligned(64)));

/* The fds a helper gets travel through a few reserved slots just above every fd the daemon had
 * at start. The vfork child shares the daemon's fd table (CLONE_FILES) and its first act is
 * close_range(slots_end, ~0, CLOSE_RANGE_UNSHARE): the kernel then copies only the fds below
 * slots_end into the child's own table. Without that, the child would copy the whole table, and
 * its exec would close every copy again: thousands of fds with a thousand sandboxes alive, the
 * largest cost of a run at that scale (docs/performance.md). */
#define N_SLOTS (RUN_PARAMS_FDS + 1) /* the helper binary too */
static int slots_base = -1, slots_null = -1;

int run_exec_reserve_slots(void) {
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        int max = 2, null;

        if (!d)
                return -errno;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.' && atoi(de->d_name) > max)
                        max = atoi(de->d_name);
        closedir(d); /* its own fd was counted: one slot of room */
        /* close_range(CLOSE_RANGE_UNSHARE) is Linux 5.9: probe it on a range that holds nothing. */
        if (syscall(SYS_close_range, ~0U - 1, ~0U, CLOSE_RANGE_UNSHARE) < 0)
                return -errno;
        null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null < 0)
                return -errno;
        for (int i = 0; i < N_SLOTS; i++)
                if (fcntl(null, F_DUPFD_CLOEXEC, max + 2 + i) != max + 2 + i) {
                        for (int j = 0; j <= i; j++)
                                (void) close(max + 2 + j);
                        close(null);
                        return -EBUSY;
                }
        slots_null = null;
        slots_base = max + 2;
        return 0;
}

/* Puts fds[i] into slot i (returned in slot[i]; -1 stays -1). */
static void slots_fill(const int *fds, size_t n, int *slot) {
        for (size_t i = 0; i < n; i++) {
                slot[i] = fds[i] < 0 ? fds[i] : slots_base + (int) i;
                if (fds[i] >= 0)
                        (void) dup3(fds[i], slot[i], O_CLOEXEC);
        }
}

/* The slots slots_fill() filled (and the helper binary's, the last) hold /dev/null again: nothing
 * of a run stays open in the daemon through them. The others hold it still. */
static void slots_clear(const int *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (fds[i] >= 0)
                        (void) dup3(slots_null, slots_base + (int) i, O_CLOEXEC);
        (void) dup3(slots_null, slots_base + N_SLOTS - 1, O_CLOEXEC);
}

static int open_exec(const char *path) {
        int fd = open(path, O_PATH | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (faccessat(fd, "", X_OK, AT_EMPTY_PATH) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

int run_exec_open_helper(void) {
        return run_exec_open_binary(RUN_HELPER_NAME, "SANDBOXD_RUN_HELPER");
}

int run_exec_open_binary(const char *name, const char *env_name) {
        const char *env = getenv(env_name);
        char self[PATH_MAX], path[2 * PATH_MAX];
        ssize_t n;
        char *slash;
        int fd;

        if (env && strcmp(env, "fork") == 0)
                return -ENOENT;
        if (env && *env)
                return open_exec(env);
        n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n > 0) {
                self[n] = '\0';
                slash = strrchr(self, '/');
                if (slash) {
                        *slash = '\0';
                        snprintf(path, sizeof(path), "%s/%s", self, name);
                        fd = open_exec(path);
                        if (fd >= 0)
                                return fd;
                }
        }
        snprintf(path, sizeof(path), "%s/%s", LIBEXECDIR, name);
        return open_exec(path);
}

char *run_exec_hex(const void *data, size_t n) {
        static const char digits[] = "0123456789abcdef";
        const unsigned char *b = data;
        char *s = malloc(2 * n + 1);

        if (!s)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                s[2 * i] = digits[b[i] >> 4];
                s[2 * i + 1] = digits[b[i] & 15];
        }
        s[2 * n] = '\0';
        return s;
}

static int unhex_digit(char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int run_exec_unhex(const char *hex, void *ret, size_t n) {
        unsigned char *b = ret;
        if (strlen(hex) != 2 * n)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                int hi = unhex_digit(hex[2 * i]), lo = unhex_digit(hex[2 * i + 1]);
                if (hi < 0 || lo < 0)
                        return -EINVAL;
                b[i] = (unsigned char) (hi << 4 | lo);
        }
        return 0;
}

typedef struct HelperExec {
        int helper_fd;
        char **argv;
        char *const *envp;
        int fds[RUN_PARAMS_FDS];
        size_t n_fds;
        int report_fd;
        int unshare_from;   /* >= 0: shares our table; keeps only the fds below this (the slots) */
        sigset_t mask; /* the daemon's, restored for the helper */
} HelperExec;

/* The vfork child: it shares the daemon's memory, so it only touches its own stack and makes raw
 * system calls, then execs (or reports and exits). No malloc, no locks, nothing that an
 * instrumented build would track. */
__attribute__((no_sanitize("address", "undefined"))) static int helper_exec_child(void *userdata) {
        const HelperExec *h = userdata;
        SpawnReport r = { .kind = REPORT_FAILED, .step = STEP_FORK };

        if (h->unshare_from >= 0 && syscall(SYS_close_range, (unsigned) h->unshare_from, ~0U, CLOSE_RANGE_UNSHARE) < 0)
                syscall(SYS_exit, 127); /* the table is still the daemon's: not even a report */
        for (size_t i = 0; i < h->n_fds; i++)
                if (h->fds[i] >= 0 && syscall(SYS_fcntl, h->fds[i], F_SETFD, 0) < 0)
                        goto fail;
        (void) syscall(SYS_rt_sigprocmask, SIG_SETMASK, &h->mask, NULL, _NSIG / 8);
        syscall(SYS_execveat, h->helper_fd, "", h->argv, h->envp, AT_EMPTY_PATH);
fail:
        r.err = errno;
        (void) syscall(SYS_write, h->report_fd, &r, sizeof(r));
        syscall(SYS_exit, 127);
        return 127;
}

/* argv: name, RunParams as hex, the filter as hex, cwd, the command's argv. */
static char **helper_argv(const RunParams *p) {
        size_t argc = 0;
        char **argv;

        while (p->argv[argc])
                argc++;
        argv = calloc(argc + 5, sizeof(char *));
        if (!argv)
                return NULL;
        argv[0] = (char *) RUN_HELPER_NAME;
        argv[1] = run_exec_hex(p, sizeof(*p));
        argv[2] = run_exec_hex(p->filter->insns, p->filter->len * sizeof(struct sock_filter));
        argv[3] = (char *) p->cwd;
        memcpy(argv + 4, p->argv, argc * sizeof(char *));
        if (!argv[1] || !argv[2]) {
                free(argv[1]);
                free(argv[2]);
                free(argv);
                return NULL;
        }
        return argv;
}

static void helper_argv_free(char **argv) {
        if (!argv)
                return;
        free(argv[1]);
        free(argv[2]);
        free(argv);
}

#if defined(__x86_64__)
/* clone3() with a stack of the child's own, calling fn(arg) there. glibc has no clone3 wrapper,
 * and the syscall() wrapper cannot be used: the child would return through it on a stack that
 * is not the one it was called on. clone3 is what lets the child be born in a cgroup
 * (CLONE_INTO_CGROUP): moving it afterwards takes the kernel's cgroup_threadgroup_rwsem for
 * writing, which waits for an RCU grace period (milliseconds on a loaded machine). */
static long clone3_call(struct clone_args *args, int (*fn)(void *), void *arg) {
        register long rax __asm__("rax") = SYS_clone3;
        register long rdi __asm__("rdi") = (long) args;
        register long rsi __asm__("rsi") = (long) sizeof(*args);
        register long r12 __asm__("r12") = (long) arg;
        register long r13 __asm__("r13") = (long) fn;

        __asm__ volatile("syscall\n\t"
                         "test %%rax, %%rax\n\t"
                         "jnz 1f\n\t"
                         "xor %%ebp, %%ebp\n\t"
                         "mov %%r12, %%rdi\n\t"
                         "call *%%r13\n\t"
                         "mov $60, %%eax\n\t" /* SYS_exit, should fn return */
                         "mov $127, %%edi\n\t"
                         "syscall\n\t"
                         "1:\n\t"
                         : "+r"(rax)
                         : "r"(rdi), "r"(rsi), "r"(r12), "r"(r13)
                         : "rcx", "r11", "memory", "cc");
        return rax;
}
#define HAVE_CLONE3_CALL 1
#else
#define HAVE_CLONE3_CALL 0
#endif

bool run_exec_into_cgroup(void) {
        return HAVE_CLONE3_CALL;
}

/* clone(CLONE_VM|CLONE_VFORK) of a child that execs h->argv, born in cgroup_fd where the
 * architecture allows (run_exec_into_cgroup()): we are suspended until it has exec'd (or has
 * failed and reported). */
static pid_t vfork_exec(HelperExec *h, int cgroup_fd, int *ret_pidfd) {
        sigset_t all;
        int pidfd = -1;
        pid_t pid;

        /* No signal may run a handler in the child on the daemon's memory (as posix_spawn). */
        sigfillset(&all);
        (void) sigprocmask(SIG_SETMASK, &all, &h->mask);
#if HAVE_CLONE3_CALL
        struct clone_args args = {
                .flags = CLONE_VM | CLONE_VFORK | CLONE_PIDFD | (cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0) |
                         (h->unshare_from >= 0 ? CLONE_FILES : 0),
                .pidfd = (uint64_t) (uintptr_t) &pidfd,
                .exit_signal = SIGCHLD,
                .stack = (uint64_t) (uintptr_t) helper_stack,
                .stack_size = sizeof(helper_stack),
                .cgroup = cgroup_fd >= 0 ? (uint64_t) cgroup_fd : 0,
        };
        pid = (pid_t) clone3_call(&args, helper_exec_child, h);
#else
        (void) cgroup_fd;
        pid = clone(helper_exec_child, helper_stack + sizeof(helper_stack),
                    CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD | (h->unshare_from >= 0 ? CLONE_FILES : 0), h, &pidfd);
        if (pid < 0)
                pid = -errno;
#endif
        (void) sigprocmask(SIG_SETMASK, &h->mask, NULL);
        if (pid > 0)
                *ret_pidfd = pidfd;
        return pid;
}

/* vfork_exec with h's fds, its report fd and the helper binary moved into the slots first (where
 * there are slots), and the slots cleared after. to_slot(fd) gives the slot an fd of h goes to,
 * for argv built before: slot i is h->fds[i], the report fd is among them, the helper is last. */
static int to_slot(const HelperExec *h, int fd) {
        if (slots_base < 0 || fd < 0)
                return fd;
        for (size_t i = 0; i < h->n_fds; i++)
                if (h->fds[i] == fd)
                        return slots_base + (int) i;
        return fd;
}

static pid_t vfork_exec_slots(HelperExec *h, int cgroup_fd, int *ret_pidfd) {
        HelperExec s = *h;
        pid_t pid;

        if (slots_base < 0) {
                h->unshare_from = -1;
                return vfork_exec(h, cgroup_fd, ret_pidfd);
        }
        slots_fill(h->fds, h->n_fds, s.fds);
        s.report_fd = to_slot(h, h->report_fd);
        s.helper_fd = slots_base + N_SLOTS - 1;
        (void) dup3(h->helper_fd, s.helper_fd, O_CLOEXEC);
        s.unshare_from = slots_base + N_SLOTS;
        pid = vfork_exec(&s, cgroup_fd, ret_pidfd);
        slots_clear(h->fds, h->n_fds);
        return pid;
}

pid_t run_exec_helper(int helper_fd, const RunParams *p, int cgroup_fd, int *ret_pidfd) {
        HelperExec h = { .helper_fd = helper_fd, .envp = p->envp, .report_fd = p->report_fd };
        pid_t pid;

        RunParams q = *p;

        h.n_fds = run_params_fds(p, h.fds);
        /* The helper reads its fds' numbers from the params: the slots' numbers. */
        if (slots_base >= 0) {
                q.init_pidfd = to_slot(&h, p->init_pidfd);
                q.cgroup_fd = to_slot(&h, p->cgroup_fd);
                q.report_fd = to_slot(&h, p->report_fd);
                for (int i = 0; i < 3; i++)
                        q.stdio[i] = to_slot(&h, p->stdio[i]);
                for (unsigned i = 0; i < p->n_extra && i < RUN_EXTRA_FDS_MAX; i++)
                        q.extra_fds[i] = to_slot(&h, p->extra_fds[i]);
        }
        h.argv = helper_argv(&q);
        if (!h.argv)
                return -ENOMEM;
        pid = vfork_exec_slots(&h, cgroup_fd, ret_pidfd);
        helper_argv_free(h.argv);
        return pid;
}

/* The helper's init argv: 14 fixed, up to 16 masks, "--" and the root_binds, "--sysctl" and the
 * sysctls, NULL. */
#define INIT_ARGV_MAX (14 + 16 + 1 + ROOT_BINDS_MAX + 1 + INIT_SYSCTLS_MAX + 2 * (1 + INIT_PATHS_MAX) + 1)

/* A marker and the strings after it, when there are any. */
static int init_argv_list(char **argv, size_t max, size_t *n, const char *marker, const char *const *list) {
        if (!list || !list[0])
                return 0;
        if (*n >= max - 1)
                return -E2BIG;
        argv[(*n)++] = (char *) marker;
        for (; *list; list++) {
                if (*n >= max - 1)
                        return -E2BIG;
                argv[(*n)++] = (char *) *list;
        }
        return 0;
}

/* "lock" or "nolock" (InitParams.lock_mounts), with "+root" or "+rootro" for a root.path. */
static const char *init_mode_arg(const InitParams *p) {
        if (!p->own_root)
                return p->lock_mounts ? "lock" : "nolock";
        if (p->own_root_read_only)
                return p->lock_mounts ? "lock+rootro" : "nolock+rootro";
        return p->lock_mounts ? "lock+root" : "nolock+root";
}

pid_t run_exec_init(int helper_fd, const InitParams *p, int cgroup_fd, int leaf_fd, int *ret_pidfd) {
        char *const envp[] = { NULL };
        char fd[16], cg[16], size[24], net[16] = "-", ids[32];
        char *argv[INIT_ARGV_MAX] = { (char *) "sandboxd-run-helper", (char *) (leaf_fd >= 0 ? RUN_HELPER_INIT_CGNS : RUN_HELPER_INIT),
                                fd, cg, (char *) (p->workdir ? p->workdir : ""), (char *) p->root_dir, (char *) p->hostname,
                                (char *) (p->dev_dir ? p->dev_dir : ""), size, (char *) init_mode_arg(p),
                                net, (char *) (p->root_upper.dir ? p->root_upper.dir : ""), ids,
                                (char *) (p->image_root ? p->image_root : "") };
        HelperExec h = { .helper_fd = helper_fd, .argv = argv, .envp = envp,
                         .fds = { p->sync_fd, leaf_fd >= 0 ? leaf_fd : cgroup_fd, p->netns_fd },
                         .n_fds = p->netns_fd >= 0 ? 3 : 2, .report_fd = p->sync_fd };
        size_t n = 14;

        snprintf(size, sizeof(size), "%" PRIu64, p->tmpfs_size);
        snprintf(ids, sizeof(ids), "%u:%u", (unsigned) p->root_upper.host_uid, p->root_upper.count);
        snprintf(fd, sizeof(fd), "%d", to_slot(&h, p->sync_fd));
        snprintf(cg, sizeof(cg), "%d", to_slot(&h, leaf_fd >= 0 ? leaf_fd : cgroup_fd));
        if (p->netns_fd >= 0)
                snprintf(net, sizeof(net), "%d", to_slot(&h, p->netns_fd));
        for (const char *const *m = p->mask_paths; m && *m; m++) {
                if (n >= ELEMENTSOF(argv) - 1)
                        return -E2BIG;
                argv[n++] = (char *) *m;
        }
        if (p->root_binds && p->root_binds[0]) {
                argv[n++] = (char *) "--";
                for (const char *const *b = p->root_binds; *b; b++) {
                        if (n >= ELEMENTSOF(argv) - 1)
                                return -E2BIG;
                        argv[n++] = (char *) *b;
                }
        }
        int r;
        if ((r = init_argv_list(argv, ELEMENTSOF(argv), &n, "--sysctl", p->sysctls)) < 0 ||
            (r = init_argv_list(argv, ELEMENTSOF(argv), &n, "--masked", p->masked_paths)) < 0 ||
            (r = init_argv_list(argv, ELEMENTSOF(argv), &n, "--readonly", p->readonly_paths)) < 0)
                return r;
        return vfork_exec_slots(&h, leaf_fd >= 0 ? cgroup_fd : -1, ret_pidfd);
}

pid_t run_exec_warm(int helper_fd, const RunParams *p, int cgroup_fd, int *ret_pidfd) {
        char *const envp[] = { NULL };
        char *argv[] = { (char *) RUN_HELPER_NAME, (char *) RUN_HELPER_WARM, NULL, NULL, NULL };
        HelperExec h = { .helper_fd = helper_fd, .argv = argv, .envp = envp, .fds = { p->init_pidfd, p->report_fd },
                         .n_fds = 2, .report_fd = p->report_fd };
        RunParams q = *p;
        pid_t pid = -ENOMEM;

        q.init_pidfd = to_slot(&h, p->init_pidfd);
        q.report_fd = to_slot(&h, p->report_fd);
        argv[2] = run_exec_hex(&q, sizeof(q));
        argv[3] = run_exec_hex(p->filter->insns, p->filter->len * sizeof(struct sock_filter));
        if (argv[2] && argv[3])
                pid = vfork_exec_slots(&h, cgroup_fd, ret_pidfd);
        free(argv[2]);
        free(argv[3]);
        return pid;
}

pid_t run_exec_placeholder(int helper_fd, int cgroup_fd, int *ret_pidfd) {
        char *const envp[] = { NULL };
        char *argv[] = { (char *) "sandboxd-placeholder", (char *) RUN_HELPER_PLACEHOLDER, NULL };
        HelperExec h = { .helper_fd = helper_fd, .argv = argv, .envp = envp, .n_fds = 0, .report_fd = -1 };

        return vfork_exec_slots(&h, cgroup_fd, ret_pidfd);
}

pid_t run_exec_mount(int helper_fd, const MountSource *m, int tree_fd, int report_fd, int *ret_pidfd) {
        char *const envp[] = { NULL };
        char fd[16], tree[16] = "-", uid[16], gid[16], muid[16], mgid[16], mcount[16], groups[MOUNT_GROUPS_MAX * 11 + 2] = "-";
        char *argv[] = { (char *) "sandboxd-mount", (char *) RUN_HELPER_MOUNT, fd, uid, gid, groups, (char *) m->root,
                         (char *) m->rest, (char *) (!m->read_only ? "rw" : m->read_only_later ? "ro-later" : "ro"), muid, mgid, mcount, tree, NULL };
        HelperExec h = { .helper_fd = helper_fd, .argv = argv, .envp = envp, .fds = { report_fd, tree_fd },
                         .n_fds = tree_fd >= 0 ? 2 : 1, .report_fd = report_fd };
        size_t n = 0;

        snprintf(fd, sizeof(fd), "%d", to_slot(&h, report_fd));
        if (tree_fd >= 0)
                snprintf(tree, sizeof(tree), "%d", to_slot(&h, tree_fd));
        snprintf(uid, sizeof(uid), "%u", (unsigned) m->uid);
        snprintf(gid, sizeof(gid), "%u", (unsigned) m->gid);
        snprintf(muid, sizeof(muid), "%u", (unsigned) m->map_uid);
        snprintf(mgid, sizeof(mgid), "%u", (unsigned) m->map_gid);
        /* 0 ids mapped: path_only (no idmap of no ids is ever asked). */
        snprintf(mcount, sizeof(mcount), "%u", m->path_only ? 0 : m->map_count ? m->map_count : 1);
        for (unsigned i = 0; i < m->n_groups && i < MOUNT_GROUPS_MAX; i++)
                n += (size_t) snprintf(groups + n, sizeof(groups) - n, "%s%u", i ? "," : "", (unsigned) m->groups[i]);
        return vfork_exec_slots(&h, -1, ret_pidfd);
}

pid_t run_exec_rm(int helper_fd, int dir_fd, const char *name, int *ret_pidfd) {
        char *const envp[] = { NULL };
        char fd[16], parent[16];
        char *argv[] = { (char *) "sandboxd-rm", (char *) RUN_HELPER_RM, fd, (char *) name, parent, NULL };
        HelperExec h = { .helper_fd = helper_fd, .argv = argv, .envp = envp, .fds = { dir_fd }, .n_fds = 1,
                         .report_fd = -1 };

        snprintf(fd, sizeof(fd), "%d", to_slot(&h, dir_fd));
        snprintf(parent, sizeof(parent), "%d", (int) getpid());
        return vfork_exec_slots(&h, -1, ret_pidfd);
}
