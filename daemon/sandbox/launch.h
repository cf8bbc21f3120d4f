/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one start path of runs and sessions (launch.c): the child cgroup, the fds, the helper, the
 * watch on the helper and on its report socket, and the failure report. A Run or a Session embeds
 * a Launch and is told what happens through its LaunchOps. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

typedef struct Sandbox Sandbox;

typedef struct Launch {
        char cg_name[32];       /* <kind>-<n> below the sandbox's cgroup */
        int cg_fd;
        int kill_fd;            /* its cgroup.kill, open from the start: a kill needs no new fd */
        pid_t pid;              /* the helper that joins the sandbox */
        int pidfd;
        int report_fd;          /* the helper's reports (spawn.h) */
        sd_event_source *report_source, *child_source;
        bool direct;            /* the helper becomes the command (RunParams.direct) */
} Launch;
