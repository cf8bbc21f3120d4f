/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The copies behind snapshot, snapshot.restore and create from_snapshot. Each runs in a child
 * process (copy_tree blocks for as long as the tree is big) that tells the daemon over a pipe:
 *
 *   progress BYTES FILES               now and then while copying
 *   copied BYTES FILES SKIPPED         the copy is complete (a snapshot's sandbox is thawed here)
 *   done                               synced and renamed into place
 *   error STEP ERRNO                   and it exits non-zero, having removed what it made
 *
 * A snapshot freezes the sandbox's cgroup first (cgroup.freeze, then cgroup.events "frozen 1")
 * and thaws it on every path: copied, failed, timed out, sandbox destroyed, daemon stopping.
 *
 * On btrfs storage (btrfs.h) nothing is copied: a snapshot is a read-only subvolume snapshot of
 * the workspace (and of the upper layer), after which the child says
 *
 *   thaw                               the point in time is taken: the sandbox runs on
 *
 * and then counts what the snapshot holds for its record; a restore is a writable snapshot of
 * it swapped in as before, a fork a writable snapshot put in place of the fork's empty
 * workspace that keeps its source's owners (the fork's init mounts it idmapped onto its own uid
 * range: sandbox_open_work()); an overlay root's upper layer gets its owners moved into the
 * fork's range (a walk that changes owners only: no data is read or written). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "btrfs.h"
#include "child-job.h"
#include "cgroup.h"
#include "copy-tree.h"
#include "disk-quota.h"
#include "log.h"
#include "macro.h"
#include "context.h"
#include "rm-rf.h"
#include "sandbox.h"
#include "remove-async.h"
#include "session.h"
#include "snapshot-job-internal.h"
#include "snapshot.h"
#include "spawn.h"
#include "state.h"
#include "util.h"

#define FREEZE_TIMEOUT_USEC (10 * USEC_PER_SEC)

/* ---- The daemon's side --------------------------------------------------------------------- */

static void job_thaw(SnapshotJob *j) {
        int r;
        if (!j->frozen)
                return;
        j->frozen = false;
        j->frozen_usec = now_usec(CLOCK_MONOTONIC) - j->freeze_start;
        /* Frozen by its client as well (sandbox.freeze): it stays so. */
        if (j->sandbox->user_frozen)
                return;
        r = cg_write(j->sandbox->cg_fd, "cgroup.freeze", "0");
        if (r < 0)
                log_warning_errno(r, "sandbox %s: cannot thaw it: %m", j->sandbox->id);
        sandbox_set_frozen(j->sandbox, false);
}

static SnapshotJob *job_free(SnapshotJob *j) {
        if (!j)
                return NULL;
        if (j->sandbox && j->sandbox->job == j)
                j->sandbox->job = NULL;
        if (j->sandbox)
                sandbox_member_remove(j->sandbox, &j->member);
        job_thaw(j);
        child_job_free(j->child);
        sd_event_source_disable_unref(j->freeze_timer);
        reply_unref(j->reply);
        free(j);
        return NULL;
}

static void job_reply_error(SnapshotJob *j, const ProtoError *err) {
        if (j->reply)
                reply_error(j->reply, err);
}

static void job_error_from_child(SnapshotJob *j, ProtoError *err) {
        const char *what = j->kind == JOB_SNAPSHOT ? "the snapshot" : j->kind == JOB_RESTORE ? "the restore" : "the fork";
        if (!j->fail_step[0])
                proto_error_set(err, SBX_E_INTERNAL, NULL, "%s's copy process died", what);
        else if (j->fail_errno == ENOSPC || j->fail_errno == EDQUOT)
                proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "disk", "%s failed at step '%s': %s", what, j->fail_step,
                                strerror(j->fail_errno));
        else if (strcmp(j->fail_step, "source") == 0)
                proto_error_set(err, SBX_E_CONFLICT, "from_snapshot", "the snapshot was deleted while it was copied");
        else
                proto_error_set(err, SBX_E_INTERNAL, NULL, "%s failed at step '%s': %s", what, j->fail_step,
                                strerror(j->fail_errno));
}

static void job_send_progress(SnapshotJob *j) {
        json_object *ev;
        if (!j->reply)
                return;
        ev = reply_event_new(j->reply, "progress");
        json_object_object_add(ev, "bytes", json_object_new_int64((int64_t) j->stats.bytes));
        json_object_object_add(ev, "files", json_object_new_int64((int64_t) j->stats.files));
        if (j->kind == JOB_RESTORE) {
                json_object_object_add(ev, "total_bytes", json_object_new_int64((int64_t) j->total_bytes));
                json_object_object_add(ev, "total_files", json_object_new_int64((int64_t) j->total_files));
        }
        reply_event(j->reply, ev);
}

static void job_line(SnapshotJob *j, char *line) {
        CopyStats *st = &j->stats;
        if (sscanf(line, "progress %" SCNu64 " %" SCNu64, &st->bytes, &st->files) == 2)
                job_send_progress(j);
        else if (sscanf(line, "copied %" SCNu64 " %" SCNu64 " %" SCNu64, &st->bytes, &st->files, &st->skipped) == 3) {
                j->copied = true;
                job_thaw(j); /* syncing and renaming need no frozen sandbox */
        } else if (strcmp(line, "thaw") == 0)
                job_thaw(j); /* btrfs: the snapshot is taken, what follows is counting it */
        else if (strcmp(line, "done") == 0)
                j->done = true;
        else if (sscanf(line, "error %15s %d", j->fail_step, &j->fail_errno) != 2)
                log_warning("sandbox %s: unexpected line from the copy process", j->sandbox->id);
}

/* Reads what is there; false at EOF or on an error. */
static bool job_read(SnapshotJob *j, int fd) {
        for (;;) {
                ssize_t n = read(fd, j->buf + j->len, sizeof(j->buf) - 1 - j->len);
                char *nl;
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return true;
                if (n <= 0)
                        return false;
                j->len += (size_t) n;
                j->buf[j->len] = '\0';
                while ((nl = strchr(j->buf, '\n'))) {
                        *nl = '\0';
                        job_line(j, j->buf);
                        j->len -= (size_t) (nl + 1 - j->buf);
                        memmove(j->buf, nl + 1, j->len);
                        j->buf[j->len] = '\0';
                }
                if (j->len == sizeof(j->buf) - 1)
                        j->len = 0; /* no line is that long: drop it */
        }
}

static int on_pipe(ChildJob *c, int fd, void *userdata) {
        return job_read(userdata, fd) ? 0 : 1;
}

static void job_finish_snapshot(SnapshotJob *j) {
        json_object *reply = json_object_new_object();
        SnapshotInfo i = { .created_usec = j->created_usec, .bytes = j->stats.bytes, .files = j->stats.files };

        snprintf(i.id, sizeof(i.id), "%s", j->snap_id);
        snprintf(i.label, sizeof(i.label), "%s", j->label);
        json_object_object_add(reply, "snapshot", snapshot_info_to_json(&i));
        json_object_object_add(reply, "skipped", json_object_new_int64((int64_t) j->stats.skipped));
        json_object_object_add(reply, "frozen", json_object_new_boolean(j->freeze_start != 0));
        json_object_object_add(reply, "frozen_s", proto_seconds(j->frozen_usec));
        log_info("sandbox %s: snapshot %s made (%" PRIu64 " bytes, %" PRIu64 " files)", j->sandbox->id, j->snap_id,
                 j->stats.bytes, j->stats.files);
        reply_ok(j->reply, reply);
        job_free(j);
}

/* The upper layer the same way, with no process of the sandbox left to have it mounted (a
 * snapshot without one leaves the upper as it is). A crash between the two renames leaves the
 * restored workspace with the old upper layer. */
static int restore_swap_root(Sandbox *s, int dfd, const SnapshotJob *j) {
        _cleanup_close_ int ru = -EBADF;

        if (!s->root_overlay)
                return 0;
        /* btrfs: root-upper is the subvolume, swapped as a whole (child_restore_btrfs()). */
        if (s->ctx->features.btrfs) {
                if (syscall(SYS_renameat2, dfd, j->upper_new, dfd, SANDBOX_ROOT_UPPER, RENAME_EXCHANGE) < 0)
                        return errno == ENOENT ? 0 : -errno;
                return fsync(dfd) < 0 ? -errno : 0;
        }
        ru = job_open_dir(dfd, SANDBOX_ROOT_UPPER);
        if (ru < 0)
                return ru;
        if (syscall(SYS_renameat2, ru, j->upper_new, ru, "upper", RENAME_EXCHANGE) < 0)
                return errno == ENOENT ? 0 : -errno;
        return fsync(ru) < 0 ? -errno : 0;
}

static int restore_swap(Sandbox *s, void *userdata) {
        SnapshotJob *j = userdata;
        _cleanup_close_ int dfd = job_open_dir(s->ctx->state_fd, s->id);
        if (dfd < 0)
                return dfd;
        /* One step: whoever looks (or a crash) finds the old tree or the new one at "work". */
        if (syscall(SYS_renameat2, dfd, j->work_new, dfd, "work", RENAME_EXCHANGE) < 0)
                return -errno;
        if (fsync(dfd) < 0)
                return -errno;
        /* A subvolume snapshot keeps the owners the snapshot's tree has (a copy: the same). */
        s->work_uid = j->tree_uid;
        (void) state_save(s);
        return restore_swap_root(s, dfd, j);
}

static void remove_root_new(Sandbox *s, int dfd, const SnapshotJob *j) {
        _cleanup_close_ int ru = s->ctx->features.btrfs ? dup(dfd) : job_open_dir(dfd, SANDBOX_ROOT_UPPER);
        if (ru >= 0)
                (void) remove_async(s->ctx->event, s->ctx->run_helper_fd, ru, j->upper_new);
}

static void restore_done(Sandbox *s, int error, void *userdata) {
        SnapshotJob *j = userdata;
        _cleanup_close_ int dfd = job_open_dir(s->ctx->state_fd, s->id);
        ProtoError err;

        /* Either the old tree (swapped out) or the unused new one is left at work.new-*. */
        if (dfd >= 0)
                (void) remove_async(s->ctx->event, s->ctx->run_helper_fd, dfd, j->work_new);
        if (dfd >= 0 && s->root_overlay)
                remove_root_new(s, dfd, j);
        if (error < 0) {
                proto_error_set(&err, SBX_E_INTERNAL, NULL, "the workspace could not be replaced: %s", strerror(-error));
                job_reply_error(j, &err);
        } else {
                json_object *reply = json_object_new_object();
                json_object_object_add(reply, "sandbox", json_object_new_string(s->id));
                json_object_object_add(reply, "snapshot", json_object_new_string(j->snap_id));
                json_object_object_add(reply, "bytes", json_object_new_int64((int64_t) j->stats.bytes));
                json_object_object_add(reply, "files", json_object_new_int64((int64_t) j->stats.files));
                json_object_object_add(reply, "runs_killed", json_object_new_int(j->runs_killed));
                json_object_object_add(reply, "sessions_ended", json_object_new_int((int) j->sessions_ended));
                json_object_object_add(reply, "processes", json_object_new_string("restarted"));
                log_info("sandbox %s: workspace restored from %s", s->id, j->snap_id);
                reply_ok(j->reply, reply);
        }
        job_free(j);
}

static void job_finish_restore(SnapshotJob *j) {
        Sandbox *s = j->sandbox;
        _cleanup_close_ int dfd = -EBADF;
        ProtoError err;
        unsigned sessions = session_count_running(s);
        int r = sandbox_restart(s, restore_swap, restore_done, j);

        if (r >= 0) {
                j->sessions_ended = sessions;
                j->runs_killed = r; /* the reply comes from restore_done */
                return;
        }
        dfd = job_open_dir(s->ctx->state_fd, s->id);
        if (dfd >= 0)
                (void) remove_async(s->ctx->event, s->ctx->run_helper_fd, dfd, j->work_new);
        if (dfd >= 0 && s->root_overlay)
                remove_root_new(s, dfd, j);
        proto_error_set(&err, SBX_E_CONFLICT, "sandbox", "sandbox %s is not ready (%s)", s->id,
                        s->state == SANDBOX_FAILED ? "broken" : "busy");
        job_reply_error(j, &err);
        job_free(j);
}

static void job_finish(SnapshotJob *j) {
        Sandbox *s = j->sandbox;
        ProtoError err;

        job_thaw(j);
        if (j->done && j->kind == JOB_SNAPSHOT)
                return job_finish_snapshot(j);
        if (j->done && j->kind == JOB_RESTORE)
                return job_finish_restore(j);
        if (j->kind == JOB_FORK) {
                bool ok = j->done;
                int r;
                if (ok && s->ctx->features.btrfs) {
                        s->work_uid = j->tree_uid;
                        (void) state_save(s); /* the fork's record; a restart reads it back */
                }
                job_error_from_child(j, &err);
                job_free(j);
                /* An overlay root's init mounts the upper layer the copy made. */
                if (ok && (r = sandbox_start_deferred_init(s)) < 0) {
                        ok = false;
                        proto_error_set(&err, SBX_E_SPAWN_FAILED, NULL, "cannot start the sandbox's init: %s", strerror(-r));
                }
                sandbox_release_hold(s, ok ? NULL : &err);
                return;
        }
        job_error_from_child(j, &err);
        log_warning("sandbox %s: %s", s->id, err.message);
        job_reply_error(j, &err);
        job_free(j);
}

/* What it wrote was read before this (child-job.h). */
static void on_child_exit(ChildJob *c, const siginfo_t *si, void *userdata) {
        SnapshotJob *j = userdata;

        j->child = child_job_free(j->child);
        if (si->si_code != CLD_EXITED || si->si_status != 0)
                j->done = false;
        job_finish(j);
}

static int job_start_child(SnapshotJob *j) {
        Context *m = j->sandbox->ctx;

        return child_job_start(m->event, &(ChildJobSpec) { .name = "sandboxd-copy", .keep = &m->state_fd, .n_keep = 1,
                                                          .fn = snapshot_job_copy_main, .arg = j, .on_exit = on_child_exit,
                                                          .on_report = on_pipe, .userdata = j }, &j->child);
}

/* ---- Freezing ------------------------------------------------------------------------------ */

static void job_fail_now(SnapshotJob *j, const ProtoError *err) {
        job_thaw(j);
        job_reply_error(j, err);
        job_free(j);
}

static int job_copy_or_fail(SnapshotJob *j) {
        ProtoError err;
        int r = job_start_child(j);
        if (r < 0) {
                proto_error_set(&err, SBX_E_INTERNAL, NULL, "cannot start the copy process: %s", strerror(-r));
                job_fail_now(j, &err);
        }
        return r;
}

static int on_freeze_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        SnapshotJob *j = userdata;
        uint64_t frozen = 0;
        ProtoError err;

        (void) cg_read_keyed(j->sandbox->cg_fd, "cgroup.events", "frozen", &frozen);
        if (frozen) {
                j->freeze_timer = sd_event_source_disable_unref(j->freeze_timer);
                j->created_usec = now_usec(CLOCK_REALTIME); /* the point in time it shows */
                (void) job_copy_or_fail(j);
                return 0;
        }
        if (now_usec(CLOCK_MONOTONIC) - j->freeze_start > FREEZE_TIMEOUT_USEC) {
                proto_error_set(&err, SBX_E_CONFLICT, "sandbox", "the processes of sandbox %s could not be frozen within %us",
                                j->sandbox->id, (unsigned) (FREEZE_TIMEOUT_USEC / USEC_PER_SEC));
                job_fail_now(j, &err);
                return 0;
        }
        /* 1 ms, doubling up to 64 ms: freezing "may take some time" (cgroup-v2.rst). */
        j->freeze_polls++;
        (void) sd_event_source_set_time_relative(src, (uint64_t) 1000 << (j->freeze_polls < 6 ? j->freeze_polls : 6));
        (void) sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
        return 0;
}

/* Freezes, and copies once frozen. Without cgroup.freeze (before 5.2) the copy runs anyway
 * (it is safe against a live tree, only not a consistent point in time) and the reply says so. */
static int job_freeze_then_copy(SnapshotJob *j) {
        Sandbox *s = j->sandbox;
        int r = cg_write(s->cg_fd, "cgroup.freeze", "1");

        if (r < 0) {
                log_warning_errno(r, "sandbox %s: cannot freeze it (%m); the snapshot is taken live", s->id);
                return job_copy_or_fail(j);
        }
        j->frozen = true;
        j->freeze_start = now_usec(CLOCK_MONOTONIC);
        sandbox_set_frozen(s, true);
        /* Accuracy 1 us: sd-event's default (0: 250 ms) would add up to that much to the frozen time. */
        r = sd_event_add_time_relative(s->ctx->event, &j->freeze_timer, CLOCK_MONOTONIC, 0, 1, on_freeze_timer, j);
        if (r < 0) {
                ProtoError err;
                proto_error_set(&err, SBX_E_INTERNAL, NULL, "out of memory");
                job_fail_now(j, &err);
        }
        return r;
}

/* ---- Entry points -------------------------------------------------------------------------- */

/* Its sandbox is destroyed: the copy is aborted (a restart is the job's own: it goes on). */
static void job_member_kill(SandboxMember *m, int sig) {
        SnapshotJob *j = SANDBOX_MEMBER_OF(m, SnapshotJob, member);
        if (j->sandbox->state == SANDBOX_DESTROYING)
                snapshot_job_abort(j->sandbox);
}

static void job_member_free(SandboxMember *m) {
        SnapshotJob *j = SANDBOX_MEMBER_OF(m, SnapshotJob, member);
        if (j->sandbox->job == j)
                snapshot_job_abort(j->sandbox);
        else
                job_free(j);
}

static const SandboxMemberOps job_member_ops = {
        .kill = job_member_kill,
        .free = job_member_free,
};

static SnapshotJob *job_new(JobKind kind, Sandbox *s, Reply *reply) {
        SnapshotJob *j = calloc(1, sizeof(*j));
        if (!j)
                return NULL;
        j->kind = kind;
        j->sandbox = s;
        j->reply = reply_ref(reply);
        s->job = j;
        sandbox_member_add(s, &j->member, &job_member_ops);
        return j;
}

static int oom(ProtoError *err) {
        return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
}

int snapshot_job_snapshot(Sandbox *s, Reply *reply, const char *label, ProtoError *err) {
        SnapshotJob *j = job_new(JOB_SNAPSHOT, s, reply);
        if (!j)
                return oom(err);
        if (snapshot_new_id(j->snap_id) < 0) {
                job_free(j);
                return oom(err);
        }
        snprintf(j->label, sizeof(j->label), "%s", label ? label : "");
        j->created_usec = now_usec(CLOCK_REALTIME);
        (void) job_freeze_then_copy(j); /* answers on failure */
        return 0;
}

/* The base a snapshot's tree carries: its record's, or its sandbox's own for one from before the
 * record said (forks then took their own range's owners). */
static uid_t snapshot_tree_uid(const Sandbox *owner, const SnapshotInfo *snap) {
        return snap->tree_uid && sandbox_uid_base_valid(owner->ctx, snap->tree_uid) ? (uid_t) snap->tree_uid
                                                                                     : owner->host_uid;
}

int snapshot_job_restore(Sandbox *s, Reply *reply, const SnapshotInfo *snap, ProtoError *err) {
        SnapshotJob *j = job_new(JOB_RESTORE, s, reply);
        uint8_t b[6];
        if (!j)
                return oom(err);
        if (getrandom(b, sizeof(b), 0) != sizeof(b)) {
                job_free(j);
                return oom(err);
        }
        snprintf(j->snap_id, sizeof(j->snap_id), "%s", snap->id);
        j->tree_uid = snapshot_tree_uid(s, snap);
        j->total_bytes = snap->bytes;
        j->total_files = snap->files;
        snprintf(j->work_new, sizeof(j->work_new), "work.new-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4],
                 b[5]);
        snprintf(j->upper_new, sizeof(j->upper_new), "upper.%s", j->work_new + strlen("work."));
        (void) job_copy_or_fail(j);
        return 0;
}

static int write_fork_marker(Sandbox *s) {
        _cleanup_close_ int dfd = job_open_dir(s->ctx->state_fd, s->id);
        _cleanup_close_ int fd = -EBADF;
        if (dfd < 0)
                return dfd;
        fd = openat(dfd, FORK_MARKER, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        return fsync(fd) < 0 || fsync(dfd) < 0 ? -errno : 0;
}

int snapshot_job_fork(Sandbox *s, Sandbox *src, const SnapshotInfo *snap, ProtoError *err) {
        SnapshotJob *j;
        int r = write_fork_marker(s);

        if (r < 0)
                return sandbox_disk_error(err, "cannot mark the fork in the state directory", r);
        j = job_new(JOB_FORK, s, NULL);
        if (!j)
                return oom(err);
        snprintf(j->snap_id, sizeof(j->snap_id), "%s", snap->id);
        snprintf(j->src_sandbox, sizeof(j->src_sandbox), "%s", src->id);
        j->src_host_uid = src->host_uid;
        j->tree_uid = snapshot_tree_uid(src, snap);
        j->total_bytes = snap->bytes;
        j->total_files = snap->files;
        s->ready_holds++;
        r = job_start_child(j);
        if (r < 0) {
                job_free(j);
                s->ready_holds--;
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "cannot start the copy process: %s", strerror(-r));
        }
        return 0;
}

void snapshot_job_abort(Sandbox *s) {
        SnapshotJob *j = s->job;
        ProtoError err;

        if (!j)
                return;
        s->job = NULL;
        sandbox_restart_cancel(s);
        /* Killed and reaped here: a SIGKILLed copy is gone in moments, and a job must not outlive
         * its sandbox (nor the daemon's loop, when it is stopping). */
        j->child = child_job_free(j->child);
        job_thaw(j);
        proto_error_set(&err, SBX_E_CONFLICT, "sandbox", "sandbox %s went away while its workspace was copied", s->id);
        job_reply_error(j, &err);
        job_free(j);
}
