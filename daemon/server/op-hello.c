/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hello: versions and what this host lets sandboxd enforce; health: the cheap liveness probe. */
#include <time.h>

#include "cgroup.h"
#include "connection.h"
#include "manager.h"
#include "ops.h"
#include "sandbox.h"
#include "util.h"

static json_object *caps_json(Context *m) {
        json_object *caps = json_object_new_object(), *cg = json_object_new_object(), *k = json_object_new_object();
        json_object *roots = json_object_new_array();

        json_object_object_add(cg, "memory", json_object_new_boolean(!!(m->cg.enforceable & CG_MEMORY)));
        json_object_object_add(cg, "pids", json_object_new_boolean(!!(m->cg.enforceable & CG_PIDS)));
        json_object_object_add(cg, "cpu", json_object_new_boolean(!!(m->cg.enforceable & CG_CPU)));
        json_object_object_add(caps, "cgroup", cg);
        json_object_object_add(k, "clone_into_cgroup", json_object_new_boolean(m->features.clone_into_cgroup));
        json_object_object_add(k, "pidfd", json_object_new_boolean(m->features.pidfd));
        json_object_object_add(k, "cgroup_kill", json_object_new_boolean(m->cg.has_kill));
        json_object_object_add(k, "memory_peak", json_object_new_boolean(m->cg.has_memory_peak));
        json_object_object_add(k, "pids_peak", json_object_new_boolean(m->cg.has_pids_peak));
        json_object_object_add(k, "mount_idmap", json_object_new_boolean(m->features.mount_idmap));
        json_object_object_add(caps, "kernel", k);
        for (char **r = m->config.mount_roots; r && *r; r++)
                json_object_array_add(roots, json_object_new_string(*r));
        json_object_object_add(caps, "mount_roots", roots);
        json_object_object_add(caps, "cgroup_root", json_object_new_string(m->cg.base));
        json_object_object_add(caps, "state_dir", json_object_new_string(m->config.state_dir));
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

int op_health(Request *c, json_object *id, json_object *req, ProtoError *err) {
        Manager *m = c->manager;
        json_object *reply = json_object_new_object();

        json_object_object_add(reply, "status", json_object_new_string("ok"));
        json_object_object_add(reply, "uptime_s",
                               json_object_new_double((double) (now_usec(CLOCK_MONOTONIC) - m->ctx->start_usec) / 1e6));
        health_counts(c, reply);
        reply_ok(c->reply, reply);
        return 0;
}
