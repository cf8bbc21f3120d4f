/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A sandbox as clients see it: inspect's and list's JSON (sandbox.h, sandbox_to_json()). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-internal.h"
#include "util.h"

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

/* Its egress's tracked connections (one conntrack dump per loop iteration for all sandboxes):
 * null without egress, or when they cannot be counted. */
static json_object *sandbox_connections_json(Sandbox *s) {
        int k = s->join_netns_fd >= 0 ? -ENOTCONN : egress_connections(s->ctx, &s->net);
        return k < 0 ? NULL : json_object_new_int(k);
}

static json_object *sandbox_usage_json(Sandbox *s) {
        json_object *u = json_object_new_object();
        CgUsage usage;

        cg_read_usage(s->cg_fd, s->enforced, &usage);
        json_object_object_add(u, "memory_bytes", json_usage_or_null(usage.memory_bytes));
        json_object_object_add(u, "pids", json_usage_or_null(usage.pids));
        json_object_object_add(u, "cpu_s", usage.cpu_usec == CG_USAGE_UNKNOWN
                                                   ? NULL
                                                   : proto_seconds(usage.cpu_usec));
        json_object_object_add(u, "connections", sandbox_connections_json(s));
        return u;
}

static json_object *mounts_to_json(const Sandbox *s) {
        json_object *a = json_object_new_array();
        for (unsigned i = sandbox_caller_workspace(s) ? 1 : 0; i < s->n_mounts; i++) {
                json_object *e = json_object_new_object();
                json_object_object_add(e, "source", json_object_new_string(s->mounts[i].source));
                json_object_object_add(e, "target", json_object_new_string(s->mounts[i].target));
                json_object_object_add(e, "read_only", json_object_new_boolean(s->mounts[i].read_only));
                if (s->mounts[i].idmap_same)
                        json_object_object_add(e, "idmap", json_object_new_string("same"));
                json_object_array_add(a, e);
        }
        return a;
}

json_object *sandbox_root_json(const Sandbox *s) {
        json_object *o;

        if (!s->root_path)
                return json_object_new_string(s->root_overlay ? "overlay" : "readonly");
        o = json_object_new_object();
        json_object_object_add(o, "path", json_object_new_string(s->root_path));
        json_object_object_add(o, "read_only", json_object_new_boolean(s->root_read_only));
        return o;
}

json_object *sandbox_to_json(Sandbox *s, bool with_usage) {
        json_object *o = json_object_new_object(), *l = json_object_new_object(), *e = json_object_new_object();
        char buf[4096], ts[32];

        json_object_object_add(o, "id", json_object_new_string(s->id));
        json_object_object_add(o, "name", s->name ? json_object_new_string(s->name) : NULL);
        json_object_object_add(o, "state", json_object_new_string(state_name(s->state)));
        if (s->teardown_stuck) {
                json_object *t = json_object_new_object();
                json_object_object_add(t, "since_s", proto_seconds(now_usec(CLOCK_MONOTONIC) - s->teardown_start_usec));
                json_object_object_add(t, "processes", json_object_get(s->teardown_stuck));
                json_object_object_add(o, "teardown_stuck", t);
        } else
                json_object_object_add(o, "teardown_stuck", NULL);
        json_object_object_add(o, "owner_uid", json_object_new_int64(s->owner_uid));
        json_object_object_add(o, "workdir", s->memory_workspace || sandbox_caller_workspace(s) ? NULL : json_object_new_string(sandbox_workdir_path(s, buf, sizeof(buf))));
        if (sandbox_caller_workspace(s)) {
                json_object *w = json_object_new_object();
                json_object_object_add(w, "source", json_object_new_string(s->mounts[0].source));
                json_object_object_add(o, "workspace", w);
        } else
                json_object_object_add(o, "workspace", json_object_new_string(s->memory_workspace ? "memory" : "disk"));
        json_object_object_add(o, "mounts", mounts_to_json(s));
        json_object_object_add(o, "cgroup", s->cg_path ? json_object_new_string(s->cg_path) : NULL);
        if (s->scope_fd >= 0 || s->scope_job)
                json_object_object_add(o, "scope", json_object_new_string(scope_unit_name(buf, s->id)));
        else
                json_object_object_add(o, "scope", NULL);
        json_object_object_add(l, "memory", json_object_new_int64((int64_t) s->limits.memory));
        json_object_object_add(l, "pids", json_object_new_int64((int64_t) s->limits.pids));
        json_object_object_add(l, "cpus", json_object_new_double((double) s->limits.millicpus / 1000.0));
        json_object_object_add(l, "timeout_s", proto_seconds(s->limits.timeout_usec));
        json_object_object_add(l, "output_bytes", json_object_new_int64((int64_t) s->limits.output_bytes));
        json_object_object_add(l, "file_size", s->limits.file_size ? json_object_new_int64((int64_t) s->limits.file_size) : NULL);
        json_object_object_add(l, "open_files", json_object_new_int64((int64_t) s->limits.open_files));
        json_object_object_add(o, "limits", l);
        json_object_object_add(e, "memory", json_object_new_boolean(!!(s->enforced & CG_MEMORY)));
        json_object_object_add(e, "pids", json_object_new_boolean(!!(s->enforced & CG_PIDS)));
        json_object_object_add(e, "cpu", json_object_new_boolean(!!(s->enforced & CG_CPU)));
        json_object_object_add(e, "disk", json_object_new_boolean(s->disk_enforced));
        json_object_object_add(o, "enforced", e);
        json_object_object_add(o, "best_effort", json_object_new_boolean(s->best_effort));
        json_object_object_add(o, "network", s->join_netns_fd >= 0 ? json_object_new_string("joined")
                                             : with_usage             ? egress_live_json(s->ctx, &s->net)
                                                                      : egress_state_json(&s->net));
        json_object_object_add(o, "user", json_object_new_string(sandbox_user_to_string(s->user)));
        if (s->image)
                json_object_object_add(o, "image", json_object_new_string(s->image));
        json_object_object_add(o, "root", sandbox_root_json(s));
        json_object_object_add(o, "hostname", json_object_new_string(s->hostname ? s->hostname : "sandbox"));
        json_object_object_add(o, "sysctls", s->sysctls ? json_object_get(s->sysctls) : json_object_new_object());
        json_object_object_add(o, "masked_paths", s->masked_paths ? json_object_get(s->masked_paths) : json_object_new_array());
        json_object_object_add(o, "readonly_paths",
                               s->readonly_paths ? json_object_get(s->readonly_paths) : json_object_new_array());
        json_object_object_add(o, "ephemeral", json_object_new_boolean(s->transient));
        json_object_object_add(o, "frozen", json_object_new_boolean(s->user_frozen));
        json_object_object_add(o, "created", json_object_new_string(format_utc(ts, s->created_usec)));
        json_object_object_add(o, "restarted_at", s->restored_usec ? json_object_new_string(format_utc(ts,
                                                                                                     s->restored_usec))
                                                                   : NULL);
        json_object_object_add(o, "restored_processes",
                               !s->restored_usec ? NULL
                                                 : json_object_new_string(s->init_adopted ? "kept" : "restarted"));
        json_object_object_add(o, "restored_init", s->init_adopted ? json_object_new_string(s->init_adopted) : NULL);
        if (s->ctx->sandbox_hooks && s->ctx->sandbox_hooks->to_json)
                s->ctx->sandbox_hooks->to_json(s, o);
        if (with_usage) {
                json_object_object_add(o, "usage", sandbox_usage_json(s));
                json_object_object_add(o, "runs_in_flight", json_object_new_int((int) s->n_runs));
        }
        return o;
}
