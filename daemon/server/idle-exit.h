/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A socket-activated daemon exits when it has been idle for idle_exit_s: no connections, no
 * runs or sweeps in flight, no sandbox being made or destroyed, and no sandbox with a process
 * besides its init (a background server started by a run keeps the daemon up). Exiting stops
 * the inits like any clean stop; the next connection starts the daemon again through the
 * socket, and it brings every sandbox back from the state directory with a new init. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

typedef struct Manager Manager;

/* Its own state; busy tells of work that is not a connection or a sandbox (runs, sweeps). */
typedef struct IdleExit {
        Manager *manager;
        bool (*busy)(void *userdata);
        void *userdata;
        sd_event_source *timer;
        uint64_t idle_since_usec;
} IdleExit;

int idle_exit_setup(IdleExit *ie, Manager *m, bool (*busy)(void *userdata), void *userdata);
void idle_exit_done(IdleExit *ie);
