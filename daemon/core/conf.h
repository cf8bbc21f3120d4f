/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's configuration: defaults, maximums, paths. Read from /etc/sandboxd/sandboxd.conf
 * ("key = value" lines; see docs/sandboxd.conf.md). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define CONFIG_POOL_IMAGES_MAX 16
#define CONFIG_POOL_MAX 256 /* pool_size, pool_create and each pool_images entry */

typedef struct Config {
        char *state_dir;
        /* "storage": 0 for "state" (sandboxes on the state directory's filesystem), else the size
         * of <state_dir>/storage.img, an XFS image mounted over <state_dir>/sandboxes. */
        uint64_t storage_image_size;
        bool storage_btrfs;         /* "image:SIZE:btrfs": the image is btrfs (subvolumes, qgroups) */
        char *cgroup_root;          /* NULL: discover the delegated subtree */
        char *root_dir;             /* the tree a sandbox's /usr, /etc and root_binds come from */
        char **root_binds;          /* NULL, or more directories of it, absolute, sorted, NULL-ended */
        char **mount_roots;         /* NULL, or where non-root clients' "mounts" sources may be */
        uint64_t max_line_bytes;
        uint64_t max_connections;
        uint64_t max_connections_per_uid; /* root's are not counted */
        uint64_t max_buffered_per_uid;    /* run output held and replies unread, per uid (not root) */
        uint64_t max_connection_output;
        uint64_t request_timeout_usec;
        uint64_t max_sandboxes;
        uint64_t max_runs_per_connection;
        char *admin_group;          /* members may see and touch every sandbox */
        char *socket_group;         /* given to the --listen socket, as SocketGroup= does */
        uint64_t max_sandboxes_per_uid;
        uint64_t max_runs_per_uid;  /* runs in flight; root is not capped */
        uint64_t max_file_transfers_per_uid; /* file.write/read in flight; root is not capped */
        uint64_t uid_base;          /* first host uid of the sandbox ranges */
        uint64_t uid_range;         /* uids per sandbox */
        /* Defaults and maximums for sandboxes and runs. */
        uint64_t default_memory, max_memory;
        uint64_t default_pids, max_pids;
        uint64_t default_millicpus, max_millicpus;
        uint64_t default_timeout_usec, max_timeout_usec;
        uint64_t default_output_bytes, max_output_bytes;
        uint64_t default_file_size, max_file_size;   /* RLIMIT_FSIZE; 0: none / no maximum */
        uint64_t default_open_files, max_open_files; /* RLIMIT_NOFILE */
        uint64_t swap_max;
        uint64_t max_stdin_bytes;
        /* Disk: the sweep (sweep.c), quotas, expiry, and idle exit (idle-exit.c). 0 = none. */
        uint64_t sweep_interval_usec;   /* the periodic sweep; 0: only on request */
        uint64_t sweep_timeout_usec;    /* bound of one sweep's walk */
        uint64_t disk_budget;           /* all sandboxes' workspaces and snapshots together */
        uint64_t default_disk, max_disk; /* per sandbox: workspace + snapshots */
        uint64_t default_ttl_usec, default_idle_usec;
        uint64_t min_free_disk;         /* creates refused below this on the state filesystem */
        /* The same in files (inodes); a file limit left at 0 where the byte one is set is one file
         * per SWEEP_BYTES_PER_FILE of it (sweep.c). */
        uint64_t files_budget, default_files, max_files, min_free_files;
        uint64_t idle_exit_usec;        /* socket-activated daemon exits when idle this long */
        /* The final reply of a run taken back after a restart that ended with no client attached:
         * kept this long for one run.attach (run.c). */
        uint64_t run_result_keep_usec;
        uint64_t hold_timeout_usec;     /* a stop's holder gives up after this long; 0: no holder */
        /* Interactive sessions (session.c). */
        uint64_t session_ring_bytes;         /* output kept per session for reattaching */
        uint64_t session_idle_timeout_usec;  /* unattached this long: closed; 0: never */
        uint64_t max_sessions_per_uid;
        uint64_t pool_size;         /* ready sandboxes kept for throwaway runs (pool.h) */
        uint64_t pool_create;       /* ... for create with the host's root (pool.h) */
        /* ... for create from these images: pool_images = NAME[:N] ... (N: 2 if left out) */
        unsigned n_pool_images;
        char *pool_image_name[CONFIG_POOL_IMAGES_MAX];
        uint64_t pool_image_count[CONFIG_POOL_IMAGES_MAX];
        uint64_t stop_sandboxes;        /* 1: no sandbox's processes outlive the daemon (a stop kills them, a restore starts anew) */
        uint64_t teardown_timeout_usec; /* a destroy with processes left after this: teardown_stuck */
        /* Published ports (port.c): per sandbox, per uid (not root) and connections in all. */
        uint64_t max_ports_per_sandbox, max_ports_per_uid;
        uint64_t max_port_connections_per_sandbox, max_port_connections_per_uid, max_port_connections;
        /* Egress (sandbox/egress.c): the private range sandboxes' veth pairs are addressed from (a
         * /30 each), what they never reach (IPv4 prefixes, or "none"), and the resolver their DNS
         * relay asks (NULL: the first IPv4 nameserver of /etc/resolv.conf). Checked at load. */
        char *egress_range, *egress_deny, *egress_dns;
        /* Each sandbox's share of the connection-tracking table: connections tracked at once, and
         * new ones a second (the same in a burst); past either a new connection is refused. */
        uint64_t egress_connections, egress_connection_rate;
        /* DNS queries the relays have in flight at once, in all (a quarter of it per owner uid, at
         * most 32 per sandbox). */
        uint64_t egress_dns_queries;
        /* The metrics endpoint (server/metrics-http.c, docs/metrics.md). */
        char *metrics_group;            /* given to the --metrics-listen Unix socket */
        uint64_t metrics_max_sandboxes; /* sandboxes with series of their own; the rest summed */
        /* Images (sandbox/image.c): caps of one import, and whether device nodes are kept. */
        uint64_t image_max_size, image_max_files, image_devices;
        uint64_t nofile_soft;       /* RLIMIT_NOFILE's soft limit at start (not a key): for runs */
        uint64_t nofile_hard;       /* and its hard limit (not a key): limits.open_files' ceiling */
} Config;

void config_init_defaults(Config *c);
void config_done(Config *c);
/* Reads path; a missing file is fine when !must_exist. Errors name the key and the line in
 * *ret_error (malloc'ed). */
int config_load(Config *c, const char *path, bool must_exist, char **ret_error);
/* Checks root_dir and root_binds on the filesystem, once the command line has had its say: each
 * bind an existing directory of root_dir, without a symlink in its path, and no kernel interface
 * (procfs, sysfs, ...). Errors name the key and the entry in *ret_error (malloc'ed). */
int config_check_root(const Config *c, char **ret_error);

/* A file (inode) limit not set where the byte limit is: one file per this many bytes of it. */
#define SWEEP_BYTES_PER_FILE 4096

/* A byte limit's file limit when none is set: 0 (none) stays 0, a small one is at least 1. */
static inline uint64_t config_files_for_bytes(uint64_t bytes) {
        return bytes == 0 ? 0 : bytes < SWEEP_BYTES_PER_FILE ? 1 : bytes / SWEEP_BYTES_PER_FILE;
}

/* Every sandbox the pools may hold: pool_size + pool_create + the pool_images counts. */
static inline uint64_t config_pool_total(const Config *c) {
        uint64_t n = c->pool_size + c->pool_create;
        for (unsigned i = 0; i < c->n_pool_images; i++)
                n += c->pool_image_count[i];
        return n;
}
