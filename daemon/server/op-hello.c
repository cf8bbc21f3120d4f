/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hello: versions and what this host lets sandboxd enforce; health: the cheap liveness probe. */
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "egress.h"
#include "cgroup.h"
#include "connection.h"
#include "image.h"
#include "manager.h"
#include "ops.h"
#include "scope.h"
#include "sandbox.h"
#include "util.h"

/* {"available": bool, "error": why not or null} of one overlay probe (lifecycle.c). */
static json_object *overlay_probe_json(int error, const char *step) {
        json_object *o = json_object_new_object();
        char why[200];

        json_object_object_add(o, "available", json_object_new_boolean(error == 0));
        if (error < 0)
                snprintf(why, sizeof(why), "%s: %s", step ?: "probe", strerror(-error));
        json_object_object_add(o, "error", error < 0 ? json_object_new_string(why) : NULL);
        return o;
}

/* Whether create's "root": "overlay" works here, and if not, why (probed at start): over the
 * host's root (available, error), and over an image (image: the same two). */
static json_object *root_overlay_json(Context *m) {
        json_object *o = overlay_probe_json(m->features.root_overlay_error, m->features.root_overlay_step);

        json_object_object_add(o, "image", overlay_probe_json(m->features.image_overlay_error, m->features.image_overlay_step));
        return o;
}

/* Whether limits.disk is the filesystem's to enforce at write time (project quotas), and how,
 * or why not; where sandboxes' directories live; whether copies there share blocks. */
static json_object *disk_caps_json(Context *m) {
        json_object *o = json_object_new_object();

        json_object_object_add(o, "enforced", json_object_new_boolean(m->features.disk_quota));
        json_object_object_add(o, "how", json_object_new_string(m->features.disk_quota_how));
        json_object_object_add(o, "storage", json_object_new_string(m->features.storage ?: "state"));
        json_object_object_add(o, "reflink", json_object_new_boolean(m->features.reflink));
        json_object_object_add(o, "fs", json_object_new_string(m->features.fs));
        /* "subvolume": a snapshot, fork or restore is one btrfs ioctl, O(1) in the tree's size;
         * "copy": a walk of the tree (blocks shared where reflink is true) */
        json_object_object_add(o, "snapshots", json_object_new_string(m->features.btrfs ? "subvolume" : "copy"));
        json_object_object_add(o, "files_enforced", json_object_new_boolean(m->features.files_quota));
        return o;
}

static json_object *caps_json(Context *m) {
        json_object *caps = json_object_new_object(), *cg = json_object_new_object(), *k = json_object_new_object();
        json_object *roots = json_object_new_array();

        json_object_object_add(cg, "memory", json_object_new_boolean(!!(m->cg.enforceable & CG_MEMORY)));
        json_object_object_add(cg, "pids", json_object_new_boolean(!!(m->cg.enforceable & CG_PIDS)));
        json_object_object_add(cg, "cpu", json_object_new_boolean(!!(m->cg.enforceable & CG_CPU)));
        json_object_object_add(caps, "cgroup", cg);
        json_object_object_add(caps, "disk", disk_caps_json(m));
        json_object_object_add(k, "clone_into_cgroup", json_object_new_boolean(m->features.clone_into_cgroup));
        json_object_object_add(k, "pidfd", json_object_new_boolean(m->features.pidfd));
        json_object_object_add(k, "pidfd_exit_info", json_object_new_boolean(m->features.pidfd_exit_info));
        json_object_object_add(k, "cgroup_kill", json_object_new_boolean(m->cg.has_kill));
        json_object_object_add(k, "memory_peak", json_object_new_boolean(m->cg.has_memory_peak));
        json_object_object_add(k, "pids_peak", json_object_new_boolean(m->cg.has_pids_peak));
        json_object_object_add(k, "mount_idmap", json_object_new_boolean(m->features.mount_idmap));
        json_object_object_add(caps, "kernel", k);
        for (char **r = m->config.mount_roots; r && *r; r++)
                json_object_array_add(roots, json_object_new_string(*r));
        json_object_object_add(caps, "mount_roots", roots);
        json_object_object_add(caps, "cgroup_root", json_object_new_string(m->cg.base));
        /* "scope": each sandbox in a transient scope of its slice (scope_slice_name()), outside the service's
         * cgroup; "subtree": below cgroup_root, where no systemd could make scopes. */
        json_object_object_add(caps, "placement", json_object_new_string(m->scopes ? "scope" : "subtree"));
        json_object_object_add(caps, "slice", m->scopes ? json_object_new_string(scope_manager_slice(m->scopes)) : NULL);
        json_object_object_add(caps, "state_dir", json_object_new_string(m->config.state_dir));
        json_object_object_add(caps, "images", image_store_capabilities(m->images));
        json_object_object_add(caps, "root_overlay", root_overlay_json(m));
        json_object_object_add(caps, "egress", egress_capability_json(m));
        return caps;
}

int op_hello(Request *c, json_object *id, json_object *req, ProtoError *err) {
        json_object *reply = json_object_new_object(), *peer = json_object_new_object();

        json_object_object_add(reply, "protocol", json_object_new_int(SBX_PROTOCOL_VERSION));
        json_object_object_add(reply, "version", json_object_new_string(PACKAGE_VERSION));
        json_object_object_add(reply, "capabilities", caps_json(c->ctx));
        json_object_object_add(peer, "uid", json_object_new_int64(c->peer.uid));
        json_object_object_add(peer, "gid", json_object_new_int64(c->peer.gid));
        json_object_object_add(peer, "pid", json_object_new_int64(c->peer.pid));
        json_object_object_add(reply, "peer", peer);
        reply_ok(c->reply, reply);
        return 0;
}

/* The network namespaces of the pool (netns-pool.h): null where each sandbox makes its own. */
static json_object *netns_json(const NetnsPool *p) {
        json_object *o;

        if (p->host_fd < 0)
                return NULL;
        o = json_object_new_object();
        json_object_object_add(o, "idle", json_object_new_int64((int64_t) p->n_idle));
        json_object_object_add(o, "made", json_object_new_int64((int64_t) p->made));
        json_object_object_add(o, "reused", json_object_new_int64((int64_t) p->reused));
        json_object_object_add(o, "discarded", json_object_new_int64((int64_t) p->discarded));
        return o;
}

/* Root and admins see the daemon's counts; anyone else only their own, as other users'
 * sandboxes and runs do not exist for them (THREATS PRO-09): "scope" says which. */
static void health_counts(Request *c, json_object *reply) {
        Manager *m = c->manager;
        UidUsage u;
        unsigned sandboxes = 0, stuck = 0;

        if (c->admin) {
                json_object_object_add(reply, "scope", json_object_new_string("all"));
                json_object_object_add(reply, "sandboxes", json_object_new_int((int) (registry_count(m->ctx->registry) - registry_count_pooled(m->ctx->registry))));
                json_object_object_add(reply, "runs", json_object_new_int((int) sandbox_count_runs(m->ctx)));
                json_object_object_add(reply, "connections", json_object_new_int((int) m->conns.n));
                json_object_object_add(reply, "quarantined", json_object_new_int((int) m->ctx->registry->n_quarantined));
                json_object_object_add(reply, "teardown_stuck", json_object_new_int((int) sandbox_count_stuck(m->ctx)));
                json_object_object_add(reply, "netns", netns_json(&m->ctx->netns));
                return;
        }
        u = connection_uid_usage(&m->conns, c->peer.uid);
        for (Sandbox *s = registry_first(m->ctx->registry); s; s = registry_next(&s->entry))
                if (!s->pooled && s->owner_uid == c->peer.uid) {
                        sandboxes++;
                        stuck += !!s->teardown_stuck;
                }
        json_object_object_add(reply, "scope", json_object_new_string("caller"));
        json_object_object_add(reply, "sandboxes", json_object_new_int((int) sandboxes));
        json_object_object_add(reply, "runs", json_object_new_int((int) u.runs));
        json_object_object_add(reply, "connections", json_object_new_int((int) u.connections));
        json_object_object_add(reply, "quarantined", NULL);
        json_object_object_add(reply, "teardown_stuck", json_object_new_int((int) stuck));
        json_object_object_add(reply, "netns", NULL);
}

/* ---- capacity: what a placer across machines reads (docs/protocol.md, "health") ---------- */

static json_object *u64_or_null(uint64_t v) {
        return v == UINT64_MAX ? NULL : json_object_new_int64(v > INT64_MAX ? INT64_MAX : (int64_t) v);
}

static uint64_t sub_or_zero(uint64_t a, uint64_t b) {
        return a > b ? a - b : 0;
}

/* A limit of our own subtree (memory.max, pids.max) and what it holds now: UINT64_MAX where the
 * file is not there (no controller) or the limit is "max". */
static void cg_limit_usage(Context *m, const char *max_file, const char *cur_file, uint64_t *ret_max, uint64_t *ret_cur) {
        if (cg_read_u64(m->cg.base_fd, max_file, ret_max) < 0)
                *ret_max = UINT64_MAX;
        if (cg_read_u64(m->cg.base_fd, cur_file, ret_cur) < 0)
                *ret_cur = UINT64_MAX;
}

/* suffix "_bytes" for memory, "" for pids; granted: the limits given to the sandboxes (pooled
 * ones included), UINT64_MAX where the caller may not know it. */
static json_object *cg_capacity_json(Context *m, bool memory, uint64_t granted, uint64_t per_sandbox) {
        json_object *o = json_object_new_object();
        const char *sfx = memory ? "_bytes" : "";
        uint64_t max, cur;
        char key[32];

        cg_limit_usage(m, memory ? "memory.max" : "pids.max", memory ? "memory.current" : "pids.current", &max, &cur);
#define ADD(name, v) (snprintf(key, sizeof(key), "%s%s", name, sfx), json_object_object_add(o, key, (v)))
        ADD("max_per_sandbox", json_object_new_int64((int64_t) per_sandbox));
        ADD("limit", u64_or_null(max));
        ADD("usage", u64_or_null(cur));
        ADD("left", u64_or_null(max == UINT64_MAX || cur == UINT64_MAX ? UINT64_MAX : sub_or_zero(max, cur)));
        ADD("granted", u64_or_null(granted));
        ADD("unreserved", u64_or_null(max == UINT64_MAX || granted == UINT64_MAX ? UINT64_MAX : sub_or_zero(max, granted)));
#undef ADD
        return o;
}

static json_object *sandboxes_capacity_json(Request *c, unsigned in_use, unsigned own) {
        Context *m = c->ctx;
        json_object *o = json_object_new_object();
        uint64_t left = sub_or_zero(m->config.max_sandboxes, in_use), mine = left;

        if (c->peer.uid != 0 && sub_or_zero(m->config.max_sandboxes_per_uid, own) < mine)
                mine = sub_or_zero(m->config.max_sandboxes_per_uid, own);
        json_object_object_add(o, "max", json_object_new_int64((int64_t) m->config.max_sandboxes));
        json_object_object_add(o, "max_per_uid", json_object_new_int64((int64_t) m->config.max_sandboxes_per_uid));
        json_object_object_add(o, "in_use", json_object_new_int64(c->admin ? in_use : own));
        json_object_object_add(o, "left", c->admin ? json_object_new_int64((int64_t) left) : NULL);
        json_object_object_add(o, "left_for_caller", json_object_new_int64((int64_t) mine));
        return o;
}

/* Free space of the state directory's filesystem (workspaces and snapshots live there), and what
 * is left of it before creates are refused (min_free_disk, min_free_files). */
static json_object *disk_capacity_json(Context *m) {
        json_object *o = json_object_new_object();
        uint64_t bytes = UINT64_MAX, files = UINT64_MAX;
        struct statvfs sv;

        if (fstatvfs(m->state_fd, &sv) == 0) {
                bytes = (uint64_t) sv.f_bavail * sv.f_frsize;
                files = sv.f_files ? (uint64_t) sv.f_favail : UINT64_MAX; /* no inode count: btrfs */
        }
        json_object_object_add(o, "free_bytes", u64_or_null(bytes));
        json_object_object_add(o, "free_files", u64_or_null(files));
        json_object_object_add(o, "min_free_bytes", json_object_new_int64((int64_t) m->config.min_free_disk));
        json_object_object_add(o, "min_free_files", json_object_new_int64((int64_t) m->config.min_free_files));
        json_object_object_add(o, "left_bytes", u64_or_null(bytes == UINT64_MAX ? bytes : sub_or_zero(bytes, m->config.min_free_disk)));
        json_object_object_add(o, "left_files", u64_or_null(files == UINT64_MAX ? files : sub_or_zero(files, m->config.min_free_files)));
        return o;
}

/* ready[0], pooled[0]: the throwaway runs' pool; [1]: the create pools (pool_create, pool_images). */
static json_object *pool_capacity_json(Context *m, const unsigned ready[2], const unsigned pooled[2]) {
        json_object *o = json_object_new_object(), *c = json_object_new_object();

        json_object_object_add(o, "size", json_object_new_int64((int64_t) m->config.pool_size));
        json_object_object_add(o, "ready", json_object_new_int64(ready[0]));
        json_object_object_add(o, "filling", json_object_new_int64(pooled[0] - ready[0]));
        json_object_object_add(c, "size", json_object_new_int64((int64_t) (config_pool_total(&m->config) - m->config.pool_size)));
        json_object_object_add(c, "ready", json_object_new_int64(ready[1]));
        json_object_object_add(c, "filling", json_object_new_int64(pooled[1] - ready[1]));
        json_object_object_add(o, "create", c);
        return o;
}

/* One walk of the registry; a few small reads of our own cgroup and one statvfs: health stays a
 * probe. Other users' grants are the admins' to know (THREATS PRO-09), as their counts are. */
static json_object *capacity_json(Request *c) {
        Context *m = c->ctx;
        json_object *o = json_object_new_object();
        unsigned in_use = 0, own = 0, ready[2] = {}, pooled[2] = {};
        uint64_t memory = 0, pids = 0;

        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry)) {
                memory += s->limits.memory;
                pids += s->limits.pids;
                if (s->pooled) {
                        pooled[!s->ephemeral]++;
                        ready[!s->ephemeral] += s->state == SANDBOX_READY;
                        continue;
                }
                in_use++;
                own += s->owner_uid == c->peer.uid;
        }
        json_object_object_add(o, "sandboxes", sandboxes_capacity_json(c, in_use, own));
        json_object_object_add(o, "memory", cg_capacity_json(m, true, c->admin ? memory : UINT64_MAX, m->config.max_memory));
        json_object_object_add(o, "pids", cg_capacity_json(m, false, c->admin ? pids : UINT64_MAX, m->config.max_pids));
        json_object_object_add(o, "disk", disk_capacity_json(m));
        json_object_object_add(o, "pool", pool_capacity_json(m, ready, pooled));
        return o;
}

int op_health(Request *c, json_object *id, json_object *req, ProtoError *err) {
        Manager *m = c->manager;
        json_object *reply = json_object_new_object();

        json_object_object_add(reply, "status", json_object_new_string("ok"));
        json_object_object_add(reply, "uptime_s",
                               proto_seconds(now_usec(CLOCK_MONOTONIC) - m->ctx->start_usec));
        health_counts(c, reply);
        json_object_object_add(reply, "capacity", capacity_json(c));
        reply_ok(c->reply, reply);
        return 0;
}
