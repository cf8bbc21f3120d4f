/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>

#include "btrfs.h"
#include "context.h"
#include "disk-quota.h"
#include "log.h"
#include "macro.h"
#include "project-quota.h"
#include "registry.h"
#include "sandbox.h"

#define PROJECT_IDS_TRIED 4096

static bool id_taken(Context *m, uint32_t id) {
        for (Sandbox *o = registry_first(m->registry); o; o = registry_next(&o->entry))
                if (o->project_id == id)
                        return true;
        return false;
}

/* The lowest id from PQ_ID_BASE that no sandbox has and that holds nothing on the filesystem:
 * not a destroyed sandbox's whose files are still being removed, not an administrator's. */
static int project_id_pick(Context *m, uint32_t *ret) {
        for (uint32_t id = PQ_ID_BASE; id < PQ_ID_BASE + PROJECT_IDS_TRIED; id++) {
                PqUsage u;
                int r;

                if (id_taken(m, id))
                        continue;
                r = pq_get(m->state_fd, id, &u);
                if (r < 0)
                        return r;
                if (u.files == 0 && u.bytes == 0 && u.bytes_limit == 0 && u.files_limit == 0) {
                        *ret = id;
                        return 0;
                }
        }
        return -ENOSPC;
}

/* btrfs storage: limits.disk is the max_rfer of each of its writable subvolumes' own qgroup
 * (btrfs.h): the workspace's, and root-upper's (the upper layer's) for an overlay root. Set on those there
 * now; sandbox_make_workspace() calls again once it has made them, and a restore or a fork
 * sets it on the subvolumes it puts in place (snapshot-job.c). limits.files has no btrfs
 * counterpart (sandbox-request.c refuses it). */
static int btrfs_quota_apply(Sandbox *s, int dir_fd) {
        static const char *const subvols[] = { "work", SANDBOX_ROOT_UPPER, NULL };
        int r;

        for (const char *const *n = subvols; *n; n++) {
                _cleanup_close_ int fd = openat(dir_fd, *n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 && errno == ENOENT)
                        continue;
                if (fd < 0)
                        return -errno;
                if (!btrfs_is_subvol(fd)) {
                        log_info("sandbox %s: %s is no subvolume; its disk limit stays the sweep's", s->id, *n);
                        return 0;
                }
                r = btrfs_subvol_limit(fd, s->limits.disk);
                if (r < 0)
                        return r;
        }
        s->disk_enforced = s->limits.disk > 0;
        return 0;
}

static int quota_set(Sandbox *s) {
        uint64_t bytes = s->limits.disk ? s->limits.disk + DISK_QUOTA_SLACK_BYTES : 0;
        uint64_t files = s->limits.files ? s->limits.files + DISK_QUOTA_SLACK_FILES : 0;

        return pq_set_limit(s->ctx->state_fd, s->project_id, bytes, files);
}

int sandbox_quota_apply(Sandbox *s, int dir_fd, bool existing) {
        Context *m = s->ctx;
        int r;

        s->disk_enforced = false;
        if (m->features.btrfs && m->features.disk_quota)
                return btrfs_quota_apply(s, dir_fd);
        if (!m->features.disk_quota || (!s->limits.disk && !s->limits.files))
                return 0;
        /* A record from before quotas (or from a host without them): its tree's files have no
         * project, and giving them one means a walk of all of them; the sweep keeps its limit. */
        if (existing && !s->project_id) {
                log_info("sandbox %s: no project quota recorded; its disk limit stays the sweep's", s->id);
                return 0;
        }
        if (!s->project_id) {
                r = project_id_pick(m, &s->project_id);
                if (r < 0)
                        return r;
        }
        r = pq_set_project(dir_fd, s->project_id);
        if (r < 0 || (r = quota_set(s)) < 0) {
                if (!existing)
                        s->project_id = 0;
                return r;
        }
        s->disk_enforced = true;
        return 0;
}

int sandbox_quota_restore(Sandbox *s) {
        _cleanup_close_ int dfd = openat(s->ctx->state_fd, s->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (dfd < 0)
                return -errno;
        return sandbox_quota_apply(s, dfd, true);
}

void sandbox_quota_release(Sandbox *s) {
        int r;

        if (!s->project_id || !s->ctx->features.disk_quota)
                return;
        if (s->ctx->features.btrfs) {
                s->disk_enforced = false; /* its subvolumes go with it, their qgroups' limits too */
                return;
        }
        r = pq_set_limit(s->ctx->state_fd, s->project_id, 0, 0);
        if (r < 0)
                log_warning_errno(r, "sandbox %s: cannot clear the quota of project %u: %m", s->id, (unsigned) s->project_id);
        s->disk_enforced = false;
}

int sandbox_quota_subvol(const Sandbox *s, int fd) {
        if (!s->ctx->features.btrfs || !s->ctx->features.disk_quota)
                return 0;
        /* Also without a limit: a snapshot's qgroup has its source's (the other sandbox's). */
        return btrfs_subvol_limit(fd, s->limits.disk);
}
