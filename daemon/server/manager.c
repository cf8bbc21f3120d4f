/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <malloc.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "connection.h"
#include "idle-exit.h"
#include "log.h"
#include "macro.h"
#include "dev-template.h"
#include "manager.h"
#include "ops.h"
#include "run-record.h"
#include "pool.h"
#include "run-exec.h"
#include "run.h"
#include "sandbox.h"
#include "snapshot.h"
#include "spawn.h"
#include "state.h"
#include "sweep.h"
#include "util.h"

int manager_new(Manager **ret, Config *config) {
        Manager *m = calloc(1, sizeof(*m));
        int r;

        if (!m)
                return -ENOMEM;
        m->config = *config;
        *config = (Config) {};
        m->state_fd = m->run_helper_fd = m->self_pidns_fd = m->run_log_fd = -EBADF;
        m->netns.host_fd = -EBADF;
        m->cg = (CgroupRoot) { .base_fd = -EBADF, .sandboxes_fd = -EBADF };
        m->start_usec = now_usec(CLOCK_MONOTONIC);
        m->uid_slots = calloc(m->config.max_sandboxes + m->config.pool_size, 1);
        m->tombstones = calloc(MANAGER_TOMBSTONES, sizeof(*m->tombstones));
        if (!m->uid_slots || !m->tombstones) {
                manager_free(m);
                return -ENOMEM;
        }
        r = sd_event_default(&m->event);
        if (r < 0) {
                manager_free(m);
                return r;
        }
        *ret = m;
        return 0;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        m->stopping = true; /* nothing refills the pool from here */
        pool_done(m);
        sweep_free_all(m);
        m->idle_timer = sd_event_source_disable_unref(m->idle_timer);
        while (m->connections)
                connection_close_now(m->connections);
        while (m->sandboxes)
                sandbox_free(m->sandboxes);
        m->accept_timer = sd_event_source_disable_unref(m->accept_timer);
        m->trim_timer = sd_event_source_disable_unref(m->trim_timer);
        for (unsigned i = 0; i < m->n_listen; i++) {
                m->listen_sources[i] = sd_event_source_disable_unref(m->listen_sources[i]);
                safe_close(m->listen_fds[i]);
                free(m->listen_paths[i]);
        }
        safe_close(m->state_fd);
        safe_close(m->run_helper_fd);
        safe_close(m->self_pidns_fd);
        netns_pool_done(&m->netns);
        free(m->filter.insns);
        cg_root_done(&m->cg);
        config_done(&m->config);
        free(m->uid_slots);
        free(m->dev_dir);
        safe_close(m->run_log_fd);
        free(m->tombstones);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}

/* Both lookups walk the whole list, found or not: a sandbox of someone else's is not told from
 * one that does not exist by how long the answer takes. */
Sandbox *manager_find_sandbox(Manager *m, const char *id) {
        Sandbox *found = NULL;

        for (Sandbox *s = m->sandboxes; s; s = s->next)
                if (!found && strcmp(s->id, id) == 0)
                        found = s;
        return found;
}

Sandbox *manager_find_named(Manager *m, uid_t owner, const char *name) {
        Sandbox *found = NULL;

        for (Sandbox *s = m->sandboxes; s; s = s->next)
                if (!found && s->name && s->owner_uid == owner && strcmp(s->name, name) == 0)
                        found = s;
        return found;
}

void manager_add_tombstone(Manager *m, const char *id, uid_t owner) {
        Tombstone *t = &m->tombstones[m->tombstone_next];

        snprintf(t->id, sizeof(t->id), "%s", id);
        t->owner_uid = owner;
        m->tombstone_next = (m->tombstone_next + 1) % MANAGER_TOMBSTONES;
        if (m->n_tombstones < MANAGER_TOMBSTONES)
                m->n_tombstones++;
}

/* The whole ring every time, for the same reason as above. */
bool manager_find_tombstone(Manager *m, const char *id, uid_t *ret_owner) {
        const Tombstone *found = NULL;

        for (unsigned i = 0; i < m->n_tombstones; i++)
                if (!found && strcmp(m->tombstones[i].id, id) == 0)
                        found = &m->tombstones[i];
        if (found)
                *ret_owner = found->owner_uid;
        return found;
}

int manager_alloc_uid_slot(Manager *m, unsigned *ret) {
        for (unsigned i = 0; i < m->config.max_sandboxes + m->config.pool_size; i++)
                if (!m->uid_slots[i]) {
                        m->uid_slots[i] = 1;
                        *ret = i;
                        return 0;
                }
        return -ENOSPC;
}

void manager_free_uid_slot(Manager *m, unsigned slot) {
        if (slot < m->config.max_sandboxes + m->config.pool_size)
                m->uid_slots[slot] = 0;
}

/* ---- Listening --------------------------------------------------------------------------- */

#define ACCEPT_PAUSE_USEC (100 * USEC_PER_MSEC)

static int on_accept_resume(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        for (unsigned i = 0; i < m->n_listen; i++)
                (void) sd_event_source_set_enabled(m->listen_sources[i], SD_EVENT_ON);
        return 0;
}

/* Out of fds: the pending connection stays in the backlog and the listening socket stays
 * readable, so a level-triggered loop would call us again at once, forever. Stop listening for
 * a moment instead; closing connections and finishing runs give fds back meanwhile. */
static void manager_pause_accept(Manager *m) {
        int r;

        if (m->accept_paused_count++ % 100 == 0)
                log_warning("accept: out of file descriptors; not accepting for %d ms (%u times so far)",
                            (int) (ACCEPT_PAUSE_USEC / USEC_PER_MSEC), m->accept_paused_count);
        for (unsigned i = 0; i < m->n_listen; i++)
                (void) sd_event_source_set_enabled(m->listen_sources[i], SD_EVENT_OFF);
        /* Made at start (manager_setup): making it now could need an fd itself. */
        r = sd_event_source_set_time_relative(m->accept_timer, ACCEPT_PAUSE_USEC);
        if (r >= 0)
                r = sd_event_source_set_enabled(m->accept_timer, SD_EVENT_ONESHOT);
        if (r < 0) /* no timer: listen again rather than never */
                on_accept_resume(NULL, 0, m);
}

/* One line, resource_exhausted, to a connection we do not take; then it is closed. */
static void refuse(int cfd, const ProtoError *err) {
        _cleanup_json_ json_object *reply = proto_reply_error(NULL, err);
        _cleanup_free_ char *line = NULL;
        size_t n;

        line = proto_serialize(reply, &n);
        if (line)
                (void) !send(cfd, line, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        close(cfd);
}

static void on_connection_closed(Connection *c, void *userdata) {
        manager_schedule_trim(userdata);
}

/* What a connection calls back: requests go to the op table, a close gives the heap back. */
static const ConnectionHooks connection_hooks = {
        .dispatch = ops_dispatch,
        .closed = on_connection_closed,
};

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Manager *m = userdata;
        Connection *c;
        ProtoError err;

        for (int i = 0; i < 64; i++) {
                int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (cfd < 0) {
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                                manager_pause_accept(m);
                        else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                                log_warning("accept: %m");
                        return 0;
                }
                struct ucred peer;
                socklen_t len = sizeof(peer);

                if (m->n_connections >= m->config.max_connections || m->stopping) {
                        proto_error_set(&err, SBX_E_RESOURCE_EXHAUSTED, NULL, "too many connections");
                        refuse(cfd, &err);
                        continue;
                }
                if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &peer, &len) < 0) {
                        close(cfd);
                        continue;
                }
                /* One uid may not take every connection: the others could not even ask (THREATS
                 * PRO-07). */
                if (peer.uid != 0 && connection_uid_usage(m, peer.uid).connections >= m->config.max_connections_per_uid) {
                        proto_error_set(&err, SBX_E_RESOURCE_EXHAUSTED, NULL,
                                        "uid %u has its maximum of %" PRIu64 " connections (max_connections_per_uid)",
                                        (unsigned) peer.uid, m->config.max_connections_per_uid);
                        refuse(cfd, &err);
                        continue;
                }
                if (connection_new(m, cfd, &peer, &connection_hooks, m, &c) < 0)
                        close(cfd);
        }
        return 0;
}

static char *socket_path(int fd) {
        struct sockaddr_un sa = {};
        socklen_t len = sizeof(sa);
        if (getsockname(fd, (struct sockaddr *) &sa, &len) < 0 || sa.sun_family != AF_UNIX || sa.sun_path[0] != '/')
                return NULL;
        return strndup(sa.sun_path, sizeof(sa.sun_path));
}

int manager_add_listener(Manager *m, int fd) {
        int r;

        if (m->n_listen >= MANAGER_MAX_LISTEN)
                return -E2BIG;
        r = fcntl(fd, F_SETFL, O_NONBLOCK);
        if (r < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
                return -errno;
        /* Referenced, to be paused when we run out of fds; unref'd by manager_free(). */
        r = sd_event_add_io(m->event, &m->listen_sources[m->n_listen], fd, EPOLLIN, on_accept, m);
        if (r < 0)
                return r;
        m->listen_paths[m->n_listen] = socket_path(fd);
        m->listen_fds[m->n_listen++] = fd;
        return 0;
}

/* ---- Memory ----------------------------------------------------------------------------- */

#define TRIM_DELAY_USEC (1 * USEC_PER_SEC)

static int on_trim(sd_event_source *s, uint64_t usec, void *userdata) {
        /* Freed memory in the middle of the heap (a burst of connections, big replies) would
         * stay counted in our RSS; give whole free pages back. */
        (void) malloc_trim(0);
        return 0;
}

void manager_schedule_trim(Manager *m) {
        if (m->stopping || !m->event)
                return;
        if (!m->trim_timer) {
                if (sd_event_add_time_relative(m->event, &m->trim_timer, CLOCK_MONOTONIC, TRIM_DELAY_USEC,
                                               100 * USEC_PER_MSEC, on_trim, m) < 0)
                        return;
                (void) sd_event_source_set_priority(m->trim_timer, SD_EVENT_PRIORITY_IDLE);
                return;
        }
        if (sd_event_source_get_enabled(m->trim_timer, NULL) > 0)
                return; /* one trim a second at most */
        (void) sd_event_source_set_time_relative(m->trim_timer, TRIM_DELAY_USEC);
        (void) sd_event_source_set_enabled(m->trim_timer, SD_EVENT_ONESHOT);
}

/* ---- Setup ------------------------------------------------------------------------------- */

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

static int manager_open_state(Manager *m) {
        _cleanup_free_ char *dir = NULL;
        int r;

        if (asprintf(&dir, "%s/sandboxes", m->config.state_dir) < 0)
                return -ENOMEM;
        r = mkdir_parents_and(dir, 0711);
        if (r < 0)
                return r;
        m->state_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return m->state_fd < 0 ? -errno : 0;
}

/* A tiny clone3(CLONE_INTO_CGROUP) of a child that exits at once tells whether the kernel
 * places children at birth (5.7+). */
static void manager_probe_features(Manager *m) {
        /* Our own leaf: the only cgroup of ours without children's controllers enabled. */
        _cleanup_close_ int leaf = openat(m->cg.base_fd, "daemon", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int pidfd = -1;
        pid_t pid = clone3_pidfd(0, leaf, &pidfd);

        if (pid == 0)
                _exit(0);
        if (pid > 0 && leaf >= 0) {
                siginfo_t si;
                (void) waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED);
                close(pidfd);
                m->features.clone_into_cgroup = true;
        }
        pidfd = (int) syscall(SYS_pidfd_open, getpid(), 0);
        m->features.pidfd = pidfd >= 0;
        safe_close(pidfd);
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;
        log_info("received SIG%s, stopping", si->ssi_signo == SIGTERM ? "TERM" : "INT");
        m->stopping = true;
        (void) sd_notify(0, "STOPPING=1\nSTATUS=Stopping");
        return sd_event_exit(m->event, 0);
}

static int manager_resolve_admin_group(Manager *m) {
        struct group *g;
        if (!m->config.admin_group)
                return 0;
        errno = 0;
        g = getgrnam(m->config.admin_group);
        if (!g) {
                log_error("configuration: admin_group '%s' is not a group on this host", m->config.admin_group);
                return errno ? -errno : -ENOENT;
        }
        m->admin_gid = g->gr_gid;
        m->have_admin_gid = true;
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
static int manager_prepare_runs(Manager *m) {
        int r = seccomp_prepare(&m->filter);
        if (r < 0) {
                log_error("cannot compile the run filter: %s", strerror(-r));
                return r;
        }
        m->ignored_signals = ignored_signals();
        m->oom_score_negative = oom_score_negative();
        m->run_helper_fd = run_exec_open_helper();
        m->self_pidns_fd = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
        if (m->run_helper_fd < 0)
                log_info("no %s (%s): runs' helpers are clones of the daemon", RUN_HELPER_NAME,
                         strerror(-m->run_helper_fd));
        else if ((r = run_exec_reserve_slots()) < 0)
                log_info("no fd slots for the run helper (%s): each start copies the whole fd table", strerror(-r));
        /* The helper joins the namespace it is given; a clone of the daemon makes its own. */
        r = netns_pool_init(&m->netns, m->run_helper_fd >= 0 ? NETNS_IDLE_MAX : 0);
        if (r < 0)
                log_info("no network namespaces used again (%s): each sandbox makes its own", strerror(-r));
        return 0;
}

int manager_setup(Manager *m) {
        sigset_t mask;
        int r;

        r = manager_resolve_admin_group(m);
        if (r < 0)
                return r;
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return -errno;
        (void) signal(SIGPIPE, SIG_IGN);
        r = manager_prepare_runs(m);
        if (r < 0)
                return r;
        r = sd_event_add_time_relative(m->event, &m->accept_timer, CLOCK_MONOTONIC, ACCEPT_PAUSE_USEC,
                                       10 * USEC_PER_MSEC, on_accept_resume, m);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(m->accept_timer, SD_EVENT_OFF);
        if ((r = sd_event_add_signal(m->event, NULL, SIGTERM, on_signal, m)) < 0 ||
            (r = sd_event_add_signal(m->event, NULL, SIGINT, on_signal, m)) < 0)
                return r;
        r = cg_setup(m->config.cgroup_root, &m->cg);
        if (r < 0) {
                log_error("cannot set up the cgroup subtree: %s", strerror(-r));
                return r;
        }
        r = manager_open_state(m);
        if (r < 0) {
                log_error("cannot open the state directory %s: %s", m->config.state_dir, strerror(-r));
                return r;
        }
        manager_probe_features(m);
        r = dev_template_prepare(m->config.state_dir, &m->dev_dir);
        if (r < 0)
                log_warning("cannot prepare %s/dev (%s): each sandbox binds the host's device nodes instead, which is slower",
                            m->config.state_dir, strerror(-r));
        r = state_restore_all(m);
        if (r < 0)
                log_warning("cannot read the state directory: %s", strerror(-r));
        r = run_log_open(m);
        if (r < 0)
                log_warning("cannot open %s/runs.log: %s; runs in flight will not be reported after a crash",
                            m->config.state_dir, strerror(-r));
        if ((r = sweep_setup_timer(m)) < 0 || (r = idle_exit_setup(m)) < 0)
                return r;
        log_info("cgroup subtree %s; enforceable: memory=%s pids=%s cpu=%s", m->cg.base,
                 m->cg.enforceable & CG_MEMORY ? "yes" : "no", m->cg.enforceable & CG_PIDS ? "yes" : "no",
                 m->cg.enforceable & CG_CPU ? "yes" : "no");
        return 0;
}

/* On stop, every sandbox's processes are killed and its cgroups removed; workspaces stay. */
static void manager_kill_all(Manager *m) {
        for (Sandbox *s = m->sandboxes; s; s = s->next) {
                snapshot_job_abort(s); /* its copy killed, its sandbox thawed */
                if (s->cg_fd >= 0)
                        (void) cg_kill(s->cg_fd);
        }
        for (int tries = 0; tries < 200; tries++) {
                bool busy = false;
                for (Sandbox *s = m->sandboxes; s; s = s->next)
                        if (s->cg_fd >= 0 && cg_populated(s->cg_fd) > 0)
                                busy = true;
                while (waitpid(-1, NULL, WNOHANG) > 0)
                        ;
                if (!busy)
                        break;
                usleep(10000);
        }
        for (Sandbox *s = m->sandboxes; s; s = s->next)
                (void) cg_remove_tree(m->cg.sandboxes_fd, s->id);
}

int manager_run(Manager *m) {
        int r;
        (void) sd_notifyf(0, "READY=1\nSTATUS=Listening; cgroup memory=%s pids=%s cpu=%s",
                          m->cg.enforceable & CG_MEMORY ? "enforced" : "unavailable",
                          m->cg.enforceable & CG_PIDS ? "enforced" : "unavailable",
                          m->cg.enforceable & CG_CPU ? "enforced" : "unavailable");
        pool_schedule_refill(m);
        r = sd_event_loop(m->event);
        manager_kill_all(m);
        return r;
}
