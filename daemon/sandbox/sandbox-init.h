/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a sandbox is built of (sandbox-init.c), for sandbox.c: each returns 0 or -errno. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

typedef struct Sandbox Sandbox;

/* sandboxes/<id> with the sandbox's limits (s->cg_fd, s->cg_rel). */
int sandbox_make_cgroup(Sandbox *s);
/* A new one after a cgroup.kill (a restart's): the old one removed. */
int sandbox_renew_cgroup(Sandbox *s);
/* An earlier daemon's cgroup of the sandbox, emptied and removed (restore). */
int sandbox_clear_old_cgroup(Sandbox *s);
/* <state>/<id>/work (s->workdir_fd); existing: it may be there already (restore). */
int sandbox_make_workspace(Sandbox *s, bool existing);
/* The init's uid/gid maps, setgroups denied (s->init_pid, not yet reaped). */
int sandbox_write_maps(Sandbox *s);
/* Starts the init: through the exec'd helper where there is one (its pid returned, its pidfd in
 * *ret_helper_pidfd, s->init_pending), else cloned by the daemon (s->init_pid, its pidfd in
 * s->init_pidfd). s->setup_fd is the setup socket either way. < 0: nothing was started. */
pid_t sandbox_start_init(Sandbox *s, int *ret_helper_pidfd);
