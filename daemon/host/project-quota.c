/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/quota.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "project-quota.h"

#ifndef SYS_quotactl_fd
#define SYS_quotactl_fd 443
#endif
#ifndef XFS_SUPER_MAGIC
#define XFS_SUPER_MAGIC 0x58465342
#endif

/* quotactl_fd(2) (5.14): no block device path to find, and it works on a loop-mounted image
 * whose device node this mount namespace may not even show. No glibc wrapper yet. */
static int quotactl_fd(int fd, unsigned cmd, int id, void *addr) {
        return syscall(SYS_quotactl_fd, fd, cmd, id, addr) < 0 ? -errno : 0;
}

static const char *fs_name(int fd) {
        struct statfs sf;

        if (fstatfs(fd, &sf) < 0)
                return "unknown";
        switch ((unsigned long) sf.f_type) {
        case XFS_SUPER_MAGIC:
                return "xfs";
        case EXT4_SUPER_MAGIC: /* ext2/3/4 share it */
                return "ext4";
        case BTRFS_SUPER_MAGIC:
                return "btrfs";
        case TMPFS_MAGIC:
                return "tmpfs";
        case OVERLAYFS_SUPER_MAGIC:
                return "overlay";
        default:
                return "other";
        }
}

static int probe_state(int fd, const char *fs, char *why, size_t len) {
        struct fs_quota_statv st = { .qs_version = FS_QSTATV_VERSION1 };
        int r = quotactl_fd(fd, QCMD(Q_XGETQSTATV, PRJQUOTA), 0, &st);

        if (r == -ENOSYS) {
                /* No quotactl_fd (CONFIG_QUOTACTL, 5.14), or no quota operations for this
                 * filesystem: one errno for both. */
                snprintf(why, len, "no quota support for %s in this kernel (CONFIG_QUOTACTL, %s) or in the filesystem", fs,
                         strcmp(fs, "xfs") == 0 ? "CONFIG_XFS_QUOTA" : "CONFIG_QUOTA, CONFIG_QFMT_V2");
                return r;
        }
        if (r == -ENOTTY || r == -EOPNOTSUPP || r == -EINVAL) {
                snprintf(why, len, "%s has no project quotas", fs);
                return -EOPNOTSUPP;
        }
        if (r < 0) {
                snprintf(why, len, "quotactl on %s: %s", fs, strerror(-r));
                return r;
        }
        if (!(st.qs_flags & FS_QUOTA_PDQ_ACCT)) {
                snprintf(why, len, "%s is not mounted with project quotas (xfs: mount -o prjquota; ext4: mkfs.ext4 -O "
                         "project,quota, then mount -o prjquota)", fs);
                return -ESRCH;
        }
        if (!(st.qs_flags & FS_QUOTA_PDQ_ENFD)) {
                snprintf(why, len, "%s accounts project quotas but does not enforce them (pqnoenforce)", fs);
                return -ENOLINK;
        }
        snprintf(why, len, "project quota on %s", fs);
        return 0;
}

int pq_probe(int fd, char *fstype, size_t fstype_len, char *why, size_t why_len) {
        char dummy[1];
        const char *fs = fs_name(fd);

        if (fstype)
                snprintf(fstype, fstype_len, "%s", fs);
        if (!why)
                why = dummy, why_len = sizeof(dummy);
        /* ext4 without the feature answers the state query as if quotas were merely off. */
        return probe_state(fd, fs, why, why_len);
}

int pq_set_project(int dir_fd, uint32_t projid) {
        struct fsxattr fa;

        if (ioctl(dir_fd, FS_IOC_FSGETXATTR, &fa) < 0)
                return -errno;
        fa.fsx_projid = projid;
        fa.fsx_xflags |= FS_XFLAG_PROJINHERIT;
        return ioctl(dir_fd, FS_IOC_FSSETXATTR, &fa) < 0 ? -errno : 0;
}

int pq_set_limit(int fd, uint32_t projid, uint64_t bytes, uint64_t files) {
        struct if_dqblk q = {
                .dqb_bhardlimit = (bytes + QIF_DQBLKSIZE - 1) / QIF_DQBLKSIZE,
                .dqb_bsoftlimit = 0,
                .dqb_ihardlimit = files,
                .dqb_isoftlimit = 0,
                .dqb_valid = QIF_LIMITS,
        };
        return quotactl_fd(fd, QCMD(Q_SETQUOTA, PRJQUOTA), (int) projid, &q);
}

int pq_get(int fd, uint32_t projid, PqUsage *ret) {
        struct if_dqblk q = {};
        int r = quotactl_fd(fd, QCMD(Q_GETQUOTA, PRJQUOTA), (int) projid, &q);

        /* An id the filesystem has never seen: nothing held, no limit. */
        if (r == -ESRCH || r == -ENOENT) {
                *ret = (PqUsage) {};
                return 0;
        }
        if (r < 0)
                return r;
        *ret = (PqUsage) { .bytes = q.dqb_curspace, .files = q.dqb_curinodes,
                           .bytes_limit = q.dqb_bhardlimit * QIF_DQBLKSIZE, .files_limit = q.dqb_ihardlimit };
        return 0;
}
