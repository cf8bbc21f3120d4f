/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The copies behind snapshots, restores and forks, each in a child process (snapshot-job.c).
 * Each entry point either answers later (the reply, or the create's for a fork) and returns 0,
 * or returns < 0 with err set and nothing started. One job per sandbox at a time (s->job). */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>

#include "proto.h"
#include "reply.h"

typedef struct Sandbox Sandbox;
typedef struct SnapshotInfo SnapshotInfo;

/* Freezes the sandbox, copies its workspace into a new snapshot, thaws it. */
int snapshot_job_snapshot(Sandbox *s, Reply *reply, const char *label, ProtoError *err);
/* Copies the snapshot aside, then restarts the sandbox around an atomic swap of the workspace. */
int snapshot_job_restore(Sandbox *s, Reply *reply, const SnapshotInfo *snap, ProtoError *err);
/* Fills the workspace of s (being created; held until the copy is done) from src's snapshot,
 * with owners moved from src's uid range into s's. */
int snapshot_job_fork(Sandbox *s, Sandbox *src, const SnapshotInfo *snap, ProtoError *err);
