/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the files of a sandbox share among themselves and nobody else: sandbox.c (the state
 * machine), sandbox-init.c (what a sandbox is built of), sandbox-teardown.c (what its teardown
 * looks at and leaves), sandbox-restore.c (a record taken back, a running sandbox adopted),
 * sandbox-json.c (its views), sandbox-request.c and sandbox-control.c. The rest of the daemon
 * knows a sandbox through sandbox.h. */
#pragma once

#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "sandbox.h"

/* ---- sandbox.c's own, for the family ---- */

/* A sandbox not yet linked: its fds -EBADF, its lists empty. */
Sandbox *sandbox_alloc(Context *m);
/* Linked into the registry and the daemon's list. */
void sandbox_link(Context *m, Sandbox *s);
/* The init ended (si NULL: an adopted one, not our child, whose pidfd turned readable). */
int sandbox_on_init_exit(sd_event_source *src, const siginfo_t *si, void *userdata);
/* systemd's job for a new scope ended (error 0: it is there). */
void sandbox_on_scope_done(int error, void *userdata);
/* The init's pidfd into systemd's fd store, so that a next daemon finds it. */
void sandbox_store_init(Sandbox *s);
/* The init started now (the scope is there). */
int sandbox_spawn_init(Sandbox *s);
/* Ready, or waiting for what still holds it (a fork's copy). */
void sandbox_go_ready(Sandbox *s);

/* ---- Helpers of sandbox.c, which return values and call nothing of its state machine: what a sandbox
 * is built of (sandbox-init.c; each returns 0 or -errno) ... */
/* Its cgroup with the sandbox's limits (s->cg_fd, s->cg_path): sandboxes/<id>, or <scope>/sandbox
 * in a scope that exists (0). For a new scope, the placeholder and systemd's job are started
 * (1, s->scope_job; done is called when the job ends, sandbox_settle_scope() then does the
 * rest). */
CgLimits sandbox_cg_limits(const Sandbox *s);
int sandbox_make_cgroup(Sandbox *s, ScopeDone done);
/* The new scope is there: its placeholder moved to <scope>/hold, its cgroup made. */
int sandbox_settle_scope(Sandbox *s);
/* A placeholder in <scope>/hold (none in the subtree), or killed, reaped and its cgroup removed. */
int sandbox_hold_start(Sandbox *s);
void sandbox_hold_end(Sandbox *s);
/* A new one after a cgroup.kill (a restart's): the old one removed. */
int sandbox_renew_cgroup(Sandbox *s);
/* An earlier daemon's cgroup of the sandbox, emptied and removed (restore). */
int sandbox_clear_old_cgroup(Sandbox *s);
/* <state>/<id>/work (s->workdir_fd); existing: it may be there already (restore). */
int sandbox_make_workspace(Sandbox *s, bool existing);
/* The init's uid/gid maps, setgroups allowed (sandbox-init.c says why; s->init_pid, not yet reaped). */
int sandbox_write_maps(Sandbox *s);
/* Starts the init: through the exec'd helper where there is one (its pid returned, its pidfd in
 * *ret_helper_pidfd, s->init_pending), else cloned by the daemon (s->init_pid, its pidfd in
 * s->init_pidfd). s->setup_fd is the setup socket either way. < 0: nothing was started. */
pid_t sandbox_start_init(Sandbox *s, int *ret_helper_pidfd);
/* ... and what its teardown looks at and leaves (sandbox-teardown.c). */
/* The processes left in the sandbox's cgroup and below: [{pid, comm, state}], at most 16. */
json_object *sandbox_stuck_processes(Sandbox *s);
/* "pid 4242 cat (D), pid ..." into buf. */
void sandbox_stuck_summary(json_object *list, char *buf, size_t len);
/* Moves the workspace aside and removes it in a child process (nothing for a memory workspace
 * or one to be kept). */
void sandbox_remove_workspace(Sandbox *s);

/* The next run's cgroup, made ahead (sandbox-spare.c). */
void sandbox_spare_init(SandboxSpare *sp);
/* sandbox_spare_make() (sandbox.h) is a no-op for a sandbox that is not ready, and for a
 * throwaway one that was not pooled (made for its one run, which makes its own cgroup). */
/* Closed and removed (a sandbox freed, kept or not: nothing of it is left for the next daemon; a
 * restart's new cgroup: its runs go there). */
void sandbox_spare_drop(Sandbox *s);
