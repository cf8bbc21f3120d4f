/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a sandbox's teardown looks at and leaves (sandbox-teardown.c), for sandbox.c. */
#pragma once

#include <json-c/json.h>
#include <stddef.h>

typedef struct Sandbox Sandbox;

/* The processes left in the sandbox's cgroup and below: [{pid, comm, state}], at most 16. */
json_object *sandbox_stuck_processes(Sandbox *s);
/* "pid 4242 cat (D), pid ..." into buf. */
void sandbox_stuck_summary(json_object *list, char *buf, size_t len);
/* Moves the workspace aside and removes it in a child process (nothing for a memory workspace
 * or one to be kept). */
void sandbox_remove_workspace(Sandbox *s);
