/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Removes dir_fd/name and everything below it without following symlinks and without crossing
 * into other mounts (a mount point found below is left alone and makes the call fail). Iterative,
 * so a tree nested deeper than any recursion limit is fine. */
int rm_rf_at(int dir_fd, const char *name);
