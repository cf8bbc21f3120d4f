/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <sys/types.h>

/* A user namespace (its fd, O_CLOEXEC) whose maps send [uid_from, +count) on disk to
 * [uid_to, +count), the same for gids: what MOUNT_ATTR_IDMAP takes. Forks the child that holds
 * it while the maps are written. -1 with errno set. */
int idmap_userns_open(uid_t uid_from, uid_t uid_to, gid_t gid_from, gid_t gid_to, unsigned count);
