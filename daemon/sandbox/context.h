/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What every part of the daemon reads: the event loop, the configuration, the cgroup root, the
 * state directory, what the host can do, and what every run shares. Filled once by lifecycle.c
 * (lifecycle_setup()) before the first request, read-only afterwards: no module writes a field
 * of it after setup. Modules keep their own state in their own structs (Pool, Sweeper, RunLog,
 * the server's Manager); the pointers to them here are set at setup and never change.
 *
 * It lives in sandbox/, not core/: it aggregates host/ and exec/ types (CgroupRoot, NetnsPool,
 * SeccompProgram), which core/ is below. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "cgroup.h"
#include "conf.h"
#include "fdstore.h"
#include "scope.h"
#include "netns-pool.h"
#include "syscall-filter.h"

typedef struct Registry Registry;
typedef struct Pool Pool;
typedef struct Sweeper Sweeper;
typedef struct RunLog RunLog;
typedef struct SandboxHooks SandboxHooks;
typedef struct PortTable PortTable;
typedef struct ImageStore ImageStore;
typedef struct Egress Egress;

typedef struct HostFeatures {
        bool clone_into_cgroup;
        bool pidfd;
        bool pidfd_exit_info; /* exit statuses kept with pidfds (pidfd.h): kept runs start direct */
        bool mount_idmap; /* mount_setattr() with MOUNT_ATTR_IDMAP (mount-open.h) */
        /* 0: create's "root": "overlay" works here (root-overlay.h, probed at start); else the
         * -errno of the step that failed, and root_overlay_step says which */
        int root_overlay_error;
        const char *root_overlay_step;
        /* The same for an image's root ("image" with "root": "overlay"): its lower layer is on
         * the image store's filesystem, not the host root's, and is probed apart */
        int image_overlay_error;
        const char *image_overlay_step;
        /* Project quotas on the sandboxes' filesystem (project-quota.h): limits.disk enforced
         * at write time. disk_quota_how: "project quota on xfs at PATH", or why not. */
        bool disk_quota;
        char disk_quota_how[320];
        const char *storage;  /* "state" or "image" (storage.h) */
        bool reflink;         /* copies there share blocks (FICLONE) */
        /* "storage = image:SIZE:btrfs": workspaces and upper layers are subvolumes, snapshots,
         * forks and restores subvolume snapshots (btrfs.h), disk limits qgroups; "xfs" or the
         * state directory's filesystem ("ext4", ...) otherwise */
        bool btrfs;
        char fs[16];
        bool files_quota;     /* limits.files enforced too (project quotas: yes; btrfs: no) */
} HostFeatures;

#define CONTEXT_MAX_MASKED 8

typedef struct Context {
        sd_event *event;
        Config config;
        CgroupRoot cg;
        HostFeatures features;
        int state_fd;      /* <state_dir>/sandboxes */
        char *dev_dir;     /* <state_dir>/dev, every sandbox's /dev (dev-template.h); NULL: none */
        /* The listening sockets' paths, masked inside every sandbox (the server's). */
        const char *masked_paths[CONTEXT_MAX_MASKED];
        unsigned n_masked;
        uint64_t start_usec;
        gid_t admin_gid;
        bool have_admin_gid;
        SeccompProgram filter;     /* every run's, compiled once */
        uint64_t ignored_signals;  /* SIG_IGN here, so reset in every command (bit n-1: signal n) */
        bool oom_score_negative;   /* our oom_score_adj (OOMScoreAdjust=) is < 0: reset in every run */
        int run_helper_fd;         /* sandboxd-run-helper (run-exec.h), or -1: clone the daemon */
        int file_helper_fd;        /* sandboxd-file-helper (file-helper.h), or -1: no file operations */
        int self_pidns_fd;         /* our pid namespace, to come back to after a direct run's clone */
        NetnsPool netns;           /* the sandboxes' network namespaces (netns-pool.h): its own state */
        /* What systemd's fd store gave back at start (fdstore.h), claimed by the sandboxes as
         * they are restored; the rest is dropped once the restore is done. */
        FdStore fdstore;
        /* Placement "scope": each sandbox in a transient scope of sandboxd.slice (scope.h); NULL:
         * placement "subtree", the sandboxes below cg.sandboxes_fd. */
        ScopeManager *scopes;
        /* The modules' own state, each behind its header; NULL where a module is not wired (a
         * unit test's Context). */
        Registry *registry;        /* the sandboxes (registry.h) */
        Pool *pool;                /* pool.h */
        Sweeper *sweeper;          /* sweep.h */
        RunLog *run_log;           /* run-record.h */
        struct RunResult *run_results; /* final replies no client took yet (run.h), oldest first */
        bool stopping;             /* the event loop is over: connections close, kept runs stay */
        const SandboxHooks *sandbox_hooks; /* what sandbox.c asks of others (sandbox.h), or NULL */
        PortTable *ports;          /* published ports (port.h) */
        ImageStore *images;        /* the image store (image.h) */
        Egress *egress;            /* egress for sandboxes (egress.h) */
} Context;

/* Takes the configuration (*config is emptied); every fd -1, no event loop yet. */
void context_init(Context *ctx, Config *config);
/* Closes and frees what the context holds (not the modules it points to). */
void context_done(Context *ctx);
