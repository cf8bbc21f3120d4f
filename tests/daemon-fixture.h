/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A daemon without a socket for unit tests: a Context set up by lifecycle_setup_context() (the
 * daemon's own code) on a temporary state directory and a temporary cgroup below the cgroup2
 * mount, named as the integration tests name theirs (tests/lib.sh: sandboxd-test-NAME-PID), a
 * Registry, a Sweeper and a RunLog with no file. Only the cgroup2 hierarchy is ever touched
 * (../shared/HOST.md). A run needs a Connection until replies are their own type: the fixture
 * makes one on a socketpair, read by the test (fixture_reply()). */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "connection.h"
#include "egress.h"
#include "lifecycle.h"
#include "log.h"
#include "macro.h"
#include "rm-rf.h"
#include "sandbox.h"
#include "tap.h"
#include "util.h"

typedef struct Fixture {
        Context ctx;
        Registry registry;
        Sweeper sweeper;
        RunLog run_log;
        Pool pool;
        Manager *manager;       /* no listener: only for the Connection */
        Connection *conn;
        int peer_fd;            /* the client's end of conn */
        char buf[1 << 16];      /* what came on it, not yet taken */
        size_t len;
        char tmp[64];           /* the state directory's parent */
        char *cg_mount, *cg_base, *cg_home; /* the mount, our cgroup, where this process was */
} Fixture;

/* .ci/run sets SANDBOXD_TEST_MUST_WORK=1: there a test that cannot run is a failure. */
static inline bool fixture_on_ci(void) {
        const char *v = getenv("SANDBOXD_TEST_MUST_WORK");
        return v && strcmp(v, "1") == 0;
}

/* Where a unit test cannot run, it says why and skips, unless on CI: there it must run. */
static inline void fixture_skip(const char *reason) {
        if (fixture_on_ci()) {
                printf("Bail out! cannot run under CI: %s\n", reason);
                exit(1);
        }
        skip_all(reason);
}

static inline char *fixture_self_cgroup(const char *mount) {
        char *self = NULL, *path = NULL;
        if (cg_self_path(&self) < 0)
                return NULL;
        if (asprintf(&path, "%s%s", mount, self) < 0)
                path = NULL;
        free(self);
        return path;
}

/* The run helper next to the daemon in the build tree (tests/../daemon/). */
static inline void fixture_find_helper(void) {
        char self[PATH_MAX], path[PATH_MAX + 64];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        char *slash;

        if (getenv("SANDBOXD_RUN_HELPER") || n <= 0)
                return;
        self[n] = '\0';
        slash = strrchr(self, '/');
        if (!slash)
                return;
        *slash = '\0';
        snprintf(path, sizeof(path), "%s/../daemon/sandboxd-run-helper", self);
        if (access(path, X_OK) == 0)
                setenv("SANDBOXD_RUN_HELPER", path, 1);
}

static inline void fixture_setup(Fixture *f, const char *name, unsigned pool_size) {
        char *state = NULL;
        Config config;
        int r;

        *f = (Fixture) { .peer_fd = -EBADF };
        if (geteuid() != 0)
                fixture_skip("must run as root (sandboxes need user namespaces and cgroups)");
        if (cg_find_mount(&f->cg_mount) < 0)
                fixture_skip("no cgroup2 hierarchy is mounted");
        f->cg_home = fixture_self_cgroup(f->cg_mount);
        if (!f->cg_home || asprintf(&f->cg_base, "%s/sandboxd-test-%s-%d", f->cg_mount, name, (int) getpid()) < 0)
                fixture_skip("cannot tell our own cgroup");
        snprintf(f->tmp, sizeof(f->tmp), "/tmp/sandboxd-unit-XXXXXX");
        if (!mkdtemp(f->tmp) || asprintf(&state, "%s/state", f->tmp) < 0)
                fixture_skip("cannot make a temporary directory");
        fixture_find_helper();
        log_open();
        config_init_defaults(&config);
        free(config.state_dir);
        config.state_dir = state;
        free(config.cgroup_root);
        config.cgroup_root = strdup(f->cg_base);
        config.pool_size = pool_size;
        context_init(&f->ctx, &config);
        f->run_log = (RunLog) { .fd = -EBADF };
        f->ctx.registry = &f->registry;
        f->ctx.sweeper = &f->sweeper;
        f->ctx.run_log = &f->run_log;
        if (registry_init(&f->registry, f->ctx.config.max_sandboxes + f->ctx.config.pool_size) < 0 ||
            sd_event_default(&f->ctx.event) < 0)
                fixture_skip("out of memory");
        r = lifecycle_setup_context(&f->ctx);
        if (r < 0) {
                char why[128];
                snprintf(why, sizeof(why), "the host cannot give the daemon a context: %s", strerror(-r));
                fixture_skip(why);
        }
        /* runs.log, as the daemon opens it once the sandboxes are restored (none here). */
        r = run_log_open(&f->ctx);
        ok(r >= 0, "a Context on %s and %s/state, with its runs.log", f->cg_base, f->tmp);
}

/* The fixture's connection takes no requests: its replies are made by the test (fixture_reply_for). */
static inline void fixture_no_dispatch(Reply *reply, const char *op, json_object *req, int *fds, size_t n_fds,
                                       void *userdata) {
}

static const ConnectionHooks fixture_hooks = { .dispatch = fixture_no_dispatch };

/* A Connection for runs' replies, on a socketpair (no listener, no Manager of a daemon). */
static inline void fixture_connect(Fixture *f) {
        struct ucred peer = { .pid = getpid(), .uid = 0, .gid = 0 };
        int sk[2];

        if (manager_new(&f->manager, &f->ctx, &fixture_hooks) < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sk) < 0 ||
            connection_new(&f->manager->conns, sk[0], &peer, &f->conn) < 0) {
                ok(false, "a connection for the runs' replies");
                exit(1);
        }
        f->peer_fd = sk[1];
        (void) fcntl(f->peer_fd, F_SETFL, O_NONBLOCK);
}

/* Runs the loop until cond holds (true) or timeout_s passed (false). */
static inline bool fixture_run_until(Fixture *f, bool (*cond)(void *), void *userdata, unsigned timeout_s) {
        uint64_t deadline = now_usec(CLOCK_MONOTONIC) + timeout_s * USEC_PER_SEC;
        while (!cond(userdata)) {
                if (now_usec(CLOCK_MONOTONIC) > deadline)
                        return false;
                if (sd_event_run(f->ctx.event, 50 * USEC_PER_MSEC) < 0)
                        return false;
        }
        return true;
}

typedef struct ReplyWait {
        Fixture *f;
        const char *id;
        json_object *found;
} ReplyWait;

/* Takes whole lines off the client's end; keeps the first whose "id" is w->id and that is not
 * an event (a run's "started"): the final reply. */
static inline bool fixture_reply_arrived(void *userdata) {
        ReplyWait *w = userdata;
        Fixture *f = w->f;
        ssize_t n;
        char *nl;

        while ((n = read(f->peer_fd, f->buf + f->len, sizeof(f->buf) - 1 - f->len)) > 0)
                f->len += (size_t) n;
        while (!w->found && (nl = memchr(f->buf, '\n', f->len))) {
                json_object *o, *id;
                *nl = '\0';
                o = json_tokener_parse(f->buf);
                if (o && json_object_object_get_ex(o, "id", &id) && strcmp(json_object_get_string(id), w->id) == 0 &&
                    !json_object_object_get_ex(o, "event", NULL))
                        w->found = o;
                else
                        json_object_put(o);
                f->len -= (size_t) (nl + 1 - f->buf);
                memmove(f->buf, nl + 1, f->len);
        }
        return w->found;
}

/* The reply to request id (which the caller puts), within timeout_s; NULL if none. */
static inline json_object *fixture_reply(Fixture *f, const char *id, unsigned timeout_s) {
        ReplyWait w = { .f = f, .id = id };
        (void) fixture_run_until(f, fixture_reply_arrived, &w, timeout_s);
        return w.found;
}

static inline bool fixture_registry_empty(void *userdata) {
        Fixture *f = userdata;
        return registry_count(&f->registry) == 0;
}

/* Every sandbox destroyed, the cgroup and the state directory removed, this process back where
 * it was: each is checked, so that a test leaves nothing behind unseen. */
static inline void fixture_done(Fixture *f) {
        char path[PATH_MAX + 64];
        bool gone = true;
        int fd;

        if (f->ctx.pool)
                pool_done(&f->ctx); /* refills no more */
        for (Sandbox *s = registry_first(&f->registry), *next; s; s = next) {
                next = registry_next(&s->entry);
                if (s->state != SANDBOX_DESTROYING)
                        sandbox_destroy(s, "test over");
        }
        ok(fixture_run_until(f, fixture_registry_empty, f, 30), "cleanup: every sandbox is gone");
        if (f->conn)
                connection_close(f->conn);
        f->manager = manager_free(f->manager);
        f->peer_fd = safe_close(f->peer_fd);
        sweep_free_all(&f->ctx);
        while (registry_first(&f->registry))
                sandbox_free(registry_first(&f->registry));
        /* Whatever a failure above left is killed, not left running on the host. */
        if (f->ctx.cg.sandboxes_fd >= 0 && cg_populated(f->ctx.cg.sandboxes_fd) > 0) {
                (void) cg_kill(f->ctx.cg.sandboxes_fd);
                for (int i = 0; i < 500 && cg_populated(f->ctx.cg.sandboxes_fd) > 0; i++)
                        usleep(10000);
        }
        if (f->ctx.cg.base_fd >= 0)
                (void) cg_remove_tree(f->ctx.cg.base_fd, "sandboxes");
        /* Out of our own leaf, back into the cgroup we came from, then the tree goes. */
        snprintf(path, sizeof(path), "%s/cgroup.procs", f->cg_home);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        ok(fd >= 0 && write(fd, "0", 1) == 1, "cleanup: back in %s", f->cg_home);
        safe_close(fd);
        egress_done(&f->ctx); /* lifecycle_setup_context() made it, as lifecycle_free() undoes it */
        context_done(&f->ctx);
        registry_done(&f->registry);
        for (const char *sub = "daemon"; sub; sub = strcmp(sub, "daemon") == 0 ? "sandboxes" : NULL) {
                snprintf(path, sizeof(path), "%s/%s", f->cg_base, sub);
                if (rmdir(path) < 0 && errno != ENOENT)
                        gone = false;
        }
        gone = gone && rmdir(f->cg_base) == 0;
        ok(gone, "cleanup: the test's cgroup %s is removed", f->cg_base);
        ok(rm_rf_at(AT_FDCWD, f->tmp) >= 0, "cleanup: %s is removed", f->tmp);
        free(f->cg_mount);
        free(f->cg_base);
        free(f->cg_home);
}
