/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk-quota.h"
#include "log.h"
#include "macro.h"
#include "context.h"
#include "project-quota.h"
#include "proto.h"
#include "sandbox.h"
#include "state.h"
#include "util.h"

#define META "meta.json"
#define META_TMP "meta.json.tmp"
#define META_MAX (1u << 20)

/* ---- sweep.c's fields: ttl, idle, limits.disk and limits.files ------------------------------ */

static void sweep_meta_save(Sandbox *s, json_object *meta) {
        json_object *l;

        if (json_object_object_get_ex(meta, "limits", &l)) {
                json_object_object_add(l, "disk", json_object_new_int64((int64_t) s->limits.disk));
                json_object_object_add(l, "files", json_object_new_int64((int64_t) s->limits.files));
        }
        if (s->project_id)
                json_object_object_add(meta, "project_id", json_object_new_int64(s->project_id));
        json_object_object_add(meta, "ttl_usec", json_object_new_int64((int64_t) s->ttl_usec));
        json_object_object_add(meta, "idle_usec", json_object_new_int64((int64_t) s->idle_usec));
        /* Over its limit at the last sweep: runs stay refused across a restart until a sweep
         * (the first refused run starts one) finds it back under. */
        if (s->disk_refused) {
                json_object *d = json_object_new_object();
                json_object_object_add(d, "bytes", json_object_new_int64((int64_t) s->disk_bytes));
                json_object_object_add(d, "files", json_object_new_int64((int64_t) s->disk_files));
                json_object_object_add(meta, "disk_refused", d);
        }
}

static uint64_t meta_u64(json_object *o, const char *key) {
        json_object *v;
        if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int) ||
            json_object_get_int64(v) < 0)
                return 0;
        return (uint64_t) json_object_get_int64(v);
}

/* Fields an older daemon did not write are absent: no disk limit, no expiry; the file limit
 * the disk limit implies. */
static int sweep_meta_restore(Sandbox *s, json_object *meta) {
        json_object *l = NULL;

        (void) json_object_object_get_ex(meta, "limits", &l);
        s->limits.disk = meta_u64(l, "disk");
        /* A sandbox of a daemon before limits.files gets the default a create would give it. */
        if (l && json_object_object_get_ex(l, "files", NULL))
                s->limits.files = meta_u64(l, "files");
        else
                s->limits.files = s->ctx->config.default_files ?: config_files_for_bytes(s->limits.disk);
        s->ttl_usec = meta_u64(meta, "ttl_usec");
        s->idle_usec = meta_u64(meta, "idle_usec");
        json_object *d;
        if (json_object_object_get_ex(meta, "disk_refused", &d) && json_object_is_type(d, json_type_object)) {
                s->disk_refused = s->disk_measured = true;
                s->disk_bytes = meta_u64(d, "bytes");
                s->disk_files = meta_u64(d, "files");
        }
        /* The idle clock starts again: the daemon does not know what happened while it was gone. */
        s->last_active_usec = now_usec(CLOCK_MONOTONIC);
        /* What is left of the ttl comes from the wall clock, the only one that spans the time the
         * daemon was gone (and a reboot); from here on, the monotonic clock counts it down, so
         * that a step of the wall clock while the daemon runs expires nothing (THREATS DMN-09). */
        if (s->ttl_usec) {
                uint64_t end = s->created_usec + s->ttl_usec, now = now_usec(CLOCK_REALTIME);
                s->ttl_deadline_usec = s->last_active_usec + (end > now ? end - now : 0);
        }
        return 0;
}

/* ---- run-record.c's: the runs a restart cut short ------------------------------------------ */

static void run_records_meta_save(Sandbox *s, json_object *meta) {
        if (s->interrupted_runs)
                json_object_object_add(meta, "interrupted_runs", json_object_get(s->interrupted_runs));
}

static void run_records_meta_restore(Sandbox *s, json_object *meta) {
        json_object *v;
        if (json_object_object_get_ex(meta, "interrupted_runs", &v) && json_object_is_type(v, json_type_array)) {
                json_object_put(s->interrupted_runs);
                s->interrupted_runs = json_object_get(v);
        }
}

/* ---- The record ----------------------------------------------------------------------------- */

static json_object *state_to_json(Sandbox *s) {
        json_object *o = json_object_new_object(), *l = json_object_new_object();

        json_object_object_add(o, "version", json_object_new_int(1));
        json_object_object_add(o, "id", json_object_new_string(s->id));
        json_object_object_add(o, "name", s->name ? json_object_new_string(s->name) : NULL);
        json_object_object_add(o, "owner_uid", json_object_new_int64(s->owner_uid));
        json_object_object_add(o, "uid_slot", json_object_new_int64(s->uid_slot));
        json_object_object_add(o, "work_uid", json_object_new_int64(s->work_uid));
        json_object_object_add(o, "created_usec", json_object_new_int64((int64_t) s->created_usec));
        json_object_object_add(o, "best_effort", json_object_new_boolean(s->best_effort));
        json_object_object_add(o, "user", json_object_new_string(sandbox_user_to_string(s->user)));
        json_object_object_add(o, "root", sandbox_root_json(s));
        json_object_object_add(o, "hostname", s->hostname ? json_object_new_string(s->hostname) : NULL);
        json_object_object_add(o, "sysctls", s->sysctls ? json_object_get(s->sysctls) : NULL);
        json_object_object_add(o, "masked_paths", s->masked_paths ? json_object_get(s->masked_paths) : NULL);
        json_object_object_add(o, "readonly_paths", s->readonly_paths ? json_object_get(s->readonly_paths) : NULL);
        json_object_object_add(o, "network", s->net.egress ? egress_spec_json(&s->net) : NULL);
        json_object_object_add(l, "memory", json_object_new_int64((int64_t) s->limits.memory));
        json_object_object_add(l, "pids", json_object_new_int64((int64_t) s->limits.pids));
        json_object_object_add(l, "millicpus", json_object_new_int64((int64_t) s->limits.millicpus));
        json_object_object_add(l, "timeout_usec", json_object_new_int64((int64_t) s->limits.timeout_usec));
        json_object_object_add(l, "output_bytes", json_object_new_int64((int64_t) s->limits.output_bytes));
        json_object_object_add(l, "file_size", json_object_new_int64((int64_t) s->limits.file_size));
        json_object_object_add(l, "open_files", json_object_new_int64((int64_t) s->limits.open_files));
        json_object_object_add(o, "limits", l);
        json_object_object_add(o, "env", s->env ? json_object_get(s->env) : NULL);
        if (s->image)
                json_object_object_add(o, "image", json_object_new_string(s->image));
        if (s->n_mounts > 0) {
                /* With the credentials they were opened with: a restart reopens them so. */
                json_object *a = json_object_new_array(), *c = json_object_new_object(), *g = json_object_new_array();
                for (unsigned i = 0; i < s->n_mounts; i++) {
                        json_object *e = json_object_new_object();
                        json_object_object_add(e, "source", json_object_new_string(s->mounts[i].source));
                        json_object_object_add(e, "target", json_object_new_string(s->mounts[i].target));
                        json_object_object_add(e, "read_only", json_object_new_boolean(s->mounts[i].read_only));
                        if (s->mounts[i].idmap_same)
                                json_object_object_add(e, "idmap", json_object_new_string("same"));
                        json_object_array_add(a, e);
                }
                for (unsigned i = 0; i < s->caller.n_groups; i++)
                        json_object_array_add(g, json_object_new_int64(s->caller.groups[i]));
                json_object_object_add(c, "uid", json_object_new_int64(s->caller.uid));
                json_object_object_add(c, "gid", json_object_new_int64(s->caller.gid));
                json_object_object_add(c, "groups", g);
                json_object_object_add(o, "mounts", a);
                json_object_object_add(o, "mount_caller", c);
        }
        sweep_meta_save(s, o);
        run_records_meta_save(s, o);
        return o;
}

/* The records of many sandboxes at once, each as state_save() writes one, in phases so that the
 * filesystem commits its journal a few times for all of them rather than three times for each:
 * every file is written and its writeback started before the first is synced (so that one
 * commit covers the blocks of all), then renamed, then the directories synced (one commit
 * covers every rename). ret[i]: 0 or -errno for v[i]. */
typedef struct SaveSlot {
        int dfd, fd, r;
} SaveSlot;

static int save_write_tmp(Sandbox *s, SaveSlot *slot) {
        _cleanup_json_ json_object *o = state_to_json(s);
        _cleanup_free_ char *text = NULL;
        size_t n;

        text = proto_serialize(o, &n);
        if (!text)
                return -ENOMEM;
        if (n > META_MAX)
                return -EFBIG;
        slot->dfd = openat(s->ctx->state_fd, s->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (slot->dfd < 0)
                return -errno;
        slot->fd = openat(slot->dfd, META_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (slot->fd < 0)
                return -errno;
        return write_all(slot->fd, text, n);
}

void state_save_many(Sandbox *const *v, size_t n, int *ret) {
        _cleanup_free_ SaveSlot *slot = calloc(n ? n : 1, sizeof(*slot));
        bool any = false;

        if (!slot) {
                for (size_t i = 0; i < n; i++)
                        ret[i] = -ENOMEM;
                return;
        }
        for (size_t i = 0; i < n; i++) {
                slot[i] = (SaveSlot) { .dfd = -EBADF, .fd = -EBADF };
                slot[i].r = save_write_tmp(v[i], &slot[i]);
        }
        /* Their blocks allocated and written out together: the first fsync commits them all. */
        for (size_t i = 0; i < n; i++)
                if (slot[i].r == 0)
                        (void) sync_file_range(slot[i].fd, 0, 0, SYNC_FILE_RANGE_WRITE);
        for (size_t i = 0; i < n; i++)
                if (slot[i].r == 0 && fsync(slot[i].fd) < 0)
                        slot[i].r = -errno;
        for (size_t i = 0; i < n; i++)
                if (slot[i].r == 0 && renameat(slot[i].dfd, META_TMP, slot[i].dfd, META) < 0)
                        slot[i].r = -errno;
        for (size_t i = 0; i < n; i++) {
                if (slot[i].r == 0 && fsync(slot[i].dfd) < 0)
                        slot[i].r = -errno;
                any = any || slot[i].r == 0;
                safe_close(slot[i].fd);
                safe_close(slot[i].dfd);
        }
        /* And their entries in sandboxes/, new at their first save. */
        int r = any && fsync(v[0]->ctx->state_fd) < 0 ? -errno : 0;
        for (size_t i = 0; i < n; i++)
                ret[i] = slot[i].r ?: r;
}

int state_save(Sandbox *s) {
        _cleanup_json_ json_object *o = state_to_json(s);
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int dfd = -EBADF, fd = -EBADF;
        size_t n;
        int r;

        text = proto_serialize(o, &n);
        /* Never a record the next start could not read back (state_read): the old one stays. */
        if (text && n > META_MAX)
                return -EFBIG;
        if (!text)
                return -ENOMEM;
        dfd = openat(s->ctx->state_fd, s->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        fd = openat(dfd, META_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        if ((r = write_all(fd, text, n)) < 0)
                return r;
        /* Data first, then the name, then the directory entry: a crash leaves the old file or
         * the new one, never a torn one. */
        if (fsync(fd) < 0 || renameat(dfd, META_TMP, dfd, META) < 0 || fsync(dfd) < 0)
                return -errno;
        /* And the sandbox's own entry in sandboxes/, new at its first save. */
        if (fsync(s->ctx->state_fd) < 0)
                return -errno;
        return 0;
}

int state_read(int state_fd, const char *id, json_object **ret) {
        _cleanup_close_ int dfd = openat(state_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        ProtoError err;
        ssize_t n;

        if (dfd < 0)
                return -errno;
        fd = openat(dfd, META, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        buf = malloc(META_MAX + 2);
        if (!buf)
                return -ENOMEM;
        /* One byte more than a record may have: a longer file is refused whole, never parsed cut. */
        n = read_full(fd, buf, META_MAX + 1);
        if (n < 0)
                return (int) n;
        if ((size_t) n > META_MAX)
                return -EFBIG;
        while (n > 0 && buf[n - 1] == '\n')
                n--;
        buf[n] = '\0';
        return proto_parse_line(buf, (size_t) n, SBX_MAX_DEPTH, ret, &err) < 0 ? -EBADMSG : 0;
}

bool state_is_sandbox_id(const char *name) {
        return strncmp(name, "sbx-", 4) == 0 && strlen(name) == 16 && strspn(name + 4, "0123456789abcdef") == 12;
}

/* What state.c keeps of the other modules' fields, back into a restored sandbox. */
/* disk-quota.c's: the project, given its limits again once they are read (the record's are
 * the quota's, whatever the filesystem kept). Not one of ours (a hand-edited record): no quota
 * rather than someone else's project. */
static void quota_meta_restore(Sandbox *s, json_object *meta) {
        int r;

        s->project_id = (uint32_t) meta_u64(meta, "project_id");
        if (s->project_id < PQ_ID_BASE)
                s->project_id = 0;
        r = sandbox_quota_restore(s);
        if (r < 0)
                log_warning_errno(r, "sandbox %s: cannot set its project quota again: %m; its disk limit is the sweep's",
                                  s->id);
}

void state_restore_fields(Sandbox *s, json_object *meta) {
        sweep_meta_restore(s, meta);
        quota_meta_restore(s, meta);
        run_records_meta_restore(s, meta);
}
