/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "log.h"
#include "macro.h"
#include "context.h"
#include "proto.h"
#include "rm-rf.h"
#include "sandbox.h"
#include "remove-async.h"
#include "snapshot.h"
#include "spawn.h"
#include "util.h"

bool snapshot_id_valid(const char *id) {
        return id && strncmp(id, "snap-", 5) == 0 && strlen(id) == SNAPSHOT_ID_LEN &&
               strspn(id + 5, "0123456789abcdef") == 12;
}

int snapshot_new_id(char ret[static SNAPSHOT_ID_LEN + 1]) {
        uint8_t b[6];
        if (getrandom(b, sizeof(b), 0) != sizeof(b))
                return -EIO;
        snprintf(ret, SNAPSHOT_ID_LEN + 1, "snap-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5]);
        return 0;
}

static int open_snapshots_dir(Sandbox *s) {
        _cleanup_close_ int dfd = openat(s->ctx->state_fd, s->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int fd;
        if (dfd < 0)
                return -errno;
        fd = openat(dfd, "snapshots", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

static int meta_u64(json_object *o, const char *key, uint64_t *ret) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int) ||
            json_object_get_int64(v) < 0)
                return -EBADMSG;
        *ret = (uint64_t) json_object_get_int64(v);
        return 0;
}

static int parse_meta(const char *text, size_t len, const char *id, SnapshotInfo *ret) {
        _cleanup_json_ json_object *o = NULL;
        json_object *v;
        ProtoError err;
        SnapshotInfo i = {};

        while (len > 0 && text[len - 1] == '\n')
                len--;
        if (proto_parse_line(text, len, SBX_MAX_DEPTH, &o, &err) < 0 || !json_object_is_type(o, json_type_object))
                return -EBADMSG;
        if (!json_object_object_get_ex(o, "id", &v) || !json_object_is_type(v, json_type_string) ||
            strcmp(json_object_get_string(v), id) != 0)
                return -EBADMSG;
        snprintf(i.id, sizeof(i.id), "%s", id);
        if (json_object_object_get_ex(o, "label", &v) && json_object_is_type(v, json_type_string))
                snprintf(i.label, sizeof(i.label), "%s", json_object_get_string(v));
        if (meta_u64(o, "created_usec", &i.created_usec) < 0 || meta_u64(o, "bytes", &i.bytes) < 0 ||
            meta_u64(o, "files", &i.files) < 0)
                return -EBADMSG;
        /* Absent: a snapshot from before btrfs forks kept their source's owners, its sandbox's. */
        if (json_object_object_get_ex(o, "tree_uid", NULL) && meta_u64(o, "tree_uid", &i.tree_uid) < 0)
                return -EBADMSG;
        *ret = i;
        return 0;
}

static int read_info(int snaps_fd, const char *id, SnapshotInfo *ret) {
        _cleanup_close_ int dfd = openat(snaps_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int fd = -EBADF;
        char buf[SNAPSHOT_META_MAX + 1];
        ssize_t n;

        if (dfd < 0)
                return -errno;
        fd = openat(dfd, "meta.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, SNAPSHOT_META_MAX);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        return parse_meta(buf, (size_t) n, id, ret);
}

int snapshot_get(Sandbox *s, const char *snap_id, SnapshotInfo *ret) {
        _cleanup_close_ int fd = -EBADF;
        int r;
        if (!snapshot_id_valid(snap_id))
                return -ENOENT;
        fd = open_snapshots_dir(s);
        if (fd < 0)
                return fd;
        r = read_info(fd, snap_id, ret);
        return r == -ENOTDIR || r == -ELOOP ? -ENOENT : r;
}

static int cmp_info(const void *a, const void *b) {
        const SnapshotInfo *x = a, *y = b;
        if (x->created_usec != y->created_usec)
                return x->created_usec < y->created_usec ? -1 : 1;
        return strcmp(x->id, y->id);
}

static int list_add(SnapshotInfo **list, size_t *n, size_t *alloc, const SnapshotInfo *i) {
        if (*n == *alloc) {
                size_t na = *alloc ? *alloc * 2 : 8;
                SnapshotInfo *l = realloc(*list, na * sizeof(*l));
                if (!l)
                        return -ENOMEM;
                *list = l;
                *alloc = na;
        }
        (*list)[(*n)++] = *i;
        return 0;
}

int snapshot_list(Sandbox *s, SnapshotInfo **ret, size_t *ret_n) {
        int fd = open_snapshots_dir(s);
        SnapshotInfo *list = NULL;
        size_t n = 0, alloc = 0;
        struct dirent *de;
        DIR *d;
        int r = 0;

        if (fd == -ENOENT) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        if (fd < 0)
                return fd;
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        while (r >= 0 && (de = readdir(d))) {
                SnapshotInfo i;
                if (!snapshot_id_valid(de->d_name) || read_info(dirfd(d), de->d_name, &i) < 0)
                        continue; /* being made or deleted, or not ours */
                r = list_add(&list, &n, &alloc, &i);
        }
        closedir(d);
        if (r < 0) {
                free(list);
                return r;
        }
        if (n > 1)
                qsort(list, n, sizeof(*list), cmp_info);
        *ret = list;
        *ret_n = n;
        return 0;
}

json_object *snapshot_info_to_json(const SnapshotInfo *i) {
        json_object *o = json_object_new_object();
        char ts[UTC_TIME_MAX];
        json_object_object_add(o, "id", json_object_new_string(i->id));
        json_object_object_add(o, "label", i->label[0] ? json_object_new_string(i->label) : NULL);
        json_object_object_add(o, "created_at",
                               json_object_new_string(format_utc(ts, i->created_usec)));
        json_object_object_add(o, "bytes", json_object_new_int64((int64_t) i->bytes));
        json_object_object_add(o, "files", json_object_new_int64((int64_t) i->files));
        return o;
}

json_object *snapshot_list_json(Sandbox *s) {
        json_object *arr = json_object_new_array();
        SnapshotInfo *list = NULL;
        size_t n = 0;

        if (snapshot_list(s, &list, &n) < 0)
                return arr;
        for (size_t i = 0; i < n; i++)
                json_object_array_add(arr, snapshot_info_to_json(&list[i]));
        free(list);
        return arr;
}

/* ---- Removing ---------------------------------------------------------------------------- */



int snapshot_delete(Sandbox *s, const char *snap_id) {
        _cleanup_close_ int fd = -EBADF;
        char tmp[8 + SNAPSHOT_ID_LEN];

        if (!snapshot_id_valid(snap_id))
                return -ENOENT;
        if (s->job)
                return -EBUSY;
        fd = open_snapshots_dir(s);
        if (fd < 0)
                return fd;
        snprintf(tmp, sizeof(tmp), ".tmp-%s", snap_id);
        if (renameat(fd, snap_id, fd, tmp) < 0)
                return -errno;
        (void) fsync(fd);
        (void) remove_async(s->ctx->event, s->ctx->run_helper_fd, fd, tmp);
        return 0;
}

/* ---- At start ---------------------------------------------------------------------------- */

static void remove_matching(int dir_fd, const char *prefix, const char *where) {
        int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct dirent *de;
        DIR *d;

        if (fd < 0)
                return;
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                return;
        }
        while ((de = readdir(d)))
                if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) {
                        log_info("%s: removing %s, left half-done by an earlier run", where, de->d_name);
                        int r = rm_rf_at(dirfd(d), de->d_name);
                        if (r < 0)
                                log_warning_errno(r, "%s: cannot remove %s: %m", where, de->d_name);
                }
        closedir(d);
}

int snapshot_cleanup_partial(int state_fd, const char *sandbox_id) {
        _cleanup_close_ int dfd = openat(state_fd, sandbox_id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int snaps = -EBADF, ru = -EBADF;
        struct stat st;

        if (dfd < 0)
                return -errno;
        if (fstatat(dfd, FORK_MARKER, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                log_warning("sandbox %s: its fork from a snapshot never finished; it is removed", sandbox_id);
                return -ESTALE;
        }
        remove_matching(dfd, "work.new-", sandbox_id);
        /* An overlay root's upper layer swapped out by a restore, whose remover did not finish. */
        ru = openat(dfd, SANDBOX_ROOT_UPPER, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ru >= 0)
                remove_matching(ru, "upper.new-", sandbox_id);
        snaps = openat(dfd, "snapshots", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (snaps >= 0)
                remove_matching(snaps, ".tmp-", sandbox_id);
        return 0;
}

static void discard_cgroup_at(int parent_fd, const char *name, const char *sandbox_id) {
        _cleanup_close_ int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int r;

        if (fd < 0)
                return;
        (void) cg_kill_wait_empty(fd, true, 1000);
        r = cg_remove_tree(parent_fd, name);
        if (r < 0)
                log_warning_errno(r, "sandbox %s: cannot remove its cgroup: %m", sandbox_id);
}

void snapshot_discard_cgroup(Context *m, const char *sandbox_id) {
        char unit[SCOPE_UNIT_MAX];
        _cleanup_close_ int scope = -EBADF;

        discard_cgroup_at(m->cg.sandboxes_fd, sandbox_id, sandbox_id);
        if (!m->scopes)
                return;
        scope = scope_open_cgroup(m->scopes, scope_unit_name(unit, sandbox_id), NULL);
        if (scope < 0)
                return;
        /* Killed from the top: cgroup.kill takes the scope's whole tree; systemd removes it. */
        (void) cg_kill_wait_empty(scope, false, 1000);
        (void) scope_stop(m->scopes, unit);
}
