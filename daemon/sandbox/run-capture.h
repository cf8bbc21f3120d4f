/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A run's capture in a memfd (docs/design/restarts.md section 5): the head and tail of each stream
 * and the account a next daemon needs to carry the run on (byte counts, the cap, the start, the
 * deadline on CLOCK_BOOTTIME, the CPU budget, the next event's seq, which pipe ends are in the fd
 * store). The memfd is sealed against shrinking and growing and goes into systemd's fd store
 * (r.<run>.cap) beside the run's pipes; the Outputs of the run write straight into it.
 *
 * The header's changing part is kept twice: a publish writes the copy not in use, with its own
 * check, and then flips "current" with a release store, so that a daemon killed between two
 * publishes leaves one copy that describes bytes that are there. A header that fails a check is
 * "torn": capture_open() names the check, and the run's capture is lost (run.c).
 *
 * A read from a pipe takes the bytes out of it: a daemon killed after its read and before the
 * publish of what it read would lose them. capture_read() announces each read first (how many
 * bytes, into a staging area after the streams, and the first of them, peeked with tee(2)), so
 * that the next daemon tells whether it took place (the staging area's first byte held that
 * byte's complement until it did) and appends them, or finds them still in the pipe. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "output.h"

#define CAPTURE_OPEN_OUT 1u  /* the stdout read end is in the store */
#define CAPTURE_OPEN_ERR 2u
#define CAPTURE_OPEN_IN 4u   /* the stdin write end */
#define CAPTURE_STARTED 8u   /* its command was started (the report of it was read) */

#define CAPTURE_STAGING (64u * 1024) /* the most one capture_read() takes */

/* What a run's capture says of the run, besides its output. */
typedef struct CaptureAccount {
        uint64_t seq;           /* of the next output event */
        uint64_t deadline_ns;   /* CLOCK_BOOTTIME; while paused (a frozen sandbox): what is left */
        uint32_t open;          /* CAPTURE_OPEN_*, CAPTURE_STARTED */
        bool paused;
} CaptureAccount;

/* What does not change once made. */
typedef struct CaptureFixed {
        uint64_t cap;           /* output_bytes of each stream */
        uint64_t start_usec;    /* CLOCK_MONOTONIC: the run's start, for its duration */
        uint64_t cpu_usec;      /* its CPU budget, 0: none */
        uint64_t pids_max_events; /* its sandbox's pids.events "max" at its start */
        uint64_t stdin_len;     /* the stdin it was given */
        bool stream;
} CaptureFixed;

typedef struct CaptureHeader CaptureHeader;

typedef struct Capture {
        int fd;
        CaptureHeader *h;
        size_t size;
} Capture;

#define CAPTURE_NONE ((Capture) { .fd = -1 })

/* A new capture for f (f->cap per stream); out[0], out[1] set up on its buffers. */
int capture_new(Capture *c, const CaptureFixed *f, Output out[2]);
/* fd (the caller's until this succeeds) as a stored capture: checked, mapped, out[] restored on
 * it. -EBADMSG with *ret_why naming what is torn; -errno (*ret_why set too). */
int capture_open(Capture *c, int fd, CaptureFixed *ret_fixed, CaptureAccount *ret_acct, Output out[2], const char **ret_why);
/* The counts of out[] and a into the header (the copy not in use, then the flip). */
void capture_publish(Capture *c, const Output out[2], const CaptureAccount *a);
/* One read of stream i's pipe fd (non-blocking) into out[i], published with a, as above. Returns
 * the bytes read (*ret_data: them, valid until the next call), 0 at the pipe's end, -1 with errno
 * (EAGAIN: nothing yet). A daemon killed anywhere in it loses none of them. */
ssize_t capture_read(Capture *c, Output out[2], const CaptureAccount *a, int i, int fd, const char **ret_data);
void capture_done(Capture *c);
