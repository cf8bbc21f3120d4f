/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What snapshot-job.c (the daemon's side of a copy) and snapshot-job-child.c (the copy process)
 * share, and nobody else: the job, whose fields the child reads in its copy of the daemon's
 * memory. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "child-job.h"
#include "copy-tree.h"
#include "sandbox.h"
#include "snapshot-job.h"
#include "snapshot.h"

/* How often the copy says how far it is. */
#define PROGRESS_USEC (200 * USEC_PER_MSEC)

typedef enum JobKind {
        JOB_SNAPSHOT,
        JOB_RESTORE,
        JOB_FORK,
} JobKind;

struct SnapshotJob {
        JobKind kind;
        Sandbox *sandbox;          /* the one it works for (the new one for a fork) */
        SandboxMember member;      /* in sandbox->members while it is s->job */
        Reply *reply;              /* who gets the answer; NULL for a fork (create answers) */
        char snap_id[SNAPSHOT_ID_LEN + 1];
        char label[SNAPSHOT_LABEL_MAX + 1];
        char src_sandbox[24];      /* fork: the sandbox the snapshot belongs to */
        uid_t src_host_uid;        /* fork: its uid range */
        uid_t tree_uid;            /* fork, restore: the host uid of id 0 in the snapshot's tree */
        char work_new[32];         /* restore: work.new-<rand> */
        char upper_new[32];        /* ... and root-upper/upper.new-<rand> for an overlay root */
        uint64_t created_usec;
        uint64_t total_bytes, total_files; /* restore, fork: the snapshot's (a progress bar, btrfs's stats) */
        uint64_t freeze_start;
        uint64_t frozen_usec;  /* how long the sandbox was frozen (until job_thaw()) */
        bool frozen, copied, done;
        unsigned freeze_polls;
        ChildJob *child;           /* the copy process, its lines on the report pipe */
        sd_event_source *freeze_timer;
        char buf[512];
        size_t len;
        CopyStats stats;
        char fail_step[16];
        int fail_errno;
        int runs_killed;
        unsigned sessions_ended;
};

/* A directory below dir, opened without following a link: the fd, or -errno. */
static inline int job_open_dir(int dir, const char *name) {
        int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* The copy process (a ChildJobSpec's fn, arg the job): snapshot, restore or fork's copy, its
 * lines on out (snapshot-job.c's top says which); exits 0 once it said done. */
int snapshot_job_copy_main(void *arg, int out);
