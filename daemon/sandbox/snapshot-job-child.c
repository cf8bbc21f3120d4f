/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The copy process of a snapshot, a restore or a fork (snapshot-job.c's top says what it tells
 * the daemon, and how): runs in a child of the daemon (child-job.h), never on the loop. */
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
#include "disk-quota.h"
#include "macro.h"
#include "rm-rf.h"
#include "snapshot-job-internal.h"
#include "util.h"

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

static int mkdir_open(int dir, const char *name, bool existing_ok) {
        if (mkdirat(dir, name, 0700) < 0 && !(existing_ok && errno == EEXIST))
                return -errno;
        return job_open_dir(dir, name);
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
        _cleanup_close_ int src = job_open_dir(src_dir, src_name), dst = -EBADF;
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
        _cleanup_close_ int src = job_open_dir(dir, name);

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
        _cleanup_close_ int fd = job_open_dir(dir, name);
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
                _cleanup_close_ int tree = job_open_dir(tmp, "tree");
                _cleanup_close_ int root = root_made ? job_open_dir(tmp, SNAPSHOT_ROOT_TREE) : -EBADF;
                _cleanup_close_ int upper = root >= 0 ? job_open_dir(root, "upper") : -EBADF;
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
        fd = job_open_dir(dir, name);
        if (fd < 0)
                return fd;
        r = sandbox_quota_subvol(s, fd);
        if (r < 0)
                return r;
        /* Only the sandbox's own tree in it (root-upper's "upper"); the rest stays root's. */
        if (shifted && (sub = job_open_dir(fd, shifted)) < 0)
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
        _cleanup_close_ int sdir = job_open_dir(state_fd, j->sandbox->id);
        _cleanup_close_ int snaps = -EBADF, tmp = -EBADF, tree = -EBADF, src = -EBADF;
        char tmp_name[8 + SNAPSHOT_ID_LEN];
        CopyStats st;
        int r;

        snprintf(tmp_name, sizeof(tmp_name), ".tmp-%s", j->snap_id);
        if (sdir < 0 || (snaps = mkdir_open(sdir, "snapshots", true)) < 0)
                child_fail(out, "open", sdir < 0 ? sdir : snaps);
        if ((tmp = mkdir_open(snaps, tmp_name, false)) < 0 || (tree = mkdir_open(tmp, "tree", false)) < 0 ||
            (src = job_open_dir(sdir, "work")) < 0) {
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
                _cleanup_close_ int ru = job_open_dir(sdir, SANDBOX_ROOT_UPPER);
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
        _cleanup_close_ int sdir = job_open_dir(state_fd, j->sandbox->id);
        _cleanup_close_ int snaps = -EBADF, snap = -EBADF, src = -EBADF, dst = -EBADF;
        CopyStats st;
        int r;

        if (sdir < 0 || (snaps = job_open_dir(sdir, "snapshots")) < 0 || (snap = job_open_dir(snaps, j->snap_id)) < 0 ||
            (src = job_open_dir(snap, "tree")) < 0)
                child_fail(out, "open", sdir < 0 ? sdir : snaps < 0 ? snaps : snap < 0 ? snap : src);
        if (j->sandbox->ctx->features.btrfs)
                child_restore_btrfs(j, sdir, snap, out);
        if ((dst = mkdir_open(sdir, j->work_new, false)) < 0)
                child_fail(out, "open", dst);
        r = child_copy_one(out, src, dst, &(CopyOptions) {}, &st);
        if (r >= 0 && j->sandbox->root_overlay) {
                _cleanup_close_ int ru = job_open_dir(sdir, SANDBOX_ROOT_UPPER);
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
        _cleanup_close_ int sdir = job_open_dir(state_fd, j->sandbox->id);
        _cleanup_close_ int from = job_open_dir(state_fd, j->src_sandbox);
        _cleanup_close_ int snaps = -EBADF, snap = -EBADF, src = -EBADF, dst = -EBADF;
        CopyOptions o = { .shift_ids = true,
                          .id_from = j->src_host_uid,
                          .id_to = j->sandbox->host_uid,
                          .id_count = m->config.uid_range };
        char path[64];
        struct stat st_snap;
        CopyStats st;
        int r;

        if (sdir < 0 || from < 0 || (snaps = job_open_dir(from, "snapshots")) < 0 ||
            (snap = job_open_dir(snaps, j->snap_id)) < 0 || fstat(snap, &st_snap) < 0 ||
            (src = job_open_dir(snap, "tree")) < 0 || (dst = job_open_dir(sdir, "work")) < 0)
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
                        dst = job_open_dir(sdir, "work");
                if (r >= 0 && dst < 0)
                        r = dst;
        } else {
                r = child_copy_one(out, src, dst, &o, &st);
                if (r >= 0 && j->sandbox->root_overlay) {
                        _cleanup_close_ int ru = job_open_dir(sdir, SANDBOX_ROOT_UPPER);
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
int snapshot_job_copy_main(void *arg, int out) {
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
