/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* <state_dir>/dev: a sandbox's /dev, made once by the daemon and bound read-only into every
 * sandbox (sandbox-setup.c), instead of six bind mounts of host nodes and five links made in
 * each one. */
#pragma once

/* Makes or completes <state_dir>/dev, never removing anything from it (restored sandboxes of an
 * earlier daemon still see it as their /dev). Returns 0 and its path in *ret, or -errno: the
 * state directory's filesystem is mounted nodev, or an entry there is not what it must be; the
 * sandboxes then bind the host's nodes one by one. */
int dev_template_prepare(const char *state_dir, char **ret);
