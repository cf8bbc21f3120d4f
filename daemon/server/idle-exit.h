/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A socket-activated daemon exits when it has been idle for idle_exit_s: no connections, no
 * runs or sweeps in flight, no sandbox being made or destroyed, and no sandbox with a process
 * besides its init (a background server started by a run keeps the daemon up). Exiting stops
 * the inits like any clean stop; the next connection starts the daemon again through the
 * socket, and it brings every sandbox back from the state directory with a new init. */
#pragma once

typedef struct Manager Manager;

int idle_exit_setup(Manager *m);
