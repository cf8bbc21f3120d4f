/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <linux/btrfs.h>
#include <linux/magic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include "btrfs.h"

#define SUBVOL_ROOT_INO 256 /* BTRFS_FIRST_FREE_OBJECTID: every subvolume's top directory */

bool btrfs_is_fs(int fd) {
        struct statfs sf;
        return fstatfs(fd, &sf) == 0 && (unsigned long) sf.f_type == BTRFS_SUPER_MAGIC;
}

bool btrfs_is_subvol(int fd) {
        struct stat st;
        return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_ino == SUBVOL_ROOT_INO && btrfs_is_fs(fd);
}

static int set_name(struct btrfs_ioctl_vol_args_v2 *a, const char *name) {
        if (!*name || strchr(name, '/') || strlen(name) > BTRFS_SUBVOL_NAME_MAX || strcmp(name, ".") == 0 ||
            strcmp(name, "..") == 0)
                return -EINVAL;
        strcpy(a->name, name);
        return 0;
}

/* One qgroup to inherit into, in the layout the ioctls read: the header, then its qgroups[]
 * (a flexible array member, so a union rather than a struct with a field after it). */
typedef union Inherit {
        struct btrfs_qgroup_inherit h;
        uint8_t bytes[sizeof(struct btrfs_qgroup_inherit) + sizeof(uint64_t)];
} Inherit;

static void set_inherit(struct btrfs_ioctl_vol_args_v2 *a, Inherit *in, uint64_t qgroup) {
        if (!qgroup)
                return;
        memset(in, 0, sizeof(*in));
        in->h.num_qgroups = 1;
        memcpy(in->bytes + offsetof(struct btrfs_qgroup_inherit, qgroups), &qgroup, sizeof(qgroup));
        a->flags |= BTRFS_SUBVOL_QGROUP_INHERIT;
        a->size = sizeof(*in);
        a->qgroup_inherit = &in->h;
}

int btrfs_subvol_create(int dir_fd, const char *name, uint64_t qgroup) {
        struct btrfs_ioctl_vol_args_v2 a = {};
        Inherit in;
        int r = set_name(&a, name);

        if (r < 0)
                return r;
        set_inherit(&a, &in, qgroup);
        return ioctl(dir_fd, BTRFS_IOC_SUBVOL_CREATE_V2, &a) < 0 ? -errno : 0;
}

int btrfs_snapshot(int src_fd, int dir_fd, const char *name, bool readonly, uint64_t qgroup) {
        struct btrfs_ioctl_vol_args_v2 a = { .fd = src_fd, .flags = readonly ? BTRFS_SUBVOL_RDONLY : 0 };
        Inherit in;
        int r = set_name(&a, name);

        if (r < 0)
                return r;
        set_inherit(&a, &in, qgroup);
        return ioctl(dir_fd, BTRFS_IOC_SNAP_CREATE_V2, &a) < 0 ? -errno : 0;
}

int btrfs_subvol_delete(int dir_fd, const char *name) {
        struct btrfs_ioctl_vol_args a = {};

        if (!*name || strchr(name, '/') || strlen(name) > BTRFS_PATH_NAME_MAX)
                return -EINVAL;
        strcpy(a.name, name);
        return ioctl(dir_fd, BTRFS_IOC_SNAP_DESTROY, &a) < 0 ? -errno : 0;
}

int btrfs_quota_enable(int fd) {
        struct btrfs_ioctl_quota_ctl_args a = { .cmd = BTRFS_QUOTA_CTL_ENABLE };
        /* Enabling again is a no-op on a filesystem that has them (the kernel returns 0). */
        return ioctl(fd, BTRFS_IOC_QUOTA_CTL, &a) < 0 ? -errno : 0;
}

int btrfs_qgroup_create(int fd, uint64_t qgroup) {
        struct btrfs_ioctl_qgroup_create_args a = { .create = 1, .qgroupid = qgroup };
        return ioctl(fd, BTRFS_IOC_QGROUP_CREATE, &a) < 0 ? -errno : 0;
}

int btrfs_qgroup_destroy(int fd, uint64_t qgroup) {
        struct btrfs_ioctl_qgroup_create_args a = { .create = 0, .qgroupid = qgroup };
        return ioctl(fd, BTRFS_IOC_QGROUP_CREATE, &a) < 0 ? -errno : 0;
}

int btrfs_qgroup_limit(int fd, uint64_t qgroup, uint64_t max_rfer) {
        struct btrfs_ioctl_qgroup_limit_args a = { .qgroupid = qgroup };

        /* A limit of "none" is max_rfer = (u64) -1 with the flag, as btrfs-progs sets it. */
        a.lim.flags = BTRFS_QGROUP_LIMIT_MAX_RFER;
        a.lim.max_rfer = max_rfer ? max_rfer : UINT64_MAX;
        return ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &a) < 0 ? -errno : 0;
}

int btrfs_subvol_id(int fd, uint64_t *ret) {
        struct btrfs_ioctl_ino_lookup_args a = { .objectid = SUBVOL_ROOT_INO };

        if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &a) < 0)
                return -errno;
        *ret = a.treeid;
        return 0;
}

int btrfs_subvol_limit(int fd, uint64_t max_rfer) {
        uint64_t id;
        int r = btrfs_subvol_id(fd, &id);

        return r < 0 ? r : btrfs_qgroup_limit(fd, id, max_rfer);
}
