/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Where sandboxes' directories live, and what that filesystem does for them: the state
 * directory's own filesystem ("storage = state"), or an XFS image of the daemon's own mounted
 * over <state_dir>/sandboxes ("storage = image:SIZE", storage-image.h). Either way, whether it
 * enforces project quotas (Context.features.disk_quota) and shares blocks (reflinks). */
#pragma once

#include "context.h"

#define STORAGE_IMAGE_NAME "storage.img"

/* Before <state_dir>/sandboxes (dir, made already) is opened: the image mounted over it, or,
 * with "storage = state", a refusal when an image of an earlier configuration is there (its
 * sandboxes would be silently out of sight). Logs what it refuses, and why. */
int storage_prepare(Context *ctx, const char *dir);
/* Once ctx->state_fd is open: features.disk_quota, disk_quota_how, storage. */
void storage_probe(Context *ctx, const char *dir);
/* Whether the filesystem of dir_fd clones file data (FICLONE on two O_TMPFILEs). */
bool storage_has_reflink(int dir_fd);
