/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A sandbox's disk limit as a project quota (host/project-quota.h): its whole directory
 * (workspace, writable root, snapshots, record) is one project, whose hard limits are
 * limits.disk and limits.files plus the room its record takes (DISK_QUOTA_SLACK_*). On btrfs
 * storage it is the max_rfer of its workspace's (and upper layer's) own qgroup (btrfs.h): each
 * of them at most limits.disk; snapshots are not charged to it. */
#pragma once

#include <stdbool.h>

#include "sandbox.h"

/* What the daemon keeps in a sandbox's directory beside the sandbox's own files (meta.json
 * and its .tmp): a full quota must not stop the daemon from recording the sandbox. */
#define DISK_QUOTA_SLACK_BYTES (UINT64_C(1) << 20)
#define DISK_QUOTA_SLACK_FILES 16

/* dir_fd: <state>/sandboxes/<id>. A new sandbox with a disk or file limit gets a project id
 * of its own and the quota; a restored one (existing) its recorded id's quota again. Not an
 * error where the host has no project quotas: the sandbox then has none (disk_enforced). */
int sandbox_quota_apply(Sandbox *s, int dir_fd, bool existing);
/* A restored sandbox, once its record's limits and project id are read (state.c). */
int sandbox_quota_restore(Sandbox *s);
/* btrfs storage: the limit on a subvolume a restore or a fork puts in place (fd in it), where
 * or none where it has none (a snapshot's qgroup starts with its source's limit). */
int sandbox_quota_subvol(const Sandbox *s, int fd);
/* Its destroy: the project's limits are cleared (the id is free again once its files are gone). */
void sandbox_quota_release(Sandbox *s);
