/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "egress.h"
#include "connection.h"
#include "dev-template.h"
#include "fdstore.h"
#include "session.h"
#include "lifecycle.h"
#include "log.h"
#include "macro.h"
#include "ops.h"
#include "pipe-peek.h"
#include "remove-async.h"
#include "rm-rf.h"
#include "file-helper.h"
#include "run-exec.h"
#include "run-result.h"
#include "run.h"
#include "scope.h"
#include "mount-open.h"
#include "pidfd.h"
#include "sandbox.h"
#include "snapshot.h"
#include "spawn.h"
#include "state.h"
#include "storage.h"
#include "util.h"

/* ---- Making and freeing, in this order ---------------------------------------------------- */

/* Work the idle exit does not see as connections or sandboxes. */
static bool daemon_busy(void *userdata) {
        Daemon *d = userdata;
        return sandbox_count_runs(&d->ctx) > 0 || d->sweeper.n_sweeps > 0;
}

/* state.c keeps meta.json as the sandbox changes (sandbox_create's registry_changed()). */
static int on_registry_changed(Registry *reg, RegistryEvent ev, RegistryEntry *e, void *userdata) {
        Sandbox *s = e->data;
        return ev == REGISTRY_CHANGED && !s->ephemeral && !s->transient ? state_save(s) : 0;
}

static void sandbox_json_others(Sandbox *s, json_object *o) {
        sweep_sandbox_json(s, o);
        run_records_json(s, o);
        ports_sandbox_json(s, o);
}

static const SandboxHooks sandbox_hooks = {
        .check_create = sweep_check_create,
        .check_run = sweep_check_run,
        .to_json = sandbox_json_others,
        .schedule_records = pool_schedule_records,
};

static void on_connection_closed(Connection *c, void *userdata) {
        manager_schedule_trim(userdata);
}

/* What a connection calls back: requests go to the op table, a close gives the heap back. */
static const ConnectionHooks connection_hooks = {
        .dispatch = ops_dispatch,
        .route = ops_route,
        .closed = on_connection_closed,
};

static int on_never(sd_event_source *s, uint64_t usec, void *userdata) {
        return 0;
}

/* Run timeouts are on CLOCK_BOOTTIME (run.c): sd-event makes that clock's timerfd at its first
 * timer and keeps it; made now, the daemon's fds at rest are those it has after its first run. */
static int make_boottime_timerfd(sd_event *e) {
        sd_event_source *t = NULL;
        int r = sd_event_add_time(e, &t, CLOCK_BOOTTIME, UINT64_MAX, 0, on_never, NULL);
        sd_event_source_disable_unref(t);
        return r;
}

int lifecycle_new(Daemon **ret, Config *config) {
        Daemon *d = calloc(1, sizeof(*d));
        int r;

        if (!d)
                return -ENOMEM;
        context_init(&d->ctx, config);
        d->run_log = (RunLog) { .fd = -EBADF };
        d->ctx.registry = &d->registry;
        d->ctx.pool = &d->pool;
        d->ctx.sweeper = &d->sweeper;
        d->ctx.run_log = &d->run_log;
        d->run_log.adopt = run_adopt;
        d->run_log.adopted = run_note_adopted;
        d->ports = (PortTable) { .dir_fd = -EBADF, .home_netns_fd = -EBADF };
        d->ctx.sandbox_hooks = &sandbox_hooks;
        r = registry_init(&d->registry, d->ctx.config.max_sandboxes + config_pool_total(&d->ctx.config));
        if (r >= 0)
                r = registry_observe(&d->registry, on_registry_changed, d);
        if (r >= 0)
                r = pool_init(&d->pool, &d->ctx);
        if (r >= 0)
                r = sd_event_default(&d->ctx.event);
        if (r >= 0)
                r = make_boottime_timerfd(d->ctx.event);
        if (r >= 0)
                r = manager_new(&d->manager, &d->ctx, &connection_hooks);
        if (r >= 0)
                r = metrics_server_new(&d->metrics, d->manager);
        if (r < 0) {
                *config = d->ctx.config; /* the caller's again, as before the call */
                d->ctx.config = (Config) {};
                lifecycle_free(d);
                return r;
        }
        *ret = d;
        return 0;
}

static bool stop_kills(Daemon *d, Sandbox *s);

Daemon *lifecycle_free(Daemon *d) {
        if (!d)
                return NULL;
        pool_done(&d->ctx); /* nothing refills the pool from here */
        d->holder = hold_free(d->holder); /* before the scopes' bus goes */
        sweep_free_all(&d->ctx);
        idle_exit_done(&d->idle);
        if (d->manager)
                manager_close_connections(d->manager);
        d->metrics = metrics_server_free(d->metrics);
        /* A sandbox left running keeps its way out for the next daemon. */
        for (Sandbox *s = registry_first(&d->registry); s; s = registry_next(&s->entry))
                if (!stop_kills(d, s) && s->init_pidfd >= 0)
                        egress_keep(&d->ctx, &s->net);
        while (registry_first(&d->registry))
                sandbox_free(registry_first(&d->registry));
        ports_done(&d->ports); /* after the sandboxes, whose members the ports are */
        image_store_done(&d->images); /* after the sandboxes, which hold images */
        egress_done(&d->ctx);  /* after the sandboxes, whose interfaces and chains it removed */
        /* After the sandboxes too, whose teardown may start one; before the event loop goes. */
        (void) remove_async_stop(REMOVE_STOP_WAIT_USEC);
        d->manager = manager_free(d->manager);
        safe_close(d->run_log.fd);
        run_results_free(&d->ctx);
        context_done(&d->ctx);
        registry_done(&d->registry);
        fdstore_set_holder(false); /* the holder has its copies now */
        free(d->runtime_dir);
        free(d);
        return NULL;
}

/* ---- Restore at start -------------------------------------------------------------------- */

/* A sandbox whose record cannot be read (torn by a disk fault, edited by hand, too large) keeps
 * everything it has: renamed to .quarantine-<id>, which no start touches again, and counted in
 * health. Its workspace and snapshots are the user's; only a person can tell what went wrong. */
static void quarantine(Context *m, const char *name, int why) {
        char to[NAME_MAX + 32];

        snprintf(to, sizeof(to), QUARANTINE_PREFIX "%s", name);
        for (unsigned i = 1; renameat2(m->state_fd, name, m->state_fd, to, RENAME_NOREPLACE) < 0; i++) {
                if (errno != EEXIST || i > 100) {
                        log_error("sandbox %s: its record is unreadable (%s) and it cannot be set aside: %m; "
                                  "left in place", name, strerror(-why));
                        return;
                }
                snprintf(to, sizeof(to), QUARANTINE_PREFIX "%s.%u", name, i);
        }
        log_error_errno(why, "sandbox %s: its record (meta.json) is unreadable: %m; its workspace and snapshots are kept "
                        "in %s for a person to look at",
                        name, to);
}

/* One entry of <state>/sandboxes: a recorded sandbox comes back; a sandbox never recorded (no
 * meta.json: a throwaway one, a create cut short) or a workspace being removed is what a crash
 * interrupted, and goes; a record that cannot be read is set aside, never removed. */
static void restore_entry(Context *m, const char *name) {
        _cleanup_json_ json_object *meta = NULL;
        Sandbox *s;
        int r;

        /* <state>/sandboxes may be a filesystem's root (storage = image, or one an administrator
         * mounted there): its lost+found is fsck's. */
        if (strcmp(name, "lost+found") == 0)
                return;
        bool unfinished_fork = state_is_sandbox_id(name) && snapshot_cleanup_partial(m->state_fd, name) == -ESTALE;

        if (unfinished_fork)
                snapshot_discard_cgroup(m, name);
        r = state_is_sandbox_id(name) && !unfinished_fork ? state_read(m->state_fd, name, &meta) : -ENOENT;
        if (r == -ENOMEM) {
                log_error("sandbox %s: no memory to read its record; left as it is for the next start", name);
                return;
        }
        if (r < 0 && r != -ENOENT) {
                quarantine(m, name, r);
                return;
        }
        if (r >= 0) {
                r = sandbox_restore(m, meta, &s);
                if (r < 0)
                        log_warning_errno(r, "sandbox %s: cannot restore it: %m; its workspace stays in place", name);
                else {
                        log_info("sandbox %s restored after a restart", name);
                        state_restore_fields(s, meta);
                        (void) run_records_collect(s);
                        session_restore_all(s);
                }
                return;
        }
        if (name[0] == '.' && strncmp(name, ".trash-", 7) != 0)
                return;
        log_info("removing %s, left half-done by an earlier run", name);
        r = rm_rf_at(m->state_fd, name);
        if (r < 0)
                log_warning_errno(r, "cannot remove %s: %m", name);
}

/* A cgroup below sandboxes/ that no restored sandbox claims: a throwaway sandbox (never
 * recorded) of a daemon that died, with whatever still runs in it. Its processes are killed and
 * the cgroup removed; recorded sandboxes replaced theirs in sandbox_restore(). */
static void remove_stale_cgroup(Context *m, const char *name) {
        _cleanup_close_ int fd = openat(m->cg.sandboxes_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int r;

        if (fd < 0)
                return;
        (void) cg_kill_wait_empty(fd, false, 1000);
        r = cg_remove_tree(m->cg.sandboxes_fd, name);
        if (r < 0)
                log_warning_errno(r, "cannot remove the stale cgroup sandboxes/%s: %m", name);
        else
                log_info("removed the stale cgroup sandboxes/%s of an earlier daemon", name);
}

static void remove_stale_cgroups(Context *m) {
        int fd = openat(m->cg.sandboxes_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d;
        struct dirent *de;

        if (fd < 0 || !(d = fdopendir(fd))) {
                safe_close(fd);
                return;
        }
        while ((de = readdir(d)))
                if (de->d_type == DT_DIR && state_is_sandbox_id(de->d_name) && !registry_find(m->registry, de->d_name))
                        remove_stale_cgroup(m, de->d_name);
        closedir(d);
}

/* A scope of our slice (scope_slice_name()) that no restored sandbox claims (a throwaway sandbox of a daemon that
 * died, a record removed by hand): its processes killed, the scope stopped. */
static void stop_stale_scope(Context *m, int slice_fd, const char *unit) {
        _cleanup_close_ int fd = openat(slice_fd, unit, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int r;

        if (fd < 0)
                return;
        (void) cg_kill_wait_empty(fd, true, 1000);
        r = scope_stop(m->scopes, unit);
        if (r < 0)
                log_warning_errno(r, "cannot stop the stale scope %s: %m", unit);
        else
                log_info("stopped the stale scope %s of an earlier daemon", unit);
}

static void stop_stale_scopes(Context *m) {
        int fd = m->scopes ? scope_open_slice(m->scopes) : -ENOENT;
        char id[32];
        DIR *d;
        struct dirent *de;

        if (fd < 0 || !(d = fdopendir(fd))) {
                safe_close(fd);
                return;
        }
        while ((de = readdir(d)))
                if (de->d_type == DT_DIR && scope_unit_id(de->d_name, id, sizeof(id)) && state_is_sandbox_id(id) &&
                    !registry_find(m->registry, id))
                        stop_stale_scope(m, dirfd(d), de->d_name);
        closedir(d);
}

static int restore_all(Context *m) {
        int fd = openat(m->state_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d;
        struct dirent *de;

        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        restore_entry(m, de->d_name);
        /* Counted once the renames are done: a directory renamed while it is read may be seen
         * under both names. */
        rewinddir(d);
        m->registry->n_quarantined = 0;
        while ((de = readdir(d)))
                if (strncmp(de->d_name, QUARANTINE_PREFIX, strlen(QUARANTINE_PREFIX)) == 0)
                        m->registry->n_quarantined++;
        closedir(d);
        remove_stale_cgroups(m);
        stop_stale_scopes(m);
        return 0;
}

/* Stored fds no restored sandbox or run claimed (a sandbox destroyed by hand, a record set aside,
 * a run that ended as its daemon died): systemd must not keep them for ever. */
static void drop_unclaimed(Context *m) {
        size_t n = fdstore_drop_unclaimed(&m->fdstore);
        if (n > 0)
                log_info("closed %zu fd(s) of the fd store that no sandbox claims", n);
}

/* ---- Setup -------------------------------------------------------------------------------- */

static int mkdir_parents_and(const char *path, mode_t mode) {
        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        for (char *s = p + 1; *s; s++)
                if (*s == '/') {
                        *s = '\0';
                        (void) mkdir(p, 0755);
                        *s = '/';
                }
        if (mkdir(p, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

/* One daemon per state directory, as per cgroup subtree (cgroup.c, cg_lock()): a second one,
 * given another subtree, would restore the first's sandboxes as its own and start inits of its
 * own in them. flock on an fd of the directory's, O_CLOEXEC, held for the daemon's life. */
static int lock_state(const char *dir) {
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        int r = flock_wait(fd, 50);
        if (r == 0)
                return 0; /* fd stays open: the lock goes with the process */
        close(fd);
        if (r == -EBUSY)
                log_error("another sandboxd uses the state directory %s: two daemons must never share one (each would "
                          "restore the other's sandboxes as its own). Give this daemon a state directory of its own "
                          "with --state-dir (state_dir in sandboxd.conf), or stop the other one first",
                          dir);
        return r;
}

static int open_state(Context *ctx) {
        _cleanup_free_ char *dir = NULL;
        int r;

        if (asprintf(&dir, "%s/sandboxes", ctx->config.state_dir) < 0)
                return -ENOMEM;
        r = mkdir_parents_and(dir, 0711);
        if (r < 0 || (r = lock_state(ctx->config.state_dir)) < 0 || (r = storage_prepare(ctx, dir)) < 0)
                return r;
        ctx->state_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (ctx->state_fd < 0)
                return -errno;
        storage_probe(ctx, dir);
        return 0;
}

/* An overlay of root_dir's /usr (and /etc) with its upper in the state directory, made and
 * dropped once at start: what create's "root": "overlay" needs (overlayfs, idmapped layers on
 * the filesystem of root_dir, an upper on the state directory's; not on an overlayfs there).
 * Then the same over an empty directory in the image store (<state_dir>/images, which may be a
 * filesystem of its own): what an image's overlay root needs. A host whose root cannot be
 * idmapped (a 9p or overlayfs root, as in a VM or a container) may still give images theirs. */
static void probe_root_overlay(Context *ctx) {
        static char step[160], image_step[160];
        char path[4096], image_root[4096];
        int r;

        if (!ctx->features.mount_idmap || ctx->run_helper_fd < 0) {
                /* Only a process of its own may leave the daemon's mount namespace to make them. */
                r = !ctx->features.mount_idmap ? -EOPNOTSUPP : -ENOENT;
                ctx->features.root_overlay_error = ctx->features.image_overlay_error = r;
                ctx->features.root_overlay_step = ctx->features.image_overlay_step =
                        !ctx->features.mount_idmap ? "idmapped mounts" : "no " RUN_HELPER_NAME;
                return;
        }
        snprintf(path, sizeof(path), "%s/sandboxes", ctx->config.state_dir);
        r = root_overlay_probe(ctx->config.root_dir, NULL, ctx->state_fd, path, (uid_t) ctx->config.uid_base,
                               (unsigned) ctx->config.uid_range, step, sizeof(step));
        ctx->features.root_overlay_error = r;
        ctx->features.root_overlay_step = r < 0 ? step : NULL;
        if (r < 0)
                log_info_errno(r, "overlay roots (create's \"root\": \"overlay\") do not work here: %s: %m", step);

        /* One name: what a daemon killed in the middle of it left is removed by the next. */
        /* The store's loader leaves out names that are not images' (image_name_valid()). */
        snprintf(image_root, sizeof(image_root), "%s/images", ctx->config.state_dir);
        (void) mkdir(image_root, 0700);
        snprintf(image_root, sizeof(image_root), "%s/images/.overlay-probe", ctx->config.state_dir);
        (void) rmdir(image_root);
        if (mkdir(image_root, 0755) < 0) {
                r = -errno;
                snprintf(image_step, sizeof(image_step), "an empty directory in the image store");
        } else
                r = root_overlay_probe(NULL, image_root, ctx->state_fd, path, (uid_t) ctx->config.uid_base,
                                       (unsigned) ctx->config.uid_range, image_step, sizeof(image_step));
        (void) rmdir(image_root);
        ctx->features.image_overlay_error = r;
        ctx->features.image_overlay_step = r < 0 ? image_step : NULL;
        if (r < 0)
                log_info_errno(r, "overlay roots of images do not work here: %s: %m", image_step);
}

/* A tiny clone3(CLONE_INTO_CGROUP) of a child that exits at once tells whether the kernel
 * places children at birth (5.7+). */
static void probe_features(Context *ctx) {
        /* Our own leaf: the only cgroup of ours without children's controllers enabled. */
        _cleanup_close_ int leaf = openat(ctx->cg.base_fd, "daemon", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int pidfd = -1;
        pid_t pid = clone3_pidfd(0, leaf, &pidfd);

        if (pid == 0)
                _exit(0);
        if (pid > 0 && leaf >= 0) {
                siginfo_t si;
                (void) waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED);
                close(pidfd);
                ctx->features.clone_into_cgroup = true;
        }
        pidfd = (int) syscall(SYS_pidfd_open, getpid(), 0);
        ctx->features.pidfd = pidfd >= 0;
        safe_close(pidfd);
        ctx->features.pidfd_exit_info = pidfd_exit_info_supported();
        ctx->features.mount_idmap = mount_idmap_supported();
        probe_root_overlay(ctx);
}

static void on_holder_ready(void *userdata) {
        Daemon *d = userdata;
        (void) sd_event_exit(d->ctx.event, 0);
}

static int on_holder_late(sd_event_source *s, uint64_t usec, void *userdata) {
        on_holder_ready(userdata);
        return 0;
}

/* With a holder and something for it, the loop ends once the holder is placed (its scope's job
 * done, at most 5 s): then the fds are handed to it (lifecycle_run()). */
static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Daemon *d = userdata;
        int r;

        log_info("received SIG%s, stopping", si->ssi_signo == SIGTERM ? "TERM" : "INT");
        d->manager->stopping = true;
        (void) sd_notify(0, "STOPPING=1\nSTATUS=Stopping");
        if (d->holder || !fdstore_holder_enabled() || fdstore_kept()->n == 0)
                return sd_event_exit(d->ctx.event, 0);
        r = hold_spawn(&d->ctx, d->runtime_dir, on_holder_ready, d, &d->holder);
        if (r < 0) {
                log_warning_errno(r, "cannot start a holder (%m): sessions and runs end with the daemon");
                return sd_event_exit(d->ctx.event, 0);
        }
        if (sd_event_add_time_relative(d->ctx.event, NULL, CLOCK_MONOTONIC, 5 * USEC_PER_SEC, 0, on_holder_late, d) < 0)
                return sd_event_exit(d->ctx.event, 0);
        return 0;
}

static int resolve_admin_group(Context *ctx) {
        struct group *g;
        if (!ctx->config.admin_group)
                return 0;
        errno = 0;
        g = getgrnam(ctx->config.admin_group);
        if (!g) {
                log_error("configuration: admin_group '%s' is not a group on this host", ctx->config.admin_group);
                return errno ? -errno : -ENOENT;
        }
        ctx->admin_gid = g->gr_gid;
        ctx->have_admin_gid = true;
        return 0;
}

static uint64_t ignored_signals(void) {
        uint64_t mask = 0;
        for (int sig = 1; sig <= 64 && sig < NSIG; sig++) {
                struct sigaction sa;
                if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
                        mask |= UINT64_C(1) << (sig - 1);
        }
        return mask;
}

/* The unit protects the daemon from the OOM killer (OOMScoreAdjust=); its runs inherit that
 * unless the helper resets it (THREATS RES-11). */
static bool oom_score_negative(void) {
        char buf[32];
        return read_small_file(AT_FDCWD, "/proc/self/oom_score_adj", false, buf, sizeof(buf)) > 0 && buf[0] == '-';
}

/* What every run needs and is the same for all: the compiled filter, the helper binary. */
static int prepare_runs(Context *ctx) {
        int r = seccomp_prepare(&ctx->filter);
        if (r < 0)
                return log_error_errno(r, "cannot compile the run filter: %m");
        ctx->ignored_signals = ignored_signals();
        ctx->oom_score_negative = oom_score_negative();
        ctx->run_helper_fd = run_exec_open_helper();
        ctx->file_helper_fd = run_exec_open_binary(FILE_HELPER_NAME, "SANDBOXD_FILE_HELPER");
        if (ctx->file_helper_fd < 0)
                log_info("no %s (%s): file operations are refused", FILE_HELPER_NAME, strerror(-ctx->file_helper_fd));
        ctx->self_pidns_fd = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
        if (ctx->run_helper_fd < 0)
                log_info_errno(ctx->run_helper_fd, "no %s (%m): runs' helpers are clones of the daemon", RUN_HELPER_NAME);
        else if ((r = run_exec_reserve_slots()) < 0)
                log_info_errno(r, "no fd slots for the run helper (%m): each start copies the whole fd table");
        /* The helper joins the namespace it is given; a clone of the daemon makes its own. */
        r = netns_pool_init(&ctx->netns, ctx->run_helper_fd >= 0 ? NETNS_IDLE_MAX : 0);
        if (r < 0)
                log_info_errno(r, "no network namespaces used again (%m): each sandbox makes its own");
        /* Before any sandbox is restored: an earlier daemon's interfaces and rules go first. */
        r = egress_init(ctx);
        if (r < 0)
                return log_error_errno(r, "cannot set up egress: %m");
        return 0;
}

/* Each sandbox in a transient scope of its own where systemd can make one (placement "scope"),
 * else in the daemon's subtree ("subtree"): standalone, a cgroup_root of the configuration (the
 * host test suite), no helper for the scopes' placeholders, or SANDBOXD_PLACEMENT=subtree. */
static void setup_placement(Context *ctx) {
        const char *e = getenv("SANDBOXD_PLACEMENT");
        int r;

        if ((e && strcmp(e, "subtree") == 0) || ctx->config.cgroup_root || ctx->run_helper_fd < 0)
                return;
        char slice[SCOPE_SLICE_MAX];
        r = scope_manager_new(ctx->event, ctx->cg.mount, scope_slice_name(slice, ctx->config.state_dir), &ctx->scopes);
        if (r == -EHOSTDOWN) /* scope_manager_new(): sd_booted() says PID 1 is not systemd */
                log_info("this host was not booted with systemd (PID 1 is another init), so there are no scopes "
                         "to make: each sandbox is a child cgroup of the daemon's subtree");
        else if (r < 0)
                log_info_errno(r, "cannot make systemd scopes (%m): each sandbox is a child cgroup of the daemon's "
                                  "subtree");
        else
                log_info("each sandbox in a scope of its own, in %s (state directory %s)", slice, ctx->config.state_dir);
}

int lifecycle_setup_context(Context *ctx) {
        sigset_t mask;
        int r;

        r = resolve_admin_group(ctx);
        if (r < 0)
                return r;
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return -errno;
        (void) signal(SIGPIPE, SIG_IGN);
        r = prepare_runs(ctx);
        if (r < 0)
                return r;
        r = cg_setup(ctx->config.cgroup_root, &ctx->cg);
        if (r < 0)
                return log_error_errno(r, "cannot set up the cgroup subtree: %m");
        if (ctx->event)
                setup_placement(ctx);
        r = open_state(ctx);
        if (r < 0)
                return log_error_errno(r, "cannot open the state directory %s: %m", ctx->config.state_dir);
        probe_features(ctx);
        r = dev_template_prepare(ctx->config.state_dir, &ctx->dev_dir);
        if (r < 0)
                log_warning_errno(r, "cannot prepare %s/dev (%m): each sandbox binds the host's device nodes instead, which is slower",
                                  ctx->config.state_dir);
        return 0;
}

/* Published ports' sockets and the holder's socket go beside the daemon's socket (under systemd
 * /run/sandboxd, its RuntimeDirectory=). */
static int find_runtime_dir(Daemon *d) {
        const char *e = getenv("RUNTIME_DIRECTORY");
        char *slash;

        if (d->manager->n_listen > 0 && d->manager->listen_paths[0] && d->manager->listen_paths[0][0] == '/') {
                d->runtime_dir = strdup(d->manager->listen_paths[0]);
                if (!d->runtime_dir)
                        return -ENOMEM;
                slash = strrchr(d->runtime_dir, '/');
                slash[slash == d->runtime_dir] = '\0';
        } else if (e && e[0] == '/' && !(d->runtime_dir = strndup(e, strcspn(e, ":"))))
                return -ENOMEM;
        return 0;
}

/* The ports' directory there, emptied of an earlier daemon's. */
static int setup_ports(Daemon *d) {
        int r = ports_init(&d->ports, &d->ctx, d->runtime_dir);
        if (r < 0)
                return log_error_errno(r, "cannot set up published ports: %m");
        d->ctx.ports = &d->ports;
        return 0;
}

int lifecycle_setup(Daemon *d) {
        Context *ctx = &d->ctx;
        int r;

        r = lifecycle_setup_context(ctx);
        if (r < 0)
                return r;
        /* The pipe of the reads that announce themselves (runs' captures, sessions' rings). */
        r = pipe_peek_init();
        if (r < 0)
                return log_error_errno(r, "cannot make a pipe: %m");
        /* The listeners' paths are masked in every sandbox: known before the first is restored. */
        r = manager_setup(d->manager);
        if (r < 0)
                return r;
        metrics_server_setup(d->metrics);
        if ((r = sd_event_add_signal(ctx->event, NULL, SIGTERM, on_signal, d)) < 0 ||
            (r = sd_event_add_signal(ctx->event, NULL, SIGINT, on_signal, d)) < 0)
                return r;
        if ((r = find_runtime_dir(d)) < 0 || (r = setup_ports(d)) < 0)
                return r;
        /* A holder (hold.h) keeps what the fd store keeps across a stop and a start too, and
         * standalone; its fds join the store's before anything claims them. */
        fdstore_set_holder(ctx->config.hold_timeout_usec > 0 && !ctx->config.stop_sandboxes);
        r = hold_take_back(ctx, d->runtime_dir);
        if (r < 0)
                log_warning_errno(r, "cannot take the fds back from a holder: %m");
        /* Before the restore: a restored sandbox takes its image again. */
        r = image_store_open(&d->images, ctx);
        if (r < 0)
                return log_error_errno(r, "cannot open the image store %s/images: %m", ctx->config.state_dir);
        ctx->images = &d->images;
        d->images.imported = pool_schedule_refill;
        r = restore_all(ctx);
        if (r < 0)
                log_warning_errno(r, "cannot read the state directory: %m");
        egress_restored(ctx);
        r = run_log_open(ctx);
        if (r < 0)
                log_warning_errno(r, "cannot open %s/runs.log: %m; runs in flight will not be reported after a crash",
                                  ctx->config.state_dir);
        drop_unclaimed(ctx); /* after runs.log: its runs in flight claim theirs */
        for (Sandbox *s = registry_first(ctx->registry); s; s = registry_next(&s->entry))
                if (s->init_adopted)
                        sandbox_clear_unclaimed_runs(s); /* likewise their cgroups */
        run_results_load(ctx);
        if ((r = sweep_setup_timer(ctx)) < 0 || (r = idle_exit_setup(&d->idle, d->manager, daemon_busy, d)) < 0)
                return r;
        log_info("cgroup subtree %s; enforceable: memory=%s pids=%s cpu=%s", ctx->cg.base,
                 ctx->cg.enforceable & CG_MEMORY ? "yes" : "no", ctx->cg.enforceable & CG_PIDS ? "yes" : "no",
                 ctx->cg.enforceable & CG_CPU ? "yes" : "no");
        return 0;
}

/* ---- Stopping ----------------------------------------------------------------------------- */

/* What a stop kills: with stop_sandboxes, everything; else only what no next daemon could take
 * back (a throwaway, pooled or "ephemeral" sandbox, never recorded; one not ready yet, whose init waits for a
 * go that will not come). A ready recorded sandbox goes on running: its runs and sessions lose
 * their daemon's end of their pipes and terminal, and are reported lost by the next one. */
static bool stop_kills(Daemon *d, Sandbox *s) {
        return d->ctx.config.stop_sandboxes || s->ephemeral || s->transient || s->pooled || s->state != SANDBOX_READY;
}

/* On stop, those sandboxes' processes are killed and their cgroups removed; workspaces stay. */
static void kill_all(Daemon *d) {
        Registry *reg = &d->registry;

        for (Sandbox *s = registry_first(reg); s; s = registry_next(&s->entry)) {
                snapshot_job_abort(s); /* its copy killed, its sandbox thawed */
                if (s->cg_fd >= 0 && stop_kills(d, s))
                        (void) cg_kill(s->cg_fd);
        }
        for (int tries = 0; tries < 200; tries++) {
                bool busy = false;
                for (Sandbox *s = registry_first(reg); s; s = registry_next(&s->entry))
                        if (s->cg_fd >= 0 && stop_kills(d, s) && cg_populated(s->cg_fd) > 0)
                                busy = true;
                while (waitpid(-1, NULL, WNOHANG) > 0)
                        ;
                if (!busy)
                        break;
                usleep(10000);
        }
        for (Sandbox *s = registry_first(reg); s; s = registry_next(&s->entry))
                if (stop_kills(d, s)) {
                        (void) cg_remove_tree(sandbox_cg_parent_fd(s), sandbox_cg_name(s));
                        sandbox_release_scope(s);
                }
}

int lifecycle_run(Daemon *d) {
        Context *ctx = &d->ctx;
        int r;

        (void) sd_notifyf(0, "READY=1\nSTATUS=Listening; cgroup memory=%s pids=%s cpu=%s",
                          ctx->cg.enforceable & CG_MEMORY ? "enforced" : "unavailable",
                          ctx->cg.enforceable & CG_PIDS ? "enforced" : "unavailable",
                          ctx->cg.enforceable & CG_CPU ? "enforced" : "unavailable");
        pool_schedule_refill(ctx);
        r = sd_event_loop(ctx->event);
        ctx->stopping = true;
        d->pool.stopping = d->sweeper.stopping = true; /* nothing refills or sweeps from here */
        kill_all(d);
        if (d->holder)
                (void) hold_hand_over(d->holder);
        return r;
}
