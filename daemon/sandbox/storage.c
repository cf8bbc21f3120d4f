/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "btrfs.h"
#include "log.h"
#include "macro.h"
#include "project-quota.h"
#include "storage-image.h"
#include "storage.h"
#include "util.h"

static int image_path(Context *ctx, char **ret) {
        return asprintf(ret, "%s/" STORAGE_IMAGE_NAME, ctx->config.state_dir) < 0 ? -ENOMEM : 0;
}

static int prepare_image(Context *ctx, const char *dir, const char *image) {
        StorageImage si;
        char why[512] = "", size[32];
        int r;

        /* The image's filesystem is mounted in the daemon's mount namespace (systemd's own for the
         * service), and every sandbox's mount namespace holds it: sandboxes kept through a restart
         * keep the earlier daemon's mount, whose loop device the next daemon finds (by the image's
         * device and inode) and mounts again, the same filesystem (storage-image.h). */
        r = storage_image_mount(image, ctx->config.storage_image_size, ctx->config.storage_btrfs, dir, &si, why,
                                sizeof(why));

        if (r == -ENOTEMPTY)
                return log_error_errno(r, "storage = image: %s already holds sandboxes on the state directory's own "
                                       "filesystem, which the image mounted over it would hide. Destroy them first "
                                       "(with storage = state), or set storage = state again to keep them", dir);
        if (r < 0)
                return log_error_errno(r, "storage = image: %s", why);
        format_size(size, sizeof(size), ctx->config.storage_image_size);
        if (si.created)
                log_info("storage: made %s (%s, sparse, %s)", image, size,
                         si.btrfs ? "btrfs: subvolumes and qgroups" : "xfs with reflinks");
        /* The filesystem's root replaces the directory: the same closed mode. */
        if (chmod(dir, 0711) < 0)
                return log_error_errno(-errno, "cannot chmod %s: %m", dir);
        if (si.taken_over)
                log_info("storage: %s still attached to %s (the earlier daemon's mount, held by the sandboxes it left "
                         "running): the same filesystem mounted again on %s%s", image, si.loop_dev, dir,
                         si.quota ? "" : " WITHOUT quotas");
        else if (!si.reused)
                log_info("storage: %s mounted on %s through %s%s", image, dir, si.loop_dev,
                         si.quota   ? (si.btrfs ? " with qgroups" : " with project quotas")
                         : si.btrfs ? " WITHOUT qgroups (the kernel refused to turn quotas on)"
                                    : " WITHOUT project quotas (the kernel refused prjquota)");
        return 0;
}

int storage_prepare(Context *ctx, const char *dir) {
        _cleanup_free_ char *image = NULL;
        struct stat st;
        int r = image_path(ctx, &image);

        if (r < 0)
                return r;
        ctx->features.storage = ctx->config.storage_image_size ? "image" : "state";
        if (ctx->config.storage_image_size)
                return prepare_image(ctx, dir, image);
        if (stat(image, &st) == 0)
                return log_error_errno(-EEXIST, "storage = state, but %s is there: the sandboxes kept in it would be "
                                       "out of sight. Set storage = image:SIZE again, or remove the image (and its "
                                       "sandboxes with it) to start afresh on the state directory", image);
        return 0;
}

bool storage_has_reflink(int dir_fd) {
        _cleanup_close_ int a = openat(dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600), b = -EBADF;
        char buf[4096] = { 1 };

        if (a < 0 || pwrite(a, buf, sizeof(buf), 0) != (ssize_t) sizeof(buf))
                return false;
        b = openat(dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        return b >= 0 && ioctl(b, FICLONE, a) == 0;
}

/* Quotas on, yet a directory may still refuse a project id: ext4 with 128-byte inodes (what
 * mkfs.ext4 makes of a small filesystem) has no room for one. Tried once on a directory of
 * its own, with an id no sandbox gets. */
static int probe_project_id(int state_fd, char *why, size_t len) {
        static const char name[] = ".quota-probe";
        _cleanup_close_ int fd = -EBADF;
        int r;

        (void) unlinkat(state_fd, name, AT_REMOVEDIR);
        if (mkdirat(state_fd, name, 0700) < 0)
                return -errno;
        fd = openat(state_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        r = fd < 0 ? -errno : pq_set_project(fd, PQ_ID_BASE - 1);
        (void) unlinkat(state_fd, name, AT_REMOVEDIR);
        if (r < 0)
                snprintf(why, len, "project quotas are on, but a directory cannot be given a project id (%s; ext4 "
                         "needs inodes of 256 bytes or more: mkfs.ext4 -I 256)", strerror(-r));
        return r;
}

/* btrfs storage: a qgroup made and removed again proves quotas are on and ours to set. */
static int probe_qgroups(int state_fd, char *why, size_t len) {
        uint64_t q = BTRFS_QGROUP_L1(PQ_ID_BASE - 1);
        int r = btrfs_quota_enable(state_fd);

        if (r >= 0) {
                r = btrfs_qgroup_create(state_fd, q);
                if (r == -EEXIST)
                        r = 0;
                if (r >= 0)
                        (void) btrfs_qgroup_destroy(state_fd, q);
        }
        if (r < 0)
                snprintf(why, len, "btrfs quotas (qgroups) cannot be used: %s", strerror(-r));
        return r;
}

void storage_probe(Context *ctx, const char *dir) {
        HostFeatures *f = &ctx->features;
        char why[256], fs[16];
        int r;

        f->btrfs = ctx->config.storage_image_size && ctx->config.storage_btrfs && btrfs_is_fs(ctx->state_fd);
        if (f->btrfs) {
                snprintf(fs, sizeof(fs), "btrfs");
                r = probe_qgroups(ctx->state_fd, why, sizeof(why));
                f->disk_quota = r >= 0;
                f->files_quota = false;
                snprintf(f->fs, sizeof(f->fs), "%s", fs);
                if (r >= 0)
                        snprintf(f->disk_quota_how, sizeof(f->disk_quota_how),
                                 "btrfs qgroup of each writable subvolume at %s (limits.files is not enforceable)", dir);
                else
                        snprintf(f->disk_quota_how, sizeof(f->disk_quota_how), "no qgroups at %s: %s", dir, why);
                f->reflink = storage_has_reflink(ctx->state_fd);
                log_info("storage: %s (%s, btrfs); disk limits %s: %s; reflinks: %s; snapshots: subvolume", dir,
                         f->storage, f->disk_quota ? "enforced at write time" : "applied by the sweep",
                         f->disk_quota_how, f->reflink ? "yes" : "no");
                return;
        }
        r = pq_probe(ctx->state_fd, fs, sizeof(fs), why, sizeof(why));
        snprintf(f->fs, sizeof(f->fs), "%s", fs);
        if (r >= 0)
                r = probe_project_id(ctx->state_fd, why, sizeof(why));
        f->disk_quota = f->files_quota = r >= 0;
        if (r >= 0)
                snprintf(f->disk_quota_how, sizeof(f->disk_quota_how), "project quota on %s at %s", fs, dir);
        else
                snprintf(f->disk_quota_how, sizeof(f->disk_quota_how), "no project quotas at %s: %s", dir, why);
        f->reflink = storage_has_reflink(ctx->state_fd);
        log_info("storage: %s (%s); disk limits %s: %s; reflinks: %s", dir, f->storage,
                 f->disk_quota ? "enforced at write time" : "applied by the sweep", f->disk_quota_how,
                 f->reflink ? "yes" : "no");
}
