/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* btrfs subvolumes and qgroups, for the daemon's btrfs storage ("storage = image:SIZE:btrfs").
 *
 * A sandbox's workspace (and its overlay root's upper layer) is a subvolume; a snapshot is a
 * read-only snapshot of it (BTRFS_IOC_SNAP_CREATE_V2: O(1), whatever the tree holds), a fork or
 * a restore a writable snapshot of that. A disk limit is the max_rfer of a writable subvolume's
 * own (level-0) qgroup, enforced at the moment of the write (EDQUOT). Level-0 qgroups only: a
 * snapshot of a subvolume with no parent qgroup is accounted exactly, whereas one made into
 * another parent than its source's (a fork from one sandbox's level-1 group into another's)
 * marks the whole filesystem's qgroups inconsistent, and then nothing is enforced until a
 * rescan. Nothing here knows a sandbox: callers pass fds, names and sizes. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* The level-1 qgroup id "1/n". */
#define BTRFS_QGROUP_L1(n) ((UINT64_C(1) << 48) | (uint64_t) (n))

/* Whether fd is on btrfs. */
bool btrfs_is_fs(int fd);
/* Whether fd is the root directory of a subvolume (on btrfs, its inode is 256). */
bool btrfs_is_subvol(int fd);
/* Makes dir_fd/name a new, empty subvolume; in qgroup (0: none: its level-0 one only). */
int btrfs_subvol_create(int dir_fd, const char *name, uint64_t qgroup);
/* Snapshots the subvolume src_fd as dir_fd/name, read-only or writable, in qgroup (0: none). */
int btrfs_snapshot(int src_fd, int dir_fd, const char *name, bool readonly, uint64_t qgroup);
/* Deletes the subvolume dir_fd/name, whatever it holds (not the subvolumes nested in it:
 * -ENOTEMPTY). Its blocks are freed by the filesystem's cleaner, after the call. */
int btrfs_subvol_delete(int dir_fd, const char *name);
/* Turns quotas (qgroups) on for the filesystem of fd; 0 if they are on already. */
int btrfs_quota_enable(int fd);
/* Makes the qgroup (-EEXIST: it is there), removes it, sets its max_rfer (0: none). */
int btrfs_qgroup_create(int fd, uint64_t qgroup);
int btrfs_qgroup_destroy(int fd, uint64_t qgroup);
int btrfs_qgroup_limit(int fd, uint64_t qgroup, uint64_t max_rfer);
/* The subvolume id of the subvolume fd is in (its level-0 qgroup is 0/id, the same number). */
int btrfs_subvol_id(int fd, uint64_t *ret);
/* The max_rfer of the level-0 qgroup of the subvolume fd is in (0: none). */
int btrfs_subvol_limit(int fd, uint64_t max_rfer);
