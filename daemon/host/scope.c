/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "macro.h"
#include "scope.h"

struct ScopeJob {
        ScopeManager *sm;
        char *unit;
        sd_bus_slot *call;
        ScopeDone done;
        void *userdata;
        ScopeJob *next, *prev;
};

struct ScopeManager {
        sd_bus *bus;
        sd_bus_slot *job_removed;
        int mount_fd;
        char *mount;
        char slice[SCOPE_SLICE_MAX];
        char slice_path[2 * SCOPE_SLICE_MAX]; /* its cgroup, below the mount */
        ScopeJob *jobs;
};

const char *scope_slice_name(char buf[static SCOPE_SLICE_MAX], const char *state_dir) {
        const char *base;
        size_t n = strlen(state_dir);
        uint32_t h = 2166136261u; /* FNV-1a */

        while (n > 1 && state_dir[n - 1] == '/')
                n--;
        for (size_t i = 0; i < n; i++)
                h = (h ^ (unsigned char) state_dir[i]) * 16777619u;
        base = memrchr(state_dir, '/', n);
        base = base ? base + 1 : state_dir;
        if ((size_t) (state_dir + n - base) == strlen("sandboxd") && strncmp(base, "sandboxd", 8) == 0)
                snprintf(buf, SCOPE_SLICE_MAX, "%s", SCOPE_SLICE);
        else
                snprintf(buf, SCOPE_SLICE_MAX, "sandboxd-%08x.slice", h);
        return buf;
}

const char *scope_manager_slice(const ScopeManager *sm) {
        return sm->slice;
}

const char *scope_unit_name(char *buf, const char *id) {
        snprintf(buf, SCOPE_UNIT_MAX, "sandboxd-%s.scope", id);
        return buf;
}

const char *scope_unit_id(const char *unit, char *buf, size_t size) {
        size_t n = strlen(unit);

        if (n <= strlen("sandboxd-.scope") || strncmp(unit, "sandboxd-", 9) != 0 || strcmp(unit + n - 6, ".scope") != 0 ||
            n - 15 >= size)
                return NULL;
        memcpy(buf, unit + 9, n - 15);
        buf[n - 15] = '\0';
        return buf;
}

static void job_unlink(ScopeJob *j) {
        if (j->prev)
                j->prev->next = j->next;
        else if (j->sm->jobs == j)
                j->sm->jobs = j->next;
        if (j->next)
                j->next->prev = j->prev;
        j->next = j->prev = NULL;
}

static ScopeJob *job_free(ScopeJob *j) {
        if (!j)
                return NULL;
        job_unlink(j);
        sd_bus_slot_unref(j->call);
        free(j->unit);
        free(j);
        return NULL;
}

ScopeJob *scope_job_cancel(ScopeJob *j) {
        return job_free(j);
}

/* The job ends (its JobRemoved, or the call's error): done once, with the job freed first (done
 * may free what owns it). */
static void job_finish(ScopeJob *j, int error) {
        ScopeDone done = j->done;
        void *userdata = j->userdata;

        job_free(j);
        done(error, userdata);
}

static ScopeJob *job_find(ScopeManager *sm, const char *unit) {
        for (ScopeJob *j = sm->jobs; j; j = j->next)
                if (strcmp(j->unit, unit) == 0)
                        return j;
        return NULL;
}

/* JobRemoved(u id, o job, s unit, s result): matched by unit, which we start one job for at a
 * time; the signal may come before the reply to our call, so the job's path is not waited for. */
static int on_job_removed(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        ScopeManager *sm = userdata;
        const char *path, *unit, *result;
        uint32_t id;
        ScopeJob *j;

        if (sd_bus_message_read(msg, "uoss", &id, &path, &unit, &result) < 0)
                return 0;
        j = job_find(sm, unit);
        if (j)
                job_finish(j, strcmp(result, "done") == 0 ? 0 : -EIO);
        return 0;
}

static int on_start_reply(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        ScopeJob *j = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        j->call = sd_bus_slot_unref(j->call);
        if (e)
                job_finish(j, -(sd_bus_error_get_errno(e) ?: EIO));
        return 0;
}

static int connect_bus(sd_bus **ret) {
        sd_bus *bus = NULL;
        int r;

        /* As root, systemd's own socket: no dbus-daemon needed, as systemctl and systemd-run do. */
        if (geteuid() == 0 && access("/run/systemd/private", F_OK) == 0) {
                r = sd_bus_new(&bus);
                if (r < 0)
                        return r;
                r = sd_bus_set_address(bus, "unix:path=/run/systemd/private");
                if (r >= 0)
                        r = sd_bus_start(bus);
                if (r >= 0) {
                        *ret = bus;
                        return 0;
                }
                bus = sd_bus_unref(bus);
        }
        return sd_bus_open_system(ret);
}

int scope_manager_new(sd_event *event, const char *cg_mount, const char *slice, ScopeManager **ret) {
        ScopeManager *sm;
        int r;

        if (sd_booted() <= 0)
                return -EHOSTDOWN;
        sm = calloc(1, sizeof(*sm));
        if (!sm)
                return -ENOMEM;
        /* sandboxd.slice is a child of -.slice (<mount>/sandboxd.slice), sandboxd-X.slice one of
         * sandboxd.slice. */
        snprintf(sm->slice, sizeof(sm->slice), "%s", slice);
        if (strcmp(slice, SCOPE_SLICE) == 0)
                snprintf(sm->slice_path, sizeof(sm->slice_path), "%s", slice);
        else
                snprintf(sm->slice_path, sizeof(sm->slice_path), "%s/%s", SCOPE_SLICE, slice);
        sm->mount = strdup(cg_mount);
        sm->mount_fd = open(cg_mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        r = !sm->mount ? -ENOMEM : sm->mount_fd < 0 ? -errno : connect_bus(&sm->bus);
        if (r >= 0)
                r = sd_bus_attach_event(sm->bus, event, SD_EVENT_PRIORITY_NORMAL);
        if (r >= 0)
                r = sd_bus_match_signal(sm->bus, &sm->job_removed, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                        "org.freedesktop.systemd1.Manager", "JobRemoved", on_job_removed, sm);
        if (r < 0) {
                scope_manager_free(sm);
                return r;
        }
        *ret = sm;
        return 0;
}

ScopeManager *scope_manager_free(ScopeManager *sm) {
        if (!sm)
                return NULL;
        while (sm->jobs)
                job_free(sm->jobs);
        sd_bus_slot_unref(sm->job_removed);
        if (sm->bus) {
                (void) sd_bus_flush(sm->bus);
                sd_bus_detach_event(sm->bus);
                sd_bus_close_unref(sm->bus);
        }
        if (sm->mount_fd >= 0)
                close(sm->mount_fd);
        free(sm->mount);
        free(sm);
        return NULL;
}

static int append_properties(sd_bus_message *m, const char *slice, const char *description, pid_t pid) {
        int r = sd_bus_message_open_container(m, 'a', "(sv)");

        /* CollectMode: a scope that failed (a process killed by a signal) is not left behind.
         * TimeoutStopUSec: the sandbox's init is pid 1 of its namespace and ignores the SIGTERM
         * of a stop (a host's shutdown): its processes get 5 s, then SIGKILL, not 90. */
        if (r >= 0)
                r = sd_bus_message_append(m, "(sv)(sv)(sv)(sv)(sv)(sv)", "Slice", "s", slice, "Delegate", "b", 1,
                                          "PIDs", "au", 1, (uint32_t) pid, "CollectMode", "s", "inactive-or-failed",
                                          "Description", "s", description, "TimeoutStopUSec", "t",
                                          (uint64_t) 5 * 1000000);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

int scope_start(ScopeManager *sm, const char *unit, const char *description, pid_t pid, ScopeDone done,
                void *userdata, ScopeJob **ret) {
        sd_bus_message *m = NULL;
        ScopeJob *j;
        int r;

        if (job_find(sm, unit))
                return -EBUSY;
        j = calloc(1, sizeof(*j));
        if (!j || !(j->unit = strdup(unit))) {
                free(j);
                return -ENOMEM;
        }
        *j = (ScopeJob) { .sm = sm, .unit = j->unit, .done = done, .userdata = userdata };
        r = sd_bus_message_new_method_call(sm->bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                           "org.freedesktop.systemd1.Manager", "StartTransientUnit");
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", unit, "fail");
        if (r >= 0)
                r = append_properties(m, sm->slice, description, pid);
        if (r >= 0)
                r = sd_bus_message_append(m, "a(sa(sv))", 0);
        if (r >= 0)
                r = sd_bus_call_async(sm->bus, &j->call, m, on_start_reply, j, 0);
        sd_bus_message_unref(m);
        if (r < 0) {
                free(j->unit);
                free(j);
                return r;
        }
        j->next = sm->jobs;
        if (sm->jobs)
                sm->jobs->prev = j;
        sm->jobs = j;
        *ret = j;
        return 0;
}

int scope_stop(ScopeManager *sm, const char *unit) {
        return sd_bus_call_method_async(sm->bus, NULL, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                        "org.freedesktop.systemd1.Manager", "StopUnit", NULL, NULL, "ss", unit, "replace");
}

int scope_open_cgroup(ScopeManager *sm, const char *unit, char **ret_path) {
        char rel[2 * SCOPE_SLICE_MAX + SCOPE_UNIT_MAX + 1];
        int fd;

        snprintf(rel, sizeof(rel), "%s/%s", sm->slice_path, unit);
        fd = openat(sm->mount_fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (ret_path && asprintf(ret_path, "%s/%s", sm->mount, rel) < 0) {
                close(fd);
                return -ENOMEM;
        }
        return fd;
}

int scope_open_slice(ScopeManager *sm) {
        int fd = openat(sm->mount_fd, sm->slice_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}
