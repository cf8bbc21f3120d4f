/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>
#include <systemd/sd-event.h>

/* Removes dir_fd/name (rm_rf_at) in a child process, so that a huge tree never blocks the event
 * loop: the exec'd helper as sandboxd-rm where there is one, else a clone of the daemon; either
 * dies with the daemon (PR_SET_PDEATHSIG), and a stop waits for it a while (remove_async_stop()). The
 * caller first renames the tree to a name that the next start removes (.trash-*, .tmp-*,
 * work.new-*), so a crash in between loses nothing and leaves nothing. run_helper_fd: the
 * helper binary (run-exec.h), or -1. 0 or -errno. */
int remove_async(sd_event *event, int run_helper_fd, int dir_fd, const char *name);

/* At a stop: waits up to timeout_usec for the removers still running, then kills and reaps the
 * rest (each also dies with the daemon: PR_SET_PDEATHSIG), so that nothing of the daemon
 * outlives it in its cgroup; their trees are removed by the next start. How many were ended
 * unfinished. */
unsigned remove_async_stop(uint64_t timeout_usec);

/* How long a stop waits for them: well inside systemd's stop timeout, and inside the tests'
 * 10 s look at the daemon's leaf after it exited (tests/lib.sh stop_daemon). */
#define REMOVE_STOP_WAIT_USEC (5 * 1000 * 1000ULL)
