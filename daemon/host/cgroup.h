/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cgroup v2 plumbing: find the cgroup2 mount and the delegated subtree, move the daemon into a
 * leaf of its own, create, limit, kill, read and remove sandbox cgroups. Everything works on
 * directory fds below the cgroup2 mount; no cgroup v1 hierarchy is ever touched. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum CgController {
        CG_MEMORY = 1 << 0,
        CG_PIDS = 1 << 1,
        CG_CPU = 1 << 2,
} CgController;

typedef struct CgroupRoot {
        char *mount;        /* where cgroup2 is mounted, e.g. /sys/fs/cgroup */
        char *base;         /* absolute path of our subtree */
        int base_fd;
        int sandboxes_fd;   /* base/sandboxes: one child per sandbox */
        /* base again, flock()ed (LOCK_EX) for as long as we live: one daemon per subtree. */
        int lock_fd;
        unsigned enforceable; /* CgController mask usable for sandboxes */
        bool has_kill;      /* cgroup.kill (5.14) */
        bool has_memory_peak;
        bool has_pids_peak;
} CgroupRoot;

typedef struct CgLimits {
        uint64_t memory;    /* 0: no limit */
        uint64_t swap;      /* written only with memory */
        uint64_t pids;      /* 0: no limit */
        uint64_t millicpus; /* 0: no limit */
        bool oom_group;
} CgLimits;

/* Finds the cgroup2 mount by filesystem type in /proc/self/mountinfo. */
int cg_find_mount(char **ret);
/* The daemon's own cgroup path from /proc/self/cgroup ("0::/..."). */
int cg_self_path(char **ret);
/* Sets up base (override, or our delegated cgroup), moves the daemon into base/daemon, enables
 * memory, pids and cpu for children where available and creates base/sandboxes. */
int cg_setup(const char *override, CgroupRoot *ret);
void cg_root_done(CgroupRoot *root);

int cg_create(int parent_fd, const char *name, int *ret_fd);
/* Removes parent/name and every cgroup below it (all must be empty of processes). */
int cg_remove_tree(int parent_fd, const char *name);
int cg_enable_controllers(int dir_fd, unsigned mask);
/* Writes the limits for the controllers in mask into the cgroup at path (absolute, below
 * root->mount: a sandbox's cgroup in the subtree or in its scope); libcgroup does the writing
 * (cgroup-limits.c). */
int cg_apply_limits(const CgroupRoot *root, const char *path, const CgLimits *l, unsigned mask);

/* The same values, written straight through the cgroup's directory fd: for the cgroup of every
 * run, where libcgroup would rebuild a path and walk its controller list each time. */
int cg_apply_limits_at(int dir_fd, const CgroupRoot *root, const CgLimits *l, unsigned mask);

int cg_write(int dir_fd, const char *file, const char *value);
int cg_read(int dir_fd, const char *file, char *buf, size_t size);
/* A "key value" line of a flat keyed file (memory.events, cpu.stat, cgroup.events). */
int cg_read_keyed(int dir_fd, const char *file, const char *key, uint64_t *ret);
/* The same from a file's text already read (cg_read()): two keys of one file, one read. */
int cg_parse_keyed(const char *buf, const char *key, uint64_t *ret);
int cg_read_u64(int dir_fd, const char *file, uint64_t *ret);
int cg_kill(int dir_fd);
/* Kills dir_fd's cgroup (thawed first when thaw: it may have been frozen for a snapshot when a
 * daemon died) and waits, at most max_ms milliseconds, until nothing is left in it: whether it is
 * empty. Blocks: for the start-up walk and discards, never the event loop's hot paths. */
bool cg_kill_wait_empty(int dir_fd, bool thaw, unsigned max_ms);
/* dir_fd's cgroup.kill, opened ahead for a kill that must not need a new fd (a run's timeout
 * when the daemon is out of fds, THREATS DMN-10): the fd, -ENOENT where the kernel has no
 * cgroup.kill (the fallback of cg_kill() is used then), or -errno. */
int cg_open_kill(int dir_fd);
/* Kills dir_fd's cgroup through kill_fd when there is one (no fd needed), else as cg_kill(). */
int cg_kill_at(int kill_fd, int dir_fd);
/* The pids in dir_fd's cgroup.procs and in its descendants' (8 levels deep), at most max: how
 * many, or -errno. */
int cg_list_pids(int dir_fd, pid_t *pids, int max);
/* The pids in dir_fd's own cgroup.procs, at most max (none of its descendants'). */
int cg_list_own_pids(int dir_fd, pid_t *pids, int max);

/* What a cgroup uses now; CG_USAGE_UNKNOWN where it cannot be read. memory.current and
 * pids.current exist only where that controller is enabled (mask), while cpu.stat's usage_usec
 * is in every cgroup2 directory, controllers or not. */
#define CG_USAGE_UNKNOWN UINT64_MAX
typedef struct CgUsage {
        uint64_t memory_bytes;
        uint64_t pids;
        uint64_t cpu_usec;
} CgUsage;
void cg_read_usage(int dir_fd, unsigned mask, CgUsage *ret);
/* 1 when processes remain in the cgroup or below, 0 when empty. */
int cg_populated(int dir_fd);
/* Whether a process born in dir_fd now would be frozen (cgroup.events "frozen": set at once for
 * an empty cgroup whose own or an ancestor's cgroup.freeze is 1): 1, 0, or -errno. */
int cg_frozen(int dir_fd);
int cg_move_pid(int dir_fd, int pid);
