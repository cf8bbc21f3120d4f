/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Runs in flight leave a note in the state directory, so that a daemon that died under them
 * (crash, SIGKILL, or a stop while they ran) is never silent about them: each note,
 * <state>/sandboxes/<id>/runs/<run-id>.json with {id, argv, started_at}, is written when the run
 * starts and removed when it ends. At start, notes left behind become the sandbox's
 * interrupted_runs (reason "daemon restarted"), kept in meta.json and shown by list/inspect.
 * Notes are not fsync'ed: they survive the daemon's death (the page cache holds them), not a
 * power loss of the host. */
#pragma once

#include <json-c/json.h>

typedef struct Run Run;
typedef struct Sandbox Sandbox;

void run_record_start(Run *r);
void run_record_end(Run *r);
/* At restore: notes left by the previous daemon into s->interrupted_runs, saved in meta.json,
 * then the notes go. */
int run_records_collect(Sandbox *s);
void run_records_meta_save(Sandbox *s, json_object *meta);
void run_records_meta_restore(Sandbox *s, json_object *meta);
/* interrupted_runs in list/inspect replies (an empty array when there are none). */
void run_records_json(Sandbox *s, json_object *o);
