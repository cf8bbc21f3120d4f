/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The manager: one sd-event loop, the listening sockets, the connections and the registry of
 * sandboxes. Everything the daemon does happens from callbacks of this loop. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "cgroup.h"
#include "conf.h"
#include "netns-pool.h"
#include "syscall-filter.h"

typedef struct Connection Connection;
typedef struct Sandbox Sandbox;
typedef struct Run Run;

/* A destroyed sandbox's id, for destroy's already_gone (told to its owner and admins only). */
typedef struct Tombstone {
        char id[24];
        uid_t owner_uid;
} Tombstone;

typedef struct HostFeatures {
        bool clone_into_cgroup;
        bool pidfd;
} HostFeatures;

#define MANAGER_MAX_LISTEN 8
#define MANAGER_TOMBSTONES 4096

typedef struct Manager {
        sd_event *event;
        Config config;
        CgroupRoot cg;
        HostFeatures features;
        int state_fd;      /* <state_dir>/sandboxes */
        int run_log_fd;    /* <state_dir>/runs.log (run-record.h) */
        uint64_t run_log_bytes; /* its size, counted as it is written (no fstat per run) */
        char *dev_dir;     /* <state_dir>/dev, every sandbox's /dev (dev-template.h); NULL: none */
        int listen_fds[MANAGER_MAX_LISTEN];
        char *listen_paths[MANAGER_MAX_LISTEN]; /* masked inside every sandbox */
        unsigned n_listen;
        sd_event_source *listen_sources[MANAGER_MAX_LISTEN];
        sd_event_source *accept_timer; /* re-enables them after running out of fds */
        unsigned accept_paused_count;
        sd_event_source *trim_timer;   /* malloc_trim() after connections went (manager_schedule_trim) */
        Connection *connections;
        unsigned n_connections;
        Sandbox *sandboxes;
        unsigned n_sandboxes; /* pooled ones included */
        unsigned n_pooled;
        unsigned n_quarantined; /* sandboxes set aside at start: their record was unreadable (state.h) */
        sd_event_source *pool_refill, *pool_retry, *pool_taken;
        unsigned n_runs;
        uint8_t *uid_slots; /* one byte per uid range: in use or not */
        Tombstone *tombstones; /* destroyed sandboxes, a ring */
        unsigned n_tombstones, tombstone_next;
        uint64_t start_usec;
        gid_t admin_gid;
        bool have_admin_gid;
        bool stopping;
        bool socket_activated;      /* sd_listen_fds gave us the sockets: we may exit when idle */
        /* sweep.c: sweeps in flight, the periodic timer, the global disk budget's verdict. */
        struct Sweep *sweeps;
        unsigned n_sweeps;
        bool timer_sweep_running;
        bool disk_budget_exceeded;  /* over disk_budget or files_budget: creates and runs refused */
        bool files_budget_exceeded; /* the files_budget part of it, for the message */
        sd_event_source *sweep_timer;
        /* idle-exit.c */
        sd_event_source *idle_timer;
        uint64_t idle_since_usec;
        SeccompProgram filter;     /* every run's, compiled once */
        uint64_t ignored_signals;  /* SIG_IGN here, so reset in every command (bit n-1: signal n) */
        bool oom_score_negative;   /* our oom_score_adj (OOMScoreAdjust=) is < 0: reset in every run */
        int run_helper_fd;         /* sandboxd-run-helper (run-exec.h), or -1: clone the daemon */
        int self_pidns_fd;         /* our pid namespace, to come back to after a direct run's clone */
        NetnsPool netns;           /* the sandboxes' network namespaces (netns-pool.h) */
} Manager;

int manager_new(Manager **ret, Config *config);
Manager *manager_free(Manager *m);
/* Takes listening fds (from sd_listen_fds or our own bind). */
int manager_add_listener(Manager *m, int fd);
int manager_setup(Manager *m);
int manager_run(Manager *m);

/* By id, whoever owns it (visibility is the caller's business: sandbox_visible_to()). */
Sandbox *manager_find_sandbox(Manager *m, const char *id);
/* By name among one owner's sandboxes: names are unique per owner, not across owners. */
Sandbox *manager_find_named(Manager *m, uid_t owner, const char *name);
void manager_add_tombstone(Manager *m, const char *id, uid_t owner);
bool manager_find_tombstone(Manager *m, const char *id, uid_t *ret_owner);
int manager_alloc_uid_slot(Manager *m, unsigned *ret);
void manager_free_uid_slot(Manager *m, unsigned slot);
/* Gives freed heap pages back to the kernel a second from now (once, however often called). */
void manager_schedule_trim(Manager *m);
