/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a client does to a ready sandbox's processes as a whole (an OCI runtime's kill --all,
 * pause, resume, update and ps): a signal to every process of its runs and sessions, a freeze or
 * thaw of its cgroup, new limits, the list of its pids. Helpers of the ops (op-sandbox.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgroup.h"
#include "log.h"
#include "macro.h"
#include "request-fields.h"
#include "sandbox-internal.h"
#include "sandbox-control.h"
#include "util.h"

#define SIGNAL_PIDS_MAX 4096
#define FREEZE_TIMEOUT_USEC (5 * USEC_PER_SEC)

static int cmp_pid(const void *a, const void *b) {
        pid_t x = *(const pid_t *) a, y = *(const pid_t *) b;
        return x < y ? -1 : x > y;
}

/* Every process of one member cgroup (and below): through cgroup.kill for SIGKILL, else each by
 * a pidfd opened before the cgroup is listed again, so that a pid reused meanwhile by a process
 * outside it is never signalled (one that is gone is skipped). How many were signalled. */
static int signal_cgroup(int fd, int sig, pid_t *pids, pid_t *again, int *pidfds) {
        int n = cg_list_pids(fd, pids, SIGNAL_PIDS_MAX), m, signalled = 0;

        if (n <= 0)
                return n;
        if (n > SIGNAL_PIDS_MAX)
                n = SIGNAL_PIDS_MAX;
        if (sig == SIGKILL) {
                int r = cg_kill(fd);
                return r < 0 ? r : n;
        }
        for (int i = 0; i < n; i++)
                pidfds[i] = (int) syscall(SYS_pidfd_open, pids[i], 0);
        m = cg_list_pids(fd, again, SIGNAL_PIDS_MAX);
        if (m > SIGNAL_PIDS_MAX)
                m = SIGNAL_PIDS_MAX;
        if (m > 0)
                qsort(again, (size_t) m, sizeof(pid_t), cmp_pid);
        for (int i = 0; i < n; i++) {
                if (pidfds[i] < 0)
                        continue;
                if (m > 0 && bsearch(&pids[i], again, (size_t) m, sizeof(pid_t), cmp_pid) &&
                    syscall(SYS_pidfd_send_signal, pidfds[i], sig, NULL, 0) == 0)
                        signalled++;
                close(pidfds[i]);
        }
        return signalled;
}

int sandbox_signal_all(Sandbox *s, int sig, unsigned *ret_signalled) {
        _cleanup_free_ pid_t *pids = calloc(2 * SIGNAL_PIDS_MAX, sizeof(pid_t));
        _cleanup_free_ int *pidfds = calloc(SIGNAL_PIDS_MAX, sizeof(int));
        unsigned total = 0;
        struct dirent *de;
        DIR *d;
        int fd;

        *ret_signalled = 0;
        if (!pids || !pidfds)
                return -ENOMEM;
        fd = openat(s->cg_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || !(d = fdopendir(fd))) {
                safe_close(fd);
                return -errno;
        }
        /* Every child cgroup but the init's leaf and the next run's: runs, sessions, file operations. */
        while ((de = readdir(d))) {
                _cleanup_close_ int cg = -EBADF;
                int k;

                if (de->d_type != DT_DIR || !sandbox_is_member_cgroup(s, de->d_name))
                        continue;
                cg = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (cg < 0)
                        continue;
                k = signal_cgroup(cg, sig, pids, pids + SIGNAL_PIDS_MAX, pidfds);
                if (k > 0)
                        total += (unsigned) k;
        }
        closedir(d);
        *ret_signalled = total;
        return 0;
}

/* ---- freeze and thaw ---------------------------------------------------------------------- */

struct SandboxFreeze {
        SandboxMember member; /* in the sandbox's members, so that its destroy or free ends it */
        Sandbox *sandbox;
        Reply *reply;
        bool freeze;
        uint64_t start;
        unsigned polls;
        sd_event_source *timer;
};

static void freeze_finish(SandboxFreeze *f, const ProtoError *err) {
        Sandbox *s = f->sandbox;

        s->freeze_op = NULL;
        sandbox_member_remove(s, &f->member);
        sd_event_source_disable_unref(f->timer);
        if (err)
                reply_error(f->reply, err);
        else {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "frozen", json_object_new_boolean(f->freeze));
                reply_ok(f->reply, o);
        }
        reply_unref(f->reply);
        free(f);
}

/* The sandbox is destroyed or freed while the freeze is in flight: its client is told. */
static void freeze_member_end(SandboxMember *m) {
        SandboxFreeze *f = SANDBOX_MEMBER_OF(m, SandboxFreeze, member);
        ProtoError err;

        sandbox_gone_error(f->sandbox, &err);
        freeze_finish(f, &err);
}

static void freeze_member_kill(SandboxMember *m, int sig) {
        (void) sig;
        freeze_member_end(m);
}

static const SandboxMemberOps freeze_member_ops = {
        .kill = freeze_member_kill,
        .free = freeze_member_end,
};

static int on_freeze_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        SandboxFreeze *f = userdata;
        Sandbox *s = f->sandbox;
        uint64_t frozen = !f->freeze;
        ProtoError err;

        (void) cg_read_keyed(s->cg_fd, "cgroup.events", "frozen", &frozen);
        if (frozen == (uint64_t) f->freeze) {
                freeze_finish(f, NULL);
                return 0;
        }
        if (now_usec(CLOCK_MONOTONIC) - f->start > FREEZE_TIMEOUT_USEC) {
                proto_error_set(&err, SBX_E_INTERNAL, "sandbox", "the sandbox's processes could not be %s within %us",
                                f->freeze ? "frozen" : "thawed", (unsigned) (FREEZE_TIMEOUT_USEC / USEC_PER_SEC));
                /* A freeze that did not take is undone: the sandbox is as it was. */
                if (f->freeze) {
                        (void) cg_write(s->cg_fd, "cgroup.freeze", "0");
                        s->user_frozen = false;
                        sandbox_set_frozen(s, false);
                }
                freeze_finish(f, &err);
                return 0;
        }
        /* 1 ms, doubling up to 64 ms: freezing "may take some time" (cgroup-v2.rst). */
        f->polls++;
        (void) sd_event_source_set_time_relative(src, (uint64_t) 1000 << (f->polls < 6 ? f->polls : 6));
        (void) sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
        return 0;
}

int sandbox_freeze(Sandbox *s, bool freeze, Reply *reply, ProtoError *err) {
        SandboxFreeze *f;
        int r;

        if (s->state != SANDBOX_READY)
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox", "sandbox %s is not ready", s->id);
        if (s->job || s->freeze_op)
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox", "the sandbox is being %s; try again",
                                       s->job ? "copied (a snapshot, restore or fork)" : "frozen or thawed");
        r = cg_write(s->cg_fd, "cgroup.freeze", freeze ? "1" : "0");
        if (r < 0)
                return proto_error_set(err, SBX_E_INTERNAL, "sandbox", "cannot write the sandbox's cgroup.freeze: %s",
                                       strerror(-r));
        if (s->user_frozen != freeze) {
                s->user_frozen = freeze;
                sandbox_set_frozen(s, freeze);
        }
        f = calloc(1, sizeof(*f));
        if (!f)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        *f = (SandboxFreeze) { .sandbox = s, .reply = reply_ref(reply), .freeze = freeze,
                               .start = now_usec(CLOCK_MONOTONIC) };
        r = sd_event_add_time_relative(s->ctx->event, &f->timer, CLOCK_MONOTONIC, 0, 0, on_freeze_timer, f);
        if (r < 0) {
                reply_unref(f->reply);
                free(f);
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        }
        s->freeze_op = f;
        sandbox_member_add(s, &f->member, &freeze_member_ops);
        return 0;
}

/* ---- update ------------------------------------------------------------------------------- */

static const FieldSpec update_limits_fields[] = {
        { "memory", FIELD_SIZE },
        { "pids", FIELD_INT },
        { "cpus", FIELD_DECIMAL },
        {},
};

static bool given(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && !json_object_is_type(v, json_type_null);
}

int sandbox_update_limits(Sandbox *s, json_object *limits, bool best_effort, ProtoError *err) {
        static const struct {
                const char *key, *field, *controller;
                unsigned mask;
        } need[] = {
                { "memory", "limits.memory", "memory", CG_MEMORY },
                { "pids", "limits.pids", "pids", CG_PIDS },
                { "cpus", "limits.cpus", "cpu", CG_CPU },
        };
        const Config *c = &s->ctx->config;
        SandboxLimits l = s->limits;
        CgLimits cl;
        int r;

        if (s->state != SANDBOX_READY)
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox", "sandbox %s is not ready", s->id);
        if ((r = proto_check_fields(limits, update_limits_fields, "limits.", err)) < 0)
                return r;
        if ((r = proto_get_size(limits, "memory", &l.memory, err)) < 0 ||
            (r = proto_get_uint(limits, "pids", 1, UINT32_MAX, &l.pids, err)) < 0 ||
            (r = proto_get_cpus(limits, "cpus", &l.millicpus, err)) < 0) {
                char f[sizeof(err->field)];
                memcpy(f, err->field, sizeof(f));
                snprintf(err->field, sizeof(err->field), "limits.%.50s", f);
                return r;
        }
        if (l.memory < (1u << 20))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "limits.memory", "'limits.memory' must be at least 1M");
        if (l.memory > c->max_memory || l.pids > c->max_pids || l.millicpus > c->max_millicpus) {
                const char *field = l.memory > c->max_memory ? "limits.memory" : l.pids > c->max_pids ? "limits.pids" : "limits.cpus";
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field, "'%s' exceeds the configured maximum", field);
        }
        for (size_t i = 0; i < ELEMENTSOF(need); i++)
                if (given(limits, need[i].key) && !(s->enforced & need[i].mask) && !best_effort)
                        return proto_error_set(err, SBX_E_LIMIT_UNENFORCEABLE, need[i].field,
                                               "the cgroup v2 '%s' controller is not available to sandboxd on this host, "
                                               "so '%s' cannot be enforced; pass best_effort to change it anyway",
                                               need[i].controller, need[i].field);
        s->limits = l;
        cl = sandbox_cg_limits(s);
        r = cg_apply_limits(&s->ctx->cg, s->cg_path, &cl, s->enforced);
        if (r < 0)
                return proto_error_set(err, SBX_E_INTERNAL, "limits", "cannot write the sandbox's cgroup limits: %s",
                                       strerror(-r));
        /* The record (state.c saves it; an ephemeral sandbox has none). */
        r = registry_changed(&s->entry);
        if (r < 0)
                return sandbox_disk_error(err, "cannot record the new limits", r);
        return 0;
}

/* ---- pids --------------------------------------------------------------------------------- */

json_object *sandbox_pids_json(Sandbox *s) {
        _cleanup_free_ pid_t *pids = calloc(SIGNAL_PIDS_MAX, sizeof(pid_t));
        json_object *a = json_object_new_array();
        int n = pids && s->cg_fd >= 0 ? cg_list_pids(s->cg_fd, pids, SIGNAL_PIDS_MAX) : 0;

        if (n > SIGNAL_PIDS_MAX)
                n = SIGNAL_PIDS_MAX;
        if (n > 0)
                qsort(pids, (size_t) n, sizeof(pid_t), cmp_pid);
        for (int i = 0; i < n; i++)
                json_object_array_add(a, json_object_new_int64(pids[i]));
        return a;
}

/* A new way out for a running sandbox that has one: the list in want (egress_parse()), in force
 * at once; *ret_cut the connections cut that it no longer admits (-1: they could not be listed). */
int sandbox_update_network(Sandbox *s, const SandboxNet *want, int *ret_cut, ProtoError *err) {
        _cleanup_free_ char *why = NULL;
        int r;

        if (s->state != SANDBOX_READY)
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox", "sandbox %s is not ready", s->id);
        if (s->join_netns_fd >= 0)
                return proto_error_set(err, SBX_E_CONFLICT, "network",
                                       "sandbox %s joined another's network namespace: its way out is that one's", s->id);
        if (!s->net.egress)
                return proto_error_set(err, SBX_E_CONFLICT, "network",
                                       "sandbox %s was made without a way out (network \"none\"): its network namespace "
                                       "has no interface to open (make it with {\"egress\":{\"allow\":[]}} to open "
                                       "one later)", s->id);
        if (!want->egress)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "network",
                                       "a running sandbox's network is changed with {\"egress\": ...}; "
                                       "{\"egress\":{\"allow\":[]}} closes every way out");
        r = egress_update(s->ctx, &s->net, want, ret_cut, &why);
        if (r < 0)
                return proto_error_set(err, SBX_E_INTERNAL, "network", "cannot change the sandbox's way out: %s",
                                       why ? why : strerror(-r));
        r = registry_changed(&s->entry);
        if (r < 0)
                return sandbox_disk_error(err, "cannot record the new network", r);
        return 0;
}
