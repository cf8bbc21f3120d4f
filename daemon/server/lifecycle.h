/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one file that knows every part: what the daemon is made of (Daemon), the order it is set
 * up in, what it brings back at start, how it stops (every sandbox's processes killed, cgroups
 * removed, workspaces kept) and the order it is freed in. */
#pragma once

#include "context.h"
#include "hold.h"
#include "image.h"
#include "idle-exit.h"
#include "manager.h"
#include "metrics-http.h"
#include "pool.h"
#include "port.h"
#include "registry.h"
#include "run-record.h"
#include "sweep.h"

typedef struct Daemon {
        Context ctx;
        Registry registry;
        Pool pool;
        Sweeper sweeper;
        RunLog run_log;
        IdleExit idle;
        PortTable ports;
        ImageStore images;
        Manager *manager;
        MetricsServer *metrics;    /* the metrics endpoint's listeners (none: not served) */
        char *runtime_dir;         /* beside the control socket: ports/, hold.sock (NULL: none) */
        Holder *holder;            /* spawned at SIGTERM, handed the fds after the loop */
} Daemon;

/* Takes the configuration (*config is emptied on success). */
int lifecycle_new(Daemon **ret, Config *config);
/* What the Context needs from the host, in this order: admin group, blocked signals, the runs'
 * filter and helper, the cgroup subtree, the state directory, host features, the /dev template.
 * lifecycle_setup() starts with it; a unit test calls it alone, on a Context of its own. */
int lifecycle_setup_context(Context *ctx);
/* After the listeners were added (manager_add_listener): signals, run prerequisites, cgroups,
 * state directory, host features, /dev template, restore, run log, timers. */
int lifecycle_setup(Daemon *d);
/* The loop, until SIGTERM/SIGINT or idle exit; then every sandbox's processes are killed. */
int lifecycle_run(Daemon *d);
Daemon *lifecycle_free(Daemon *d);
