/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <linux/openat2.h>

/* openat2 with RESOLVE_IN_ROOT or RESOLVE_BENEATH fails with EAGAIN when a rename or a mount
 * anywhere on the host raced with a ".." of the walk (the kernel cannot prove the walk stayed
 * inside): tried again, a bounded number of times. -1 with errno as openat2 set it. */
int openat2_retry(int dir_fd, const char *path, const struct open_how *how);

/* name opened beneath dir_fd with flags | O_NOFOLLOW | O_CLOEXEC, no symlink and no magic link
 * anywhere on the way, nothing above dir_fd (an archive's hostile names: file.put, image
 * imports). */
int open_beneath(int dir_fd, const char *name, int flags);
