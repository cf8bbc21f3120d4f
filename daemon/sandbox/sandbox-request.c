/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A create request (or a throwaway run's) read into a sandbox: its name, limits, environment,
 * user, workspace and what the host can enforce of them. Helpers of sandbox.c: they return
 * values and call nothing of its state machine. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup.h"
#include "macro.h"
#include "context.h"
#include "image.h"
#include "request-fields.h"
#include "run-exec.h"
#include "run-spec.h"
#include "sandbox-internal.h"
#include "util.h"

#define SANDBOX_NAME_MAX 64

static bool name_valid(const char *n) {
        size_t len = strlen(n);
        if (len == 0 || len > SANDBOX_NAME_MAX || strncmp(n, "sbx-", 4) == 0 || n[0] == '.' || n[0] == '-')
                return false;
        return strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == len;
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
                               c->default_output_bytes, c->default_disk, .file_size = c->default_file_size,
                               .open_files = c->default_open_files };
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
            (r = proto_get_uint(limits, "files", 0, INT64_MAX, &l->files, err)) < 0 ||
            (r = proto_get_size(limits, "file_size", &l->file_size, err)) < 0 ||
            (r = proto_get_uint(limits, "open_files", 16, INT32_MAX, &l->open_files, err)) < 0) {
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
        /* max_file_size 0: no maximum, and a sandbox may then ask for none (0) as well. */
        if (c->max_file_size && (l->file_size == 0 || l->file_size > c->max_file_size))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "limits.file_size",
                                       "'limits.file_size' must be set and at most the configured maximum (%" PRIu64 ")",
                                       c->max_file_size);
        if (l->open_files > c->max_open_files)
                return limit_over("limits.open_files", err, c->max_open_files);
        /* A command cannot raise its hard limit inside the sandbox's user namespace. */
        if (c->nofile_hard && l->open_files > c->nofile_hard)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "limits.open_files",
                                       "'limits.open_files' exceeds the daemon's own RLIMIT_NOFILE (%" PRIu64 ")",
                                       c->nofile_hard);
        return 0;
}

static bool limit_given(json_object *limits, const char *key) {
        json_object *v;
        return limits && json_object_object_get_ex(limits, key, &v) && !json_object_is_type(v, json_type_null);
}

/* Honest reporting: a limit this host cannot enforce is refused unless best_effort. One the
 * request did not give is the configured default: the message says so, and field best_effort
 * names what to change (the caller never wrote limits.memory). */
static int check_enforceable(Context *m, json_object *limits, bool best_effort, unsigned *ret_enforced,
                             ProtoError *err) {
        static const struct {
                unsigned mask;
                const char *key, *field, *controller, *conf;
        } need[] = {
                { CG_MEMORY, "memory", "limits.memory", "memory", "default_memory" },
                { CG_PIDS, "pids", "limits.pids", "pids", "default_pids" },
                { CG_CPU, "cpus", "limits.cpus", "cpu", "default_cpus" },
        };
        for (size_t i = 0; i < ELEMENTSOF(need) && !best_effort; i++)
                if (!(m->cg.enforceable & need[i].mask) && limit_given(limits, need[i].key))
                        return proto_error_set(err, SBX_E_LIMIT_UNENFORCEABLE, need[i].field,
                                               "the cgroup v2 '%s' controller is not available to sandboxd on this host, "
                                               "so '%s' cannot be enforced; pass best_effort to run anyway",
                                               need[i].controller, need[i].field);
        for (size_t i = 0; i < ELEMENTSOF(need) && !best_effort; i++) {
                if (m->cg.enforceable & need[i].mask)
                        continue;
                return proto_error_set(err, SBX_E_LIMIT_UNENFORCEABLE, "best_effort",
                                       "this host cannot enforce every limit: the cgroup v2 '%s' controller is not "
                                       "available to sandboxd, so not even the default %s limit (%s) can be "
                                       "enforced; pass best_effort to run anyway with what it can enforce",
                                       need[i].controller, need[i].key, need[i].conf);
        }
        *ret_enforced = m->cg.enforceable & (CG_MEMORY | CG_PIDS | CG_CPU);
        return 0;
}

/* A disk or file limit the request asks for, on a host whose sandbox storage has no project
 * quotas: refused unless best_effort, like the cgroup limits. One that only comes from
 * default_disk is not asked for: it stays the sweep's, and the sandbox says enforced.disk
 * false (a configured default must not make every create fail where quotas are missing). */
static int check_disk_enforceable(Context *m, Sandbox *s, json_object *limits, ProtoError *err) {
        if ((m->features.disk_quota && m->features.files_quota) || s->best_effort || s->memory_workspace)
                return 0;
        if (m->features.disk_quota && limit_given(limits, "files"))
                return proto_error_set(err, SBX_E_LIMIT_UNENFORCEABLE, "limits.files",
                                       "'limits.files' cannot be enforced on this host: btrfs qgroups count bytes, not "
                                       "files (hello: capabilities.disk.files_enforced); pass best_effort to have the "
                                       "sweep apply it after the fact");
        for (const char *const *k = (const char *const[]) { "disk", "files", NULL }; *k; k++)
                if (!m->features.disk_quota && limit_given(limits, *k))
                        return proto_error_set(err, SBX_E_LIMIT_UNENFORCEABLE, *k[0] == 'd' ? "limits.disk" : "limits.files",
                                               "'limits.%s' cannot be enforced on this host: the sandboxes' storage has "
                                               "no project quotas (hello: capabilities.disk.how; sandboxd.conf(5) "
                                               "storage); pass best_effort to have the sweep apply it after the fact", *k);
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

/* Where a mount may go: beneath /work (not /work itself: that is the workspace), or at or
 * beneath /mnt, /opt, /srv, /home. Never over, beneath or above a root_bind or a mask. */
/* In a root.path sandbox: anywhere in its root but /, /proc, /sys and /dev (/dev/shm is fine),
 * and never over, beneath or above another mount. */
static int mount_target_check_own_root(const Sandbox *s, const char *t, const char *field, ProtoError *err) {
        if (strcmp(t, "/") == 0 || path_is_below(t, "/proc") || path_is_below(t, "/sys") ||
            (path_is_below(t, "/dev") && !path_is_below(t, "/dev/shm")))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                       "'%s' must not be /, nor at or beneath /proc, /sys or /dev (but /dev/shm): "
                                       "those are the sandbox's own", field);
        for (unsigned i = 0; i < s->n_mounts; i++)
                if (path_is_below(t, s->mounts[i].target) || path_is_below(s->mounts[i].target, t))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                               "'%s' is, contains or lies beneath the target of mounts[%u]", field,
                                               i - (sandbox_caller_workspace(s) ? 1 : 0));
        return 0;
}

static int mount_target_check(Context *m, const Sandbox *s, const char *t, const char *field, ProtoError *err) {
        static const char *const allowed[] = { "/mnt", "/opt", "/srv", "/home" };
        bool ok = path_is_below(t, "/work") && strcmp(t, "/work") != 0;

        if (!path_is_normal(t, PATH_MAX))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                       "'%s' must be an absolute normal path (no '.', '..', '//' or trailing '/')", field);
        if (s->root_path)
                return mount_target_check_own_root(s, t, field, err);
        for (size_t i = 0; i < ELEMENTSOF(allowed); i++)
                ok = ok || path_is_below(t, allowed[i]);
        if (!ok)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                       "'%s' must be beneath /work, or at or beneath /mnt, /opt, /srv or /home "
                                       "(never /proc, /dev, /sys, /usr, /etc, /run, /tmp, /var or /)", field);
        for (char **b = m->config.root_binds; b && *b; b++)
                if (path_is_below(t, *b) || path_is_below(*b, t))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, field, "'%s' overlaps root_bind %s", field, *b);
        if (path_is_below(t, m->config.state_dir) || path_is_below(m->config.state_dir, t))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                       "'%s' overlaps a path the daemon masks (its state directory)", field);
        for (unsigned i = 0; i < m->n_masked; i++)
                if (m->masked_paths[i] && (path_is_below(t, m->masked_paths[i]) || path_is_below(m->masked_paths[i], t)))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, field, "'%s' overlaps a path the daemon masks", field);
        for (unsigned i = 0; i < s->n_mounts; i++) {
                if (i == 0 && sandbox_caller_workspace(s) && path_is_below(t, "/work"))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                               "'%s' lies in the caller's workspace (workspace.source): mount it at /mnt, "
                                               "/opt, /srv or /home instead", field);
                if (path_is_below(t, s->mounts[i].target) || path_is_below(s->mounts[i].target, t))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                               "'%s' is, contains or lies beneath the target of mounts[%u]", field,
                                               i - (sandbox_caller_workspace(s) ? 1 : 0));
        }
        return 0;
}

void sandbox_mounts_free(Sandbox *s) {
        for (unsigned i = 0; i < s->n_mounts; i++) {
                free(s->mounts[i].source);
                free(s->mounts[i].target);
                s->mounts[i].tree_fd = safe_close(s->mounts[i].tree_fd);
        }
        s->n_mounts = 0;
}

/* "mounts": [{"source", "target", "read_only"}], at most SANDBOX_MOUNTS_MAX, checked as text here;
 * sources are opened later, as the caller (sandbox_open_mounts()). */
/* create's "workspace": {"source": DIR}: the caller's directory as /work, opened and idmapped
 * as a mount is (mounts[0], target /work). limits.disk and limits.files are not sandboxd's to
 * enforce on it. */
static int parse_workspace_source(Sandbox *s, json_object *ws, json_object *req, ProtoError *err) {
        json_object *limits, *v;
        const char *src;
        int r = proto_check_fields(ws, request_workspace_fields, "workspace.", err);

        if (r < 0)
                return r;
        src = json_object_get_string(json_object_object_get(ws, "source"));
        if (!path_is_normal(src, PATH_MAX))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "workspace.source",
                                       "'workspace.source' must be an absolute normal path (no '.', '..', '//' or trailing '/')");
        if (json_object_object_get_ex(req, "limits", &limits) && json_object_is_type(limits, json_type_object))
                for (const char *const *k = (const char *const[]) { "disk", "files", NULL }; *k; k++)
                        if (json_object_object_get_ex(limits, *k, &v) && !json_object_is_type(v, json_type_null))
                                return proto_error_set(err, SBX_E_INVALID_REQUEST, *k[0] == 'd' ? "limits.disk" : "limits.files",
                                                       "'limits.%s' cannot be combined with workspace.source: the caller's "
                                                       "disk is not the daemon's to budget", *k);
        s->mounts[0] = (SandboxMount) { .source = strdup(src), .target = strdup("/work"), .tree_fd = -EBADF };
        s->n_mounts = 1;
        if (!s->mounts[0].source || !s->mounts[0].target)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        return 0;
}

static int parse_mounts(Context *m, Sandbox *s, json_object *mounts, ProtoError *err) {
        size_t n;
        int r;

        if (!mounts || json_object_is_type(mounts, json_type_null))
                return 0;
        n = json_object_array_length(mounts);
        if (n > SANDBOX_MOUNTS_MAX)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "mounts", "'mounts' has at most %d entries",
                                       SANDBOX_MOUNTS_MAX);
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(mounts, i), *v;
                char prefix[32], field[48];
                const char *src, *dst, *idmap = NULL;
                SandboxMount *sm;

                snprintf(prefix, sizeof(prefix), "mounts[%zu].", i);
                if (!json_object_is_type(e, json_type_object))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "mounts", "'mounts[%zu]' must be an object", i);
                r = proto_check_fields(e, request_mount_fields, prefix, err);
                if (r < 0)
                        return r;
                src = json_object_get_string(json_object_object_get(e, "source"));
                dst = json_object_get_string(json_object_object_get(e, "target"));
                snprintf(field, sizeof(field), "mounts[%zu].source", i);
                if (!path_is_normal(src, PATH_MAX))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                               "'%s' must be an absolute normal path (no '.', '..', '//' or trailing '/')",
                                               field);
                snprintf(field, sizeof(field), "mounts[%zu].target", i);
                r = mount_target_check(m, s, dst, field, err);
                if (r < 0)
                        return r;
                sm = &s->mounts[s->n_mounts];
                *sm = (SandboxMount) { .source = strdup(src), .target = strdup(dst), .tree_fd = -EBADF };
                s->n_mounts++;
                if (!sm->source || !sm->target)
                        return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
                sm->read_only = json_object_object_get_ex(e, "read_only", &v) && json_object_get_boolean(v);
                snprintf(field, sizeof(field), "mounts[%zu].idmap", i);
                if ((r = proto_get_string(e, "idmap", 16, &idmap, err)) < 0)
                        return r;
                if (idmap && strcmp(idmap, "same") != 0 && strcmp(idmap, "caller") != 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                               "'%s' must be \"caller\" (the default: your uid and gid are the sandbox "
                                               "user's inside) or \"same\"", field);
                sm->idmap_same = idmap && strcmp(idmap, "same") == 0;
                if (sm->idmap_same && (s->caller.uid != 0 || s->caller.gid == (gid_t) -1))
                        return proto_error_set(err, SBX_E_PERMISSION_DENIED, field,
                                               "'%s': \"same\" (host ids as they are inside) is for root clients only", field);
        }
        return 0;
}

/* Whether the sandbox's caller is root or in admin_group, as far as its groups are known. */
static bool caller_is_admin(Context *m, const SandboxCaller *c) {
        if (c->uid == 0)
                return true;
        if (!m->have_admin_gid || c->gid == (gid_t) -1)
                return false;
        if (c->gid == m->admin_gid)
                return true;
        for (unsigned i = 0; i < c->n_groups; i++)
                if (c->groups[i] == m->admin_gid)
                        return true;
        return false;
}

/* "image": an image of the store, which the sandbox holds from here (sandbox_free() lets go). */
static int parse_image(Context *m, Sandbox *s, json_object *req, ProtoError *err) {
        const char *name = NULL;
        Image *img;
        int r = proto_get_string(req, "image", 128, &name, err);

        if (r < 0 || !name)
                return r;
        img = image_name_valid(name) ? image_find(m->images, name) : NULL;
        if (!img)
                return proto_error_set(err, SBX_E_NOT_FOUND, "image", "no image '%.64s' (image.list shows them)", name);
        if (!image_usable_by(img, s->owner_uid, caller_is_admin(m, &s->caller)))
                return proto_error_set(err, SBX_E_PERMISSION_DENIED, "image",
                                       "image '%.64s' is owner-only: only uid %u, who imported it, and admins may use it", name,
                                       (unsigned) img->importer);
        if (!m->features.mount_idmap)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "image",
                                       "this kernel has no idmapped mounts (mount_setattr MOUNT_ATTR_IDMAP): a sandbox cannot "
                                       "see an image's files with their owners");
        if (m->images && !m->images->idmap)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "image",
                                       "the filesystem of the image store (%s) cannot be idmapped on this kernel (%s): a sandbox "
                                       "cannot see an image with its owners; keep the state directory on ext4, xfs or btrfs "
                                       "(tmpfs from Linux 6.3)", m->images->dir, strerror(m->images->idmap_error));
        if (!(s->image = strdup(name)))
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        image_hold(img);
        return 0;
}

/* create's "root": {"tree_fd"}: the fd (op-sandbox.c took it: s->root_sent_tree_fd) of a detached
 * tree of the path the client made in its own mount namespace. Such a sandbox is never recorded
 * (transient, as one that joined a network namespace): a restarted daemon would find only the
 * path, which its own namespace may show empty. */
static int parse_root_tree(Sandbox *s, json_object *root, ProtoError *err) {
        if (!json_object_object_get_ex(root, "tree_fd", NULL)) {
                if (s->root_sent_tree_fd >= 0)
                        return proto_error_set(err, SBX_E_INTERNAL, "root", "a mount tree came without root.tree_fd");
                return 0;
        }
        if (s->root_sent_tree_fd < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "root.tree_fd",
                                       "'root.tree_fd' is for create with the tree's fd passed along");
        s->root_from_tree = true;
        s->transient = true;
        return 0;
}

/* create's "root": {"path", "read_only", "tree_fd"}: a host directory as the whole root (root
 * clients only), opened and idmapped later (sandbox_open_mounts()); checked as text here. */
static int parse_root_path(Context *m, Sandbox *s, json_object *root, json_object *req, ProtoError *err) {
        const char *path;
        int r = proto_check_fields(root, request_root_fields, "root.", err);

        if (r < 0 || (r = proto_get_bool(root, "read_only", &s->root_read_only, err)) < 0)
                return r;
        if (s->caller.uid != 0 || s->caller.gid == (gid_t) -1)
                return proto_error_set(err, SBX_E_PERMISSION_DENIED, "root.path",
                                       "'root.path' (a host directory as the sandbox's root) is for root clients only");
        path = json_object_get_string(json_object_object_get(root, "path"));
        if (!path_is_normal(path, PATH_MAX) || strcmp(path, "/") == 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "root.path",
                                       "'root.path' must be an absolute normal path (no '.', '..', '//' or trailing '/'), "
                                       "not /");
        if (json_object_object_get_ex(req, "image", NULL) || json_object_object_get_ex(req, "from_snapshot", NULL))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "root.path",
                                       "'root.path' cannot be combined with 'image' or 'from_snapshot'");
        if (!m->features.mount_idmap)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "root.path",
                                       "this kernel has no idmapped mounts (mount_setattr MOUNT_ATTR_IDMAP): a sandbox "
                                       "cannot see the directory's files with their owners");
        if (!(s->root_path = strdup(path)))
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        return parse_root_tree(s, root, err);
}

/* create's "root": "readonly" (the default) or "overlay" (root-overlay.h), where the host can
 * make one (probed at start: hello's capabilities.root_overlay), or {"path"} (parse_root_path()). */
static int parse_root(Context *m, Sandbox *s, json_object *req, ProtoError *err) {
        json_object *obj = json_object_object_get(req, "root");
        const char *root = NULL;
        int r;

        if (obj && json_object_is_type(obj, json_type_object))
                return parse_root_path(m, s, obj, req, err);
        r = proto_get_string(req, "root", 16, &root, err);
        if (r < 0 || !root)
                return r;
        if (strcmp(root, "overlay") != 0 && strcmp(root, "readonly") != 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "root",
                                       "'root' must be \"readonly\" (the default), \"overlay\" or {\"path\": DIR}");
        s->root_overlay = strcmp(root, "overlay") == 0;
        /* An image's root has its lower layer on the image store's filesystem, the host's root
         * its own: each was probed at start. */
        if (s->root_overlay && json_object_object_get_ex(req, "image", NULL)) {
                if (m->features.image_overlay_error < 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "root",
                                               "overlay roots of images do not work on this host (%s: %s); see hello's "
                                               "capabilities.root_overlay.image",
                                               m->features.image_overlay_step ?: "probe", strerror(-m->features.image_overlay_error));
        } else if (s->root_overlay && m->features.root_overlay_error < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "root",
                                       "overlay roots of the host's root do not work on this host (%s: %s); see hello's "
                                       "capabilities.root_overlay (an image's root may: capabilities.root_overlay.image)",
                                       m->features.root_overlay_step ?: "probe", strerror(-m->features.root_overlay_error));
        return 0;
}

/* create's "hostname": an RFC 1123 label (letters, digits, '-', neither first nor last), at
 * most 64 characters (HOST_NAME_MAX). */
static int parse_hostname(Sandbox *s, json_object *req, ProtoError *err) {
        const char *h = NULL;
        size_t n;
        int r = proto_get_string(req, "hostname", 256, &h, err);

        if (r < 0 || !h)
                return r;
        n = strlen(h);
        if (n == 0 || n > 64 || h[0] == '-' || h[n - 1] == '-' ||
            strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != n)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "hostname",
                                       "'hostname' must be 1-64 of [A-Za-z0-9-], not starting or ending with '-'");
        if (!(s->hostname = strdup(h)))
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        return 0;
}

int sandbox_sysctls_check(json_object *sysctls, ProtoError *err) {
        if (!json_object_is_type(sysctls, json_type_object))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "sysctls", "'sysctls' must be an object of strings");
        if (json_object_object_length(sysctls) > INIT_SYSCTLS_MAX)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "sysctls", "'sysctls': at most %d", INIT_SYSCTLS_MAX);
        json_object_object_foreach(sysctls, k, v) {
                if (!sysctl_name_valid(k))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "sysctls",
                                               "'sysctls': '%.64s' is not a sysctl name (dotted components of "
                                               "[A-Za-z0-9_-], at most 128 characters)", k);
                if (!sysctl_name_namespaced(k))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "sysctls",
                                               "'sysctls': %s is not a sysctl of the sandbox's own namespaces (net.*, "
                                               "kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*): it is the host's; refused", k);
                if (!json_object_is_type(v, json_type_string) ||
                    !sysctl_value_valid(json_object_get_string(v), (size_t) json_object_get_string_len(v)))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "sysctls",
                                               "'sysctls': the value of %s must be a string of 1-256 printable characters", k);
        }
        return 0;
}

static int parse_sysctls(Sandbox *s, json_object *req, ProtoError *err) {
        json_object *v;
        int r;

        if (!json_object_object_get_ex(req, "sysctls", &v) || json_object_is_type(v, json_type_null))
                return 0;
        if ((r = sandbox_sysctls_check(v, err)) < 0)
                return r;
        if (json_object_object_length(v) > 0)
                s->sysctls = json_object_get(v);
        return 0;
}

int sandbox_paths_check(json_object *paths, const char *field, ProtoError *err) {
        size_t n;

        if (!json_object_is_type(paths, json_type_array) || (n = json_object_array_length(paths)) > INIT_PATHS_MAX)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field, "'%s' must be an array of at most %d paths",
                                       field, INIT_PATHS_MAX);
        for (size_t i = 0; i < n; i++) {
                json_object *v = json_object_array_get_idx(paths, i);
                const char *p = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
                if (!p || !path_is_normal(p, 1024) || strcmp(p, "/") == 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                               "'%s[%zu]' must be an absolute, normal path inside (no '..', '.' or '//'; "
                                               "not '/'), at most 1024 bytes", field, i);
        }
        return 0;
}

static int parse_paths(json_object *req, const char *field, json_object **ret, ProtoError *err) {
        json_object *v;
        int r;

        if (!json_object_object_get_ex(req, field, &v) || json_object_is_type(v, json_type_null))
                return 0;
        if ((r = sandbox_paths_check(v, field, err)) < 0)
                return r;
        if (json_object_array_length(v) > 0)
                *ret = json_object_get(v);
        return 0;
}

/* "network": "none", {"egress"} (egress.h), or {"netns_fd": i}: the namespace that came with the
 * request (op-sandbox.c checked and took it: s->join_netns_fd). Such a sandbox is never recorded,
 * since a restarted daemon could not join that namespace again. */
static int parse_network(Context *m, Sandbox *s, json_object *net, ProtoError *err) {
        int r;

        if (!net || !json_object_is_type(net, json_type_object) || !json_object_object_get_ex(net, "netns_fd", NULL)) {
                if (s->join_netns_fd >= 0)
                        return proto_error_set(err, SBX_E_INTERNAL, "network", "a network namespace came without network.netns_fd");
                if ((r = egress_parse(m, net, &s->net, err)) < 0 || (s->net.egress && (r = egress_check(m, err)) < 0))
                        return r;
                return 0;
        }
        if (json_object_object_length(net) != 1)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "network",
                                       "'network' with 'netns_fd' takes nothing else (no egress of the daemon's)");
        if (s->join_netns_fd < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "network.netns_fd",
                                       "'network.netns_fd' is for create with the namespace's fd passed along");
        if (s->ctx->run_helper_fd < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "network.netns_fd",
                                       "joining a network namespace needs " RUN_HELPER_NAME ", which was not found at start");
        s->transient = true;
        return 0;
}

int sandbox_parse(Context *m, Sandbox *s, json_object *req, ProtoError *err) {
        json_object *limits = NULL, *env = NULL;
        const char *name = NULL, *workspace = NULL;
        json_object *ws = json_object_object_get(req, "workspace");
        bool ws_source = ws && json_object_is_type(ws, json_type_object), ephemeral = false;
        int r;

        if ((r = proto_get_string(req, "name", SANDBOX_NAME_MAX, &name, err)) < 0 ||
            (!ws_source && (r = proto_get_string(req, "workspace", 16, &workspace, err)) < 0) ||
            (r = proto_get_bool(req, "best_effort", &s->best_effort, err)) < 0 ||
            (r = sandbox_user_parse(req, &s->user, err)) < 0)
                return r;
        if (name && !name_valid(name))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "name",
                                       "'name' must be 1-64 of [A-Za-z0-9._-], not starting with 'sbx-', '.' or '-'");
        /* Per owner: another user's names are neither told nor taken (THREATS PRO-09). */
        if (name && registry_find_named(m->registry, s->owner_uid, name))
                return proto_error_set(err, SBX_E_CONFLICT, "name", "you have a sandbox named '%s' already", name);
        if ((r = parse_network(m, s, json_object_object_get(req, "network"), err)) < 0)
                return r;
        if (workspace && strcmp(workspace, "memory") != 0 && strcmp(workspace, "disk") != 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "workspace",
                                       "'workspace' must be \"memory\" (the default) or \"disk\"");
        /* Only a throwaway run has the field (create's field list refuses it). */
        s->memory_workspace = s->ephemeral && !(workspace && strcmp(workspace, "disk") == 0);
        s->unprivileged_only = s->ephemeral && s->user != SANDBOX_USER_ROOT;
        if ((r = parse_root(m, s, req, err)) < 0 || (r = parse_hostname(s, req, err)) < 0 ||
            (r = parse_sysctls(s, req, err)) < 0 || (r = parse_paths(req, "masked_paths", &s->masked_paths, err)) < 0 ||
            (r = parse_paths(req, "readonly_paths", &s->readonly_paths, err)) < 0 ||
            (r = proto_get_bool(req, "ephemeral", &ephemeral, err)) < 0 ||
            (r = proto_get_bool(req, "with_connection", &s->with_connection, err)) < 0)
                return r;
        /* One that ends with a connection is never brought back by a restarted daemon either. */
        s->transient = s->transient || ephemeral || s->with_connection; /* a joined namespace makes it so (parse_network()) */
        /* A root.path has no /work unless a mount asks for one: an ephemeral one nothing in the
         * state directory (a recorded one its record's directory, with an unused work/). */
        if (s->root_path && s->transient)
                s->memory_workspace = true;
        (void) json_object_object_get_ex(req, "limits", &limits);
        if (limits && json_object_is_type(limits, json_type_null))
                limits = NULL;
        r = parse_limits(m, limits, &s->limits, err);
        if (r < 0)
                return r;
        r = check_disk_enforceable(m, s, limits, err);
        if (r < 0 || (r = check_enforceable(m, limits, s->best_effort, &s->enforced, err)) < 0 ||
            (r = parse_sweep_fields(m, s, req, err)) < 0)
                return r;
        if (json_object_object_get_ex(req, "env", &env) && json_object_is_type(env, json_type_object)) {
                r = sandbox_env_check(env, err);
                if (r < 0)
                        return r;
                s->env = json_object_get(env);
        }
        if (name && !(s->name = strdup(name)))
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        if (ws_source && (r = parse_workspace_source(s, ws, req, err)) < 0)
                return r;
        if ((r = parse_image(m, s, req, err)) < 0)
                return r;
        return parse_mounts(m, s, json_object_object_get(req, "mounts"), err);
}

int sandbox_parse_request(Context *m, json_object *req, SandboxRequest *ret, ProtoError *err) {
        Sandbox tmp = { .ctx = m, .ephemeral = true, .join_netns_fd = -EBADF, .root_tree_fd = -EBADF,
                        .root_sent_tree_fd = -EBADF };
        int r = sandbox_parse(m, &tmp, req, err);

        *ret = (SandboxRequest) { .limits = tmp.limits, .best_effort = tmp.best_effort,
                                  .disk_workspace = !tmp.memory_workspace, .root = !tmp.unprivileged_only,
                                  .name = tmp.name, .env = tmp.env, .mounts = tmp.n_mounts > 0, .image = tmp.image,
                                  .egress = tmp.net.egress };
        sandbox_mounts_free(&tmp);
        image_release(m->images, tmp.image);
        free(tmp.image);
        free(tmp.root_path);
        free(tmp.hostname);
        json_object_put(tmp.sysctls);
        json_object_put(tmp.masked_paths);
        json_object_put(tmp.readonly_paths);
        if (r < 0)
                sandbox_request_done(ret);
        return r;
}

void sandbox_request_done(SandboxRequest *r) {
        free(r->name);
        json_object_put(r->env);
        *r = (SandboxRequest) {};
}
