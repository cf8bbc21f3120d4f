/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "cgroup.h"
#include "idle-exit.h"
#include "log.h"
#include "macro.h"
#include "manager.h"
#include "sandbox.h"
#include "util.h"

/* Whether a cgroup of the sandbox's runs, sessions or file operations holds a process (not its
 * init's leaf, nor the next run's with its warm helper). */
static bool sandbox_has_user_processes(Sandbox *s) {
        int fd;
        DIR *d;
        struct dirent *de;
        bool busy = false;

        if (s->cg_fd < 0)
                return false;
        fd = openat(s->cg_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || !(d = fdopendir(fd))) {
                safe_close(fd);
                return true; /* cannot tell: not idle */
        }
        while (!busy && (de = readdir(d))) {
                _cleanup_close_ int c = -EBADF;
                if (de->d_type != DT_DIR || !sandbox_is_member_cgroup(s, de->d_name))
                        continue;
                c = openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                busy = c >= 0 && cg_populated(c) != 0;
        }
        closedir(d);
        return busy;
}

static bool manager_is_idle(IdleExit *ie) {
        Manager *m = ie->manager;

        if (m->conns.n > 0 || (ie->busy && ie->busy(ie->userdata)))
                return false;
        for (Sandbox *s = registry_first(m->ctx->registry); s; s = registry_next(&s->entry))
                if (s->state == SANDBOX_CREATING || s->state == SANDBOX_DESTROYING || s->pending_runs || s->job ||
                    sandbox_has_user_processes(s))
                        return false;
        return true;
}

static uint64_t check_interval(Manager *m) {
        uint64_t i = m->ctx->config.idle_exit_usec / 10;
        return i < 100 * USEC_PER_MSEC ? 100 * USEC_PER_MSEC : i > 5 * USEC_PER_SEC ? 5 * USEC_PER_SEC : i;
}

static int on_idle_check(sd_event_source *src, uint64_t usec, void *userdata) {
        IdleExit *ie = userdata;
        Manager *m = ie->manager;
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        if (!manager_is_idle(ie))
                ie->idle_since_usec = 0;
        else if (!ie->idle_since_usec)
                ie->idle_since_usec = now;
        else if (now - ie->idle_since_usec >= m->ctx->config.idle_exit_usec) {
                log_info("idle for %.1f s: exiting; the next connection starts sandboxd again",
                         (double) (now - ie->idle_since_usec) / 1e6);
                m->stopping = true;
                (void) sd_notify(0, "STOPPING=1\nSTATUS=Idle, exiting");
                return sd_event_exit(m->ctx->event, 0);
        }
        (void) sd_event_source_set_time_relative(src, check_interval(m));
        return sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
}

int idle_exit_setup(IdleExit *ie, Manager *m, bool (*busy)(void *userdata), void *userdata) {
        *ie = (IdleExit) { .manager = m, .busy = busy, .userdata = userdata };
        if (!m->ctx->config.idle_exit_usec)
                return 0;
        if (!m->socket_activated) {
                log_info("idle_exit_s is ignored: sandboxd was not socket-activated, nothing would start it again");
                return 0;
        }
        return sd_event_add_time_relative(m->ctx->event, &ie->timer, CLOCK_MONOTONIC, check_interval(m), 0,
                                          on_idle_check, ie);
}

void idle_exit_done(IdleExit *ie) {
        ie->timer = sd_event_source_disable_unref(ie->timer);
}
