/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The measuring half of a sweep, off the event loop: a child process walks each listed
 * sandbox's workspace and snapshots (disk-usage.c) and reports one fixed-size record per tree
 * over a pipe; the daemon collects them without blocking and kills a walk that outlives its
 * time bound. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "child-job.h"


typedef enum SweepKind {
        SWEEP_WORK,     /* <id>/work */
        SWEEP_SNAPSHOT, /* <id>/snapshots/<snap-id> */
        SWEEP_PARTIAL,  /* <id>/snapshots/.tmp-*: a snapshot being made (never evicted) */
} SweepKind;

typedef struct SweepRecord {
        uint32_t sandbox;       /* index in the list given to the walk */
        uint32_t kind;          /* SweepKind */
        int32_t error;          /* errno of a tree that could not be walked, else 0 */
        uint32_t links_truncated;
        uint32_t cut_short;     /* the walk's deadline passed in this tree: the last record */
        uint32_t reserved;
        uint64_t created_usec;  /* snapshots: created_at of meta.json (else the directory's mtime) */
        uint64_t bytes, apparent_bytes, files, skipped;
        char snap[80];          /* snapshot directory name */
        char label[80];         /* snapshot label from meta.json, or "" */
} SweepRecord;

typedef struct SweepWalk SweepWalk;
/* Called once: r < 0 when the walk failed, -ETIME when it was killed past its deadline (the
 * records read until then are there), else the walk ended: complete, unless its last record is
 * cut_short (the child stops itself at sweep_timeout and says so). */
typedef void (*sweep_walk_done_t)(SweepWalk *w, int r, void *userdata);
/* Called as records arrive, at most every 200 ms, and once more when the walk is complete. */
typedef void (*sweep_walk_progress_t)(SweepWalk *w, void *userdata);

struct SweepWalk {
        sd_event *event;
        uint64_t timeout_usec;  /* sweep_timeout */
        ChildJob *job;          /* the walk's child, its records on the report pipe */
        sd_event_source *timeout_source;
        char *buf;              /* records as read from the pipe */
        size_t len, alloc;
        sweep_walk_done_t done;
        sweep_walk_progress_t progress; /* optional; set after start */
        uint64_t progress_usec;         /* when it was last called */
        void *userdata;
};

/* Walks state_fd/<id> for each of ids in a child that stops itself after timeout_usec. */
int sweep_walk_start(sd_event *event, int state_fd, uint64_t timeout_usec, char (*ids)[24], size_t n_ids, sweep_walk_done_t done, void *userdata,
                     SweepWalk **ret);
/* Kills the child if it still runs. */
SweepWalk *sweep_walk_free(SweepWalk *w);
static inline const SweepRecord *sweep_walk_records(const SweepWalk *w, size_t *ret_n) {
        *ret_n = w->len / sizeof(SweepRecord);
        return (const SweepRecord *) (const void *) w->buf;
}

/* "2026-11-30T05:00:00Z" or a number (seconds, milliseconds or microseconds since the epoch). */
int sweep_parse_time(const char *text, uint64_t *ret_usec);
