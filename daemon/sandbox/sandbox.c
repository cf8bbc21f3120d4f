/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "log.h"
#include "macro.h"
#include "context.h"
#include "fdstore.h"
#include "image.h"
#include "sandbox-internal.h"
#include "spawn.h"
#include "util.h"

static int sandbox_random_id(char *buf, size_t len, const char *prefix) {
        uint8_t b[6];
        if (getrandom(b, sizeof(b), 0) != sizeof(b))
                return -EIO;
        snprintf(buf, len, "%s%02x%02x%02x%02x%02x%02x", prefix, b[0], b[1], b[2], b[3], b[4], b[5]);
        return 0;
}

Sandbox *sandbox_alloc(Context *m) {
        Sandbox *s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        s->ctx = m;
        s->cg_fd = s->workdir_fd = s->init_pidfd = s->setup_fd = s->netns_fd = s->root_tree_fd = -EBADF;
        s->join_netns_fd = s->root_sent_tree_fd = -EBADF;
        s->scope_fd = s->hold_pidfd = -EBADF;
        sandbox_spare_init(&s->spare);
        s->uid_slot = UINT32_MAX;
        s->user = SANDBOX_USER_SANDBOX;
        s->created_usec = now_usec(CLOCK_REALTIME);
        return s;
}

static int on_setup_report(sd_event_source *src, int fd, uint32_t revents, void *userdata);
static void sandbox_restart_step(Sandbox *s);


static int sandbox_init_started(Sandbox *s);
static void sandbox_fail(Sandbox *s, const ProtoError *err);

static void sandbox_ready(Sandbox *s);

static int on_helper_exit(sd_event_source *src, const siginfo_t *si, void *userdata) {
        Sandbox *s = userdata;
        s->setup_helper = sd_event_source_disable_unref(s->setup_helper);
        if (s->ready_deferred) {
                s->ready_deferred = false;
                if (s->state == SANDBOX_CREATING)
                        sandbox_ready(s);
        }
        return 0;
}

/* The helper that clones the init (sandbox_start_init()): reaped when it is done; the sandbox is
 * not ready before (it is in its cgroup). The init's pidfd comes on the setup socket. */
static int sandbox_watch_helper(Sandbox *s, int pidfd) {
        Context *m = s->ctx;
        int r = sd_event_add_child_pidfd(m->event, &s->setup_helper, pidfd, WEXITED, on_helper_exit, s);

        if (r < 0) {
                (void) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                (void) waitid(P_PIDFD, (id_t) pidfd, &(siginfo_t) {}, WEXITED);
                close(pidfd);
                return r;
        }
        (void) sd_event_source_set_child_pidfd_own(s->setup_helper, true);
        (void) sd_event_source_set_child_process_own(s->setup_helper, true);
        return sd_event_add_io(m->event, &s->setup_source, s->setup_fd, EPOLLIN, on_setup_report, s);
}

/* The init's pidfd into systemd's fd store, for the next daemon (a recorded sandbox's only: a
 * throwaway one does not outlive its run). Without it, the next daemon finds the init in its
 * cgroup. */
void sandbox_store_init(Sandbox *s) {
        char name[FDSTORE_NAME_MAX];
        int r;

        if (s->ephemeral || s->transient || s->pooled)
                return;
        r = fdstore_push(fdstore_name(name, 's', s->id, "init"), s->init_pidfd);
        if (r < 0)
                log_debug_errno(r, "sandbox %s: its init's pidfd is not in the fd store: %m", s->id);
}

static void sandbox_unstore_init(Sandbox *s) {
        char name[FDSTORE_NAME_MAX];

        if (!s->ephemeral && !s->transient && !s->pooled)
                (void) fdstore_remove(fdstore_name(name, 's', s->id, "init"));
}

int sandbox_spawn_init(Sandbox *s) {
        int helper_pidfd = -1;
        pid_t pid = sandbox_start_init(s, &helper_pidfd);

        if (pid < 0)
                return pid;
        if (s->ctx->run_helper_fd >= 0)
                return sandbox_watch_helper(s, helper_pidfd);
        return sandbox_init_started(s);
}

int sandbox_start_deferred_init(Sandbox *s) {
        if (!s->init_deferred)
                return 0;
        s->init_deferred = false;
        if (s->ctx->features.btrfs) {
                /* The fork's workspace is the snapshot put in place of the one made empty. */
                _cleanup_close_ int dfd = openat(s->ctx->state_fd, s->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (dfd < 0)
                        return -errno;
                safe_close(s->workdir_fd);
                s->workdir_fd = openat(dfd, "work", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (s->workdir_fd < 0)
                        return -errno;
        }
        /* Its scope is still being made: sandbox_on_scope_done() starts it. */
        if (s->scope_job)
                return 0;
        return sandbox_spawn_init(s);
}

/* The init is a child of ours, waiting for its go: watch it, give it its uid/gid maps, go. */
static int sandbox_init_started(Sandbox *s) {
        Context *m = s->ctx;
        int r = sd_event_add_child_pidfd(m->event, &s->init_exit_source, s->init_pidfd, WEXITED, sandbox_on_init_exit, s);
        if (r < 0) {
                (void) cg_kill(s->cg_fd);
                return r;
        }
        sandbox_store_init(s);
        r = sandbox_write_maps(s);
        if (r >= 0)
                r = sandbox_send_go(s);
        if (r < 0) {
                (void) cg_kill(s->cg_fd);
                return r;
        }
        if (s->setup_source)
                return 0;
        return sd_event_add_io(m->event, &s->setup_source, s->setup_fd, EPOLLIN, on_setup_report, s);
}

void sandbox_link(Context *m, Sandbox *s) {
        s->entry.id = s->id;
        s->entry.name = s->name;
        s->entry.owner = s->owner_uid;
        s->entry.pooled = s->pooled;
        registry_add(m->registry, &s->entry, s);
}

int sandbox_disk_error(ProtoError *err, const char *what, int r) {
        if (r == -ENOSPC || r == -EDQUOT)
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "disk",
                                       "%s: %s (the state directory's filesystem is full, in bytes or in files)",
                                       what, strerror(-r));
        return proto_error_set(err, SBX_E_INTERNAL, NULL, "%s: %s", what, strerror(-r));
}

int sandbox_check_run(Sandbox *s, ProtoError *err) {
        const SandboxHooks *h = s->ctx->sandbox_hooks;

        if (s->user_frozen)
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox", "sandbox %s is frozen (sandbox.thaw resumes it)", s->id);
        return h && h->check_run ? h->check_run(s, err) : 0;
}

static int internal_error(ProtoError *err, const char *what, int r) {
        return proto_error_set(err, SBX_E_INTERNAL, NULL, "%s: %s", what, strerror(-r));
}

static int sandbox_create_full(Context *m, json_object *req, const SandboxCaller *caller, bool ephemeral, bool pooled,
                               int netns_fd, int root_tree_fd, Sandbox **ret, ProtoError *err);
/* systemd's job for the sandbox's new scope is over: the cgroup is made in it, and the init
 * started unless it waits for a fork's copy. */
void sandbox_on_scope_done(int error, void *userdata) {
        Sandbox *s = userdata;
        char unit[SCOPE_UNIT_MAX];
        ProtoError err;
        int r = error;

        s->scope_job = NULL;
        if (r >= 0)
                r = sandbox_settle_scope(s);
        if (r >= 0 && !s->init_deferred)
                r = sandbox_spawn_init(s);
        if (r < 0) {
                log_warning_errno(r, "sandbox %s: cannot start it in %s: %m", s->id, scope_unit_name(unit, s->id));
                proto_error_set(&err, SBX_E_SPAWN_FAILED, NULL, "cannot start the sandbox in its scope %s: %s", unit,
                                strerror(-r));
                /* A restored one keeps its workspace: only the processes are given up. */
                s->keep_workspace = s->restored_usec != 0;
                sandbox_fail(s, &err);
        }
}

int sandbox_create(Context *m, json_object *req, uid_t owner, bool ephemeral, Sandbox **ret, ProtoError *err) {
        return sandbox_create_as(m, req, &(SandboxCaller) { .uid = owner, .gid = (gid_t) -1 }, ephemeral, ret, err);
}

int sandbox_create_as(Context *m, json_object *req, const SandboxCaller *caller, bool ephemeral, Sandbox **ret,
                      ProtoError *err) {
        return sandbox_create_full(m, req, caller, ephemeral, false, -EBADF, -EBADF, ret, err);
}

int sandbox_create_joined(Context *m, json_object *req, const SandboxCaller *caller, int netns_fd, int root_tree_fd,
                          Sandbox **ret, ProtoError *err) {
        return sandbox_create_full(m, req, caller, false, false, netns_fd, root_tree_fd, ret, err);
}

/* Its record is written with those of the creates around it (SandboxHooks.schedule_records,
 * the pool's), before its create is answered; at once where there is no pool (a unit test's
 * context). */
static int sandbox_record_soon(Sandbox *s) {
        const SandboxHooks *h = s->ctx->sandbox_hooks;

        if (!s->ctx->pool || !h || !h->schedule_records)
                return registry_changed(&s->entry); /* state.c saves it */
        s->record_pending = true;
        if (h->schedule_records(s->ctx) >= 0)
                return 0;
        s->record_pending = false;
        return registry_changed(&s->entry);
}

/* pooled: made for the pool (pool.h), no one's and not recorded until it is handed out; netns_fd:
 * the network namespace "network": {"netns_fd"} named, or -1; root_tree_fd: the mount tree
 * "root": {"tree_fd"} named, or -1. */
static int sandbox_create_full(Context *m, json_object *req, const SandboxCaller *caller, bool ephemeral, bool pooled,
                               int netns_fd, int root_tree_fd, Sandbox **ret, ProtoError *err) {
        _cleanup_close_ int join = netns_fd, tree = root_tree_fd;
        uid_t owner = caller->uid;
        Sandbox *s;
        int r;

        if (!pooled && registry_count(m->registry) - registry_count_pooled(m->registry) >= m->config.max_sandboxes)
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, NULL, "the daemon holds its maximum of %" PRIu64
                                       " sandboxes", m->config.max_sandboxes);
        if (owner != 0 && sandbox_count_owned(m, owner) >= m->config.max_sandboxes_per_uid)
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, NULL,
                                       "uid %u has its maximum of %" PRIu64 " sandboxes (max_sandboxes_per_uid)",
                                       (unsigned) owner, m->config.max_sandboxes_per_uid);
        if (m->sandbox_hooks && m->sandbox_hooks->check_create && (r = m->sandbox_hooks->check_create(m, err)) < 0)
                return r;
        s = sandbox_alloc(m);
        if (!s)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        s->owner_uid = owner;
        s->ephemeral = ephemeral;
        s->pooled = pooled;
        s->caller = *caller;
        s->join_netns_fd = TAKE_FD(join);
        s->root_sent_tree_fd = TAKE_FD(tree);
        r = sandbox_parse(m, s, req, err);
        if (r < 0)
                goto fail;
        if (s->n_mounts > 0 && caller->gid == (gid_t) -1) {
                r = proto_error_set(err, SBX_E_INVALID_REQUEST, "mounts", "'mounts' cannot be combined with this request");
                goto fail;
        }
        if (sandbox_random_id(s->id, sizeof(s->id), "sbx-") < 0 || registry_alloc_uid_slot(m->registry, &s->uid_slot) < 0) {
                r = proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, NULL, "no free uid range for a new sandbox");
                goto fail;
        }
        s->host_uid = (uid_t) (m->config.uid_base + (uint64_t) s->uid_slot * m->config.uid_range);
        s->work_uid = s->host_uid;
        if ((r = sandbox_open_mounts(s, err)) < 0)
                goto fail;
        sandbox_link(m, s);
        s->state = SANDBOX_CREATING;
        if ((r = sandbox_make_cgroup(s, sandbox_on_scope_done)) < 0) {
                r = internal_error(err, m->scopes ? "cannot create the sandbox's scope and cgroup" : "cannot create the sandbox's cgroup", r);
                goto fail_destroy;
        }
        if (!s->memory_workspace && (r = sandbox_make_workspace(s, false)) < 0) {
                r = sandbox_disk_error(err, "cannot create the workspace", r);
                goto fail_destroy;
        }
        /* "ephemeral": never recorded, so never restored: a next daemon kills what is left of it
         * (remove_stale_cgroups()) and removes its directory. */
        if (!s->ephemeral && !s->transient && !s->pooled && (r = sandbox_record_soon(s)) < 0) {
                r = sandbox_disk_error(err, "cannot record the sandbox in the state directory", r);
                goto fail_destroy;
        }
        /* A fork's overlay root is mounted from the upper layer the fork's copy makes, and on
         * btrfs its workspace is the snapshot put in place of the empty one: its init waits for
         * them (snapshot-job.c); one whose scope is still being made is started by sandbox_on_scope_done(). */
        s->init_deferred = (s->root_overlay || m->features.btrfs) && json_object_object_get_ex(req, "from_snapshot", NULL);
        if (!s->init_deferred && !s->scope_job && (r = sandbox_spawn_init(s)) < 0) {
                if (s->net.error)
                        r = proto_error_set(err, SBX_E_SPAWN_FAILED, "network", "cannot give the sandbox egress: %s",
                                            s->net.error);
                else
                        r = proto_error_set(err, SBX_E_SPAWN_FAILED, NULL, "cannot start the sandbox's init: %s", strerror(-r));
                goto fail_destroy;
        }
        *ret = s;
        return 0;
fail_destroy:
        sandbox_destroy(s, "create failed");
        return r;
fail:
        sandbox_free(s);
        return r;
}


int sandbox_create_pooled(Context *m, json_object *req, bool ephemeral, Sandbox **ret, ProtoError *err) {
        return sandbox_create_full(m, req, &(SandboxCaller) { .uid = 0, .gid = (gid_t) -1 }, ephemeral, true, -EBADF, -EBADF,
                                   ret, err);
}

static bool limits_same(const SandboxLimits *a, const SandboxLimits *b) {
        return a->memory == b->memory && a->pids == b->pids && a->millicpus == b->millicpus &&
               a->timeout_usec == b->timeout_usec && a->output_bytes == b->output_bytes && a->disk == b->disk &&
               a->files == b->files && a->file_size == b->file_size && a->open_files == b->open_files;
}

/* What a create asks (want, parsed as for a fresh sandbox of the same caller) is what the
 * pooled sandbox s was made as: everything its init and cgroup were set up with. */
static bool pooled_fits(const Sandbox *s, const Sandbox *want) {
        return limits_same(&s->limits, &want->limits) && want->n_mounts == 0 && !want->net.egress &&
               want->root_overlay == s->root_overlay && want->memory_workspace == s->memory_workspace &&
               ((!want->image && !s->image) || (want->image && s->image && strcmp(want->image, s->image) == 0)) &&
               !want->root_path && !want->hostname && !want->sysctls && !want->masked_paths && !want->readonly_paths && !want->transient && want->join_netns_fd < 0;
}

/* What a create sets that a pooled sandbox's making did not depend on, moved from want. */
static void pooled_take_fields(Sandbox *s, Sandbox *want, const SandboxCaller *caller) {
        s->pooled = false;
        registry_set_pooled(&s->entry, false);
        s->owner_uid = s->entry.owner = caller->uid;
        s->caller = *caller;
        s->name = TAKE_PTR(want->name);
        s->entry.name = s->name;
        json_object_put(s->env);
        s->env = TAKE_PTR(want->env);
        s->user = want->user;
        s->best_effort = want->best_effort;
        s->enforced = want->enforced;
        s->created_usec = now_usec(CLOCK_REALTIME);
        s->ttl_usec = want->ttl_usec;
        s->idle_usec = want->idle_usec;
        s->last_active_usec = want->last_active_usec;
        s->ttl_deadline_usec = want->ttl_deadline_usec;
}

int sandbox_hand_out(Sandbox *s, json_object *req, const SandboxCaller *caller, ProtoError *err) {
        Context *m = s->ctx;
        Sandbox *want = sandbox_alloc(m);

        if (!want)
                return 0;
        want->owner_uid = caller->uid;
        want->caller = *caller;
        /* Anything it refuses, a fresh create refuses too, with its own words: made fresh then. */
        if (sandbox_parse(m, want, req, err) < 0 || !pooled_fits(s, want)) {
                sandbox_free(want);
                return 0;
        }
        pooled_take_fields(s, want, caller);
        sandbox_free(want);
        s->record_pending = true;
        /* The pidfd of an init already there; one still to come is stored as it arrives. */
        if (s->init_exit_source)
                sandbox_store_init(s);
        return 1;
}

void sandbox_add_waiter(Waiter **list, Reply *reply) {
        Waiter *w = calloc(1, sizeof(*w));
        if (!w) {
                ProtoError e;
                proto_error_set(&e, SBX_E_INTERNAL, NULL, "out of memory");
                reply_error(reply, &e);
                return;
        }
        w->reply = reply_ref(reply);
        w->next = *list;
        *list = w;
}

/* Answers and frees every waiter: with ok_reply (copied per waiter) or err. */
static void waiters_answer(Waiter **list, json_object *extra_key_value_src, const char *key, const ProtoError *err) {
        Waiter *w = *list;
        *list = NULL;
        while (w) {
                Waiter *next = w->next;
                if (err)
                        reply_error(w->reply, err);
                else {
                        json_object *reply = json_object_new_object();
                        if (key && extra_key_value_src)
                                json_object_object_add(reply, key, json_object_get(extra_key_value_src));
                        reply_ok(w->reply, reply);
                }
                reply_unref(w->reply);
                free(w);
                w = next;
        }
}

static void sandbox_restart_finish(Sandbox *s, int error) {
        SandboxRestart *rs = s->restart;
        if (!rs)
                return;
        s->restart = NULL;
        sd_event_source_disable_unref(rs->timer);
        rs->done(s, error, rs->userdata);
        free(rs);
}

static void sandbox_fail(Sandbox *s, const ProtoError *err) {
        sandbox_restart_finish(s, -EIO);
        s->failure = *err;
        s->state = SANDBOX_FAILED;
        waiters_answer(&s->create_waiters, NULL, NULL, err);
        sandbox_destroy(s, "setup failed");
}


static void sandbox_ready(Sandbox *s) {
        _cleanup_close_ int init_cg = -EBADF;
        ProtoError err;
        int r;

        /* Its helper must be gone from the sandbox's cgroup first (no internal processes). */
        if (s->setup_helper) {
                s->ready_deferred = true;
                return;
        }
        /* The init leaves the sandbox cgroup for a leaf of its own so that controllers can be
         * enabled for the runs' cgroups (no internal processes), unless it was born there. */
        r = s->init_in_leaf ? 0 : cg_create(s->cg_fd, "init", &init_cg);
        if (r >= 0 && !s->init_in_leaf)
                r = cg_move_pid(init_cg, s->init_pid);
        if (r >= 0)
                r = cg_enable_controllers(s->cg_fd, s->enforced);
        if (r < 0) {
                proto_error_set(&err, SBX_E_INTERNAL, NULL, "cannot set up the sandbox's cgroups: %s", strerror(-r));
                sandbox_fail(s, &err);
                return;
        }
        s->init_ready = true;
        /* The init holds the scope now. */
        sandbox_hold_end(s);
        if (s->ready_holds == 0)
                sandbox_go_ready(s);
}

/* Runs that waited for it start, one by one, from the list's head again after each: a start
 * that fails may end other members (its reply). */
static void sandbox_members_start(Sandbox *s) {
        SandboxMember *m;

        do
                for (m = s->members; m && !(m->ops->start && m->ops->start(m)); m = m->next)
                        ;
        while (m);
}

void sandbox_go_ready(Sandbox *s) {
        s->state = SANDBOX_READY;
        sandbox_restart_finish(s, 0);
        if (s->create_waiters && !s->record_pending) {
                _cleanup_json_ json_object *j = sandbox_to_json(s, false);
                waiters_answer(&s->create_waiters, j, "sandbox", NULL);
        }
        sandbox_members_start(s);
        /* A pooled sandbox is there to be used at once; another gets its next run's cgroup and
         * warm helper with its first run (launch.c), so that one never used carries neither. */
        if (s->pooled)
                sandbox_spare_make(s);
}

void sandbox_record_done(Sandbox *s, int r) {
        ProtoError err;

        s->record_pending = false;
        if (r < 0) {
                sandbox_disk_error(&err, "cannot record the sandbox in the state directory", r);
                waiters_answer(&s->create_waiters, NULL, NULL, &err);
                sandbox_destroy(s, "create failed");
                return;
        }
        if (s->state == SANDBOX_READY && s->create_waiters) {
                _cleanup_json_ json_object *j = sandbox_to_json(s, false);
                waiters_answer(&s->create_waiters, j, "sandbox", NULL);
        }
}

static void sandbox_teardown_step(Sandbox *s);

/* The helper cloned the init (our child, waiting for its go): its pid and pidfd. */
static int sandbox_init_arrived(Sandbox *s, pid_t pid, int pidfd) {
        ProtoError err;
        int r;

        s->init_pending = false;
        s->init_pid = pid;
        s->init_pidfd = pidfd;
        if (s->state == SANDBOX_DESTROYING) {
                r = sd_event_add_child_pidfd(s->ctx->event, &s->init_exit_source, s->init_pidfd, WEXITED,
                                             sandbox_on_init_exit, s);
                (void) syscall(SYS_pidfd_send_signal, s->init_pidfd, SIGKILL, NULL, 0);
                if (r < 0) { /* unwatched: reap it here, it was killed */
                        (void) waitid(P_PIDFD, (id_t) s->init_pidfd, &(siginfo_t) {}, WEXITED);
                        s->init_pidfd = safe_close(s->init_pidfd);
                }
                s->setup_source = sd_event_source_disable_unref(s->setup_source);
                s->setup_fd = safe_close(s->setup_fd);
                sandbox_teardown_step(s);
                return 0;
        }
        r = sandbox_init_started(s);
        if (r < 0) {
                proto_error_set(&err, SBX_E_SPAWN_FAILED, NULL, "cannot start the sandbox's init: %s", strerror(-r));
                sandbox_fail(s, &err);
        }
        return 0;
}

static int on_setup_report(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Sandbox *s = userdata;
        SpawnReport rep;
        ProtoError err;
        int passed = -1;
        int r = report_recv(fd, &rep, &passed);

        if (r == -EAGAIN || r == -EINTR)
                return 0;
        if (r > 0 && rep.kind == REPORT_STARTED && s->init_pending && passed >= 0)
                return sandbox_init_arrived(s, rep.code, passed);
        s->init_pending = false;
        safe_close(passed);
        if (s->state == SANDBOX_DESTROYING) {
                /* Destroyed before its init was cloned: nothing more will come. */
                s->setup_source = sd_event_source_disable_unref(s->setup_source);
                s->setup_fd = safe_close(s->setup_fd);
                sandbox_teardown_step(s);
                return 0;
        }
        s->setup_source = sd_event_source_disable_unref(s->setup_source);
        s->setup_fd = safe_close(s->setup_fd);
        if (r > 0 && rep.kind == REPORT_READY) {
                sandbox_ready(s);
                return 0;
        }
        if (r > 0 && rep.kind == REPORT_FAILED) {
                proto_error_set(&err, SBX_E_SPAWN_FAILED, NULL, "sandbox setup failed at step '%s': %s",
                                spawn_step_to_string(rep.step), strerror(rep.err));
                proto_error_set_spawn(&err, spawn_step_to_string(rep.step), rep.err);
        } else
                proto_error_set(&err, SBX_E_SPAWN_FAILED, NULL, "the sandbox's init died during setup");
        log_warning("sandbox %s: %s", s->id, err.message);
        sandbox_fail(s, &err);
        return 0;
}

static void sandbox_teardown_step(Sandbox *s);

int sandbox_on_init_exit(sd_event_source *src, const siginfo_t *si, void *userdata) {
        Sandbox *s = userdata;
        s->init_exit_source = sd_event_source_disable_unref(s->init_exit_source);
        s->init_pidfd = safe_close(s->init_pidfd);
        s->init_pid = 0;
        sandbox_unstore_init(s);
        if (s->state == SANDBOX_READY) {
                /* Nothing inside can kill its pid 1 (it ignores all signals it has no handler
                 * for); if it died, the sandbox is unusable. */
                log_warning("sandbox %s: init exited unexpectedly", s->id);
                s->state = SANDBOX_FAILED;
                proto_error_set(&s->failure, SBX_E_INTERNAL, NULL, "the sandbox's init exited");
        } else if (s->state == SANDBOX_DESTROYING)
                sandbox_teardown_step(s);
        else if (s->restart)
                sandbox_restart_step(s); /* its processes may all be gone now: no poll to wait for */
        return 0;
}


static void sandbox_finish_destroy(Sandbox *s) {
        Context *m = s->ctx;
        int r;

        if (s->cg_fd >= 0)
                (void) unlinkat(s->cg_fd, "init", AT_REMOVEDIR);
        r = cg_remove_tree(sandbox_cg_parent_fd(s), sandbox_cg_name(s));
        if (r < 0)
                log_warning_errno(r, "sandbox %s: cannot remove its cgroup: %m", s->id);
        sandbox_release_scope(s);
        /* Its cgroup was empty: none of its processes is left to hold a socket. */
        egress_detach(m, &s->net);
        netns_pool_put(&m->netns, TAKE_FD(s->netns_fd));
        sandbox_remove_workspace(s);
        if (!s->keep_workspace)
                registry_add_tombstone(m->registry, s->id, s->owner_uid);
        if (s->destroy_waiters) {
                _cleanup_json_ json_object *t = json_object_new_boolean(1);
                waiters_answer(&s->destroy_waiters, t, "destroyed", NULL);
        }
        log_debug("sandbox %s destroyed", s->id);
        sandbox_free(s);
}

static int on_teardown_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        sandbox_teardown_step(userdata);
        return 0;
}

/* Waits, with a growing interval, until init and every run helper have been reaped and the
 * cgroup is empty; cgroup.kill is repeated in case something forked in the meantime. */
/* Kills what is left in the sandbox's cgroup, then looks again after 1 ms, 2 ms, ... up to 128 ms:
 * the kernel empties a killed cgroup asynchronously. */
static void kill_and_retry(Sandbox *s, int populated, sd_event_source **timer, unsigned *tries,
                           sd_event_time_handler_t handler) {
        uint64_t delay = (uint64_t) 1000 << (*tries < 7 ? *tries : 7);

        if (populated > 0)
                (void) cg_kill(s->cg_fd);
        (*tries)++;
        if (*timer) {
                (void) sd_event_source_set_time_relative(*timer, delay);
                (void) sd_event_source_set_enabled(*timer, SD_EVENT_ONESHOT);
        } else
                (void) sd_event_add_time_relative(s->ctx->event, timer, CLOCK_MONOTONIC, delay, 0, handler, s);
}

/* Past teardown_timeout with processes left: said once in the log and to whoever waits for the
 * destroy; the sandbox stays (destroying) and is looked at once a second until it is empty. */
static void sandbox_teardown_stuck(Sandbox *s) {
        bool first = !s->teardown_stuck;
        char what[200];
        ProtoError err;

        json_object_put(s->teardown_stuck);
        s->teardown_stuck = sandbox_stuck_processes(s);
        if (!first)
                return;
        sandbox_stuck_summary(s->teardown_stuck, what, sizeof(what));
        log_warning("sandbox %s: processes outlived the kill for %" PRIu64 " s: %s; still trying", s->id,
                    s->ctx->config.teardown_timeout_usec / USEC_PER_SEC, what[0] ? what : "none listed");
        sandbox_teardown_error(s, &err);
        waiters_answer(&s->destroy_waiters, NULL, NULL, &err);
        for (SandboxMember *m = s->members, *next; m; m = next) {
                next = m->next;
                if (m->ops->answer_stuck)
                        m->ops->answer_stuck(m, &err);
        }
}

static void sandbox_teardown_step(Sandbox *s) {
        int populated = s->cg_fd >= 0 ? cg_populated(s->cg_fd) : 0;

        /* Unknown (out of fds, say) is not empty: the sandbox is kept, and tried again. */
        if (populated < 0 && populated != -ENOENT)
                populated = 1;
        if (populated <= 0 && s->init_pidfd < 0 && !s->runs && !s->sessions && !s->init_pending) {
                s->teardown_timer = sd_event_source_disable_unref(s->teardown_timer);
                sandbox_unstore_init(s);
                if (s->teardown_stuck)
                        log_info("sandbox %s: torn down after %.1f s", s->id,
                                 (double) (now_usec(CLOCK_MONOTONIC) - s->teardown_start_usec) / 1e6);
                sandbox_finish_destroy(s);
                return;
        }
        if (populated > 0 && now_usec(CLOCK_MONOTONIC) - s->teardown_start_usec >= s->ctx->config.teardown_timeout_usec)
                sandbox_teardown_stuck(s);
        kill_and_retry(s, populated, &s->teardown_timer, &s->teardown_tries, on_teardown_timer);
        if (s->teardown_stuck && s->teardown_timer)
                (void) sd_event_source_set_time_relative(s->teardown_timer, USEC_PER_SEC);
}

/* Its runs killed, its sessions hung up, its snapshot job aborted; pending runs are answered. */
static void sandbox_members_kill(Sandbox *s) {
        for (SandboxMember *m = s->members, *next; m; m = next) {
                next = m->next;
                if (m->ops->kill)
                        m->ops->kill(m, SIGKILL);
        }
}

void sandbox_gone_error(Sandbox *s, ProtoError *err) {
        if (s->failure.code)
                *err = s->failure;
        else
                proto_error_set(err, SBX_E_CONFLICT, "sandbox", "sandbox %s was destroyed before it was ready", s->id);
}

void sandbox_destroy(Sandbox *s, const char *reason) {
        ProtoError err;

        if (s->state == SANDBOX_DESTROYING)
                return;
        log_debug("destroying sandbox %s (%s)", s->id, reason);
        s->teardown_start_usec = now_usec(CLOCK_MONOTONIC);
        sandbox_restart_cancel(s); /* its snapshot job is aborted below, with the other members */
        s->state = SANDBOX_DESTROYING;
        /* Frozen by its client: thawed, so that what is killed below can die. */
        if (s->user_frozen && s->cg_fd >= 0) {
                (void) cg_write(s->cg_fd, "cgroup.freeze", "0");
                s->user_frozen = false;
                sandbox_set_frozen(s, false);
        }
        /* An init still to arrive is awaited on the setup socket, to be killed and reaped. */
        if (!s->init_pending) {
                s->setup_source = sd_event_source_disable_unref(s->setup_source);
                s->setup_fd = safe_close(s->setup_fd);
        }
        sandbox_gone_error(s, &err);
        waiters_answer(&s->create_waiters, NULL, NULL, &err);
        sandbox_members_kill(s);
        /* Killing pid 1 ends its pid namespace, and needs no new fd (cgroup.kill does: a daemon
         * out of fds still kills the sandbox's processes). */
        if (s->init_pidfd >= 0)
                (void) syscall(SYS_pidfd_send_signal, s->init_pidfd, SIGKILL, NULL, 0);
        if (s->cg_fd >= 0)
                (void) cg_kill(s->cg_fd);
        /* A scope still being made is not waited for: stopped when the teardown is done. */
        s->scope_job = scope_job_cancel(s->scope_job);
        sandbox_teardown_step(s);
}

static void on_connection_closed(Hook *h, void *userdata) {
        Sandbox *s = userdata;

        (void) h;
        s->conn_reply = reply_unref(s->conn_reply);
        sandbox_destroy(s, "the connection that created it closed");
}

void sandbox_tie_to_connection(Sandbox *s, Reply *reply) {
        if (!s->with_connection || s->conn_reply)
                return;
        if (reply_gone(reply)) {
                sandbox_destroy(s, "the connection that created it closed");
                return;
        }
        s->conn_reply = reply_ref(reply);
        hook_init(&s->conn_hook, on_connection_closed, s);
        reply_on_close(reply, &s->conn_hook);
}

Sandbox *sandbox_free(Sandbox *s) {
        if (!s)
                return NULL;
        hook_remove(&s->conn_hook);
        s->conn_reply = reply_unref(s->conn_reply);
        registry_remove(&s->entry); /* the pool refills (pool.c observes) */
        s->setup_helper = sd_event_source_disable_unref(s->setup_helper);
        while (s->members)
                s->members->ops->free(s->members); /* the snapshot job's also cancels its restart */
        sandbox_restart_cancel(s);
        sd_event_source_disable_unref(s->setup_source);
        sd_event_source_disable_unref(s->init_exit_source);
        sd_event_source_disable_unref(s->teardown_timer);
        safe_close(s->setup_fd);
        safe_close(s->init_pidfd);
        egress_detach(s->ctx, &s->net);
        free(s->net.error);
        netns_pool_drop(&s->ctx->netns, TAKE_FD(s->netns_fd));
        safe_close(s->join_netns_fd);
        sandbox_spare_drop(s);
        safe_close(s->cg_fd);
        /* Its scope outlives the daemon with its processes; a placeholder of ours does not. */
        scope_job_cancel(s->scope_job);
        if (s->hold_pidfd >= 0) {
                (void) syscall(SYS_pidfd_send_signal, s->hold_pidfd, SIGKILL, NULL, 0);
                (void) waitid(P_PIDFD, (id_t) s->hold_pidfd, &(siginfo_t) {}, WEXITED);
                safe_close(s->hold_pidfd);
        }
        safe_close(s->scope_fd);
        safe_close(s->workdir_fd);
        if (s->uid_slot != UINT32_MAX)
                registry_free_uid_slot(s->ctx->registry, s->uid_slot);
        json_object_put(s->env);
        sandbox_mounts_free(s);
        safe_close(s->root_tree_fd);
        safe_close(s->root_sent_tree_fd);
        image_release(s->ctx->images, s->image);
        free(s->image);
        free(s->root_path);
        free(s->hostname);
        json_object_put(s->sysctls);
        json_object_put(s->masked_paths);
        json_object_put(s->readonly_paths);
        json_object_put(s->interrupted_runs);
        json_object_put(s->teardown_stuck);
        free(s->name);
        free(s->cg_path);
        free(s);
        return NULL;
}

/* Anyone else gets not_found, not permission_denied: no oracle for other users' sandboxes. */
bool sandbox_visible_to(Sandbox *s, const ReplyPeer *peer) {
        return !s->pooled && (peer->admin || peer->cred.uid == s->owner_uid);
}

unsigned sandbox_count_stuck(Context *m) {
        unsigned n = 0;
        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry))
                n += !!s->teardown_stuck;
        return n;
}

unsigned sandbox_count_owned(Context *m, uid_t uid) {
        unsigned n = 0;
        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry))
                n += s->owner_uid == uid && s->state != SANDBOX_DESTROYING && !s->pooled;
        return n;
}

unsigned sandbox_count_runs(Context *m) {
        unsigned n = 0;
        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry))
                n += s->n_runs;
        return n;
}

const char *sandbox_root_upper_path(Sandbox *s, char *buf, size_t len) {
        snprintf(buf, len, "%s/sandboxes/%s/" SANDBOX_ROOT_UPPER, s->ctx->config.state_dir, s->id);
        return buf;
}

const char *sandbox_workdir_path(Sandbox *s, char *buf, size_t len) {
        snprintf(buf, len, "%s/sandboxes/%s/work", s->ctx->config.state_dir, s->id);
        return buf;
}

void sandbox_run_finished(Sandbox *s, Run *r) {
        if (s->ephemeral && !s->runs && !s->pending_runs && s->state != SANDBOX_DESTROYING)
                sandbox_destroy(s, "throwaway run finished");
        else if (s->state == SANDBOX_DESTROYING)
                sandbox_teardown_step(s);
        else if (s->restart)
                sandbox_restart_step(s);
}

void sandbox_release_hold(Sandbox *s, const ProtoError *err) {
        if (s->state != SANDBOX_CREATING || s->ready_holds == 0)
                return;
        s->ready_holds--;
        if (err)
                sandbox_fail(s, err);
        else if (s->ready_holds == 0 && s->init_ready)
                sandbox_go_ready(s);
}

void sandbox_restart_cancel(Sandbox *s) {
        if (!s->restart)
                return;
        sd_event_source_disable_unref(s->restart->timer);
        free(TAKE_PTR(s->restart));
}

/* Everything is gone: swap, then a new init as for a new sandbox. */
static void sandbox_restart_respawn(Sandbox *s) {
        _cleanup_close_ int dfd = -EBADF;
        SandboxRestart *rs = s->restart;
        int r = rs->swap(s, rs->userdata), k;

        if (r < 0)
                log_warning_errno(r, "sandbox %s: the workspace was not replaced: %m", s->id);
        /* The workspace may be another inode now. */
        dfd = openat(s->ctx->state_fd, s->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd >= 0) {
                safe_close(s->workdir_fd);
                s->workdir_fd = openat(dfd, "work", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        s->init_ready = false;
        s->init_adopted = NULL;
        k = sandbox_renew_cgroup(s);
        if (k >= 0 && (sandbox_opens_trees(s))) {
                /* The new init gets the caller's directories again, opened as the caller. */
                ProtoError err;
                if (sandbox_open_mounts(s, &err) < 0) {
                        sandbox_fail(s, &err);
                        return;
                }
        }
        if (k >= 0)
                k = sandbox_spawn_init(s);
        if (k < 0) {
                ProtoError err;
                proto_error_set(&err, SBX_E_SPAWN_FAILED, NULL, "cannot start the sandbox's new init: %s", strerror(-k));
                sandbox_fail(s, &err);
        } else if (r < 0 && s->restart) {
                /* Tell the owner now; the sandbox still comes back with its old workspace. */
                SandboxRestart *keep = TAKE_PTR(s->restart);
                sd_event_source_disable_unref(keep->timer);
                keep->done(s, r, keep->userdata);
                free(keep);
        }
}

static int on_restart_timer(sd_event_source *src, uint64_t usec, void *userdata);

static void sandbox_restart_step(Sandbox *s) {
        SandboxRestart *rs = s->restart;
        int populated = cg_populated(s->cg_fd);

        if (populated <= 0 && s->init_pidfd < 0 && !s->runs && !s->sessions) {
                rs->timer = sd_event_source_disable_unref(rs->timer);
                sandbox_restart_respawn(s);
                return;
        }
        kill_and_retry(s, populated, &rs->timer, &rs->tries, on_restart_timer);
}

static int on_restart_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        sandbox_restart_step(userdata);
        return 0;
}

int sandbox_restart(Sandbox *s, int (*swap)(Sandbox *s, void *userdata),
                    void (*done)(Sandbox *s, int error, void *userdata), void *userdata) {
        int killed = (int) s->n_runs;

        if (s->state != SANDBOX_READY || s->restart)
                return -EBUSY;
        s->restart = calloc(1, sizeof(*s->restart));
        if (!s->restart)
                return -ENOMEM;
        *s->restart = (SandboxRestart) { .swap = swap, .done = done, .userdata = userdata };
        /* Runs asked for meanwhile wait for the new init, as they do for a new sandbox. */
        /* Nothing of the sandbox lives for a while: a placeholder keeps its scope from being
         * collected by systemd meanwhile. */
        int r = sandbox_hold_start(s);
        if (r < 0) {
                free(TAKE_PTR(s->restart));
                return r;
        }
        s->state = SANDBOX_CREATING;
        sandbox_members_kill(s); /* runs killed, sessions end as when the sandbox goes */
        sandbox_spare_drop(s);   /* a new cgroup comes, and the new one's runs go there */
        (void) cg_kill(s->cg_fd);
        sandbox_restart_step(s);
        return killed;
}

void sandbox_member_add(Sandbox *s, SandboxMember *m, const SandboxMemberOps *ops) {
        m->ops = ops;
        m->prev = NULL;
        m->next = s->members;
        if (s->members)
                s->members->prev = m;
        s->members = m;
}

void sandbox_member_remove(Sandbox *s, SandboxMember *m) {
        if (m->prev)
                m->prev->next = m->next;
        else if (s->members == m)
                s->members = m->next;
        else
                return;
        if (m->next)
                m->next->prev = m->prev;
        m->next = m->prev = NULL;
}

void sandbox_set_frozen(Sandbox *s, bool frozen) {
        s->frozen = frozen;
        for (SandboxMember *m = s->members, *next; m; m = next) {
                next = m->next;
                if (m->ops->frozen)
                        m->ops->frozen(m);
        }
}
