/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-event.h>

/* Removes dir_fd/name (rm_rf_at) in a child process, so that a huge tree never blocks the event
 * loop: the exec'd helper as sandboxd-rm where there is one, else a clone of the daemon. The
 * caller first renames the tree to a name that the next start removes (.trash-*, .tmp-*,
 * work.new-*), so a crash in between loses nothing and leaves nothing. run_helper_fd: the
 * helper binary (run-exec.h), or -1. 0 or -errno. */
int remove_async(sd_event *event, int run_helper_fd, int dir_fd, const char *name);
