/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The disk sweep: how much each sandbox's workspace and snapshots take (walked in a child
 * process with disk-usage.c, bounded by sweep_timeout), and what follows from it: a sandbox over
 * its limits.disk loses its oldest snapshots first and, if still over, has its runs refused;
 * over the global disk_budget the oldest snapshots of all go, then new sandboxes and runs are
 * refused; sandboxes past their ttl or idle time are destroyed. Runs on request (op `sweep`)
 * and every sweep_interval. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <systemd/sd-event.h>

#include "proto.h"
#include "reply.h"

typedef struct Context Context;
typedef struct Sandbox Sandbox;
typedef struct Sweep Sweep;

/* The sweep's own state (Context.sweeper): sweeps in flight, the periodic timer, the global disk
 * budget's verdict. */
typedef struct Sweeper {
        Sweep *sweeps;
        unsigned n_sweeps;
        bool timer_sweep_running;
        bool disk_budget_exceeded;  /* over disk_budget or files_budget: creates and runs refused */
        bool files_budget_exceeded; /* the files_budget part of it, for the message */
        bool stopping;              /* the daemon stops: no timer sweep starts */
        sd_event_source *sweep_timer;
} Sweeper;

/* Starts a sweep of the sandboxes reply's client may see (all of them for the timer, reply
 * NULL), or of only that one sandbox (the global budget is then left as it is); the answer goes
 * to reply when it is done. */
int sweep_start(Context *m, Reply *reply, Sandbox *only, bool dry_run, ProtoError *err);
/* Arms the periodic sweep (sweep_interval). */
int sweep_setup_timer(Context *m);
/* At exit: kills the walks in flight and drops their requests. */
void sweep_free_all(Context *m);

/* create: refused below min_free_disk or min_free_files on the state directory's filesystem, or
 * over the budget. */
int sweep_check_create(Context *m, ProtoError *err);
/* run: refused while the sandbox is over its disk limit or all are over the budget. A refusal for
 * the sandbox's own limit has it walked again (in the background, at most every
 * SWEEP_REMEASURE_USEC), so that a run after its files were removed is taken. */
#define SWEEP_REMEASURE_USEC (5 * USEC_PER_SEC)
int sweep_check_run(Sandbox *s, ProtoError *err);
/* The sandbox's disk and expiry members in replies (ttl_s, idle_s, expires_at, disk_refused). */
void sweep_sandbox_json(Sandbox *s, json_object *o);

