/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Snapshots of a sandbox's workspace, on disk beside it:
 *
 *   <state>/sandboxes/<id>/snapshots/<snap-id>/meta.json   id, label, sandbox, created_at,
 *                                                          created_usec, bytes, files, skipped
 *   <state>/sandboxes/<id>/snapshots/<snap-id>/tree/       the copy
 *   <state>/sandboxes/<id>/snapshots/.tmp-<snap-id>/       one being made (or deleted): renamed
 *                                                          into place only once complete
 *   <state>/sandboxes/<id>/work.new-<rand>/                a workspace being restored, or the old
 *                                                          one after the swap, about to go
 *   <state>/sandboxes/<id>/.fork-incomplete                a fork whose copy has not finished
 *
 * A snapshot directory without '.' in front is complete (its data synced, its meta.json fsynced,
 * then renamed, then its parent fsynced). Anything named .tmp-* or work.new-* at start is what a
 * crash interrupted and is removed; so is a sandbox whose fork never finished.
 *
 * This file is the storage and the API other parts of the daemon call (the sweep: list with
 * creation times, delete); snapshot-job.c does the copying off the event loop, op-snapshot.c the
 * protocol. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Sandbox Sandbox;
typedef struct Context Context;

#define SNAPSHOT_ID_LEN 17 /* "snap-" + 12 hex */
#define SNAPSHOT_LABEL_MAX 128
#define SNAPSHOT_MAX_PER_SANDBOX 256
#define SNAPSHOT_META_MAX (64u * 1024)
#define FORK_MARKER ".fork-incomplete"
/* snapshots/<id>/root: an overlay root's upper layer beside the workspace's tree */
#define SNAPSHOT_ROOT_TREE "root"

typedef struct SnapshotInfo SnapshotInfo;
struct SnapshotInfo {
        char id[SNAPSHOT_ID_LEN + 1];
        char label[SNAPSHOT_LABEL_MAX + 1]; /* "" when none */
        uint64_t created_usec;              /* CLOCK_REALTIME: when the sandbox was frozen */
        uint64_t bytes;                     /* apparent size of its files, each inode once */
        uint64_t files;                     /* files, symlinks and FIFOs, each inode once */
        uint64_t tree_uid;                  /* host uid of id 0 in its tree's files; 0: its sandbox's */
};

bool snapshot_id_valid(const char *id);
int snapshot_new_id(char ret[static SNAPSHOT_ID_LEN + 1]);

/* The sandbox's complete snapshots, oldest first (by created_usec). ret is malloc'ed (NULL with
 * *ret_n 0 when there are none). */
int snapshot_list(Sandbox *s, SnapshotInfo **ret, size_t *ret_n);
/* One snapshot's metadata: -ENOENT when the sandbox has no such (complete) snapshot. */
int snapshot_get(Sandbox *s, const char *snap_id, SnapshotInfo *ret);
/* Deletes one: renamed to .tmp-<snap-id> at once (so it is gone for every reader and a crash
 * finishes the job at the next start), then removed by a child process. -ENOENT when there is
 * none, -EBUSY while a snapshot, restore or fork of this sandbox is in flight. */
int snapshot_delete(Sandbox *s, const char *snap_id);

json_object *snapshot_info_to_json(const SnapshotInfo *i);
/* The array for snapshot.list and inspect (an empty array when it cannot be read). */
json_object *snapshot_list_json(Sandbox *s);

/* At start, before the sandbox in <state>/sandboxes/<sandbox_id> is restored: removes half-made
 * snapshots and workspaces. -ESTALE when the sandbox is an unfinished fork and must go. */
int snapshot_cleanup_partial(int state_fd, const char *sandbox_id);

/* An unfinished fork is not restored: the processes an earlier daemon left in its cgroup are
 * killed and the cgroup removed (blocks for at most about a second, at start only). */
void snapshot_discard_cgroup(Context *m, const char *sandbox_id);

/* Removes dir_fd/name in a child process (the loop never waits for a big tree). */

/* ---- snapshot-job.c ---------------------------------------------------------------------- */

/* The sandbox is going away (destroy, daemon stop): its copy in flight is killed, its cgroup
 * thawed, its client told, and a restart it asked for is forgotten. */
void snapshot_job_abort(Sandbox *s);
