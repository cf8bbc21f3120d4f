/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a pidfd says of its process: its pid, as our pid namespace and as its own see it (the
 * fdinfo's "Pid:" and "NSpid:"), and how it ended when it is not our child.
 *
 * The end is what lets a run start without a helper waiting for it and still outlive the daemon
 * (issue 33; docs/performance.md). Its parent,
 * the daemon, may be gone when it ends: it is then reaped by the host's init (or a subreaper),
 * and only the pidfd is left. Linux 6.15 keeps the exit status with the pidfd
 * (PIDFD_GET_INFO, PIDFD_INFO_EXIT), readable once the process was reaped; before that, a zombie's
 * status is field 52 of /proc/PID/stat (Linux 3.5), read while its pidfd still names it. */
#pragma once

#include <stdbool.h>

/* Its pid in our pid namespace into *ret_pid, and (ret_inner_pid not NULL) in its innermost one
 * (a sandbox's; 0 where that is ours, or the kernel does not say). 0; -ESRCH when it was reaped (or is in no pid
 * namespace of ours); -errno when fd's fdinfo cannot be read or holds no "Pid:" (not a pidfd). */
int pidfd_pids(int pidfd, int *ret_pid, int *ret_inner_pid);

/* Whether this kernel keeps exit statuses with pidfds (probed once, with a child of ours). */
bool pidfd_exit_info_supported(void);

/* The end of the process pidfd refers to, as waitid() gives it: *ret_code CLD_EXITED (the exit
 * status in *ret_status), CLD_KILLED or CLD_DUMPED (the signal). 1: known; 0: not known yet (it
 * runs, or it ended and is reaped on a kernel without PIDFD_INFO_EXIT, or between the two reads);
 * -errno: pidfd is not a pidfd. */
int pidfd_exit_status(int pidfd, int *ret_code, int *ret_status);
