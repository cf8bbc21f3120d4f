/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's side of mount-source.h: the caller's directory opened, as the caller, by a child
 * (the run helper's "mount" mode; a clone of the daemon without the helper), its detached
 * idmapped tree passed back. */
#pragma once

#include "mount-source.h"

/* Waits at most timeout_ms for the child (a source on a hung filesystem must not hold the daemon
 * for long), killed past it (-ETIMEDOUT). Returns the tree fd, or -errno with *ret_step the
 * step that failed (MOUNT_STEP_NONE when the child itself failed). */
int mount_open(int run_helper_fd, const MountSource *m, int timeout_ms, MountStep *ret_step);
/* The same with a detached tree the caller sent (mount_tree_open()) in place of m's root and
 * rest, in a child whose mount namespace is its own: the daemon's never changes. */
int mount_open_tree(int run_helper_fd, int tree_fd, const MountSource *m, int timeout_ms, MountStep *ret_step);

/* Whether the kernel has mount_setattr() (5.12, with MOUNT_ATTR_IDMAP); whether a filesystem
 * can be idmapped is known only when one of its directories is mounted. */
bool mount_idmap_supported(void);
