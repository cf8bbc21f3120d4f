/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A sandbox: its cgroup, its init process (pid 1 of its namespaces, held by a pidfd), its
 * workspace, its limits and its runs. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "caller.h"
#include "context.h"
#include "egress.h"
#include "identity.h"
#include "proto.h"
#include "registry.h"
#include "reply.h"
#include "scope.h"
#include "spawn.h"

typedef struct Sandbox Sandbox;
typedef struct Run Run;
typedef struct Session Session;
typedef struct SandboxFreeze SandboxFreeze;

typedef enum SandboxState {
        SANDBOX_CREATING,
        SANDBOX_READY,
        SANDBOX_DESTROYING,
        SANDBOX_FAILED,
} SandboxState;

/* The next run's cgroup, made ahead (sandbox-spare.c, which alone reads it). */
typedef struct SandboxSpare {
        char name[32];          /* "run-<n>"; "" when there is none */
        int cg_fd, kill_fd;     /* kill_fd: -ENOENT where the kernel has no cgroup.kill */
        CgLimits lim;           /* what was written into it, */
        unsigned mask;          /* for these controllers */
        WarmHelper warm;        /* waiting in it for the run, where there is one, */
        sd_event_source *warm_exit; /* and reaped should it end first (its pid namespace's init waits for that) */
} SandboxSpare;

typedef struct SandboxLimits {
        uint64_t memory;
        uint64_t pids;
        uint64_t millicpus;
        uint64_t timeout_usec;
        uint64_t output_bytes;
        uint64_t disk;          /* workspace + snapshots, checked by the sweep; 0: none */
        uint64_t files;         /* the same in files and directories (inodes); 0: none */
        uint64_t file_size;     /* RLIMIT_FSIZE of every command; 0: none */
        uint64_t open_files;    /* RLIMIT_NOFILE (soft = hard) of every command */
} SandboxLimits;

/* Someone waiting for the sandbox to be ready or gone: a create or destroy reply. */
typedef struct Waiter {
        Reply *reply;
        struct Waiter *next;
} Waiter;

typedef struct SnapshotJob SnapshotJob;

/* What a sandbox knows of its runs, sessions and snapshot jobs (run.c, session.c, snapshot-job.c):
 * each embeds a member, on s->members from its making to its freeing, and the sandbox asks it
 * through its ops. An op may be NULL where the member has nothing to do. */
typedef struct SandboxMember SandboxMember;
typedef struct SandboxMemberOps {
        /* The sandbox is destroyed (s->state is SANDBOX_DESTROYING) or restarted: sig to what the
         * member runs in it. One that waits for the sandbox to be ready is answered
         * (sandbox_gone_error()) and freed on a destroy, and waits on through a restart. */
        void (*kill)(SandboxMember *m, int sig);
        /* Its teardown is stuck with processes left (THREATS DMN-06): the client is told err now. */
        void (*answer_stuck)(SandboxMember *m, const ProtoError *err);
        /* The sandbox is ready: a member waiting for that starts, and true is returned. */
        bool (*start)(SandboxMember *m);
        /* The sandbox was frozen for a snapshot, or thawed (s->frozen tells which). */
        void (*frozen)(SandboxMember *m);
        /* The sandbox is freed (at the daemon's stop): the member goes with it, without ending
         * what it records (a restarted daemon finds it interrupted). */
        void (*free)(SandboxMember *m);
        /* The cgroup below the sandbox's it runs in, or NULL (may be NULL itself). */
        const char *(*cgroup)(SandboxMember *m);
} SandboxMemberOps;

struct SandboxMember {
        const SandboxMemberOps *ops;
        SandboxMember *next, *prev;
};

#define SANDBOX_MEMBER_OF(m, type, field) ((type *) ((char *) (m) - offsetof(type, field)))

/* A restart of a ready sandbox's processes (snapshot.restore): everything is stopped, swap runs
 * while nothing lives inside, then a new init is made; done tells how it went. */
typedef struct SandboxRestart {
        int (*swap)(Sandbox *s, void *userdata);
        void (*done)(Sandbox *s, int error, void *userdata);
        void *userdata;
        sd_event_source *timer;
        unsigned tries;
} SandboxRestart;

/* A caller's directory in the sandbox (create's "mounts"): opened with the credentials of the
 * client that made it (caller below), kept in meta.json so that a restart reopens it so. */
#define SANDBOX_MOUNTS_MAX 16
typedef struct SandboxMount {
        char *source, *target;
        bool read_only;
        /* "idmap": "same" (root clients only): host ids 0..65535 are the same ids inside, instead
         * of the caller's uid and gid becoming the sandbox user's */
        bool idmap_same;
        int tree_fd; /* the detached idmapped tree until the init has it, else -1 */
} SandboxMount;

typedef struct Sandbox {
        Context *ctx;
        char id[24];
        char *name;
        SandboxState state;
        uid_t owner_uid;
        unsigned uid_slot;
        uid_t host_uid; /* uid 0 inside maps here */
        /* The host uid (and gid) id 0 of the workspace's files carries on disk: host_uid, or a
         * btrfs fork's source's (its /work is then idmapped onto host_uid: sandbox_open_work()) */
        uid_t work_uid;
        SandboxLimits limits;
        unsigned enforced; /* CgController mask */
        bool best_effort;
        bool ephemeral;    /* made for one run, destroyed after it */
        /* /work is a directory of the sandbox's own tmpfs, not <state>/<id>/work: a throwaway
         * sandbox's unless its run asks for "workspace":"disk" */
        bool memory_workspace;
        /* A throwaway sandbox whose run is not root: its init skips the child user namespace that
         * locks the mounts (lock_mounts() in sandbox-setup.c), which only root inside could undo,
         * and a "user":"root" run in it is refused (run_spec_resolve()). */
        bool unprivileged_only;
        SandboxUser user;  /* its runs' default: "sandbox" (uid 1000) unless "user":"root" */
        /* "root": "overlay": its root directories are overlays with an upper layer of its own in
         * <state>/<id>/root-upper (root-overlay.h), copied by snapshots, forks and restores */
        bool root_overlay;
        bool init_deferred; /* a fork's overlay root: the init starts once the copy is in place */
        bool pooled;       /* waiting in the pool (pool.h): no one's, invisible, not counted */
        bool from_pool;    /* taken from it: its end refills the pool (pool_taken_done) */
        /* Made by a create or handed out to one by the pool, its record not written yet: the
         * create's answer waits for it (pool.c writes the records of a burst at once,
         * sandbox_record_done()). */
        bool record_pending;
        json_object *env;  /* default environment for runs, or NULL */
        /* mounts[0] has target /work when the workspace is the caller's ("workspace":
         * {"source"}): nothing of it is sandboxd's to snapshot, budget or remove. */
        SandboxMount mounts[SANDBOX_MOUNTS_MAX + 1];
        unsigned n_mounts;
        SandboxCaller caller; /* the mounts' credentials (with n_mounts > 0) */
        /* Its root: the image of that name (image.h), held while the sandbox exists; NULL: the
         * host's minimal view. root_tree_fd: the detached tree the init binds as / until it has
         * it (sandbox_open_root()), else -1. */
        char *image;
        int root_tree_fd;
        /* create's "root": {"path", "read_only"} (root clients only): that host directory, idmapped
         * so that host ids 0..65535 are the same inside, is the whole root (sandbox_open_mounts()
         * opens it into root_tree_fd); NULL: none. */
        char *root_path;
        bool root_read_only;
        /* create's "root": {"tree_fd"}: the detached tree of root_path the client made in its own
         * mount namespace (an engine's private mount of a rootfs, which the daemon's namespace
         * does not show), until sandbox_open_mounts() takes it (then -1); root_from_tree stays
         * true: such a root is never opened again by its path (the sandbox is transient). */
        int root_sent_tree_fd;
        bool root_from_tree;
        char *hostname;    /* create's "hostname", or NULL: "sandbox" */
        /* create's "sysctls": {"key": "value"}, namespaced keys only (sandbox_sysctls_check()),
         * written when its init starts (spawn.h InitParams.sysctls); NULL: none */
        json_object *sysctls;
        /* create's "with_connection": destroyed when the connection that created it closes (an
         * OCI container's proxy holds it: whatever ends the proxy ends the sandbox). conn_reply
         * is that create's reply, held for its close hook. */
        bool with_connection;
        Reply *conn_reply;
        Hook conn_hook;
        /* create's "masked_paths" and "readonly_paths": arrays of absolute paths inside, masked
         * or made read-only by its init (spawn.h InitParams); NULL: none */
        json_object *masked_paths, *readonly_paths;
        /* create's "ephemeral": true: never restored by a restarted daemon (its record removed,
         * its processes killed), never pooled. Not a throwaway (ephemeral above). */
        bool transient;
        uint64_t created_usec; /* CLOCK_REALTIME */
        uint64_t restored_usec; /* when a restarted daemon brought it back, or 0 */
        bool keep_workspace;   /* a teardown that must leave the workspace (failed restore) */
        char *cg_path;     /* its cgroup's path: <base>/sandboxes/<id>, or <scope>/sandbox */
        int cg_fd;
        /* Placement "scope" (scope.h): its scope's cgroup, the parent of cg_fd; -1 in the
         * daemon's subtree. scope_job: systemd's job for a new scope, until it is done; the
         * placeholder that keeps the scope from being empty meanwhile (at birth, and while a
         * restart has no process in it), in <scope>/hold. */
        int scope_fd;
        ScopeJob *scope_job;
        pid_t hold_pid;
        int hold_pidfd;
        int workdir_fd;    /* O_PATH of the workspace */
        pid_t init_pid;
        int init_pidfd;
        int setup_fd;      /* the init's setup report */
        int netns_fd;      /* its network namespace, from the pool (netns-pool.h), or -1: its own */
        /* create's "network": {"netns_fd"}: the client's namespace, which every init of the
         * sandbox joins (netns_fd is a dup of it then), or -1 */
        int join_netns_fd;
        SandboxNet net;    /* create's "network": egress (egress.h) */
        bool init_pending; /* the helper that clones the init has yet to send its pidfd */
        bool init_in_leaf; /* ... and clones it into <cgroup>/init, in the sandbox's cgroup namespace */
        /* The init of an earlier daemon, taken back at a restore (not our child: watched by its
         * pidfd's POLLIN, reaped by whoever inherited it); how: "fd store" or "cgroup". NULL:
         * ours, or a new init after a restart. */
        const char *init_adopted;
        bool ready_deferred; /* the init is ready, the helper not gone yet */
        sd_event_source *setup_helper; /* that helper, until it is reaped */
        sd_event_source *setup_source, *init_exit_source, *teardown_timer;
        unsigned teardown_tries;
        uint64_t teardown_start_usec;  /* CLOCK_MONOTONIC: when sandbox_destroy() began */
        /* Processes outlived the kill for teardown_timeout (THREATS DMN-06: one in state D on a
         * filesystem that does not answer, say): [{pid, comm, state}], as last looked at; the
         * teardown goes on, once a second. NULL otherwise. */
        json_object *teardown_stuck;
        unsigned next_run_no;
        SandboxSpare spare; /* the next run's cgroup, made ahead (sandbox-spare.c) */
        Run *runs;         /* in flight */
        unsigned n_runs;
        Waiter *create_waiters, *destroy_waiters;
        Run *pending_runs; /* waiting for the sandbox to be ready */
        Session *sessions; /* interactive sessions (session.c) */
        SandboxMember *members; /* runs (in flight and pending), sessions, its snapshot job */
        ProtoError failure;
        SnapshotJob *job;      /* a snapshot, restore or fork copy in flight (snapshot-job.c) */
        bool frozen;           /* ... which froze the sandbox's cgroup (sandbox_set_frozen()) */
        /* sandbox.freeze (sandbox-control.h): frozen at a client's asking until sandbox.thaw; new
         * runs, sessions and file operations are refused meanwhile */
        bool user_frozen;
        SandboxFreeze *freeze_op; /* a freeze or thaw waiting for cgroup.events */
        unsigned ready_holds;  /* work that must end before a new sandbox is ready (a fork's copy) */
        bool init_ready;       /* its init is set up, waiting for the holds */
        SandboxRestart *restart;
        /* Expiry and disk (sweep.c), interrupted runs (run-record.c). */
        uint64_t ttl_usec, idle_usec;  /* 0: never expires */
        uint64_t last_active_usec;     /* CLOCK_MONOTONIC: made, restored, a run started or ended */
        uint64_t ttl_deadline_usec;    /* CLOCK_MONOTONIC: when ttl_usec runs out (sweep.c) */
        bool disk_refused;             /* over limits.disk after eviction: runs are refused */
        bool disk_measured;
        uint64_t disk_walked_usec;     /* CLOCK_MONOTONIC: the last sweep that walked it (to its end
                                        * or cut short in it); sweeps walk the least recent first */
        uint64_t disk_remeasure_usec;  /* CLOCK_MONOTONIC: the last walk a refused run asked for */
        uint64_t disk_bytes;           /* workspace + snapshots at the last sweep */
        uint64_t disk_files;           /* and their files */
        /* Its directory's project (disk-quota.h): the filesystem enforces limits.disk and
         * limits.files as it writes. 0: none (not asked, or not enforceable here). */
        uint32_t project_id;
        bool disk_enforced;            /* the quota is set now */
        struct RunNote *notes;         /* its runs and sessions in flight, as runs.log has them (run-record.h) */
        json_object *interrupted_runs; /* runs a restart cut short, reported by inspect */
        bool interrupted_changed;      /* run_log_open() added to them: to be saved */
        RegistryEntry entry;           /* in Context.registry (registry.h) */
} Sandbox;

/* What sandbox.c asks of the modules that observe it, without knowing them: set once by
 * lifecycle.c (Context.sandbox_hooks); a NULL hook is skipped. */
struct SandboxHooks {
        /* create: refused below min_free_disk or min_free_files, or over the budget (sweep.c). */
        int (*check_create)(Context *ctx, ProtoError *err);
        /* run: refused while the sandbox is over its disk limit or all are over the budget. */
        int (*check_run)(Sandbox *s, ProtoError *err);
        /* Members of other modules in a sandbox's replies: expiry and disk (sweep.c), interrupted
         * runs (run-record.c). */
        void (*to_json)(Sandbox *s, json_object *o);
        /* A create's record is to be written with the others of this loop turn (pool.c): 0, or
         * < 0 (it is then written alone). */
        int (*schedule_records)(Context *ctx);
};

/* A failure to write the state directory (what names it): ENOSPC and EDQUOT are
 * resource_exhausted, field disk; anything else internal. */
int sandbox_disk_error(ProtoError *err, const char *what, int r);
/* Whether s takes a run now (SandboxHooks.check_run): 0, or < 0 with err set. */
int sandbox_check_run(Sandbox *s, ProtoError *err);

/* What a create request (or a throwaway run's) asks of its sandbox, validated. */
typedef struct SandboxRequest {
        SandboxLimits limits;
        bool best_effort;
        bool disk_workspace; /* a throwaway run's "workspace":"disk" */
        bool root;           /* ... and "user":"root" */
        char *name;
        json_object *env;
        bool mounts;         /* ... with "mounts": never a pooled sandbox */
        bool image;          /* ... with "image": neither */
        bool egress;         /* ... with "network" egress: nor then */
} SandboxRequest;

int sandbox_parse_request(Context *m, json_object *req, SandboxRequest *ret, ProtoError *err);
/* The same read into s, which is being made for s->owner_uid (s->ephemeral set): name, limits,
 * best_effort, user, workspace, env, and the sweep's fields (sandbox-request.c). */
int sandbox_parse(Context *m, Sandbox *s, json_object *req, ProtoError *err);
/* create's "sysctls" (or a record's): at most 32 keys of the sandbox's own namespaces (net.*;
 * kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*), each a dotted name of [A-Za-z0-9_-]
 * components, each value 1-256 printable characters. 0 or -EINVAL with err. */
int sandbox_sysctls_check(json_object *sysctls, ProtoError *err);
/* create's "masked_paths" or "readonly_paths" (field), or a record's: at most 64 absolute normal
 * paths (no "..", ".", "//"), each at most 1024 bytes, not "/". 0 or -EINVAL with err. */
int sandbox_paths_check(json_object *paths, const char *field, ProtoError *err);
void sandbox_request_done(SandboxRequest *r);
void sandbox_mounts_free(Sandbox *s);
/* Whether /work is the caller's directory (mounts[0], target /work). */
static inline bool sandbox_caller_workspace(const Sandbox *s) {
        return s->n_mounts > 0 && s->mounts[0].target && strcmp(s->mounts[0].target, "/work") == 0;
}

/* Whether the sandbox's root is its own rather than the host's minimal view (an image's, or a
 * root.path): a run's cwd may then be any directory of it (run_spec_resolve()). */
static inline bool sandbox_has_own_root(const Sandbox *s) {
        return s->image != NULL || s->root_path != NULL;
}

/* Validates a create request (shared by throwaway runs) into a new sandbox that is being set
 * up; the reply comes later through the waiters or pending runs. */
int sandbox_create(Context *m, json_object *req, uid_t owner, bool ephemeral, Sandbox **ret, ProtoError *err);
/* The same for a client whose credentials are known (needed by "mounts"; sandbox_create refuses
 * them). */

int sandbox_create_as(Context *m, json_object *req, const SandboxCaller *caller, bool ephemeral, Sandbox **ret,
                      ProtoError *err);
/* The same with the fds a create came with, taken by the sandbox whatever the outcome (-1: none
 * came): the network namespace that "network": {"netns_fd"} named (checked: a network namespace,
 * not the daemon's), and the mount tree that "root": {"tree_fd"} named (checked when it is
 * opened: sandbox_open_mounts()). */
int sandbox_create_joined(Context *m, json_object *req, const SandboxCaller *caller, int netns_fd, int root_tree_fd,
                          Sandbox **ret, ProtoError *err);
/* The same for the pool (pool.h): a sandbox of no one's, not recorded, made from req. */
int sandbox_create_pooled(Context *m, json_object *req, bool ephemeral, Sandbox **ret, ProtoError *err);
/* A pooled sandbox made for create (not ephemeral) becomes caller's, as the create req asks,
 * where req asks for what it was made as (its limits, root, image; no mounts, no egress): its
 * name, env, user, ttl and idle are set here, and its record is to be written (record_pending).
 * 1: handed out; 0: it does not fit, or the request is refused (a fresh create then says why). */
int sandbox_hand_out(Sandbox *s, json_object *req, const SandboxCaller *caller, ProtoError *err);
/* Its record (record_pending) is written (r 0) or could not be (the create is told, and the
 * sandbox destroyed); a ready one's create is answered. */
void sandbox_record_done(Sandbox *s, int r);
/* What a sandbox's root is, in one place: the tree its init binds as / (sent with the go,
 * sandbox_send_go()): its image's rootfs, shared read-only and idmapped with the init's user
 * namespace (its maps written), so that the image's owners are the ones inside; -EBADF for the
 * host's view (no image), else a negative errno. A writable root would put its layer here. */
int sandbox_open_root(Sandbox *s);
/* Before an init is started: whether the sandbox's root can be made (its image exists, the
 * store can be idmapped): 0, or a reply's error naming image. */
int sandbox_check_root(Sandbox *s, ProtoError *err);
/* Checks s's root (sandbox_check_root()) and opens its mounts as s->caller (mount-open.h),
 * before its init is started: 0, or a reply's error naming image or mounts[i].source. */
int sandbox_open_mounts(Sandbox *s, ProtoError *err);
/* Whether the sandbox's init gets trees opened beforehand (sandbox_open_mounts()): mounts, an
 * image, a root.path. */
bool sandbox_opens_trees(const Sandbox *s);
/* u is the first host uid of one of the daemon's uid slots. */
bool sandbox_uid_base_valid(const Context *m, uint64_t u);
/* The init's go (its maps are written), with the mounts' trees, which are then closed. */
int sandbox_send_go(Sandbox *s);
/* Brings back a sandbox recorded by an earlier daemon (state.c) with a new init. */
int sandbox_restore(Context *m, json_object *meta, Sandbox **ret);
void sandbox_destroy(Sandbox *s, const char *reason);
/* With "with_connection": s is destroyed when reply's connection closes (at once if it has). */
void sandbox_tie_to_connection(Sandbox *s, Reply *reply);
/* The teardown_stuck error for a sandbox whose teardown is stuck (Sandbox.teardown_stuck). */
int sandbox_teardown_error(Sandbox *s, ProtoError *err);
Sandbox *sandbox_free(Sandbox *s);

void sandbox_add_waiter(Waiter **list, Reply *reply);
json_object *sandbox_to_json(Sandbox *s, bool with_usage);
/* SANDBOX's and the record's "root": "readonly", "overlay" or {"path", "read_only"}. */
json_object *sandbox_root_json(const Sandbox *s);
bool sandbox_visible_to(Sandbox *s, const ReplyPeer *peer);
/* Sandboxes whose teardown is stuck (health's teardown_stuck). */
unsigned sandbox_count_stuck(Context *m);
unsigned sandbox_count_owned(Context *m, uid_t uid);
/* Runs in flight in every sandbox. */
unsigned sandbox_count_runs(Context *m);
const char *sandbox_workdir_path(Sandbox *s, char *buf, size_t len);
/* <state>/sandboxes/<id>/root-upper: the upper layer of an overlay root (root-overlay.h). */
#define SANDBOX_ROOT_UPPER "root-upper"
const char *sandbox_root_upper_path(Sandbox *s, char *buf, size_t len);
/* A fork's deferred init (init_deferred), once its copy is done. */
int sandbox_start_deferred_init(Sandbox *s);
/* A fork's copy is done (err NULL) or failed: the sandbox becomes ready, or fails, when nothing
 * else holds it. */
void sandbox_release_hold(Sandbox *s, const ProtoError *err);
/* Starts a restart (see SandboxRestart); returns how many runs in flight it kills. */
int sandbox_restart(Sandbox *s, int (*swap)(Sandbox *s, void *userdata),
                    void (*done)(Sandbox *s, int error, void *userdata), void *userdata);
/* Forgets a restart in progress without calling its done (its owner is going away). */
void sandbox_restart_cancel(Sandbox *s);
/* Where the sandbox's cgroup is: the parent's fd and the name below it. */
int sandbox_cg_parent_fd(const Sandbox *s);
const char *sandbox_cg_name(const Sandbox *s);
/* The scope's own leftovers at a destroy: the placeholder, and the scope stopped. */
void sandbox_release_scope(Sandbox *s);

/* A run, session or snapshot job becomes a member of s (ops kept), or stops being one. */
void sandbox_member_add(Sandbox *s, SandboxMember *m, const SandboxMemberOps *ops);
void sandbox_member_remove(Sandbox *s, SandboxMember *m);
/* A snapshot job froze the sandbox's cgroup, or thawed it: s->frozen, and every member is told. */
void sandbox_set_frozen(Sandbox *s, bool frozen);
/* What a request waiting for the sandbox to be ready is told when it is destroyed instead. */
void sandbox_gone_error(Sandbox *s, ProtoError *err);
/* Whether name, a cgroup below the sandbox's, is one of its runs', sessions' or file operations':
 * not its init's leaf nor the next run's, made ahead with its warm helper (sandbox-spare.c). */
bool sandbox_is_member_cgroup(Sandbox *s, const char *name);
/* After a start has taken back the runs of a sandbox an earlier daemon left (runs.log): the
 * empty run cgroups that none of them claims go, the next run's that that daemon made ahead
 * before it died among them (sandbox-spare.c). */
void sandbox_clear_unclaimed_runs(Sandbox *s);
/* Whether its runs outlive the daemon (run.c, run_keep(): unless a run's stdio is its client's):
 * a sandbox that is recorded and kept at a stop, under a daemon with an fd store. */
bool sandbox_keeps_runs(const Sandbox *s);
/* The limits of a run's cgroup: memory and pids the run's, 0 for the sandbox's memory (pids: none
 * on the run's cgroup, the sandbox's holds). */
CgLimits sandbox_run_limits(const Sandbox *s, uint64_t memory, uint64_t pids);
/* A launch of kind "run" takes the cgroup made ahead (sandbox-spare.c), with lim written where it
 * differs: its name and fds are then the caller's (*ret_cg_fd, *ret_kill_fd). 0 when there is
 * none (or kind is another), 1 taken, < 0 a limit could not be written (the fds are the caller's
 * all the same). The warm helper waiting in it comes along (*ret_warm; none where there is
 * none). sandbox_spare_name(): the name it would take, or NULL. sandbox_spare_make()
 * (launch.c, once the helper is started): the next one. */
int sandbox_spare_take(Sandbox *s, const char *kind, const CgLimits *lim, unsigned mask, char *name, size_t len,
                       int *ret_cg_fd, int *ret_kill_fd, WarmHelper *ret_warm);
const char *sandbox_spare_name(Sandbox *s, const char *kind);
void sandbox_spare_make(Sandbox *s);
/* Called when a run of this sandbox ends (frees ephemeral sandboxes). */
void sandbox_run_finished(Sandbox *s, Run *r);
