/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Process creation: clone3 into a cgroup, the sandbox's init (namespaces, mounts, reaper) and
 * the two-step spawn of a run (a helper joins the sandbox's namespaces, then forks the command).
 * Children report over a CLOEXEC socket as {step, errno}; the parent never guesses. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "identity.h"
#include "root-overlay.h"
#include "syscall-filter.h"

typedef enum SpawnStep {
        STEP_NONE,
        STEP_SYNC,
        STEP_SETUID,
        STEP_CGROUPNS,
        STEP_MOUNT_PRIVATE,
        STEP_ROOT,
        STEP_PROC,
        STEP_DEV,
        STEP_TMP,
        STEP_WORK,
        STEP_MASK,
        STEP_PIVOT,
        STEP_HOSTNAME,
        STEP_LOOPBACK,
        STEP_SETNS,
        STEP_FORK,
        STEP_SETSID,
        STEP_STDIO,
        STEP_CWD,
        STEP_RLIMIT,
        STEP_SIGNALS,
        STEP_EXEC,
        STEP_SECCOMP,
        STEP_TTY,
        STEP_OOM_SCORE,
        STEP_MOUNTS,
        STEP_SYSCTL,
        _STEP_MAX,
} SpawnStep;

const char *spawn_step_to_string(int step);

typedef enum ReportKind {
        REPORT_READY,   /* init: setup done */
        REPORT_FAILED,  /* a setup step failed */
        REPORT_STARTED, /* run: the command was exec'd; carries its pidfd */
        REPORT_EXITED,  /* run: the command ended: code/status as in siginfo */
        REPORT_TERMINAL, /* run with a pty: the terminal's master, opened inside the sandbox */
} ReportKind;

typedef struct SpawnReport {
        int32_t kind;
        int32_t step;
        int32_t err;
        int32_t code;
        int32_t status;
        int32_t reserved;
        /* REPORT_EXITED: when the command ended (CLOCK_MONOTONIC, usec), so that a run that ended
         * while no daemon ran is not timed to the next one's start. 0 when not known. */
        uint64_t end_usec;
} SpawnReport;

/* The record of the helpers before end_usec: a daemon upgraded while runs live reads theirs. */
#define SPAWN_REPORT_V1_SIZE (5 * sizeof(int32_t))

/* clone3 with the given namespace flags into cgroup_fd (if >= 0), returning a pidfd. Returns the
 * pid in the parent, 0 in the child, -errno on failure. */
pid_t clone3_pidfd(uint64_t flags, int cgroup_fd, int *ret_pidfd);

int report_send(int fd, const SpawnReport *r, int pass_fd);

/* A child of the daemon that does not exec (a sandbox's init, a session's helper) is not shown as
 * the daemon: its name (comm) and its command line become name, and its environment is wiped, as
 * /proc/PID/cmdline, ps and pgrep -f see them. Their strings are ours to overwrite: whatever the
 * caller still uses was copied out of them first (run-helper.c), or is the daemon's heap. */
void spawn_set_name(const char *name);
/* Receives one report, and an fd when one was passed (else -1). 0 on EOF. */
int report_recv(int fd, SpawnReport *ret, int *ret_fd);

/* What a sandbox sees of root_dir (sandbox-setup.c, docs/security.md "What a sandbox sees"):
 * /usr, /etc and the merged-/usr names (as symlinks where root_dir has them so, else as
 * directories), and the configured root_binds, each bound read-only without the mounts below it.
 * The binds are detached copies (open_tree without AT_RECURSIVE) made by a process of the host's
 * user namespace before it clones the init: in the init's mount namespace, a copy of the host's
 * owned by the sandbox's user namespace, every mount is locked, and the kernel refuses to bind
 * one without the locked mounts below it (EINVAL), since that would uncover what they hide.
 * With an overlay root (root-overlay.h), each base directory is an overlay of its tree instead,
 * and /var and /opt are directories of the upper layer; the root_binds stay read-only. */
#define ROOT_BINDS_MAX 16
#define ROOT_TREES_MAX (8 + 2 + ROOT_BINDS_MAX)
typedef struct RootTrees {
        unsigned n;
        int fd[ROOT_TREES_MAX];           /* read-only (but overlays), nosuid, nodev, private */
        const char *path[ROOT_TREES_MAX]; /* where, relative to the root: "usr", "srv/data" */
} RootTrees;

/* Opens the trees of root_dir's base directories and of binds (absolute, sorted, checked at
 * start: conf.h); with overlay (else NULL), the base directories' as overlays and the upper's
 * own directories. A bind that is gone, has a symlink in its path or is a kernel interface
 * (root_fs_refused) fails it, with errno set. Returns 0 or -1; *ret is complete or empty. */
int root_trees_open(const char *root_dir, const char *const *binds, RootOverlay *overlay, RootTrees *ret);
/* The names of root_dir a sandbox gets besides the root_binds (sandbox-setup.c says which). */
extern const char *const sandbox_root_base[];
/* A directory below dir_fd opened O_PATH with resolve and no link followed: the fd, or -1. */
int root_open_no_symlinks(int dir_fd, const char *path, uint64_t resolve);
void root_trees_close(RootTrees *t);
/* A filesystem that is the kernel's interface rather than files (procfs, sysfs, cgroupfs,
 * debugfs, ...): never bound into a sandbox, wherever the host mounted it. */
bool root_fs_refused(long f_type);

/* The init's go (its uid/gid maps are written), with the caller's directories to attach: one
 * SOCK_SEQPACKET message "g", then each target (absolute, NUL-terminated), the detached trees
 * (mount-source.h) in the same order as SCM_RIGHTS. */
#define INIT_MOUNTS_MAX 18 /* the root (an image), the caller's workspace, 16 mounts */
#define INIT_GO_MAX (1 + INIT_MOUNTS_MAX * 4096)
typedef struct InitMounts {
        unsigned n;
        const char *target[INIT_MOUNTS_MAX];
        int fd[INIT_MOUNTS_MAX];
} InitMounts;
int init_go_send(int fd, const InitMounts *m);
/* Receives into buf (INIT_GO_MAX bytes, which the targets point into). -1 with errno. */
int init_go_recv(int fd, char *buf, InitMounts *ret);

#define INIT_SYSCTLS_MAX 32 /* create's "sysctls" */
#define INIT_PATHS_MAX 64   /* create's "masked_paths", and its "readonly_paths" */
typedef struct InitParams {
        int sync_fd;        /* the child's end: wait for the id maps, then report */
        const char *workdir; /* host path of the workspace; NULL: a directory of the root tmpfs */
        const char *root_dir;
        const char *hostname;
        const char *dev_dir; /* bound as /dev (dev-template.h); NULL: the host's nodes one by one */
        /* size= of the sandbox's own tmpfs (its root, holding /tmp, /run and /dev/shm): a write
         * past it is ENOSPC, never an OOM kill or the host's memory (sandbox_tmpfs_size()) */
        uint64_t tmpfs_size;
        const char *const *mask_paths; /* hidden inside (state dir, control sockets) */
        const char *const *root_binds; /* more directories of root_dir, bound read-only (conf.h) */
        RootUpper root_upper; /* .dir set: "root": "overlay" (root-overlay.h); the trees are overlays */
        /* With root_upper: host path of an image's rootfs, the one lower layer of an overlay of
         * the whole root (trees then holds that overlay alone, as "/"); NULL: the host's view */
        const char *image_root;
        RootTrees trees;     /* made by whoever clones the init, from root_dir and root_binds */
        bool cgroupns_ready; /* born in the sandbox's own cgroup namespace: no unshare */
        bool lock_mounts;    /* end in a child user namespace whose mounts are locked (sandbox-setup.c) */
        /* The go's "/" tree is a root.path (create's "root": {"path"}): the whole root as it is,
         * with the sandbox's own /proc, /sys, /dev, /dev/pts and /dev/shm over it, writable unless
         * own_root_read_only; no /work of the daemon's. */
        bool own_root;
        bool own_root_read_only;
        /* >= 0: the network namespace to join (netns-pool.h), for the helper that clones the
         * init; -1: the init gets a new one of its own */
        int netns_fd;
        /* >= 0: the init's /sys, a sysfs of that namespace the helper mounted (detached) before
         * leaving the host's user namespace: a sandbox may not mount one of a namespace it does
         * not own. -1: the init mounts its own, and brings its own loopback up. */
        int sysfs_fd;
        /* create's "sysctls" as "key=value" (keys checked by the daemon: namespaced ones only),
         * NULL-terminated, or NULL: net.* written by the helper that joined netns_fd (a namespace
         * of the host's user namespace, which nothing inside may write), the rest by the init */
        const char *const *sysctls;
        /* create's "masked_paths" and "readonly_paths" (absolute, checked by the daemon), each
         * NULL-terminated, or NULL: resolved in the new root, masked (a directory by an empty
         * read-only tmpfs, anything else by /dev/null) or bound read-only; a missing one skipped */
        const char *const *masked_paths;
        const char *const *readonly_paths;
} InitParams;

/* Writes the "key=value" sysctls of kv (the key's dots become /proc/sys's slashes) in the
 * namespaces of the caller: those of the network namespace (net.*) when net, the others when
 * other. -1 with errno set at the first that fails. */
int sandbox_sysctls_write(const char *const *kv, bool net, bool other);

/* Whether overlay roots work here: the overlays of root_dir's trees (image_root NULL), or of
 * image_root as an image's rootfs (an empty directory on the image store's filesystem), made in a
 * child, their upper in a scratch directory below state_fd, which is state_path (removed again).
 * Each lower layer is idmapped, which its filesystem may not allow: the host's root and the image
 * store are probed apart. 0, or -errno and ret_step (what failed, in words). */
int root_overlay_probe(const char *root_dir, const char *image_root, int state_fd, const char *state_path,
                       uid_t host_uid, unsigned count, char *ret_step, size_t len);

/* p->trees from p->root_dir, p->root_binds and p->root_upper (root_trees_open()), or the overlay
 * of p->image_root, by host root in the host's user namespace. 0, or -1 with errno set. */
int init_trees_open(InitParams *p);

/* The sandbox's pid 1: sets up its view of the world, reports, then reaps orphans forever. */
_Noreturn void sandbox_init_main(const InitParams *p);

/* Everything the helper and the command need. When the helper is the exec'd
 * sandboxd-run-helper (run-exec.c), this struct travels as bytes through its argv and the
 * pointers (argv, envp, cwd, filter) are set anew on the other side: a new pointer field needs a
 * line in run_exec_argv() and in the helper's main(); a new fd needs one in run_params_fds(). */
#define RUN_EXTRA_FDS_MAX 8  /* a run's "extra_fds": its fds 3, 4, ... */
#define RUN_RLIMITS_MAX 16   /* RLIMIT_CPU .. RLIMIT_RTTIME */
#define RUN_GROUPS_MAX 32    /* a run's "user.groups" */
typedef struct RunParams {
        int init_pidfd;     /* the sandbox's init: its namespaces are joined */
        int cgroup_fd;      /* >= 0: the helper was not born in the run's cgroup and moves there */
        int report_fd;
        int stdio[3];
        int extra_fds[RUN_EXTRA_FDS_MAX]; /* become the command's 3, 4, ...; n_extra of them */
        unsigned n_extra;
        char *const *argv;
        char *const *envp;
        const char *cwd;    /* absolute; beneath /work unless cwd_anywhere */
        bool cwd_anywhere;  /* the sandbox has a root of its own: any directory of it */
        SandboxUser user;   /* who the command is inside (identity.h) */
        bool ids_set;       /* uid/gid instead of the user's own ids (identity_apply_ids()) */
        uint32_t uid, gid;
        uint32_t groups[RUN_GROUPS_MAX]; /* with ids_set: supplementary gids, n_groups of them */
        unsigned n_groups;
        bool caps_set;      /* the run's own capability sets instead of the user's (identity_apply_caps()) */
        IdentityCaps caps;
        bool umask_set;     /* umask set before exec (else the helper's) */
        unsigned umask;
        /* Other rlimits the run asked for (bit r: RLIMIT_r), set before the guards below */
        uint32_t rl_mask;
        struct rlimit rl[RUN_RLIMITS_MAX];
        /* An interactive session: the helper opens a terminal in the sandbox's own devpts, passes
         * its master back (REPORT_TERMINAL) and the command gets the slave as its controlling
         * terminal and stdio (stdio[] is then unused). */
        bool pty;
        unsigned short rows, cols;
        struct rlimit rl_cpu, rl_nproc, rl_data, rl_nofile, rl_fsize;
        bool rl_cpu_set, rl_nproc_set, rl_data_set, rl_nofile_set, rl_fsize_set;
        uint64_t reset_signals; /* bit n-1: signal n is ignored in the daemon; the command resets it */
        bool reset_oom_score;   /* the daemon's oom_score_adj is negative: the helper sets 0 */
        pid_t parent;           /* the daemon, whose death must end the helper (launch_params_guard) */
        bool direct;        /* the helper is in the sandbox's pid namespace and becomes the command */
        bool own_pidns;     /* the command is pid 1 of a pid namespace nested in the sandbox's (never direct) */
        /* No parent-death signal: a session's or a kept run's helper whose fds wait in systemd's
         * fd store for the next daemon, which supervises it again (restarts.md, 4 and 5); a run's
         * reports the command's end to whichever daemon reads its socket. */
        bool outlive_daemon;
        const SeccompProgram *filter; /* compiled once by the daemon */
} RunParams;

/* The fds of p the helper uses (-1 for none); returns how many it wrote (at most RUN_PARAMS_FDS). */
#define RUN_PARAMS_FDS (6 + RUN_EXTRA_FDS_MAX)
size_t run_params_fds(const RunParams *p, int ret[static RUN_PARAMS_FDS]);

/* Closes every fd but those in keep (which gets sorted); for children that do not exec. */
void close_all_fds_except(int *keep, size_t n);

/* What a helper that does not exec does to be in the sandbox as p->user (the file helper):
 * run_helper_main()'s steps and the command's up to its filter (groups dropped, p->cgroup_fd
 * entered, the namespaces joined, identity_apply(), rlimits, signals). -1 with errno set and the
 * step that failed in *ret_step. */
int helper_enter_sandbox(const RunParams *p, SpawnStep *ret_step);
/* The helper: joins the sandbox, forks the command, reports its start and its end; or, direct,
 * joins the sandbox and becomes the command (the daemon is its parent and sees its end). */
_Noreturn void run_helper_main(const RunParams *p);

/* A warm helper (run-exec.h, run_exec_warm()): exec'd ahead into the cgroup of a sandbox's next
 * run, in its pid namespace, the sandbox joined, in a session of its own, as its user, under the
 * filter; it waits on sock for the run, then becomes its command as a direct helper does. pidfd
 * < 0: none. */
typedef struct WarmHelper {
        pid_t pid;
        int pidfd;
        int sock;         /* ours; the helper's reports come back on it, as on a report socket */
        SandboxUser user; /* who it already is: it takes only a run as that user, with neither
                           * ids nor capabilities of its own (RunParams.ids_set, caps_set) */
        pid_t inner_pid;  /* its pid in the sandbox's pid namespace, the command's to be; 0: not known */
} WarmHelper;
#define WARM_HELPER_NONE ((WarmHelper) { 0, -EBADF, -EBADF, SANDBOX_USER_UNSET, 0 })

/* The daemon's side: p's run (argv, envp, cwd, stdio, extra fds and the rest of p; not a pty,
 * not own_pidns) to the warm helper on sock. 0, -E2BIG when its strings are too long for one
 * request, or -errno (-EPIPE: the helper is gone). */
int warm_request_send(int sock, const RunParams *p);
/* On the wire, one SEQPACKET message: this header, then cwd, argv and envp as NUL-terminated
 * strings (len bytes in all), with stdio and the n_extra extra fds (SCM_RIGHTS). */
typedef struct WarmHeader {
        RunParams params; /* its pointers and fds mean nothing on the other side */
        uint32_t argc, envc, len;
} WarmHeader;
/* What the helper receives: the run's params, cwd, argv and envp pointing into strings, stdio and
 * extra_fds the fds that came with it (CLOEXEC), the other fds -1, filter NULL. */
#define WARM_STRINGS_MAX (64 * 1024)
typedef struct WarmRequest {
        RunParams params;
        char strings[WARM_STRINGS_MAX];
        char *ptrs[WARM_STRINGS_MAX / 2 + 2];
} WarmRequest;
/* 0, or -1 when what came is not one request (the daemon's end closed included); the fds that came
 * with something else are closed. */
int warm_request_recv(int sock, WarmRequest *ret);
/* The helper's side: w carries init_pidfd, report_fd (its end of sock), the user, the filter and
 * the sandbox's signals and OOM score; never returns. */
_Noreturn void run_helper_warm(const RunParams *w);
/* Killed (unless it has ended) and reaped, its fds closed: *w is then none. */
void warm_helper_kill(WarmHelper *w);
