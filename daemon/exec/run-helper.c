/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd-run-helper: exec'd by sandboxd for every run (run-exec.c), never by hand. It takes
 * the run's parameters from its argv, then does what run_helper_main() says: joins the
 * sandbox, forks the command, reports its start and its end. A small, separate process, so
 * that the fork of the command copies almost nothing. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/mount.h>
#include <sys/prctl.h>

#include "mount-compat.h"
#include "mount-source.h"
#include "rm-rf.h"
#include "run-exec.h"
#include "spawn.h"

extern char **environ;

static int parse_fd(const char *s) {
        char *end;
        long v = strtol(s, &end, 10);
        return *end || v < 0 || v > INT_MAX ? -1 : (int) v;
}

static int parse_u64(const char *s, uint64_t *ret) {
        char *end;
        unsigned long long v;

        errno = 0;
        v = strtoull(s, &end, 10);
        if (!*s || *end || errno || s[0] == '-')
                return -1;
        *ret = v;
        return 0;
}

/* The network namespace the daemon gave (netns-pool.h), joined while we are still host root,
 * and a sysfs of it for the init's /sys: mounted here, detached, because no process in the
 * sandbox's user namespace may mount a sysfs of a network namespace that namespace does not own. */
static int join_netns(InitParams *p) {
        int fs;

        if (setns(p->netns_fd, CLONE_NEWNET) < 0)
                return -1;
        fs = fsopen("sysfs", FSOPEN_CLOEXEC);
        if (fs < 0)
                return -1;
        if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
                p->sysfs_fd = fsmount(fs, FSMOUNT_CLOEXEC,
                                      MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        close(fs);
        return p->sysfs_fd < 0 ? -1 : 0;
}

/* The paths to mask, then "--" and the root_binds, "--sysctl" and the sysctls, "--masked" and
 * "--readonly" and create's paths: split in place (each marker ends the list before it). */
static void split_paths(InitParams *p, char **paths) {
        p->mask_paths = (const char *const *) paths;
        for (; *paths; paths++) {
                const char *const **list;
                if (strcmp(*paths, "--") == 0)
                        list = &p->root_binds;
                else if (strcmp(*paths, "--sysctl") == 0)
                        list = &p->sysctls;
                else if (strcmp(*paths, "--masked") == 0)
                        list = &p->masked_paths;
                else if (strcmp(*paths, "--readonly") == 0)
                        list = &p->readonly_paths;
                else
                        continue;
                *paths = NULL;
                *list = (const char *const *) paths + 1;
        }
}

static int fail_step(InitParams *p, SpawnStep step) {
        SpawnReport r = { .kind = REPORT_FAILED, .step = step, .err = errno };
        report_send(p->sync_fd, &r, -1);
        return 1;
}

/* argv: "init", the sync fd, the sandbox's cgroup fd, workdir ("" for one in memory), root_dir, hostname, the /dev
 * template ("" for none), the tmpfs size in bytes, "lock" or "nolock" (InitParams.lock_mounts, "+root" or "+rootro" appended for a root.path), the network
 * namespace's fd ("-" for a new one), the overlay root's directory ("" for a read-only root), its "HOSTUID:COUNT",
 * the image's rootfs under an overlay root ("" for the host's view), the paths to mask, "--" and the root_binds,
 * "--sysctl" and the sysctls ("key=value"), "--masked" and "--readonly" and their paths. The init is cloned from this small process, not from the daemon
 * (run-exec.h). */
/* "lock" or "nolock", then "+root" or "+rootro" for a root.path (run-exec.c init_mode_arg()). */
static int parse_init_mode(const char *s, InitParams *p) {
        const char *plus = strchr(s, '+');
        size_t n = plus ? (size_t) (plus - s) : strlen(s);

        if (n == 4 && strncmp(s, "lock", 4) == 0)
                p->lock_mounts = true;
        else if (!(n == 6 && strncmp(s, "nolock", 6) == 0))
                return -1;
        if (!plus)
                return 0;
        if (strcmp(plus, "+root") != 0 && strcmp(plus, "+rootro") != 0)
                return -1;
        p->own_root = true;
        p->own_root_read_only = strcmp(plus, "+rootro") == 0;
        return 0;
}

/* A copy of argv on the heap: the init wipes the strings of its command line (sandbox-setup.c,
 * init_hide_args()), which its parameters must not point into. Kept for the process's life, here
 * where LeakSanitizer sees it held (the init ends by exit(), never by freeing its parameters). */
static char **argv_kept;

static char **argv_copy(int argc, char **argv) {
        char **copy = calloc((size_t) argc + 1, sizeof(char *));
        argv_kept = copy;
        for (int i = 0; copy && i < argc; i++)
                if (!(copy[i] = strdup(argv[i])))
                        return NULL; /* the helper exits at once: nothing to free */
        return copy;
}

static int init_main(int argc, char **argv, bool cgns) {
        SpawnReport r = { .kind = REPORT_STARTED };
        InitParams p = { .cgroupns_ready = cgns, .netns_fd = -1, .sysfs_fd = -1 };
        uint64_t flags = cgns ? SANDBOX_NS_FLAGS & ~(uint64_t) CLONE_NEWUSER : SANDBOX_NS_FLAGS;
        int cg_fd, pidfd = -1;
        pid_t pid;

        if (argc < 14 || !(argv = argv_copy(argc, argv)) || (p.sync_fd = parse_fd(argv[2])) < 0 || (cg_fd = parse_fd(argv[3])) < 0 ||
            parse_u64(argv[8], &p.tmpfs_size) < 0 || parse_init_mode(argv[9], &p) < 0 ||
            (strcmp(argv[10], "-") != 0 && (p.netns_fd = parse_fd(argv[10])) < 0) ||
            sscanf(argv[12], "%u:%u", &p.root_upper.host_uid, &p.root_upper.count) != 2)
                return 127;

        p.workdir = argv[4][0] ? argv[4] : NULL;
        p.root_dir = argv[5];
        p.hostname = argv[6];
        p.dev_dir = argv[7][0] ? argv[7] : NULL;
        p.root_upper.dir = argv[11][0] ? argv[11] : NULL;
        p.image_root = p.root_upper.dir && argv[13][0] ? argv[13] : NULL;
        split_paths(&p, argv + 14);
        if (p.netns_fd >= 0) {
                if (join_netns(&p) < 0)
                        return fail_step(&p, STEP_SETNS);
                /* Host root in it: the namespace is the host user namespace's, which nothing in the
                 * sandbox may write (a value naming ids, such as ping_group_range's gids, was
                 * made the host's ids of the sandbox's by the daemon). */
                if (sandbox_sysctls_write(p.sysctls, true, false) < 0)
                        return fail_step(&p, STEP_SYSCTL);
                close(p.netns_fd);
                flags &= ~(uint64_t) CLONE_NEWNET;
        }
        /* Still host root in the host's user namespace, where the mounts are not locked. */
        if (init_trees_open(&p) < 0)
                return fail_step(&p, STEP_ROOT);
        /* Born in the sandbox's cgroup ourselves, we make the sandbox's user namespace and its
         * cgroup namespace here: rooted at our cgroup, owned by that user namespace (so that
         * cgroup2 can be mounted inside). The init, born in its leaf (cg_fd), gets the rest new
         * and these two from us. (A cgroup namespace made by the clone itself would be rooted
         * at the leaf.) */
        if (cgns && unshare(CLONE_NEWUSER | CLONE_NEWCGROUP) < 0)
                return fail_step(&p, STEP_CGROUPNS);
        pid = clone3_pidfd(flags | CLONE_PARENT, cg_fd, &pidfd);
        if (pid == 0) {
                close(cg_fd);
                sandbox_init_main(&p);
        }
        root_trees_close(&p.trees);
        if (pid < 0) {
                errno = -pid;
                return fail_step(&p, STEP_FORK);
        }
        r.code = pid;
        return report_send(p.sync_fd, &r, pidfd) < 0 ? 1 : 0;
}

/* argv: "rm", the directory fd, the name to remove below it, the daemon's pid. The remover dies
 * with its daemon: nothing of a daemon outlives it in its cgroup, and the next start removes what
 * is left (remove-async.h). */
static int rm_main(int argc, char **argv) {
        int fd = argc == 5 ? parse_fd(argv[2]) : -1;
        int parent = argc == 5 ? parse_fd(argv[4]) : -1;
        if (fd < 0 || parent <= 0)
                return 127;
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* A daemon that died before the prctl sends no signal: then our parent is another. */
        if (getppid() != parent)
                return 1;
        (void) prctl(PR_SET_NAME, "sandboxd-rm");
        return rm_rf_at(fd, argv[3]) < 0 ? 1 : 0;
}

static int parse_id(const char *s, unsigned *ret) {
        uint64_t v;
        if (parse_u64(s, &v) < 0 || v >= UINT32_MAX)
                return -1;
        *ret = (unsigned) v;
        return 0;
}

/* argv: "mount", the report fd, uid, gid, the groups ("-" or comma-separated), root, the rest
 * of the source beneath it, "ro", "rw" or "ro-later" (read_only_later), the uid and gid the caller's become, how many ids on,
 * and the fd of a caller's tree to take instead of root and rest ("-": none). */
static int mount_main(int argc, char **argv) {
        MountSource m = { .root = argc == 13 ? argv[6] : NULL, .rest = argc == 13 ? argv[7] : NULL };
        SpawnReport r = { .kind = REPORT_FAILED };
        MountStep step;
        int fd, tree, from = -1;

        if (argc != 13 || (fd = parse_fd(argv[2])) < 0 || parse_id(argv[3], &m.uid) < 0 || parse_id(argv[4], &m.gid) < 0 ||
            (strcmp(argv[8], "ro") != 0 && strcmp(argv[8], "rw") != 0 && strcmp(argv[8], "ro-later") != 0) || parse_id(argv[9], &m.map_uid) < 0 ||
            parse_id(argv[10], &m.map_gid) < 0 || parse_id(argv[11], &m.map_count) < 0 ||
            (strcmp(argv[12], "-") != 0 && (from = parse_fd(argv[12])) < 0))
                return 127;
        m.read_only = strcmp(argv[8], "rw") != 0;
        m.read_only_later = strcmp(argv[8], "ro-later") == 0;
        m.path_only = m.map_count == 0;
        if (strcmp(argv[5], "-") != 0)
                for (char *g = argv[5]; g;) {
                        char *comma = strchr(g, ',');
                        if (comma)
                                *comma = '\0';
                        if (m.n_groups >= MOUNT_GROUPS_MAX || parse_id(g, &m.groups[m.n_groups++]) < 0)
                                return 127;
                        g = comma ? comma + 1 : NULL;
                }
        (void) prctl(PR_SET_NAME, "sandboxd-mount");
        tree = from >= 0 ? mount_tree_open(from, &m, &step) : mount_source_open(&m, &step);
        if (tree < 0) {
                r.step = (int32_t) step;
                r.err = errno;
                return report_send(fd, &r, -1) < 0 ? 1 : 0;
        }
        r.kind = REPORT_READY;
        return report_send(fd, &r, tree) < 0 ? 1 : 0;
}

/* A sandbox scope's placeholder: nothing but a process, until it is killed. The daemon's blocked
 * signals are unblocked, so that systemd's SIGTERM at a scope's stop ends it. */
_Noreturn static void placeholder_main(void) {
        sigset_t none;

        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);
        for (;;)
                pause();
}

/* argv[0] as RunParams in hex, argv[1] the filter in hex: into p (the filter's instructions in
 * insns). -1 when they are not. */
static int params_unhex(char **argv, RunParams *p, SeccompProgram *filter, struct sock_filter *insns, size_t max) {
        size_t len;

        if (run_exec_unhex(argv[0], p, sizeof(*p)) < 0) {
                fprintf(stderr, "%s: started by sandboxd only\n", RUN_HELPER_NAME);
                return -1;
        }
        len = strlen(argv[1]) / 2;
        if (len == 0 || len % sizeof(struct sock_filter) != 0 || len > max || run_exec_unhex(argv[1], insns, len) < 0) {
                fprintf(stderr, "%s: bad filter\n", RUN_HELPER_NAME);
                return -1;
        }
        filter->insns = insns;
        filter->len = (unsigned short) (len / sizeof(struct sock_filter));
        p->filter = filter;
        return 0;
}

int main(int argc, char **argv) {
        static struct sock_filter insns[BPF_MAXINSNS];
        SeccompProgram filter;
        RunParams p;

        if (argc > 1 && strcmp(argv[1], RUN_HELPER_INIT) == 0)
                return init_main(argc, argv, false);
        if (argc > 1 && strcmp(argv[1], RUN_HELPER_INIT_CGNS) == 0)
                return init_main(argc, argv, true);
        if (argc > 1 && strcmp(argv[1], RUN_HELPER_RM) == 0)
                return rm_main(argc, argv);
        if (argc > 1 && strcmp(argv[1], RUN_HELPER_MOUNT) == 0)
                return mount_main(argc, argv);
        if (argc > 1 && strcmp(argv[1], RUN_HELPER_PLACEHOLDER) == 0)
                placeholder_main();
        /* argv: "warm", RunParams as hex, the filter as hex (run_exec_warm()). */
        if (argc == 4 && strcmp(argv[1], RUN_HELPER_WARM) == 0) {
                if (params_unhex(argv + 2, &p, &filter, insns, sizeof(insns)) < 0)
                        return 127;
                run_helper_warm(&p);
        }
        /* argv: RunParams as hex, the filter as hex, cwd, the command's argv. */
        if (argc < 5) {
                fprintf(stderr, "%s: started by sandboxd only\n", RUN_HELPER_NAME);
                return 127;
        }
        if (params_unhex(argv + 1, &p, &filter, insns, sizeof(insns)) < 0)
                return 127;
        p.cwd = argv[3];
        p.argv = argv + 4;
        p.envp = environ;
        run_helper_main(&p);
}
