/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What survives the daemon: each sandbox's metadata in <state>/sandboxes/<id>/meta.json, written
 * atomically (temp file, fsync, rename, directory fsync), and read back at start. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>

typedef struct Context Context;
typedef struct Sandbox Sandbox;

/* Where a sandbox whose record cannot be read is set aside, whole, at start. */
#define QUARANTINE_PREFIX ".quarantine-"

/* The whole meta.json: the sandbox's own fields and the sweep's (ttl, idle, limits.disk and
 * limits.files) and run-record's (interrupted_runs). The walk over <state>/sandboxes at start
 * (restore, quarantine, stale cgroups) is lifecycle.c's. */
int state_save(Sandbox *s);
/* The same for n sandboxes at once (ret[i] for v[i]), with a few journal commits for all of them
 * instead of three each: the first records of a burst of creates, fresh or from the pool
 * (pool.c; written so, not through the registry's REGISTRY_CHANGED). */
void state_save_many(Sandbox *const *v, size_t n, int *ret);
/* <state_fd>/<id>/meta.json, parsed: -EFBIG past its size limit, -EBADMSG when unreadable. */
int state_read(int state_fd, const char *id, json_object **ret);
/* The fields of other modules that state_save() wrote, into a sandbox sandbox_restore() made. */
void state_restore_fields(Sandbox *s, json_object *meta);
/* sbx- and 12 hex digits. */
bool state_is_sandbox_id(const char *name);
