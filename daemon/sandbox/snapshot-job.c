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
#include "snapshot-job.h"
#include "snapshot.h"
#include "spawn.h"
#include "state.h"
#include "util.h"

#define FREEZE_TIMEOUT_USEC (10 * USEC_PER_SEC)
#define PROGRESS_USEC (200 * USEC_PER_MSEC)

typedef enum JobKind {
        JOB_SNAPSHOT,
        JOB_RESTORE,
        JOB_FORK,
} JobKind;

struct SnapshotJob {
        JobKind kind;
        Sandbox *sandbox;          /* the one it works for (the new one for a fork) */
        SandboxMember member;      /* in sandbox->members while it is s->job */
        Reply *reply;              /* who gets the answer; NULL for a fork (create answers) */
        char snap_id[SNAPSHOT_ID_LEN + 1];
        char label[SNAPSHOT_LABEL_MAX + 1];
        char src_sandbox[24];      /* fork: the sandbox the snapshot belongs to */
        uid_t src_host_uid;        /* fork: its uid range */
        uid_t tree_uid;            /* fork, restore: the host uid of id 0 in the snapshot's tree */
        char work_new[32];         /* restore: work.new-<rand> */
        char upper_new[32];        /* ... and root-upper/upper.new-<rand> for an overlay root */
        uint64_t created_usec;
        uint64_t total_bytes, total_files; /* restore, fork: the snapshot's (a progress bar, btrfs's stats) */
        uint64_t freeze_start;
        uint64_t frozen_usec;  /* how long the sandbox was frozen (until job_thaw()) */
        bool frozen, copied, done;
        unsigned freeze_polls;
        ChildJob *child;           /* the copy process, its lines on the report pipe */
        sd_event_source *freeze_timer;
        char buf[512];
        size_t len;
        CopyStats stats;
        char fail_step[16];
        int fail_errno;
        int runs_killed;
        unsigned sessions_ended;
};

/* ---- The child ----------------------------------------------------------------------------- */

_printf_(2, 3) static void child_say(int fd, const char *fmt, ...) {
        char line[256];
        va_list ap;
        int n;
        va_start(ap, fmt);
        n = vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        if (n > 0)
                (void) write_all(fd, line, (size_t) n < sizeof(line) ? (size_t) n : sizeof(line) - 1);
}

_Noreturn static void child_fail(int fd, const char *step, int err) {
        child_say(fd, "error %s %d\n", step, err < 0 ? -err : err);
        _exit(1);
}

static int child_progress(const CopyStats *st, void *userdata) {
        child_say(*(int *) userdata, "progress %" PRIu64 " %" PRIu64 "\n", st->bytes, st->files);
        return 0;
}

static int open_dir_at(int dir, const char *name) {
        int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

static int mkdir_open(int dir, const char *name, bool existing_ok) {
        if (mkdirat(dir, name, 0700) < 0 && !(existing_ok && errno == EEXIST))
                return -errno;
        return open_dir_at(dir, name);
}

static int write_meta(int dir, const SnapshotJob *j, const CopyStats *st) {
        _cleanup_json_ json_object *o = json_object_new_object();
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = -EBADF;
        char ts[UTC_TIME_MAX];
        size_t n;
        int r;

        json_object_object_add(o, "version", json_object_new_int(1));
        json_object_object_add(o, "id", json_object_new_string(j->snap_id));
        json_object_object_add(o, "label", j->label[0] ? json_object_new_string(j->label) : NULL);
        json_object_object_add(o, "sandbox", json_object_new_string(j->sandbox->id));
        json_object_object_add(o, "created_at",
                               json_object_new_string(format_utc(ts, j->created_usec)));
        json_object_object_add(o, "created_usec", json_object_new_int64((int64_t) j->created_usec));
        json_object_object_add(o, "bytes", json_object_new_int64((int64_t) st->bytes));
        json_object_object_add(o, "files", json_object_new_int64((int64_t) st->files));
        json_object_object_add(o, "skipped", json_object_new_int64((int64_t) st->skipped));
        json_object_object_add(o, "tree_uid", json_object_new_int64((int64_t) j->sandbox->work_uid));
        text = proto_serialize(o, &n);
        if (!text)
                return -ENOMEM;
        fd = openat(dir, "meta.json", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        if ((r = write_all(fd, text, n)) < 0)
                return r;
        return fsync(fd) < 0 ? -errno : 0;
}

static int child_copy_one(int out, int src, int dst, const CopyOptions *base, CopyStats *st) {
        CopyOptions o = *base;
        o.progress = child_progress;
        o.userdata = &out;
        o.progress_usec = PROGRESS_USEC;
        return copy_tree(src, dst, &o, st);
}

static void child_copied(int out, const CopyStats *st) {
        child_say(out, "copied %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", st->bytes, st->files, st->skipped);
}

/* An overlay root's upper layer (root-overlay.h), copied after the workspace: its whiteouts and
 * opaque directories as such, its stats added to the workspace's. src_name below src_dir (absent:
 * nothing to copy, 0), into dst_name made below dst_dir. */
static int child_copy_root(int out, int src_dir, const char *src_name, int dst_dir, const char *dst_name,
                           const CopyOptions *base, CopyStats *st) {
        _cleanup_close_ int src = open_dir_at(src_dir, src_name), dst = -EBADF;
        CopyOptions o = *base;
        CopyStats more = {};
        int r;

        if (src == -ENOENT)
                return 0;
        if (src < 0)
                return src;
        if ((dst = mkdir_open(dst_dir, dst_name, false)) < 0)
                return dst;
        o.overlay_upper = true;
        r = child_copy_one(out, src, dst, &o, &more);
        st->bytes += more.bytes;
        st->files += more.files;
        st->dirs += more.dirs;
        st->links += more.links;
        st->skipped += more.skipped;
        return r;
}

/* ---- btrfs: subvolume snapshots instead of copies ------------------------------------------- */

/* nftw() has no userdata; the child is single-threaded. */
static CopyStats *walk_stats;
static const CopyOptions *walk_shift;
static int walk_errno;

/* Inodes with more than one name seen so far (open addressing; one subvolume: inode numbers
 * are unique in it), so that each counts once, as the copy counts them. */
static uint64_t *links_seen;
static size_t links_n, links_cap;

static bool link_seen(uint64_t ino) {
        size_t i;

        if (links_n * 2 >= links_cap) {
                size_t cap = links_cap ? links_cap * 2 : 1024;
                uint64_t *t = calloc(cap, sizeof(*t)), *old = links_seen;
                size_t old_cap = links_cap;
                if (!t)
                        return false; /* counted twice: only a number in a record */
                links_seen = t;
                links_cap = cap;
                links_n = 0;
                for (size_t k = 0; k < old_cap; k++)
                        if (old[k])
                                (void) link_seen(old[k]);
                free(old);
        }
        for (i = ino % links_cap; links_seen[i]; i = (i + 1) % links_cap)
                if (links_seen[i] == ino)
                        return true;
        links_seen[i] = ino;
        links_n++;
        return false;
}

static int count_entry(const char *path, const struct stat *st, int type, struct FTW *f) {
        if (f->level == 0)
                return 0;
        if (S_ISDIR(st->st_mode))
                walk_stats->dirs++;
        else if (st->st_nlink > 1 && link_seen((uint64_t) st->st_ino))
                walk_stats->links++;
        else {
                walk_stats->files++;
                if (S_ISREG(st->st_mode))
                        walk_stats->bytes += (uint64_t) st->st_size;
        }
        return 0;
}

/* What a subvolume of the daemon's (a snapshot, nobody else's to change) holds, as the copy's
 * stats would say it: each inode once. */
static int tree_stats(int fd, CopyStats *st) {
        char path[64];

        snprintf(path, sizeof(path), "/proc/self/fd/%d/.", fd);
        walk_stats = st;
        links_n = 0;
        if (links_seen)
                memset(links_seen, 0, links_cap * sizeof(*links_seen));
        return nftw(path, count_entry, 16, FTW_PHYS | FTW_MOUNT) != 0 ? -EIO : 0;
}

static uid_t shift_id(uid_t id) {
        const CopyOptions *o = walk_shift;
        if (id >= o->id_from && (uint64_t) (id - o->id_from) < o->id_count)
                return o->id_to + (id - o->id_from);
        if (id >= o->id_to && (uint64_t) (id - o->id_to) < o->id_count)
                return id; /* a hard link met again: shifted already */
        return o->id_to;
}

static int shift_entry(const char *path, const struct stat *st, int type, struct FTW *f) {
        uid_t u = shift_id(st->st_uid);
        gid_t g = (gid_t) shift_id((uid_t) st->st_gid);

        if (type == FTW_NS || type == FTW_DNR) {
                walk_errno = EIO;
                return 1;
        }
        (void) count_entry(path, st, type, f);
        if (u == st->st_uid && g == st->st_gid)
                return 0;
        /* chown clears setuid and setgid on files, as the copy drops them. */
        if (lchown(path, u, g) < 0) {
                walk_errno = errno;
                return 1;
        }
        return 0;
}

/* The new subvolume's owners into the fork's uid range, counted as tree_stats() does it, in
 * one walk. No one but this process can reach it yet (the fork's init waits for it), so names
 * are safe to walk. */
static int tree_shift(int fd, const CopyOptions *o, CopyStats *st) {
        char path[64];

        snprintf(path, sizeof(path), "/proc/self/fd/%d/.", fd);
        walk_stats = st;
        links_n = 0;
        if (links_seen)
                memset(links_seen, 0, links_cap * sizeof(*links_seen));
        walk_shift = o;
        walk_errno = 0;
        if (nftw(path, shift_entry, 16, FTW_PHYS | FTW_MOUNT) != 0)
                return -(walk_errno ?: EIO);
        return 0;
}

/* A snapshot of dir/name (a subvolume) as dst_dir/dst_name; ENOENT (no such tree: an overlay
 * root never mounted) is 0 and nothing, as the copies have it. */
static int snap_at(int dir, const char *name, int dst_dir, const char *dst_name, bool readonly, uint64_t qgroup,
                   bool *ret_made) {
        _cleanup_close_ int src = open_dir_at(dir, name);

        *ret_made = false;
        if (src == -ENOENT)
                return 0;
        if (src < 0)
                return src;
        int r = btrfs_snapshot(src, dst_dir, dst_name, readonly, qgroup);
        if (r == -ENOTTY || r == -EINVAL) /* a plain directory, not a subvolume: made before btrfs */
                return -EXDEV;
        *ret_made = r >= 0;
        return r;
}

/* The sandbox's disk limit on the new writable subvolume dir/name (disk-quota.h). */
static int limit_at(const Sandbox *s, int dir, const char *name) {
        _cleanup_close_ int fd = open_dir_at(dir, name);
        return fd < 0 ? fd : sandbox_quota_subvol(s, fd);
}

static void add_stats(CopyStats *st, const CopyStats *more) {
        st->bytes += more->bytes;
        st->files += more->files;
        st->dirs += more->dirs;
}

_Noreturn static void child_snapshot_btrfs(const SnapshotJob *j, int sdir, int snaps, int tmp, const char *tmp_name,
                                           int out) {
        const uint64_t qg = 0; /* a snapshot is in no qgroup but its own (btrfs.h) */
        CopyStats st = {}, more = {};
        bool made, root_made = false;
        int r = snap_at(sdir, "work", tmp, "tree", true, qg, &made);

        if (r >= 0 && !made)
                r = -ENOENT;
        /* root-upper as a whole (the subvolume): the upper layer is its "upper". */
        if (r >= 0 && j->sandbox->root_overlay)
                r = snap_at(sdir, SANDBOX_ROOT_UPPER, tmp, SNAPSHOT_ROOT_TREE, true, qg, &root_made);
        if (r < 0) {
                (void) rm_rf_at(snaps, tmp_name);
                child_fail(out, "snapshot", r);
        }
        child_say(out, "thaw\n");
        {
                _cleanup_close_ int tree = open_dir_at(tmp, "tree");
                _cleanup_close_ int root = root_made ? open_dir_at(tmp, SNAPSHOT_ROOT_TREE) : -EBADF;
                _cleanup_close_ int upper = root >= 0 ? open_dir_at(root, "upper") : -EBADF;
                r = tree < 0 ? tree : tree_stats(tree, &st);
                if (r >= 0 && upper >= 0 && (r = tree_stats(upper, &more)) >= 0)
                        add_stats(&st, &more);
        }
        if (r < 0) {
                (void) rm_rf_at(snaps, tmp_name);
                child_fail(out, "count", r);
        }
        child_copied(out, &st);
        /* The snapshot is on disk with its transaction; the record, then the name. */
        if ((r = write_meta(tmp, j, &st)) < 0 || fsync(tmp) < 0 || renameat(snaps, tmp_name, snaps, j->snap_id) < 0 ||
            fsync(snaps) < 0) {
                r = r < 0 ? r : -errno;
                (void) rm_rf_at(snaps, tmp_name);
                child_fail(out, "sync", r);
        }
        child_say(out, "done\n");
        _exit(0);
}

_Noreturn static void child_restore_btrfs(const SnapshotJob *j, int sdir, int snap, int out) {
        CopyStats st = { .bytes = j->total_bytes, .files = j->total_files };
        bool made;
        int r = snap_at(snap, "tree", sdir, j->work_new, false, 0, &made);

        if (r >= 0 && !made)
                r = -ENOENT;
        if (r >= 0)
                r = limit_at(j->sandbox, sdir, j->work_new);
        /* The whole root-upper, as <sandbox>/upper.new-*, swapped for root-upper. */
        if (r >= 0 && j->sandbox->root_overlay) {
                r = snap_at(snap, SNAPSHOT_ROOT_TREE, sdir, j->upper_new, false, 0, &made);
                if (r >= 0 && made)
                        r = limit_at(j->sandbox, sdir, j->upper_new);
                if (r < 0)
                        (void) rm_rf_at(sdir, j->upper_new);
        }
        if (r < 0) {
                (void) rm_rf_at(sdir, j->work_new);
                child_fail(out, "snapshot", r);
        }
        child_copied(out, &st);
        child_say(out, "done\n");
        _exit(0);
}

/* In place of the fork's empty subvolume dir/name, a writable snapshot of src_dir/src_name, its
 * owners shifted and its stats added to st (o NULL: neither). */
static int fork_one(const Sandbox *s, int src_dir, const char *src_name, int dir, const char *name,
                    const char *shifted, const CopyOptions *o, CopyStats *st) {
        _cleanup_close_ int fd = -EBADF, sub = -EBADF;
        CopyStats more = {};
        bool made;
        int r;

        if (faccessat(src_dir, src_name, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        r = btrfs_subvol_delete(dir, name);
        if (r < 0 && r != -ENOENT)
                return r;
        r = snap_at(src_dir, src_name, dir, name, false, 0, &made);
        if (r < 0)
                return r;
        fd = open_dir_at(dir, name);
        if (fd < 0)
                return fd;
        r = sandbox_quota_subvol(s, fd);
        if (r < 0)
                return r;
        /* Only the sandbox's own tree in it (root-upper's "upper"); the rest stays root's. */
        if (shifted && (sub = open_dir_at(fd, shifted)) < 0)
                return sub == -ENOENT ? 0 : sub;
        if (!o)
                return 0; /* its owners kept, its stats the snapshot record's */
        if ((r = tree_shift(shifted ? sub : fd, o, &more)) >= 0)
                add_stats(st, &more);
        return r;
}

/* <sandbox>/work -> <sandbox>/snapshots/.tmp-<id>/tree (and an overlay root's root-upper/upper
 * -> .../root), then meta.json, then renamed. */
_Noreturn static void child_snapshot(const SnapshotJob *j, int state_fd, int out) {
        _cleanup_close_ int sdir = open_dir_at(state_fd, j->sandbox->id);
        _cleanup_close_ int snaps = -EBADF, tmp = -EBADF, tree = -EBADF, src = -EBADF;
        char tmp_name[8 + SNAPSHOT_ID_LEN];
        CopyStats st;
        int r;

        snprintf(tmp_name, sizeof(tmp_name), ".tmp-%s", j->snap_id);
        if (sdir < 0 || (snaps = mkdir_open(sdir, "snapshots", true)) < 0)
                child_fail(out, "open", sdir < 0 ? sdir : snaps);
        if ((tmp = mkdir_open(snaps, tmp_name, false)) < 0 || (tree = mkdir_open(tmp, "tree", false)) < 0 ||
            (src = open_dir_at(sdir, "work")) < 0) {
                r = tmp < 0 ? tmp : tree < 0 ? tree : src;
                (void) rm_rf_at(snaps, tmp_name);
                child_fail(out, "open", r);
        }
        if (j->sandbox->ctx->features.btrfs) {
                (void) unlinkat(tmp, "tree", AT_REMOVEDIR); /* the snapshot's own name */
                child_snapshot_btrfs(j, sdir, snaps, tmp, tmp_name, out);
        }
        r = child_copy_one(out, src, tree, &(CopyOptions) {}, &st);
        if (r >= 0 && j->sandbox->root_overlay) {
                _cleanup_close_ int ru = open_dir_at(sdir, SANDBOX_ROOT_UPPER);
                r = ru < 0 ? ru : child_copy_root(out, ru, "upper", tmp, SNAPSHOT_ROOT_TREE, &(CopyOptions) {}, &st);
        }
        if (r < 0) {
                (void) rm_rf_at(snaps, tmp_name);
                child_fail(out, "copy", r);
        }
        child_copied(out, &st);
        /* Data, then the metadata, then the name: a snapshot in place is a whole one. */
        if (syncfs(tree) < 0 || (r = write_meta(tmp, j, &st)) < 0 || fsync(tmp) < 0 ||
            renameat(snaps, tmp_name, snaps, j->snap_id) < 0 || fsync(snaps) < 0) {
                r = r < 0 ? r : -errno;
                (void) rm_rf_at(snaps, tmp_name);
                child_fail(out, "sync", r);
        }
        child_say(out, "done\n");
        _exit(0);
}

/* <sandbox>/snapshots/<id>/tree -> <sandbox>/work.new-<rand> (and its root ->
 * root-upper/upper.new-<rand>); the daemon swaps them in. */
_Noreturn static void child_restore(const SnapshotJob *j, int state_fd, int out) {
        _cleanup_close_ int sdir = open_dir_at(state_fd, j->sandbox->id);
        _cleanup_close_ int snaps = -EBADF, snap = -EBADF, src = -EBADF, dst = -EBADF;
        CopyStats st;
        int r;

        if (sdir < 0 || (snaps = open_dir_at(sdir, "snapshots")) < 0 || (snap = open_dir_at(snaps, j->snap_id)) < 0 ||
            (src = open_dir_at(snap, "tree")) < 0)
                child_fail(out, "open", sdir < 0 ? sdir : snaps < 0 ? snaps : snap < 0 ? snap : src);
        if (j->sandbox->ctx->features.btrfs)
                child_restore_btrfs(j, sdir, snap, out);
        if ((dst = mkdir_open(sdir, j->work_new, false)) < 0)
                child_fail(out, "open", dst);
        r = child_copy_one(out, src, dst, &(CopyOptions) {}, &st);
        if (r >= 0 && j->sandbox->root_overlay) {
                _cleanup_close_ int ru = open_dir_at(sdir, SANDBOX_ROOT_UPPER);
                r = ru < 0 ? ru : child_copy_root(out, snap, SNAPSHOT_ROOT_TREE, ru, j->upper_new, &(CopyOptions) {}, &st);
                if (r < 0 && ru >= 0)
                        (void) rm_rf_at(ru, j->upper_new);
        }
        if (r >= 0 && (syncfs(dst) < 0 || fsync(sdir) < 0))
                r = -errno;
        if (r < 0) {
                (void) rm_rf_at(sdir, j->work_new);
                child_fail(out, "copy", r);
        }
        child_copied(out, &st);
        child_say(out, "done\n");
        _exit(0);
}

static bool same_inode(int dir, const char *path, const struct stat *want) {
        struct stat st;
        return fstatat(dir, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_ino == want->st_ino &&
               st.st_dev == want->st_dev;
}

/* <other>/snapshots/<id>/tree -> <new sandbox>/work (and its root -> root-upper/upper, before
 * the fork's init mounts it: init_deferred), owners moved into the new uid range. */
_Noreturn static void child_fork(const SnapshotJob *j, int state_fd, int out) {
        const Context *m = j->sandbox->ctx;
        _cleanup_close_ int sdir = open_dir_at(state_fd, j->sandbox->id);
        _cleanup_close_ int from = open_dir_at(state_fd, j->src_sandbox);
        _cleanup_close_ int snaps = -EBADF, snap = -EBADF, src = -EBADF, dst = -EBADF;
        CopyOptions o = { .shift_ids = true,
                          .id_from = j->src_host_uid,
                          .id_to = j->sandbox->host_uid,
                          .id_count = m->config.uid_range };
        char path[64];
        struct stat st_snap;
        CopyStats st;
        int r;

        if (sdir < 0 || from < 0 || (snaps = open_dir_at(from, "snapshots")) < 0 ||
            (snap = open_dir_at(snaps, j->snap_id)) < 0 || fstat(snap, &st_snap) < 0 ||
            (src = open_dir_at(snap, "tree")) < 0 || (dst = open_dir_at(sdir, "work")) < 0)
                child_fail(out, "open", -ENOENT);
        if (m->features.btrfs) {
                st = (CopyStats) { .bytes = j->total_bytes, .files = j->total_files };
                dst = safe_close(dst);
                /* The workspace keeps its owners: the fork's init idmaps it (sandbox_open_work()). */
                r = fork_one(j->sandbox, snap, "tree", sdir, "work", NULL, NULL, &st);
                /* The upper layer's owners still moved (its stats are in the record's already):
                 * overlayfs would take an idmapped upper layer from 5.19, root_overlay_mount()
                 * does not make one yet. */
                if (r >= 0 && j->sandbox->root_overlay)
                        r = fork_one(j->sandbox, snap, SNAPSHOT_ROOT_TREE, sdir, SANDBOX_ROOT_UPPER, "upper", &o,
                                     &(CopyStats) {});
                if (r >= 0)
                        dst = open_dir_at(sdir, "work");
                if (r >= 0 && dst < 0)
                        r = dst;
        } else {
                r = child_copy_one(out, src, dst, &o, &st);
                if (r >= 0 && j->sandbox->root_overlay) {
                        _cleanup_close_ int ru = open_dir_at(sdir, SANDBOX_ROOT_UPPER);
                        r = ru < 0 ? ru : child_copy_root(out, snap, SNAPSHOT_ROOT_TREE, ru, "upper", &o, &st);
                }
        }
        if (r < 0)
                child_fail(out, "copy", r);
        child_copied(out, &st);
        /* Deleting a snapshot or destroying its sandbox renames it away before removing
         * anything: if it is still in place, the copy saw all of it. */
        snprintf(path, sizeof(path), "%s/snapshots/%s", j->src_sandbox, j->snap_id);
        if (!same_inode(state_fd, path, &st_snap))
                child_fail(out, "source", ESTALE);
        if (syncfs(dst) < 0 || unlinkat(sdir, FORK_MARKER, 0) < 0 || fsync(sdir) < 0)
                child_fail(out, "sync", errno);
        child_say(out, "done\n");
        _exit(0);
}

/* A copy nobody waits for is pointless: it dies with the daemon (child-job.h). */
static int child_main(void *arg, int out) {
        const SnapshotJob *j = arg;
        int state_fd = j->sandbox->ctx->state_fd;

        switch (j->kind) {
        case JOB_SNAPSHOT:
                child_snapshot(j, state_fd, out);
        case JOB_RESTORE:
                child_restore(j, state_fd, out);
        case JOB_FORK:
                child_fork(j, state_fd, out);
        }
        _exit(1);
}

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
        ru = open_dir_at(dfd, SANDBOX_ROOT_UPPER);
        if (ru < 0)
                return ru;
        if (syscall(SYS_renameat2, ru, j->upper_new, ru, "upper", RENAME_EXCHANGE) < 0)
                return errno == ENOENT ? 0 : -errno;
        return fsync(ru) < 0 ? -errno : 0;
}

static int restore_swap(Sandbox *s, void *userdata) {
        SnapshotJob *j = userdata;
        _cleanup_close_ int dfd = open_dir_at(s->ctx->state_fd, s->id);
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
        _cleanup_close_ int ru = s->ctx->features.btrfs ? dup(dfd) : open_dir_at(dfd, SANDBOX_ROOT_UPPER);
        if (ru >= 0)
                (void) remove_async(s->ctx->event, s->ctx->run_helper_fd, ru, j->upper_new);
}

static void restore_done(Sandbox *s, int error, void *userdata) {
        SnapshotJob *j = userdata;
        _cleanup_close_ int dfd = open_dir_at(s->ctx->state_fd, s->id);
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
        dfd = open_dir_at(s->ctx->state_fd, s->id);
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
                                                          .fn = child_main, .arg = j, .on_exit = on_child_exit,
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
        _cleanup_close_ int dfd = open_dir_at(s->ctx->state_fd, s->id);
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
