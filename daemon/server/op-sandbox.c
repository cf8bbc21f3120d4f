/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* create, list, inspect, destroy. */
#include <errno.h>
#include <inttypes.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>

#include "macro.h"
#include "ops.h"
#include "pool.h"
#include "session.h"
#include "sandbox.h"
#include "sandbox-control.h"
#include "snapshot.h"
#include "util.h"

/* The index a create's fd field (network.netns_fd, root.tree_fd) names: *ret_i, 1; 0 when the
 * field is absent. It must name an fd that came with the request. */
static int create_fd_index(Request *c, json_object *req, const char *obj, const char *key, uint64_t *ret_i,
                           ProtoError *err) {
        json_object *o = json_object_object_get(req, obj), *v;
        char field[32];

        if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
                return 0;
        snprintf(field, sizeof(field), "%s.%s", obj, key);
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
            (uint64_t) json_object_get_int64(v) >= c->n_fds)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                       "'%s' must be the index of an fd that came with this request (%zu did)", field,
                                       c->n_fds);
        if (c->peer.uid != 0)
                return proto_error_set(err, SBX_E_PERMISSION_DENIED, field, "'%s' is for root clients only", field);
        *ret_i = (uint64_t) json_object_get_int64(v);
        return 1;
}

/* network.netns_fd: a network namespace (nsfs, NS_GET_NSTYPE), never the daemon's own (the
 * host's, by its inode). */
static int check_netns_fd(int fd, uint64_t i, ProtoError *err) {
        struct stat st, own;
        struct statfs sfs;
        int type;

        if (fstatfs(fd, &sfs) < 0 || (unsigned long) sfs.f_type != (unsigned long) NSFS_MAGIC ||
            (type = ioctl(fd, NS_GET_NSTYPE)) < 0 || type != CLONE_NEWNET)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "network.netns_fd",
                                       "fd %" PRIu64 " is not a network namespace (an nsfs fd, /proc/PID/ns/net or a "
                                       "file ip netns add bound)", i);
        if (fstat(fd, &st) < 0 || stat("/proc/self/ns/net", &own) < 0)
                return proto_error_set(err, SBX_E_INTERNAL, "network.netns_fd", "cannot compare the namespace: %m");
        if (st.st_dev == own.st_dev && st.st_ino == own.st_ino)
                return proto_error_set(err, SBX_E_PERMISSION_DENIED, "network.netns_fd",
                                       "fd %" PRIu64 " is the daemon's own network namespace (the host's): never a sandbox's",
                                       i);
        return 0;
}

/* create's fds, each named by one field: "network": {"netns_fd": i} (a network namespace,
 * checked here) and "root": {"tree_fd": j} (a detached mount tree, checked as it is opened:
 * sandbox_open_mounts()), from a root client, every fd that came named once. Taken from the
 * request: -EBADF for a field that is absent. */
static int take_create_fds(Request *c, json_object *req, int *ret_netns, int *ret_tree, ProtoError *err) {
        uint64_t ni = 0, ti = 0;
        int n, t, r;

        *ret_netns = *ret_tree = -EBADF;
        if ((n = create_fd_index(c, req, "network", "netns_fd", &ni, err)) < 0 ||
            (t = create_fd_index(c, req, "root", "tree_fd", &ti, err)) < 0)
                return n < 0 ? n : t;
        if (c->n_fds != (size_t) (n + t) || (n && t && ni == ti))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "fds",
                                       "%zu file descriptors came with this create, which names %d (network.netns_fd "
                                       "and root.tree_fd take one each, a different one)", c->n_fds, n + t);
        if (n && (r = check_netns_fd(c->fds[ni], ni, err)) < 0)
                return r;
        if (n)
                *ret_netns = TAKE_FD(c->fds[ni]);
        if (t)
                *ret_tree = TAKE_FD(c->fds[ti]);
        return 0;
}

int op_create(Request *c, json_object *id, json_object *req, ProtoError *err) {
        SandboxCaller caller;
        Sandbox *s;
        int r, netns_fd, tree_fd;

        if (json_object_object_get_ex(req, "from_snapshot", NULL)) {
                if (c->n_fds > 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "fds", "a fork takes no file descriptors");
                return op_create_from_snapshot(c, id, req, err);
        }
        if ((r = take_create_fds(c, req, &netns_fd, &tree_fd, err)) < 0)
                return r;
        ops_caller(c, &caller);
        /* A pooled sandbox never has a joined network namespace or a sent root (pool_take_create()
         * tells). */
        r = netns_fd < 0 && tree_fd < 0 ? pool_take_create(c->ctx, req, &caller, &s, err) : 0;
        if (r == 0)
                r = sandbox_create_joined(c->ctx, req, &caller, netns_fd, tree_fd, &s, err);
        if (r < 0)
                return r;
        /* Answered when the sandbox's init reports ready (or failed), and a pooled one once its
         * record is written. */
        sandbox_add_waiter(&s->create_waiters, c->reply);
        sandbox_tie_to_connection(s, c->reply);
        return 0;
}

int op_list(Request *c, json_object *id, json_object *req, ProtoError *err) {
        json_object *reply = json_object_new_object(), *arr = json_object_new_array(), *v;
        /* usage reads three small cgroup files per sandbox: only for those who ask (top). */
        bool usage = json_object_object_get_ex(req, "usage", &v) && json_object_get_boolean(v);

        for (Sandbox *s = registry_first(c->ctx->registry); s; s = registry_next(&s->entry))
                if (!s->ephemeral && sandbox_visible_to(s, reply_peer(c->reply)) && s->state != SANDBOX_DESTROYING)
                        json_object_array_add(arr, sandbox_to_json(s, usage));
        json_object_object_add(reply, "sandboxes", arr);
        reply_ok(c->reply, reply);
        return 0;
}

int op_inspect(Request *c, json_object *id, json_object *req, ProtoError *err) {
        Sandbox *s;
        json_object *reply, *sj, *v;
        int r = ops_lookup_sandbox(c, req, &s, err);
        if (r < 0)
                return r;
        reply = json_object_new_object();
        sj = sandbox_to_json(s, true);
        json_object_object_add(sj, "snapshots", snapshot_list_json(s));
        json_object_object_add(sj, "sessions", session_sessions_json(s));
        if (json_object_object_get_ex(req, "pids", &v) && json_object_get_boolean(v))
                json_object_object_add(sj, "pids", sandbox_pids_json(s));
        json_object_object_add(reply, "sandbox", sj);
        reply_ok(c->reply, reply);
        return 0;
}

/* A sandbox destroyed before, by id: ok with already_gone for its owner and for admins (who see
 * every sandbox anyway); for anyone else it is an id that never existed (THREATS PRO-09). */
static bool destroyed_before(Request *c, const char *key) {
        uid_t owner;

        return registry_find_tombstone(c->ctx->registry, key, &owner) && (c->admin || owner == c->peer.uid);
}

/* Idempotent: a sandbox destroyed before answers ok with already_gone. */
int op_destroy(Request *c, json_object *id, json_object *req, ProtoError *err) {
        const char *key = NULL;
        Sandbox *s;
        json_object *reply;
        int r = ops_lookup_sandbox(c, req, &s, err);

        if (r < 0) {
                /* not_found: the field is a string (ops_lookup_sandbox checked it). */
                if (err->code != SBX_E_NOT_FOUND || proto_get_string(req, "sandbox", 128, &key, err) <= 0 ||
                    !destroyed_before(c, key))
                        return r;
                reply = json_object_new_object();
                json_object_object_add(reply, "destroyed", json_object_new_boolean(0));
                json_object_object_add(reply, "already_gone", json_object_new_boolean(1));
                reply_ok(c->reply, reply);
                return 0;
        }
        /* Its teardown is known to be stuck: said at once rather than some day. */
        if (s->teardown_stuck)
                return sandbox_teardown_error(s, err);
        sandbox_add_waiter(&s->destroy_waiters, c->reply);
        sandbox_destroy(s, "requested");
        return 0;
}

/* sandbox.signal: every process of the sandbox's runs and sessions (not its init). */
int op_sandbox_signal(Request *c, json_object *id, json_object *req, ProtoError *err) {
        json_object *reply, *v;
        unsigned n = 0;
        Sandbox *s;
        int sig, r = ops_lookup_sandbox(c, req, &s, err);

        if (r < 0)
                return r;
        v = json_object_object_get(req, "signal");
        sig = signal_from_string(json_object_get_string(v));
        if (sig <= 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "signal", "unknown signal '%.32s'", json_object_get_string(v));
        if (s->state != SANDBOX_READY)
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox", "the sandbox is not ready");
        r = sandbox_signal_all(s, sig, &n);
        if (r < 0)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "cannot signal the sandbox's processes: %s", strerror(-r));
        reply = json_object_new_object();
        json_object_object_add(reply, "signalled", json_object_new_int64(n));
        reply_ok(c->reply, reply);
        return 0;
}

static int freeze_op(Request *c, json_object *req, bool freeze, ProtoError *err) {
        Sandbox *s;
        int r = ops_lookup_sandbox(c, req, &s, err);

        return r < 0 ? r : sandbox_freeze(s, freeze, c->reply, err);
}

int op_sandbox_freeze(Request *c, json_object *id, json_object *req, ProtoError *err) {
        return freeze_op(c, req, true, err);
}

int op_sandbox_thaw(Request *c, json_object *id, json_object *req, ProtoError *err) {
        return freeze_op(c, req, false, err);
}

/* sandbox.update: new memory, pids and cpu limits, a new way out, or both (the network is checked
 * before the limits are written, and changed after); the reply is the SANDBOX, and with a network
 * the connections cut. */
int op_sandbox_update(Request *c, json_object *id, json_object *req, ProtoError *err) {
        json_object *reply, *limits, *net;
        SandboxNet want;
        Sandbox *s;
        bool best_effort;
        int cut = 0, r = ops_lookup_sandbox(c, req, &s, err);

        if (r < 0)
                return r;
        best_effort = s->best_effort;
        if ((r = proto_get_bool(req, "best_effort", &best_effort, err)) < 0)
                return r;
        limits = json_object_object_get(req, "limits");
        net = json_object_object_get(req, "network");
        if (!limits && !net)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "limits", "sandbox.update needs 'limits', 'network' or both");
        if (net && (r = egress_parse(s->ctx, net, &want, err)) < 0)
                return r;
        if (limits && (r = sandbox_update_limits(s, limits, best_effort, err)) < 0)
                return r;
        if (net && (r = sandbox_update_network(s, &want, &cut, err)) < 0)
                return r;
        reply = json_object_new_object();
        json_object_object_add(reply, "sandbox", sandbox_to_json(s, true));
        if (net)
                json_object_object_add(reply, "connections_cut", cut >= 0 ? json_object_new_int(cut) : NULL);
        reply_ok(c->reply, reply);
        return 0;
}
