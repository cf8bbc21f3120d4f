/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What survives the daemon: each sandbox's metadata in <state>/sandboxes/<id>/meta.json, written
 * atomically (temp file, fsync, rename, directory fsync), and read back at start. */
#pragma once

#include <json-c/json.h>

typedef struct Context Context;
typedef struct Sandbox Sandbox;

/* Where a sandbox whose record cannot be read is set aside, whole, at start. */
#define QUARANTINE_PREFIX ".quarantine-"

int state_save(Sandbox *s);
/* At start: removes what a crash left half-done (trash, workspaces without metadata), brings
 * every recorded sandbox back with a new init, and quarantines the ones whose record is
 * unreadable (counted in m->n_quarantined). */
int state_restore_all(Context *m);
