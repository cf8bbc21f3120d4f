/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "connection.h"
#include "log.h"
#include "macro.h"
#include "context.h"
#include "remove-async.h"
#include "rm-rf.h"
#include "run-exec.h"
#include "run.h"
#include "pty.h"
#include "request-fields.h"
#include "sandbox.h"
#include "snapshot.h"
#include "spawn.h"
#include "util.h"

#define SANDBOX_NAME_MAX 64

static int sandbox_random_id(char *buf, size_t len, const char *prefix) {
        uint8_t b[6];
        if (getrandom(b, sizeof(b), 0) != sizeof(b))
                return -EIO;
        snprintf(buf, len, "%s%02x%02x%02x%02x%02x%02x", prefix, b[0], b[1], b[2], b[3], b[4], b[5]);
        return 0;
}

static bool name_valid(const char *n) {
        size_t len = strlen(n);
        if (len == 0 || len > SANDBOX_NAME_MAX || strncmp(n, "sbx-", 4) == 0 || n[0] == '.' || n[0] == '-')
                return false;
        return strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == len;
}

/* An environment of at most this many bytes ("NAME=value\0" each): what the kernel's exec takes
 * with room to spare, and a sandbox's record (meta.json, state.c) stays below its 1 MiB even
 * when JSON escapes every byte (6 for 1: 384 KiB) beside its interrupted runs (run-record.c). */
#define ENV_MAX_BYTES (64u * 1024)

static int parse_env_object(json_object *env, ProtoError *err) {
        size_t bytes = 0;

        if (!env)
                return 0;
        if (json_object_object_length(env) > 1024)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "env", "field 'env' has more than 1024 variables");
        json_object_object_foreach(env, k, v) {
                if (!*k || strchr(k, '=') || strlen(k) > 1024)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "env",
                                               "environment variable names must be non-empty, without '='");
                if (!json_object_is_type(v, json_type_string))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "env", "environment values must be strings");
                bytes += strlen(k) + 1 + (size_t) json_object_get_string_len(v) + 1;
        }
        if (bytes > ENV_MAX_BYTES)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "env", "field 'env' has %zu bytes, more than %u",
                                       bytes, ENV_MAX_BYTES);
        return 0;
}

int sandbox_env_check(json_object *env, ProtoError *err) {
        return parse_env_object(env, err);
}

static int limit_over(const char *field, ProtoError *err, uint64_t max) {
        return proto_error_set(err, SBX_E_INVALID_REQUEST, field, "'%s' exceeds the configured maximum (%" PRIu64 ")",
                               field, max);
}

/* Defaults and maximums from the configuration; messages name "limits.X". */
static int parse_limits(Context *m, json_object *limits, SandboxLimits *l, ProtoError *err) {
        const Config *c = &m->config;
        int r;

        *l = (SandboxLimits) { c->default_memory, c->default_pids, c->default_millicpus, c->default_timeout_usec,
                               c->default_output_bytes, c->default_disk };
        if (!limits)
                return 0;
        r = proto_check_fields(limits, request_limits_fields, "limits.", err);
        if (r < 0)
                return r;
        if ((r = proto_get_size(limits, "memory", &l->memory, err)) < 0 ||
            (r = proto_get_uint(limits, "pids", 1, UINT32_MAX, &l->pids, err)) < 0 ||
            (r = proto_get_cpus(limits, "cpus", &l->millicpus, err)) < 0 ||
            (r = proto_get_duration(limits, "timeout_s", &l->timeout_usec, err)) < 0 ||
            (r = proto_get_size(limits, "output_bytes", &l->output_bytes, err)) < 0 ||
            (r = proto_get_size(limits, "disk", &l->disk, err)) < 0 ||
            (r = proto_get_uint(limits, "files", 0, INT64_MAX, &l->files, err)) < 0) {
                char f[sizeof(err->field)];
                memcpy(f, err->field, sizeof(f));
                snprintf(err->field, sizeof(err->field), "limits.%.50s", f);
                return r;
        }
        if (l->memory < (1u << 20))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "limits.memory", "'limits.memory' must be at least 1M");
        if (l->memory > c->max_memory)
                return limit_over("limits.memory", err, c->max_memory);
        if (l->pids > c->max_pids)
                return limit_over("limits.pids", err, c->max_pids);
        if (l->millicpus > c->max_millicpus)
                return limit_over("limits.cpus", err, c->max_millicpus / 1000);
        if (l->timeout_usec == 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "limits.timeout_s", "'limits.timeout_s' must be positive");
        if (l->timeout_usec > c->max_timeout_usec)
                return limit_over("limits.timeout_s", err, c->max_timeout_usec / USEC_PER_SEC);
        if (l->output_bytes < 2)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "limits.output_bytes",
                                       "'limits.output_bytes' must be at least 2");
        if (l->output_bytes > c->max_output_bytes)
                return limit_over("limits.output_bytes", err, c->max_output_bytes);
        return 0;
}

/* Honest reporting: a limit this host cannot enforce is refused unless best_effort. */
static int check_enforceable(Context *m, bool best_effort, unsigned *ret_enforced, ProtoError *err) {
        static const struct {
                unsigned mask;
                const char *field, *controller;
        } need[] = {
                { CG_MEMORY, "limits.memory", "memory" },
                { CG_PIDS, "limits.pids", "pids" },
                { CG_CPU, "limits.cpus", "cpu" },
        };
        for (size_t i = 0; i < ELEMENTSOF(need); i++)
                if (!(m->cg.enforceable & need[i].mask) && !best_effort)
                        return proto_error_set(err, SBX_E_LIMIT_UNENFORCEABLE, need[i].field,
                                               "the cgroup v2 '%s' controller is not available to sandboxd on this host, "
                                               "so '%s' cannot be enforced; pass best_effort to run anyway",
                                               need[i].controller, need[i].field);
        *ret_enforced = m->cg.enforceable & (CG_MEMORY | CG_PIDS | CG_CPU);
        return 0;
}

/* limits.files (parsed with the others in sandbox.c) where the request left it out:
 * default_files, else one file per SWEEP_BYTES_PER_FILE of limits.disk; max_files caps both. */
static int parse_files_limit(Context *m, Sandbox *s, json_object *req, ProtoError *err) {
        json_object *l = NULL, *v = NULL;
        bool given = json_object_object_get_ex(req, "limits", &l) && json_object_object_get_ex(l, "files", &v) &&
                     !json_object_is_type(v, json_type_null);

        if (!given)
                s->limits.files = m->config.default_files ?: config_files_for_bytes(s->limits.disk);
        if (m->config.max_files && (s->limits.files == 0 || s->limits.files > m->config.max_files)) {
                if (given)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "limits.files",
                                               "'limits.files' must be set and at most the configured maximum (%" PRIu64 ")",
                                               m->config.max_files);
                s->limits.files = m->config.max_files;
        }
        return 0;
}

/* ttl and idle (top-level fields) with the configured defaults; limits.disk's maximum, and
 * limits.files. (The sweep's fields of a create request, which it enforces.) */
static int parse_sweep_fields(Context *m, Sandbox *s, json_object *req, ProtoError *err) {
        int r;

        s->ttl_usec = m->config.default_ttl_usec;
        s->idle_usec = m->config.default_idle_usec;
        if ((r = proto_get_duration(req, "ttl", &s->ttl_usec, err)) < 0 ||
            (r = proto_get_duration(req, "idle", &s->idle_usec, err)) < 0)
                return r;
        if (m->config.max_disk && (s->limits.disk == 0 || s->limits.disk > m->config.max_disk))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "limits.disk",
                                       "'limits.disk' must be set and at most the configured maximum (%" PRIu64 ")",
                                       m->config.max_disk);
        if ((r = parse_files_limit(m, s, req, err)) < 0)
                return r;
        s->last_active_usec = now_usec(CLOCK_MONOTONIC);
        s->ttl_deadline_usec = s->ttl_usec ? s->last_active_usec + s->ttl_usec : 0;
        return 0;
}

static int sandbox_parse(Context *m, Sandbox *s, json_object *req, ProtoError *err) {
        json_object *limits = NULL, *env = NULL;
        const char *name = NULL, *network = NULL, *workspace = NULL;
        int r;

        if ((r = proto_get_string(req, "name", SANDBOX_NAME_MAX, &name, err)) < 0 ||
            (r = proto_get_string(req, "network", 16, &network, err)) < 0 ||
            (r = proto_get_string(req, "workspace", 16, &workspace, err)) < 0 ||
            (r = proto_get_bool(req, "best_effort", &s->best_effort, err)) < 0 ||
            (r = sandbox_user_parse(req, &s->user, err)) < 0)
                return r;
        if (name && !name_valid(name))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "name",
                                       "'name' must be 1-64 of [A-Za-z0-9._-], not starting with 'sbx-', '.' or '-'");
        /* Per owner: another user's names are neither told nor taken (THREATS PRO-09). */
        if (name && registry_find_named(m->registry, s->owner_uid, name))
                return proto_error_set(err, SBX_E_CONFLICT, "name", "you have a sandbox named '%s' already", name);
        if (network && strcmp(network, "none") != 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "network",
                                       "'network' must be \"none\" (loopback only); no other mode is supported yet");
        if (workspace && strcmp(workspace, "memory") != 0 && strcmp(workspace, "disk") != 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "workspace",
                                       "'workspace' must be \"memory\" (the default) or \"disk\"");
        /* Only a throwaway run has the field (create's field list refuses it). */
        s->memory_workspace = s->ephemeral && !(workspace && strcmp(workspace, "disk") == 0);
        s->unprivileged_only = s->ephemeral && s->user != SANDBOX_USER_ROOT;
        (void) json_object_object_get_ex(req, "limits", &limits);
        if (limits && json_object_is_type(limits, json_type_null))
                limits = NULL;
        r = parse_limits(m, limits, &s->limits, err);
        if (r < 0)
                return r;
        r = check_enforceable(m, s->best_effort, &s->enforced, err);
        if (r < 0 || (r = parse_sweep_fields(m, s, req, err)) < 0)
                return r;
        if (json_object_object_get_ex(req, "env", &env) && json_object_is_type(env, json_type_object)) {
                r = parse_env_object(env, err);
                if (r < 0)
                        return r;
                s->env = json_object_get(env);
        }
        if (name && !(s->name = strdup(name)))
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        return 0;
}

int sandbox_parse_request(Context *m, json_object *req, SandboxRequest *ret, ProtoError *err) {
        Sandbox tmp = { .ctx = m, .ephemeral = true };
        int r = sandbox_parse(m, &tmp, req, err);

        *ret = (SandboxRequest) { .limits = tmp.limits, .best_effort = tmp.best_effort,
                                  .disk_workspace = !tmp.memory_workspace, .root = !tmp.unprivileged_only,
                                  .name = tmp.name, .env = tmp.env };
        if (r < 0)
                sandbox_request_done(ret);
        return r;
}

void sandbox_request_done(SandboxRequest *r) {
        free(r->name);
        json_object_put(r->env);
        *r = (SandboxRequest) {};
}

static Sandbox *sandbox_alloc(Context *m) {
        Sandbox *s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        s->ctx = m;
        s->cg_fd = s->workdir_fd = s->init_pidfd = s->setup_fd = s->netns_fd = -EBADF;
        s->uid_slot = UINT32_MAX;
        s->user = SANDBOX_USER_SANDBOX;
        s->created_usec = now_usec(CLOCK_REALTIME);
        return s;
}

static int sandbox_make_cgroup(Sandbox *s) {
        Context *m = s->ctx;
        CgLimits l = {
                .memory = s->limits.memory,
                .swap = m->config.swap_max,
                .pids = s->limits.pids,
                .millicpus = s->limits.millicpus,
                .oom_group = false, /* an OOM kills one run's group, never the whole sandbox */
        };
        int r = cg_create(m->cg.sandboxes_fd, s->id, &s->cg_fd);
        if (r < 0)
                return r;
        if (asprintf(&s->cg_rel, "sandboxes/%s", s->id) < 0)
                return -ENOMEM;
        return cg_apply_limits(&m->cg, s->cg_rel, &l, s->enforced);
}

/* <state>/<id>/work, owned by the sandbox's unprivileged user (uid 1000 inside, host_uid + 1000
 * outside), so that runs write there without being root. The sandbox reaches it through an fd,
 * so the path's own permissions may stay closed to everyone else. */
static int sandbox_make_workspace(Sandbox *s, bool existing) {
        _cleanup_close_ int dfd = -EBADF;
        int state_fd = s->ctx->state_fd;

        if (mkdirat(state_fd, s->id, 0700) < 0 && (!existing || errno != EEXIST))
                return -errno;
        dfd = openat(state_fd, s->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        if (mkdirat(dfd, "work", 0755) < 0 && errno != EEXIST)
                return -errno;
        if (fchownat(dfd, "work", s->host_uid + SANDBOX_USER_UID, s->host_uid + SANDBOX_USER_GID, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        s->workdir_fd = openat(dfd, "work", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return s->workdir_fd < 0 ? -errno : 0;
}

static int write_proc_file(pid_t pid, const char *file, const char *text) {
        char path[64];
        _cleanup_close_ int fd = -EBADF;
        snprintf(path, sizeof(path), "/proc/%d/%s", (int) pid, file);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return write(fd, text, strlen(text)) < 0 ? -errno : 0;
}

/* uid/gid 0..range-1 inside map to host_uid.. outside; setgroups is denied so that no one inside
 * can drop a group to gain access (CVE-2014-8989). The init is our unreaped child, so its pid
 * cannot have been reused. */
static int sandbox_write_maps(Sandbox *s) {
        char map[64];
        int r;
        snprintf(map, sizeof(map), "0 %u %" PRIu64 "\n", (unsigned) s->host_uid, s->ctx->config.uid_range);
        if ((r = write_proc_file(s->init_pid, "uid_map", map)) < 0 ||
            (r = write_proc_file(s->init_pid, "setgroups", "deny")) < 0 ||
            (r = write_proc_file(s->init_pid, "gid_map", map)) < 0)
                return r;
        /* The reaper must outlive any memory hog of the sandbox. */
        (void) write_proc_file(s->init_pid, "oom_score_adj", "-1000");
        return 0;
}

/* Half the memory limit: well below memory.max, so that a full /tmp is ENOSPC and the sandbox's
 * processes keep the other half (THREATS RES-03). The same bound where the memory controller is
 * missing, where it is all that keeps a sandbox's /tmp from the host's memory. */
static uint64_t sandbox_tmpfs_size(const Sandbox *s) {
        return s->limits.memory / 2;
}

static const char **sandbox_mask_paths(Context *m) {
        static const char *paths[CONTEXT_MAX_MASKED + 2];
        size_t n = 0;
        paths[n++] = m->config.state_dir;
        for (unsigned i = 0; i < m->n_masked; i++)
                if (m->masked_paths[i])
                        paths[n++] = m->masked_paths[i];
        paths[n] = NULL;
        return paths;
}

static int on_setup_report(sd_event_source *src, int fd, uint32_t revents, void *userdata);
static int on_init_exit(sd_event_source *src, const siginfo_t *si, void *userdata);

static int sandbox_init_started(Sandbox *s);

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

/* The init cloned by the exec'd helper (run-exec.h): nothing of the daemon is copied, and the
 * init stays a small process whatever the daemon's heap holds. Its pidfd arrives later, on the
 * setup socket (on_setup_report).
 *
 * Where the helper can be born in the sandbox's cgroup (run_exec_into_cgroup()), it clones the
 * init straight into its leaf, with the sandbox's cgroup namespace rooted there: moving a process
 * between cgroups waits for an RCU grace period (cgroup_threadgroup_rwsem), about 9 ms each time
 * here, and was the largest part of making a sandbox. */
static int sandbox_exec_init(Sandbox *s, int sp[2], InitParams *p) {
        Context *m = s->ctx;
        _cleanup_close_ int leaf = -EBADF;
        int pidfd = -1, r;
        pid_t pid;

        /* Not into a frozen cgroup (run.c's run_cgroup_frozen() says why): the helper is then born
         * in ours, and the init it clones (no vfork) waits in the sandbox's for the thaw. */
        if (run_exec_into_cgroup() && cg_frozen(s->cg_fd) == 0 && cg_create(s->cg_fd, "init", &leaf) >= 0)
                p->cgroupns_ready = true;
        pid = run_exec_init(m->run_helper_fd, p, s->cg_fd, p->cgroupns_ready ? leaf : -1, &pidfd);
        close(sp[1]);
        s->setup_fd = sp[0];
        if (pid < 0)
                return pid;
        s->init_pending = true;
        s->init_in_leaf = p->cgroupns_ready;
        /* Reaped when it is done; the sandbox is not ready before (it is in its cgroup). */
        r = sd_event_add_child_pidfd(m->event, &s->setup_helper, pidfd, WEXITED, on_helper_exit, s);
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

static int sandbox_spawn_init(Sandbox *s) {
        Context *m = s->ctx;
        char workdir[4096];
        InitParams p = {
                .workdir = s->memory_workspace ? NULL : sandbox_workdir_path(s, workdir, sizeof(workdir)),
                .root_dir = m->config.root_dir,
                .hostname = "sandbox",
                .dev_dir = m->dev_dir,
                .tmpfs_size = sandbox_tmpfs_size(s),
                .mask_paths = sandbox_mask_paths(m),
                .root_binds = (const char *const *) m->config.root_binds,
                .lock_mounts = !s->unprivileged_only,
                .netns_fd = -EBADF,
                .sysfs_fd = -EBADF,
        };
        int sp[2];
        pid_t pid;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return -errno;
        p.sync_fd = sp[1];
        if (m->run_helper_fd >= 0) {
                /* A new init (a restore's) gets a namespace as a new sandbox does: every process
                 * of the last one is gone. */
                netns_pool_put(&m->netns, TAKE_FD(s->netns_fd));
                s->netns_fd = netns_pool_get(&m->netns);
                p.netns_fd = s->netns_fd;
                return sandbox_exec_init(s, sp, &p);
        }
        /* Without the helper, the daemon makes the init's trees: in the host's user namespace. */
        if (root_trees_open(p.root_dir, p.root_binds, &p.trees) < 0) {
                int r = -errno;
                close(sp[0]);
                close(sp[1]);
                return r;
        }
        pid = clone3_pidfd(SANDBOX_NS_FLAGS, s->cg_fd, &s->init_pidfd);
        if (pid == 0) {
                int keep[2 + ROOT_TREES_MAX] = { 2, sp[1] };
                for (unsigned i = 0; i < p.trees.n; i++)
                        keep[2 + i] = p.trees.fd[i];
                close_all_fds_except(keep, 2 + p.trees.n);
                close(sp[0]);
                sandbox_init_main(&p);
        }
        root_trees_close(&p.trees);
        close(sp[1]);
        s->setup_fd = sp[0];
        if (pid < 0)
                return pid;
        s->init_pid = pid;
        return sandbox_init_started(s);
}

/* The init is a child of ours, waiting for its go: watch it, give it its uid/gid maps, go. */
static int sandbox_init_started(Sandbox *s) {
        Context *m = s->ctx;
        int r = sd_event_add_child_pidfd(m->event, &s->init_exit_source, s->init_pidfd, WEXITED, on_init_exit, s);
        if (r < 0) {
                (void) cg_kill(s->cg_fd);
                return r;
        }
        r = sandbox_write_maps(s);
        if (r < 0 || send(s->setup_fd, "g", 1, MSG_NOSIGNAL) != 1) {
                (void) cg_kill(s->cg_fd);
                return r < 0 ? r : -EIO;
        }
        if (s->setup_source)
                return 0;
        return sd_event_add_io(m->event, &s->setup_source, s->setup_fd, EPOLLIN, on_setup_report, s);
}

static void sandbox_link(Context *m, Sandbox *s) {
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
        return h && h->check_run ? h->check_run(s, err) : 0;
}

static int internal_error(ProtoError *err, const char *what, int r) {
        return proto_error_set(err, SBX_E_INTERNAL, NULL, "%s: %s", what, strerror(-r));
}

int sandbox_create(Context *m, json_object *req, uid_t owner, bool ephemeral, Sandbox **ret, ProtoError *err) {
        Sandbox *s;
        int r;

        if (registry_count(m->registry) - registry_count_pooled(m->registry) >= m->config.max_sandboxes)
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
        r = sandbox_parse(m, s, req, err);
        if (r < 0)
                goto fail;
        if (sandbox_random_id(s->id, sizeof(s->id), "sbx-") < 0 || registry_alloc_uid_slot(m->registry, &s->uid_slot) < 0) {
                r = proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, NULL, "no free uid range for a new sandbox");
                goto fail;
        }
        s->host_uid = (uid_t) (m->config.uid_base + (uint64_t) s->uid_slot * m->config.uid_range);
        sandbox_link(m, s);
        s->state = SANDBOX_CREATING;
        if ((r = sandbox_make_cgroup(s)) < 0) {
                r = internal_error(err, "cannot create the sandbox's cgroup", r);
                goto fail_destroy;
        }
        if (!s->memory_workspace && (r = sandbox_make_workspace(s, false)) < 0) {
                r = sandbox_disk_error(err, "cannot create the workspace", r);
                goto fail_destroy;
        }
        if (!s->ephemeral && (r = registry_changed(&s->entry)) < 0) { /* state.c saves it */
                r = sandbox_disk_error(err, "cannot record the sandbox in the state directory", r);
                goto fail_destroy;
        }
        if ((r = sandbox_spawn_init(s)) < 0) {
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

/* A cgroup of an earlier daemon's sandbox: its processes did not survive the restart (the init
 * may have), so it is emptied and removed before the sandbox gets a new one. */
static int sandbox_clear_old_cgroup(Sandbox *s) {
        Context *m = s->ctx;
        _cleanup_close_ int fd = openat(m->cg.sandboxes_fd, s->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        /* It may have been frozen for a snapshot when the daemon died. */
        (void) cg_write(fd, "cgroup.freeze", "0");
        for (int i = 0; i < 1000 && cg_populated(fd) > 0; i++) {
                (void) cg_kill(fd);
                usleep(1000);
        }
        return cg_remove_tree(m->cg.sandboxes_fd, s->id);
}

static int restore_u64(json_object *o, const char *key, uint64_t *ret) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int) ||
            json_object_get_int64(v) < 0)
                return -EBADMSG;
        *ret = (uint64_t) json_object_get_int64(v);
        return 0;
}

static int sandbox_restore_fields(Sandbox *s, json_object *meta) {
        json_object *l, *v;
        uint64_t owner, slot;

        if (!json_object_object_get_ex(meta, "limits", &l) || restore_u64(meta, "owner_uid", &owner) < 0 ||
            restore_u64(meta, "uid_slot", &slot) < 0 || restore_u64(meta, "created_usec", &s->created_usec) < 0 ||
            restore_u64(l, "memory", &s->limits.memory) < 0 || restore_u64(l, "pids", &s->limits.pids) < 0 ||
            restore_u64(l, "millicpus", &s->limits.millicpus) < 0 ||
            restore_u64(l, "timeout_usec", &s->limits.timeout_usec) < 0 ||
            restore_u64(l, "output_bytes", &s->limits.output_bytes) < 0)
                return -EBADMSG;
        s->owner_uid = (uid_t) owner;
        s->uid_slot = (unsigned) slot;
        if (json_object_object_get_ex(meta, "name", &v) && json_object_is_type(v, json_type_string) &&
            !(s->name = strdup(json_object_get_string(v))))
                return -ENOMEM;
        if (json_object_object_get_ex(meta, "best_effort", &v))
                s->best_effort = json_object_get_boolean(v);
        if (json_object_object_get_ex(meta, "env", &v) && json_object_is_type(v, json_type_object))
                s->env = json_object_get(v);
        /* A record without it predates the option: it gets the default (its workspace's files
         * made as root inside may then be read-only to its runs; "user":"root" on a run helps). */
        if (json_object_object_get_ex(meta, "user", &v) && json_object_is_type(v, json_type_string))
                s->user = sandbox_user_from_string(json_object_get_string(v));
        if (s->user == SANDBOX_USER_UNSET)
                return -EBADMSG;
        return 0;
}

static int sandbox_restore_claim(Sandbox *s, json_object *meta) {
        Context *m = s->ctx;
        json_object *id;

        if (!json_object_object_get_ex(meta, "id", &id) || !json_object_is_type(id, json_type_string))
                return -EBADMSG;
        snprintf(s->id, sizeof(s->id), "%s", json_object_get_string(id));
        if (sandbox_restore_fields(s, meta) < 0)
                return -EBADMSG;
        if (registry_find(m->registry, s->id) || (s->name && registry_find_named(m->registry, s->owner_uid, s->name)) ||
            registry_claim_uid_slot(m->registry, s->uid_slot) < 0)
                return -EEXIST;
        s->host_uid = (uid_t) (m->config.uid_base + (uint64_t) s->uid_slot * m->config.uid_range);
        /* What the host enforces now, which need not be what it enforced before. */
        s->enforced = m->cg.enforceable & (CG_MEMORY | CG_PIDS | CG_CPU);
        return 0;
}

int sandbox_restore(Context *m, json_object *meta, Sandbox **ret) {
        Sandbox *s = sandbox_alloc(m);
        int r;

        if (!s)
                return -ENOMEM;
        r = sandbox_restore_claim(s, meta);
        if (r < 0) {
                sandbox_free(s);
                return r;
        }
        s->restored_usec = now_usec(CLOCK_REALTIME);
        sandbox_link(m, s);
        s->state = SANDBOX_CREATING;
        if ((r = sandbox_clear_old_cgroup(s)) < 0 || (r = sandbox_make_cgroup(s)) < 0 ||
            (r = sandbox_make_workspace(s, true)) < 0 || (r = sandbox_spawn_init(s)) < 0) {
                /* Keep the workspace: only the processes are given up. */
                s->keep_workspace = true;
                sandbox_destroy(s, "restore failed");
                return r;
        }
        *ret = s;
        return 0;
}

void sandbox_add_waiter(Waiter **list, Connection *c, json_object *id) {
        Waiter *w = calloc(1, sizeof(*w));
        if (!w) {
                ProtoError e;
                proto_error_set(&e, SBX_E_INTERNAL, NULL, "out of memory");
                connection_reply_error(c, id, &e);
                return;
        }
        w->conn = connection_ref(c);
        w->id = json_object_get(id);
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
                        connection_reply_error(w->conn, w->id, err);
                else {
                        json_object *reply = proto_reply_ok(w->id);
                        if (key && extra_key_value_src)
                                json_object_object_add(reply, key, json_object_get(extra_key_value_src));
                        connection_send_take(w->conn, reply);
                }
                connection_unref(w->conn);
                json_object_put(w->id);
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

static void sandbox_go_ready(Sandbox *s);

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
        if (s->ready_holds == 0)
                sandbox_go_ready(s);
}

static void sandbox_go_ready(Sandbox *s) {
        s->state = SANDBOX_READY;
        sandbox_restart_finish(s, 0);
        if (s->create_waiters) {
                _cleanup_json_ json_object *j = sandbox_to_json(s, false);
                waiters_answer(&s->create_waiters, j, "sandbox", NULL);
        }
        while (s->pending_runs) {
                Run *r2 = s->pending_runs;
                s->pending_runs = r2->next;
                if (s->pending_runs)
                        s->pending_runs->prev = NULL;
                r2->next = r2->prev = NULL;
                run_start(r2);
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
                                             on_init_exit, s);
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

static int on_init_exit(sd_event_source *src, const siginfo_t *si, void *userdata) {
        Sandbox *s = userdata;
        s->init_exit_source = sd_event_source_disable_unref(s->init_exit_source);
        s->init_pidfd = safe_close(s->init_pidfd);
        s->init_pid = 0;
        if (s->state == SANDBOX_READY) {
                /* Nothing inside can kill its pid 1 (it ignores all signals it has no handler
                 * for); if it died, the sandbox is unusable. */
                log_warning("sandbox %s: init exited unexpectedly", s->id);
                s->state = SANDBOX_FAILED;
                proto_error_set(&s->failure, SBX_E_INTERNAL, NULL, "the sandbox's init exited");
        } else if (s->state == SANDBOX_DESTROYING)
                sandbox_teardown_step(s);
        return 0;
}


/* Most throwaway workspaces are left empty: a few unlinks then, and no child process. Anything
 * more is a tree walk, which the remover does (ENOTEMPTY). */
static int remove_if_empty(int dir_fd, const char *name) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        if (unlinkat(fd, "meta.json", 0) < 0 && errno != ENOENT)
                return -errno;
        if (unlinkat(fd, "work", AT_REMOVEDIR) < 0 && errno != ENOENT)
                return -errno;
        return unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

/* Moves the workspace aside atomically, then removes it in a child process so that a huge tree
 * never blocks the event loop. */
static void sandbox_remove_workspace(Sandbox *s) {
        Context *m = s->ctx;
        char trash[64];

        if (s->keep_workspace || s->memory_workspace)
                return;
        /* A throwaway has no record to lose half-way, and its workspace is mostly empty: if a
         * crash interrupts this, the next start removes what is left (state.c). */
        if (s->ephemeral && remove_if_empty(m->state_fd, s->id) == 0)
                return;
        snprintf(trash, sizeof(trash), ".trash-%s", s->id);
        if (renameat(m->state_fd, s->id, m->state_fd, trash) < 0) {
                if (errno != ENOENT)
                        log_warning("sandbox %s: cannot move the workspace aside: %m", s->id);
                return;
        }
        if (remove_if_empty(m->state_fd, trash) == 0)
                return;
        (void) remove_async(m->event, m->run_helper_fd, m->state_fd, trash);
}

static void sandbox_finish_destroy(Sandbox *s) {
        Context *m = s->ctx;
        int r;

        if (s->cg_fd >= 0)
                (void) unlinkat(s->cg_fd, "init", AT_REMOVEDIR);
        r = cg_remove_tree(m->cg.sandboxes_fd, s->id);
        if (r < 0)
                log_warning("sandbox %s: cannot remove its cgroup: %s", s->id, strerror(-r));
        /* Its cgroup was empty: none of its processes is left to hold a socket. */
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

/* A process as {pid, comm, state} from /proc/PID/stat; nothing when it is gone. */
static void stuck_add_proc(pid_t pid, json_object *list) {
        char path[64], stat[512], *lp, *rp;
        json_object *o;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        /* "PID (COMM) S ...": the comm may hold ") ", so its end is the last ')'. */
        if (read_small_file(AT_FDCWD, path, true, stat, sizeof(stat)) < 0 || !(lp = strchr(stat, '(')) ||
            !(rp = strrchr(stat, ')')) || rp[1] != ' ' || !rp[2])
                return;
        *rp = '\0';
        o = json_object_new_object();
        json_object_object_add(o, "pid", json_object_new_int64(pid));
        json_object_object_add(o, "comm", json_object_new_string(lp + 1));
        json_object_object_add(o, "state", json_object_new_string_len(rp + 2, 1));
        json_object_array_add(list, o);
}

/* The processes left in the sandbox's cgroup and below (init, run-*; nothing inside can make
 * cgroups of its own): at most 16. */
#define STUCK_LISTED_MAX 16
static json_object *stuck_processes(Sandbox *s) {
        json_object *list = json_object_new_array();
        pid_t pids[STUCK_LISTED_MAX];
        int n = s->cg_fd >= 0 ? cg_list_pids(s->cg_fd, pids, STUCK_LISTED_MAX) : 0;

        for (int i = 0; i < n; i++)
                stuck_add_proc(pids[i], list);
        return list;
}

/* "pid 4242 cat (D), pid ..." into buf. */
static void stuck_summary(json_object *list, char *buf, size_t len) {
        size_t n = json_object_array_length(list), at = 0;

        buf[0] = '\0';
        for (size_t i = 0; i < n && at < len; i++) {
                json_object *o = json_object_array_get_idx(list, i), *pid, *comm, *state;
                json_object_object_get_ex(o, "pid", &pid);
                json_object_object_get_ex(o, "comm", &comm);
                json_object_object_get_ex(o, "state", &state);
                int k = snprintf(buf + at, len - at, "%spid %" PRId64 " %s (%s)", i ? ", " : "", json_object_get_int64(pid),
                                 json_object_get_string(comm), json_object_get_string(state));
                if (k < 0)
                        break;
                at += (size_t) k;
        }
}

int sandbox_teardown_error(Sandbox *s, ProtoError *err) {
        char what[160];
        size_t n = s->teardown_stuck ? json_object_array_length(s->teardown_stuck) : 0;

        stuck_summary(s->teardown_stuck, what, sizeof(what));
        return proto_error_set(err, SBX_E_TEARDOWN_STUCK, "sandbox",
                               "sandbox %s: %s%zu process%s outlived the kill (%s); its teardown goes on, see inspect",
                               s->id, n >= STUCK_LISTED_MAX ? "at least " : "", n, n == 1 ? "" : "es",
                               n ? what : "not listed");
}

/* Past teardown_timeout with processes left: said once in the log and to whoever waits for the
 * destroy; the sandbox stays (destroying) and is looked at once a second until it is empty. */
static void sandbox_teardown_stuck(Sandbox *s) {
        bool first = !s->teardown_stuck;
        char what[200];
        ProtoError err;

        json_object_put(s->teardown_stuck);
        s->teardown_stuck = stuck_processes(s);
        if (!first)
                return;
        stuck_summary(s->teardown_stuck, what, sizeof(what));
        log_warning("sandbox %s: processes outlived the kill for %" PRIu64 " s: %s; still trying", s->id,
                    s->ctx->config.teardown_timeout_usec / USEC_PER_SEC, what[0] ? what : "none listed");
        sandbox_teardown_error(s, &err);
        waiters_answer(&s->destroy_waiters, NULL, NULL, &err);
        for (Run *r = s->runs; r; r = r->next)
                run_answer_stuck(r, &err);
}

static void sandbox_teardown_step(Sandbox *s) {
        int populated = s->cg_fd >= 0 ? cg_populated(s->cg_fd) : 0;

        /* Unknown (out of fds, say) is not empty: the sandbox is kept, and tried again. */
        if (populated < 0 && populated != -ENOENT)
                populated = 1;
        if (populated <= 0 && s->init_pidfd < 0 && !s->runs && !s->sessions && !s->init_pending) {
                s->teardown_timer = sd_event_source_disable_unref(s->teardown_timer);
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

void sandbox_destroy(Sandbox *s, const char *reason) {
        ProtoError err;

        if (s->state == SANDBOX_DESTROYING)
                return;
        log_debug("destroying sandbox %s (%s)", s->id, reason);
        s->teardown_start_usec = now_usec(CLOCK_MONOTONIC);
        snapshot_job_abort(s); /* also cancels its restart */
        sandbox_restart_cancel(s);
        s->state = SANDBOX_DESTROYING;
        /* An init still to arrive is awaited on the setup socket, to be killed and reaped. */
        if (!s->init_pending) {
                s->setup_source = sd_event_source_disable_unref(s->setup_source);
                s->setup_fd = safe_close(s->setup_fd);
        }
        proto_error_set(&err, SBX_E_CONFLICT, "sandbox", "the sandbox was destroyed before it was ready");
        waiters_answer(&s->create_waiters, NULL, NULL, s->failure.code ? &s->failure : &err);
        while (s->pending_runs) {
                Run *r = s->pending_runs;
                connection_reply_error(r->conn, r->req_id, s->failure.code ? &s->failure : &err);
                run_free(r);
        }
        for (Run *r = s->runs; r; r = r->next)
                run_kill(r, SIGKILL, REASON_DESTROYED);
        pty_sandbox_destroying(s);
        /* Killing pid 1 ends its pid namespace, and needs no new fd (cgroup.kill does: a daemon
         * out of fds still kills the sandbox's processes). */
        if (s->init_pidfd >= 0)
                (void) syscall(SYS_pidfd_send_signal, s->init_pidfd, SIGKILL, NULL, 0);
        if (s->cg_fd >= 0)
                (void) cg_kill(s->cg_fd);
        sandbox_teardown_step(s);
}

Sandbox *sandbox_free(Sandbox *s) {
        if (!s)
                return NULL;
        pty_free_all(s);
        registry_remove(&s->entry); /* the pool refills (pool.c observes) */
        s->setup_helper = sd_event_source_disable_unref(s->setup_helper);
        snapshot_job_abort(s);
        sandbox_restart_cancel(s);
        sd_event_source_disable_unref(s->setup_source);
        sd_event_source_disable_unref(s->init_exit_source);
        sd_event_source_disable_unref(s->teardown_timer);
        safe_close(s->setup_fd);
        safe_close(s->init_pidfd);
        netns_pool_drop(&s->ctx->netns, TAKE_FD(s->netns_fd));
        safe_close(s->cg_fd);
        safe_close(s->workdir_fd);
        if (s->uid_slot != UINT32_MAX)
                registry_free_uid_slot(s->ctx->registry, s->uid_slot);
        json_object_put(s->env);
        json_object_put(s->interrupted_runs);
        json_object_put(s->teardown_stuck);
        free(s->name);
        free(s->cg_rel);
        free(s);
        return NULL;
}

/* Anyone else gets not_found, not permission_denied: no oracle for other users' sandboxes. */
bool sandbox_visible_to(Sandbox *s, const Connection *c) {
        return !s->pooled && (c->admin || c->peer.uid == s->owner_uid);
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

const char *sandbox_workdir_path(Sandbox *s, char *buf, size_t len) {
        snprintf(buf, len, "%s/sandboxes/%s/work", s->ctx->config.state_dir, s->id);
        return buf;
}

static const char *state_name(SandboxState st) {
        switch (st) {
        case SANDBOX_CREATING: return "creating";
        case SANDBOX_READY: return "ready";
        case SANDBOX_DESTROYING: return "destroying";
        case SANDBOX_FAILED: return "failed";
        }
        return "unknown";
}

static json_object *json_usage_or_null(uint64_t v) {
        return v == CG_USAGE_UNKNOWN ? NULL : json_object_new_int64((int64_t) v);
}

static json_object *sandbox_usage_json(Sandbox *s) {
        json_object *u = json_object_new_object();
        CgUsage usage;

        cg_read_usage(s->cg_fd, s->enforced, &usage);
        json_object_object_add(u, "memory_bytes", json_usage_or_null(usage.memory_bytes));
        json_object_object_add(u, "pids", json_usage_or_null(usage.pids));
        json_object_object_add(u, "cpu_s", usage.cpu_usec == CG_USAGE_UNKNOWN
                                                   ? NULL
                                                   : json_object_new_double((double) usage.cpu_usec / 1e6));
        return u;
}

json_object *sandbox_to_json(Sandbox *s, bool with_usage) {
        json_object *o = json_object_new_object(), *l = json_object_new_object(), *e = json_object_new_object();
        char buf[4096], ts[32];

        json_object_object_add(o, "id", json_object_new_string(s->id));
        json_object_object_add(o, "name", s->name ? json_object_new_string(s->name) : NULL);
        json_object_object_add(o, "state", json_object_new_string(state_name(s->state)));
        if (s->teardown_stuck) {
                json_object *t = json_object_new_object();
                json_object_object_add(t, "since_s", json_object_new_double(
                                                             (double) (now_usec(CLOCK_MONOTONIC) - s->teardown_start_usec) / 1e6));
                json_object_object_add(t, "processes", json_object_get(s->teardown_stuck));
                json_object_object_add(o, "teardown_stuck", t);
        } else
                json_object_object_add(o, "teardown_stuck", NULL);
        json_object_object_add(o, "owner_uid", json_object_new_int64(s->owner_uid));
        json_object_object_add(o, "workdir", s->memory_workspace ? NULL : json_object_new_string(sandbox_workdir_path(s, buf, sizeof(buf))));
        json_object_object_add(o, "workspace", json_object_new_string(s->memory_workspace ? "memory" : "disk"));
        snprintf(buf, sizeof(buf), "%s/%s", s->ctx->cg.base, s->cg_rel ? s->cg_rel : "");
        json_object_object_add(o, "cgroup", json_object_new_string(buf));
        json_object_object_add(l, "memory", json_object_new_int64((int64_t) s->limits.memory));
        json_object_object_add(l, "pids", json_object_new_int64((int64_t) s->limits.pids));
        json_object_object_add(l, "cpus", json_object_new_double((double) s->limits.millicpus / 1000.0));
        json_object_object_add(l, "timeout_s", json_object_new_double((double) s->limits.timeout_usec / 1e6));
        json_object_object_add(l, "output_bytes", json_object_new_int64((int64_t) s->limits.output_bytes));
        json_object_object_add(o, "limits", l);
        json_object_object_add(e, "memory", json_object_new_boolean(!!(s->enforced & CG_MEMORY)));
        json_object_object_add(e, "pids", json_object_new_boolean(!!(s->enforced & CG_PIDS)));
        json_object_object_add(e, "cpu", json_object_new_boolean(!!(s->enforced & CG_CPU)));
        json_object_object_add(o, "enforced", e);
        json_object_object_add(o, "best_effort", json_object_new_boolean(s->best_effort));
        json_object_object_add(o, "network", json_object_new_string("none"));
        json_object_object_add(o, "user", json_object_new_string(sandbox_user_to_string(s->user)));
        json_object_object_add(o, "created", json_object_new_string(format_utc(ts, s->created_usec)));
        json_object_object_add(o, "restarted_at", s->restored_usec ? json_object_new_string(format_utc(ts,
                                                                                                     s->restored_usec))
                                                                   : NULL);
        if (s->ctx->sandbox_hooks && s->ctx->sandbox_hooks->to_json)
                s->ctx->sandbox_hooks->to_json(s, o);
        if (with_usage) {
                json_object_object_add(o, "usage", sandbox_usage_json(s));
                json_object_object_add(o, "runs_in_flight", json_object_new_int((int) s->n_runs));
        }
        return o;
}

void sandbox_run_finished(Sandbox *s, Run *r) {
        if (s->ephemeral && !s->runs && !s->pending_runs && s->state != SANDBOX_DESTROYING)
                sandbox_destroy(s, "throwaway run finished");
        else if (s->state == SANDBOX_DESTROYING)
                sandbox_teardown_step(s);
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

/* A new cgroup, as a new sandbox gets: a cgroup once killed through cgroup.kill may kill what
 * is later cloned into it (seen on 6.18: the new init died of SIGKILL at birth). */
static int sandbox_renew_cgroup(Sandbox *s) {
        s->cg_fd = safe_close(s->cg_fd);
        free(s->cg_rel);
        s->cg_rel = NULL;
        int r = cg_remove_tree(s->ctx->cg.sandboxes_fd, s->id);
        if (r < 0)
                return r;
        return sandbox_make_cgroup(s);
}

/* Everything is gone: swap, then a new init as for a new sandbox. */
static void sandbox_restart_respawn(Sandbox *s) {
        _cleanup_close_ int dfd = -EBADF;
        SandboxRestart *rs = s->restart;
        int r = rs->swap(s, rs->userdata), k;

        if (r < 0)
                log_warning("sandbox %s: the workspace was not replaced: %s", s->id, strerror(-r));
        /* The workspace may be another inode now. */
        dfd = openat(s->ctx->state_fd, s->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd >= 0) {
                safe_close(s->workdir_fd);
                s->workdir_fd = openat(dfd, "work", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        s->init_ready = false;
        k = sandbox_renew_cgroup(s);
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
        s->state = SANDBOX_CREATING;
        for (Run *r = s->runs; r; r = r->next)
                run_kill(r, SIGKILL, REASON_KILLED);
        pty_sandbox_destroying(s); /* sessions end as when the sandbox goes */
        (void) cg_kill(s->cg_fd);
        sandbox_restart_step(s);
        return killed;
}
