/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One transient scope per sandbox, made by systemd over D-Bus (sd-bus), so that the sandboxes
 * are not in the service's own cgroup and a stop, a crash or an upgrade of the daemon leaves
 * them running (docs/design/restarts.md, section 2). A scope needs a process at birth: the
 * caller passes a placeholder's pid (scope_placeholder_start()); once systemd's job for the scope
 * is done, the scope's cgroup is the caller's to divide (Delegate=yes).
 *
 * Everything is asynchronous on the daemon's event loop: StartTransientUnit, then the
 * JobRemoved signal of its job. Where no systemd can be reached (standalone, a container, the
 * host test suite), scope_manager_new() fails and the sandboxes stay in the daemon's subtree. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#define SCOPE_SLICE "sandboxd.slice"
#define SCOPE_UNIT_MAX 96
#define SCOPE_SLICE_MAX 48

typedef struct ScopeManager ScopeManager;
typedef struct ScopeJob ScopeJob;

/* The job is over: 0 (the scope runs, with the placeholder in it) or -errno. */
typedef void (*ScopeDone)(int error, void *userdata);

/* The slice of the instance whose state directory is state_dir, into buf: SCOPE_SLICE for one
 * named "sandboxd" (/var/lib/sandboxd: the packaged unit's), else its child slice
 * "sandboxd-<8 hex of a hash of the path>.slice". Each instance walks only its own slice for
 * stale scopes, so a second instance (another state directory) never stops the first's. */
const char *scope_slice_name(char buf[static SCOPE_SLICE_MAX], const char *state_dir);

/* Connects to systemd (its private socket as root, else the system bus) on event; cg_mount is
 * where cgroup2 is mounted; slice: scope_slice_name()'s. -errno where there is no systemd to ask
 * (sd_booted() false, no bus). */
int scope_manager_new(sd_event *event, const char *cg_mount, const char *slice, ScopeManager **ret);
/* The slice's name. */
const char *scope_manager_slice(const ScopeManager *sm);
ScopeManager *scope_manager_free(ScopeManager *sm);

/* "sandboxd-<id>.scope" into buf (SCOPE_UNIT_MAX bytes). */
const char *scope_unit_name(char *buf, const char *id);
/* The id of a "sandboxd-<id>.scope" name, into buf (size bytes): NULL for any other name. */
const char *scope_unit_id(const char *unit, char *buf, size_t size);

/* StartTransientUnit of unit in the manager's slice with pid in it; done is called once, later
 * (never from here), unless the job is cancelled first. */
int scope_start(ScopeManager *sm, const char *unit, const char *description, pid_t pid, ScopeDone done,
                void *userdata, ScopeJob **ret);
/* done is not called any more. NULL-safe; returns NULL. */
ScopeJob *scope_job_cancel(ScopeJob *j);
/* StopUnit, not waited for (a stale scope whose processes were killed). */
int scope_stop(ScopeManager *sm, const char *unit);

/* The scope's cgroup directory (O_DIRECTORY), and its path into ret_path when not NULL. */
int scope_open_cgroup(ScopeManager *sm, const char *unit, char **ret_path);
/* The slice's cgroup directory, to walk for stale scopes: -ENOENT before the first scope. */
int scope_open_slice(ScopeManager *sm);
