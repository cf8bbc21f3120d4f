/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* snapshot, snapshot.list, snapshot.restore, snapshot.delete, and create with from_snapshot. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manager.h"
#include "ops.h"
#include "sandbox.h"
#include "snapshot-job.h"
#include "snapshot.h"

static const char *state_word(const Sandbox *s) {
        switch (s->state) {
        case SANDBOX_CREATING: return "not ready yet";
        case SANDBOX_DESTROYING: return "being destroyed";
        case SANDBOX_FAILED: return "broken (its init died)";
        default: return "ready";
        }
}

/* The caller's ready, persistent sandbox with no copy in flight. */
static int lookup_for_job(Request *c, json_object *req, Sandbox **ret, ProtoError *err) {
        Sandbox *s;
        int r = ops_lookup_sandbox(c, req, &s, err);
        if (r < 0)
                return r;
        if (s->ephemeral)
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox", "sandbox %s is a throwaway one (made for one run)",
                                       s->id);
        if (s->state != SANDBOX_READY)
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox", "sandbox %s is %s", s->id, state_word(s));
        if (sandbox_caller_workspace(s))
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox",
                                       "the workspace of sandbox %s is the caller's directory: snapshots are of workspaces "
                                       "sandboxd owns", s->id);
        if (s->job)
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox",
                                       "sandbox %s is busy with another snapshot, restore or fork", s->id);
        if (s->root_path)
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox",
                                       "the root of sandbox %s is a host directory (root.path): snapshots are of "
                                       "workspaces sandboxd owns", s->id);
        if (s->user_frozen)
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox", "sandbox %s is frozen (sandbox.thaw resumes it)", s->id);
        *ret = s;
        return 0;
}

/* A snapshot reference: "<sandbox>/<snap-id>" (the sandbox by id, name or "UID/NAME": the id
 * follows the last slash) or "<snap-id>" alone. Returns the snapshot id; *ret_named is the sandbox
 * the prefix names among those the caller may see (NULL: none, or no prefix: *ret_prefixed). */
static const char *snapshot_ref(Request *c, const char *spec, Sandbox **ret_named, bool *ret_prefixed) {
        const char *slash = strrchr(spec, '/');
        char key[SBX_MAX_ID_LEN + 1];

        *ret_named = NULL;
        *ret_prefixed = slash;
        if (!slash)
                return spec;
        snprintf(key, sizeof(key), "%.*s", (int) (slash - spec), spec);
        *ret_named = ops_resolve_sandbox(c, key);
        return slash + 1;
}

/* "snap-...", or "<sandbox>/snap-..." as from_snapshot takes it, where that sandbox must be s: a
 * snapshot is restored into, or deleted from, its own sandbox only. A prefix that names no
 * sandbox the caller may see is an unknown snapshot. */
static int get_snapshot_arg(Request *c, json_object *req, Sandbox *s, SnapshotInfo *ret, ProtoError *err) {
        const char *snap = NULL, *spec;
        Sandbox *named;
        bool prefixed;
        int r = proto_get_string(req, "snapshot", 200, &snap, err);

        if (r < 0)
                return r;
        if (snap) {
                spec = snap;
                snap = snapshot_ref(c, spec, &named, &prefixed);
                if (prefixed && named && named != s)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "snapshot",
                                               "snapshot '%.100s' is of another sandbox than %s (a snapshot of another "
                                               "sandbox is forked with create's from_snapshot)", spec, s->id);
                if (prefixed && !named)
                        return proto_error_set(err, SBX_E_NOT_FOUND, "snapshot", "sandbox %s has no snapshot '%.100s'",
                                               s->id, spec);
        }
        if (!snap || snapshot_get(s, snap, ret) < 0)
                return proto_error_set(err, SBX_E_NOT_FOUND, "snapshot", "sandbox %s has no snapshot '%.64s'", s->id,
                                       snap ? snap : "");
        return 0;
}

static int check_label(const char *label, ProtoError *err) {
        if (strlen(label) > SNAPSHOT_LABEL_MAX)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "label", "'label' is longer than %d bytes",
                                       SNAPSHOT_LABEL_MAX);
        /* C1 controls too (U+0080-U+009F, 0xc2 0x80-0x9f in UTF-8): some terminals act on them. */
        for (const unsigned char *p = (const unsigned char *) label; *p; p++)
                if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "label",
                                               "'label' must not contain control characters");
        return 0;
}

int op_snapshot(Request *c, json_object *id, json_object *req, ProtoError *err) {
        const char *label = NULL;
        SnapshotInfo *list = NULL;
        size_t n = 0;
        Sandbox *s;
        int r = lookup_for_job(c, req, &s, err);

        if (r < 0)
                return r;
        if ((r = proto_get_string(req, "label", 4096, &label, err)) < 0 || (label && (r = check_label(label, err)) < 0))
                return r;
        if (snapshot_list(s, &list, &n) < 0)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "cannot read the sandbox's snapshots");
        free(list);
        if (n >= SNAPSHOT_MAX_PER_SANDBOX)
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "sandbox",
                                       "sandbox %s has its maximum of %d snapshots; delete one first", s->id,
                                       SNAPSHOT_MAX_PER_SANDBOX);
        return snapshot_job_snapshot(s, c->reply, label, err);
}

int op_snapshot_list(Request *c, json_object *id, json_object *req, ProtoError *err) {
        json_object *reply;
        Sandbox *s;
        int r = ops_lookup_sandbox(c, req, &s, err);
        if (r < 0)
                return r;
        reply = json_object_new_object();
        json_object_object_add(reply, "sandbox", json_object_new_string(s->id));
        json_object_object_add(reply, "snapshots", snapshot_list_json(s));
        reply_ok(c->reply, reply);
        return 0;
}

int op_snapshot_restore(Request *c, json_object *id, json_object *req, ProtoError *err) {
        SnapshotInfo info;
        Sandbox *s;
        int r = lookup_for_job(c, req, &s, err);
        if (r < 0 || (r = get_snapshot_arg(c, req, s, &info, err)) < 0)
                return r;
        return snapshot_job_restore(s, c->reply, &info, err);
}

int op_snapshot_delete(Request *c, json_object *id, json_object *req, ProtoError *err) {
        SnapshotInfo info;
        json_object *reply;
        Sandbox *s;
        int r = ops_lookup_sandbox(c, req, &s, err);

        if (r < 0 || (r = get_snapshot_arg(c, req, s, &info, err)) < 0)
                return r;
        r = snapshot_delete(s, info.id);
        if (r == -EBUSY)
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox",
                                       "sandbox %s is busy with a snapshot, restore or fork", s->id);
        if (r == -ENOENT)
                return proto_error_set(err, SBX_E_NOT_FOUND, "snapshot", "sandbox %s has no snapshot '%s'", s->id, info.id);
        if (r < 0)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "cannot delete snapshot %s: %s", info.id, strerror(-r));
        reply = json_object_new_object();
        json_object_object_add(reply, "deleted", json_object_new_string(info.id));
        reply_ok(c->reply, reply);
        return 0;
}

/* A snapshot reference (snapshot_ref()); a "<snap-id>" alone is looked for among the caller's
 * sandboxes: snapshot ids are unique. */
static int find_source(Request *c, const char *spec, Sandbox **ret_src, SnapshotInfo *ret_info, ProtoError *err) {
        Sandbox *s;
        bool prefixed;
        const char *snap = snapshot_ref(c, spec, &s, &prefixed);

        if (prefixed) {
                if (s && s->state != SANDBOX_DESTROYING && snapshot_get(s, snap, ret_info) >= 0) {
                        *ret_src = s;
                        return 0;
                }
        } else if (snapshot_id_valid(snap))
                for (s = registry_first(c->ctx->registry); s; s = registry_next(&s->entry))
                        if (sandbox_visible_to(s, reply_peer(c->reply)) && s->state != SANDBOX_DESTROYING &&
                            snapshot_get(s, snap, ret_info) >= 0) {
                                *ret_src = s;
                                return 0;
                        }
        return proto_error_set(err, SBX_E_NOT_FOUND, "from_snapshot", "no snapshot '%.100s'", spec);
}

static void limit_add(json_object *limits, const char *key, json_object *v) {
        if (json_object_object_get_ex(limits, key, NULL))
                json_object_put(v); /* given: the request's */
        else
                json_object_object_add(limits, key, v);
}

static json_object *duration_json(uint64_t usec) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%lluus", (unsigned long long) usec);
        return json_object_new_string(buf);
}

/* A fork is its source again: its limits are the source's, each unless the request gives it,
 * and so is best_effort (a source that runs only best-effort here would be refused otherwise).
 * disk and files only where the source had more than the defaults, which are the sweep's where
 * quotas are missing and must not turn into a refused request. */
static int fork_inherit_limits(Context *m, const Sandbox *src, json_object *req, ProtoError *err) {
        const SandboxLimits *l = &src->limits;
        json_object *limits = NULL;
        uint64_t files;
        char cpus[32];

        if (json_object_object_get_ex(req, "limits", &limits) && !json_object_is_type(limits, json_type_object)) {
                if (json_object_is_type(limits, json_type_null))
                        limits = NULL;
                else
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "limits", "'limits' must be an object");
        }
        if (!limits) {
                limits = json_object_new_object();
                json_object_object_add(req, "limits", limits);
        }
        limit_add(limits, "memory", json_object_new_int64((int64_t) l->memory));
        if (l->pids)
                limit_add(limits, "pids", json_object_new_int64((int64_t) l->pids));
        if (l->millicpus) {
                snprintf(cpus, sizeof(cpus), "%llu.%03llu", (unsigned long long) (l->millicpus / 1000),
                         (unsigned long long) (l->millicpus % 1000));
                limit_add(limits, "cpus", json_object_new_string(cpus));
        }
        limit_add(limits, "timeout_s", duration_json(l->timeout_usec));
        limit_add(limits, "output_bytes", json_object_new_int64((int64_t) l->output_bytes));
        limit_add(limits, "file_size", json_object_new_int64((int64_t) l->file_size));
        limit_add(limits, "open_files", json_object_new_int64((int64_t) l->open_files));
        if (l->disk != m->config.default_disk)
                limit_add(limits, "disk", json_object_new_int64((int64_t) l->disk));
        files = m->config.default_files ?: config_files_for_bytes(l->disk);
        if (m->config.max_files && (files == 0 || files > m->config.max_files))
                files = m->config.max_files;
        if (l->files != files)
                limit_add(limits, "files", json_object_new_int64((int64_t) l->files));
        if (src->best_effort && !json_object_object_get_ex(req, "best_effort", NULL))
                json_object_object_add(req, "best_effort", json_object_new_boolean(true));
        return 0;
}

int op_create_from_snapshot(Request *c, json_object *id, json_object *req, ProtoError *err) {
        const char *spec = NULL;
        SnapshotInfo info;
        Sandbox *src = NULL, *s;
        int r = proto_get_string(req, "from_snapshot", 200, &spec, err);

        if (r < 0 || (r = find_source(c, spec ? spec : "", &src, &info, err)) < 0)
                return r;
        /* A fork's root is its source's unless the request says (a fork of a sandbox with
         * packages installed has them), its image too (the upper layer is written over it). */
        if (src && src->root_overlay && !json_object_object_get_ex(req, "root", NULL))
                json_object_object_add(req, "root", json_object_new_string("overlay"));
        if (src && src->image && !json_object_object_get_ex(req, "image", NULL))
                json_object_object_add(req, "image", json_object_new_string(src->image));
        if ((r = fork_inherit_limits(c->ctx, src, req, err)) < 0)
                return r;
        r = sandbox_create(c->ctx, req, c->peer.uid, false, &s, err);
        if (r < 0)
                return r;
        r = snapshot_job_fork(s, src, &info, err);
        if (r < 0) {
                sandbox_destroy(s, "fork failed");
                return r;
        }
        /* Answered when the init is ready and the copy is done. */
        sandbox_add_waiter(&s->create_waiters, c->reply);
        return 0;
}
