/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Starting a run's helper without copying the daemon: a vfork-style child (CLONE_VM|CLONE_VFORK,
 * on a stack of its own) that only execs sandboxd-run-helper, which then does what
 * run_helper_main() does. No page of the daemon is copied and no copy-on-write fault follows,
 * and the helper's later fork of the command copies a tiny process, not the daemon. */
#pragma once

#include <linux/sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "spawn.h"

#define RUN_HELPER_NAME "sandboxd-run-helper"
#define RUN_HELPER_INIT "init" /* its argv[1] when it is to clone a sandbox's init */
#define RUN_HELPER_RM "rm" /* ... when it is to remove a destroyed workspace */
#define RUN_HELPER_MOUNT "mount" /* ... when it is to open a caller's directory for a mount */
#define RUN_HELPER_INIT_CGNS "init-cgns" /* ... with its cgroup namespace (the helper is in the sandbox's cgroup) */
#define RUN_HELPER_PLACEHOLDER "placeholder" /* ... when it is to wait until killed (scope.h) */
#define RUN_HELPER_WARM "warm" /* ... when it is to wait, warm, for a run (spawn.h, WarmHelper) */

/* Opens the helper binary: next to our own executable (a build tree), else in LIBEXECDIR.
 * $SANDBOXD_RUN_HELPER names another path, or "fork" for none (the helper is then a clone of the
 * daemon, as before; for measurements). Returns an O_PATH fd, or -errno. */
int run_exec_open_helper(void);
/* The same for another helper binary (sandboxd-file-helper; $env_name names another path). */
int run_exec_open_binary(const char *name, const char *env_name);

/* Reserves the fd slots through which helpers get their fds (run-exec.c says why), just above
 * every fd open now: called once at start. Without them (-errno) helpers copy the whole table. */
int run_exec_reserve_slots(void);

/* Whether run_exec_helper() can have the helper born in a cgroup (x86_64: clone3 with a stack of
 * its own); elsewhere the helper moves itself there (p->cgroup_fd). */
bool run_exec_into_cgroup(void);

/* Starts the helper for p, born in cgroup_fd if run_exec_into_cgroup(). Returns its pid and a
 * pidfd in *ret_pidfd, or -errno. The helper reports a failed exec over p->report_fd like any
 * step. */
pid_t run_exec_helper(int helper_fd, const RunParams *p, int cgroup_fd, int *ret_pidfd);

/* Starts a sandbox's init the same way. The exec'd helper (it must not be in the new user
 * namespace yet: an exec there before the uid map exists would drop its capabilities) clones
 * the init with CLONE_PARENT into the new namespaces and cgroup_fd, sends its pid and pidfd over
 * p->sync_fd as a REPORT_STARTED, and exits; the init, our child, waits for its go on
 * p->sync_fd. Returns the helper's pid (and pidfd), or -errno. */
#define SANDBOX_NS_FLAGS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET)
/* With leaf_fd >= 0 (p->cgroupns_ready; only where run_exec_into_cgroup()), the helper is born
 * in cgroup_fd and clones the init into leaf_fd with a new cgroup namespace rooted at
 * cgroup_fd. */
pid_t run_exec_init(int helper_fd, const InitParams *p, int cgroup_fd, int leaf_fd, int *ret_pidfd);

/* Starts the helper warm (spawn.h, WarmHelper) born in cgroup_fd: p gives init_pidfd, report_fd
 * (the helper's end of the socket its run will come on), the filter, and the sandbox's signals,
 * OOM score and parent. The caller has set our children's pid namespace to the sandbox's. Returns
 * its pid (and pidfd), or -errno. */
pid_t run_exec_warm(int helper_fd, const RunParams *p, int cgroup_fd, int *ret_pidfd);

/* Starts the helper as sandboxd-placeholder: a process that only waits, with no fd of ours, to
 * be born in cgroup_fd (if >= 0) and keep a sandbox's scope from being empty (scope.h). */
pid_t run_exec_placeholder(int helper_fd, int cgroup_fd, int *ret_pidfd);

/* Starts the helper as sandboxd-rm, removing dir_fd/name (rm_rf_at) in the background. */
pid_t run_exec_rm(int helper_fd, int dir_fd, const char *name, int *ret_pidfd);

/* Starts the helper as sandboxd-mount: mount_source_open(m) (mount-source.h), or
 * mount_tree_open(tree_fd, m) with a caller's tree (tree_fd >= 0), its result sent over
 * report_fd as a REPORT_READY carrying the tree, or a REPORT_FAILED {step, err}. */
typedef struct MountSource MountSource;
pid_t run_exec_mount(int helper_fd, const MountSource *m, int tree_fd, int report_fd, int *ret_pidfd);

/* The bytes of the RunParams and of the filter, in the helper's argv. */
char *run_exec_hex(const void *data, size_t n);
int run_exec_unhex(const char *hex, void *ret, size_t n);
