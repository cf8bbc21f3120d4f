/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "disk-usage.h"
#include "log.h"
#include "macro.h"
#include "spawn.h"
#include "sweep-walk.h"
#include "util.h"

#define SNAP_META_MAX (64u << 10)

/* ---- In the child ------------------------------------------------------------------------ */

int sweep_parse_time(const char *text, uint64_t *ret_usec) {
        struct tm tm = {};
        char *end;
        double d;

        if (!text || !*text)
                return -EINVAL;
        end = strptime(text, "%Y-%m-%dT%H:%M:%S", &tm);
        if (end) {
                time_t t = timegm(&tm);
                double frac = *end == '.' ? strtod(end, &end) : 0;
                if ((*end != 'Z' && *end != '\0') || t < 0)
                        return -EINVAL;
                *ret_usec = (uint64_t) t * USEC_PER_SEC + (uint64_t) (frac * 1e6);
                return 0;
        }
        errno = 0;
        d = strtod(text, &end);
        if (errno || *end || d < 0)
                return -EINVAL;
        /* Seconds until year 5138, then milliseconds, then microseconds. */
        *ret_usec = d < 1e11 ? (uint64_t) (d * 1e6) : d < 1e14 ? (uint64_t) (d * 1e3) : (uint64_t) d;
        return 0;
}

/* created_at and label from a snapshot's meta.json, read without following symlinks. */
static void read_snapshot_meta(int snap_fd, SweepRecord *rec) {
        _cleanup_close_ int fd = openat(snap_fd, "meta.json", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        _cleanup_free_ char *buf = NULL;
        json_object *o, *v;
        struct stat st;
        ssize_t n;

        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !(buf = malloc(SNAP_META_MAX + 1)))
                return;
        n = read(fd, buf, SNAP_META_MAX);
        if (n <= 0)
                return;
        buf[n] = '\0';
        o = json_tokener_parse(buf);
        if (!o)
                return;
        if (json_object_object_get_ex(o, "created_at", &v) && !json_object_is_type(v, json_type_null))
                (void) sweep_parse_time(json_object_get_string(v), &rec->created_usec);
        if (json_object_object_get_ex(o, "label", &v) && json_object_is_type(v, json_type_string))
                snprintf(rec->label, sizeof(rec->label), "%s", json_object_get_string(v));
        json_object_put(o);
}

static void emit(int out, SweepRecord *rec) {
        if (write_all(out, rec, sizeof(*rec)) < 0)
                _exit(EXIT_FAILURE);
}

static void walk_tree(int dir_fd, const char *name, uint64_t deadline, SweepRecord *rec) {
        DiskUsage u;
        int r = disk_usage_at(dir_fd, name, deadline, &u);
        if (r < 0 && r != -ENOENT)
                rec->error = -r;
        rec->bytes = u.bytes;
        rec->apparent_bytes = u.apparent_bytes;
        rec->files = u.files;
        rec->skipped = u.skipped;
        rec->links_truncated = u.links_truncated;
        rec->cut_short = u.cut_short;
}

/* An overlay root's upper layer (<id>/root-upper, root-overlay.h) is the sandbox's as much as its
 * workspace is: counted in the workspace's record. */
static void walk_root_upper(int state_fd, const char *id, uint64_t deadline, SweepRecord *rec) {
        SweepRecord more = {};
        char path[64];

        snprintf(path, sizeof(path), "%s/root-upper", id);
        walk_tree(state_fd, path, deadline, &more);
        rec->bytes += more.bytes;
        rec->apparent_bytes += more.apparent_bytes;
        rec->files += more.files;
        rec->skipped += more.skipped;
        rec->links_truncated += more.links_truncated;
        rec->cut_short = more.cut_short;
        if (!rec->error)
                rec->error = more.error;
}

/* False once a tree was cut short: its record is the walk's last. */
static bool walk_snapshots(int state_fd, const char *id, uint32_t index, uint64_t deadline, int out) {
        char path[64];
        int fd;
        DIR *d;
        struct dirent *de;

        snprintf(path, sizeof(path), "%s/snapshots", id);
        fd = openat(state_fd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || !(d = fdopendir(fd))) {
                safe_close(fd);
                return true;
        }
        while ((de = readdir(d))) {
                SweepRecord rec = { .sandbox = index, .kind = SWEEP_SNAPSHOT };
                struct stat st;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof(rec.snap))
                        rec.kind = SWEEP_PARTIAL;
                snprintf(rec.snap, sizeof(rec.snap), "%s", de->d_name);
                if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                rec.created_usec = (uint64_t) st.st_mtim.tv_sec * USEC_PER_SEC + (uint64_t) st.st_mtim.tv_nsec / 1000;
                if (rec.kind == SWEEP_SNAPSHOT && S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int sfd = openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sfd >= 0)
                                read_snapshot_meta(sfd, &rec);
                }
                walk_tree(fd, de->d_name, deadline, &rec);
                emit(out, &rec);
                if (rec.cut_short) {
                        closedir(d);
                        return false;
                }
        }
        closedir(d);
        return true;
}

/* Stops by itself at deadline (sweep_timeout after the start): the tree it is in is reported
 * with what was counted so far and cut_short, and nothing after it. */
typedef struct SweepArgs {
        int state_fd;
        char (*ids)[24];
        size_t n_ids;
        uint64_t deadline;
} SweepArgs;

static int sweep_child(void *arg, int out) {
        const SweepArgs *a = arg;
        int state_fd = a->state_fd;
        char (*ids)[24] = a->ids;
        size_t n_ids = a->n_ids;
        uint64_t deadline = a->deadline;

        /* Measuring is never urgent: the lowest CPU and the idle I/O class. */
        (void) setpriority(PRIO_PROCESS, 0, 19);
        (void) syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, 0, 3 << 13 /* IOPRIO_CLASS_IDLE */);
        for (size_t i = 0; i < n_ids; i++) {
                SweepRecord rec = { .sandbox = (uint32_t) i, .kind = SWEEP_WORK };
                char path[64];
                snprintf(path, sizeof(path), "%s/work", ids[i]);
                walk_tree(state_fd, path, deadline, &rec);
                if (!rec.cut_short)
                        walk_root_upper(state_fd, ids[i], deadline, &rec);
                emit(out, &rec);
                if (rec.cut_short || !walk_snapshots(state_fd, ids[i], (uint32_t) i, deadline, out))
                        break;
        }
        return EXIT_SUCCESS;
}

/* ---- In the daemon ----------------------------------------------------------------------- */

/* 0 at EAGAIN, 1 at the end of the pipe or an error. */
static int walk_read(SweepWalk *w, int fd) {
        for (;;) {
                ssize_t n;
                if (w->alloc - w->len < 64 * 1024) {
                        size_t a = w->alloc ? w->alloc * 2 : 64 * 1024;
                        char *p = realloc(w->buf, a);
                        if (!p)
                                return 1;
                        w->buf = p;
                        w->alloc = a;
                }
                n = read(fd, w->buf + w->len, w->alloc - w->len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n == 0 || errno != EAGAIN;
                w->len += (size_t) n;
        }
}

static int on_walk_io(ChildJob *j, int fd, void *userdata) {
        SweepWalk *w = userdata;
        uint64_t now;
        int r = walk_read(w, fd);

        if (w->progress && (now = now_usec(CLOCK_MONOTONIC)) - w->progress_usec >= 200 * USEC_PER_MSEC) {
                w->progress_usec = now;
                w->progress(w, w->userdata);
        }
        return r;
}

static void on_walk_exit(ChildJob *j, const siginfo_t *si, void *userdata) {
        SweepWalk *w = userdata;
        int r = 0;

        w->job = child_job_free(w->job); /* what it wrote was read before this */
        if (si->si_code != CLD_EXITED || si->si_status != 0)
                r = w->timeout_source ? -EIO : -ETIME;
        if (w->len % sizeof(SweepRecord) != 0)
                r = -EBADMSG;
        /* The last progress is the whole walk: a client always sees where it ended. */
        if ((r == 0 || r == -ETIME) && w->progress)
                w->progress(w, w->userdata);
        w->timeout_source = sd_event_source_disable_unref(w->timeout_source);
        w->done(w, r, w->userdata);
}

/* The backstop, for a child stuck in a system call (it stops by itself at sweep_timeout). */
#define SWEEP_KILL_GRACE_USEC (5 * USEC_PER_SEC)
static int on_walk_timeout(sd_event_source *src, uint64_t usec, void *userdata) {
        SweepWalk *w = userdata;
        log_warning("disk sweep: the walk did not stop at sweep_timeout; killing it");
        w->timeout_source = sd_event_source_disable_unref(w->timeout_source);
        child_job_kill(w->job);
        return 0;
}

int sweep_walk_start(sd_event *event, int state_fd, uint64_t timeout_usec, char (*ids)[24], size_t n_ids, sweep_walk_done_t done, void *userdata,
                     SweepWalk **ret) {
        SweepWalk *w = calloc(1, sizeof(*w));
        SweepArgs a = { .state_fd = state_fd, .ids = ids, .n_ids = n_ids,
                        .deadline = now_usec(CLOCK_MONOTONIC) + timeout_usec };
        int r;

        if (!w)
                return -ENOMEM;
        *w = (SweepWalk) { .event = event, .timeout_usec = timeout_usec, .done = done, .userdata = userdata };
        r = child_job_start(event, &(ChildJobSpec) { .name = "sandboxd-sweep", .keep = &state_fd, .n_keep = 1,
                                                     .fn = sweep_child, .arg = &a, .on_exit = on_walk_exit,
                                                     .on_report = on_walk_io, .userdata = w }, &w->job);
        if (r >= 0)
                r = sd_event_add_time_relative(event, &w->timeout_source, CLOCK_MONOTONIC,
                                               timeout_usec + SWEEP_KILL_GRACE_USEC, 0, on_walk_timeout, w);
        if (r < 0) {
                sweep_walk_free(w);
                return r;
        }
        *ret = w;
        return 0;
}

SweepWalk *sweep_walk_free(SweepWalk *w) {
        if (!w)
                return NULL;
        child_job_free(w->job); /* kills and reaps a child still running */
        sd_event_source_disable_unref(w->timeout_source);
        free(w->buf);
        free(w);
        return NULL;
}
