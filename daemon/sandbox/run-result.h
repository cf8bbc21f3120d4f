/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The final replies of runs that ended with no client (run_result_keep): kept for one run.attach,
 * in memory and in <state_dir>/results/<run id>.json, so that a result outlives a restart of the
 * daemon too (an upgrade's second restart, a crash). Each file is
 * {"owner": uid, "expires": CLOCK_REALTIME usec, "reply": {...}}, written atomically; it goes
 * when the reply is taken, expires, or is pushed out by its uid's max_buffered_per_uid. */
#pragma once

#include <json-c/json.h>
#include <sys/types.h>

#include "context.h"
#include "reply.h"

/* Takes msg. */
void run_result_add(Context *m, const char *run_id, uid_t owner, json_object *msg);
/* The kept reply of run_id for peer (its owner, or an admin), removed; NULL: none. */
json_object *run_result_take(Context *m, const char *run_id, const ReplyPeer *peer);
/* At start: the replies an earlier daemon kept (their expiry counted on the wall clock, never
 * past run_result_keep from now); what cannot be read is removed. */
void run_results_load(Context *m);
/* At stop: forgotten in memory, kept on disk for the next daemon. */
void run_results_free(Context *m);
