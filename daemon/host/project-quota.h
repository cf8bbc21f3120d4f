/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Project quotas: a disk limit the filesystem enforces at the moment of the write (XFS mounted
 * with pquota/prjquota, ext4 made with -O project,quota and mounted prjquota).
 *
 * A directory tree belongs to a project by its inodes' project id: set on the top directory
 * with FS_IOC_FSSETXATTR together with FS_XFLAG_PROJINHERIT, so that everything made below it
 * later inherits the id. The limit is the project's, set with quotactl_fd(Q_SETQUOTA,
 * PRJQUOTA) on any fd of that filesystem: a write that would take the project past its block
 * hard limit fails, with ENOSPC on XFS (which reports a project's limit as a full directory
 * tree) and EDQUOT on ext4; a create past its inode limit likewise. Nothing here knows a sandbox: callers pass fds and ids. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Where the daemon's project ids start: far above what administrators number their own
 * projects with (/etc/projid), below the 32-bit limit. */
#define PQ_ID_BASE UINT32_C(0x5bd00000)

typedef struct PqUsage {
        uint64_t bytes, files;             /* what the project holds now */
        uint64_t bytes_limit, files_limit; /* hard limits; 0: none */
} PqUsage;

/* 0 when the filesystem of fd enforces project quotas; else -ENOSYS (the kernel has no quota
 * support), -EOPNOTSUPP (this filesystem has none), -ESRCH (not mounted with them), -ENOLINK
 * (accounting only, not enforced). why (may be NULL) says it in words, fstype its name
 * ("xfs", "ext4", ...). */
int pq_probe(int fd, char *fstype, size_t fstype_len, char *why, size_t why_len);
/* Gives the directory dir_fd the project id, inherited by what is made below it. */
int pq_set_project(int dir_fd, uint32_t projid);
/* The project's hard limits (bytes rounded up to 1 KiB; 0: none, which clears it). */
int pq_set_limit(int fd, uint32_t projid, uint64_t bytes, uint64_t files);
int pq_get(int fd, uint32_t projid, PqUsage *ret);
