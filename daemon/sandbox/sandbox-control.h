/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A ready sandbox's processes as a whole (sandbox-control.c): sandbox.signal, sandbox.freeze and
 * sandbox.thaw, sandbox.update, inspect's "pids". */
#pragma once

#include <stdbool.h>

#include "sandbox.h"

/* sig to every process of the sandbox's runs, sessions and file operations (not its init):
 * SIGKILL through each one's cgroup.kill. *ret_signalled: how many processes. 0 or -errno. */
int sandbox_signal_all(Sandbox *s, int sig, unsigned *ret_signalled);
/* cgroup.freeze of the sandbox's cgroup; reply is answered once cgroup.events says so (at most
 * 5 s, else an error, and a freeze is undone). While frozen, new runs, sessions and file
 * operations are refused (conflict). 0, or < 0 with err set (nothing changed, reply not kept). */
int sandbox_freeze(Sandbox *s, bool freeze, Reply *reply, ProtoError *err);
/* (A freeze or thaw waiting for the kernel is a member of the sandbox: its destroy or free
 * answers it with the sandbox's end.) */
/* "limits": {"memory", "pids", "cpus"}, validated as at create, into the kernel and the record. */
int sandbox_update_limits(Sandbox *s, json_object *limits, bool best_effort, ProtoError *err);
int sandbox_update_network(Sandbox *s, const SandboxNet *want, int *ret_cut, ProtoError *err);
/* The host pids in the sandbox's cgroup tree, sorted, at most 4096. */
json_object *sandbox_pids_json(Sandbox *s);
