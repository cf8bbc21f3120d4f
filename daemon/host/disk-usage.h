/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* How much disk a tree takes, measured the way du(1) does, on a tree that may be hostile: a
 * sandbox's workspace or snapshot, which the sandbox may be changing during the walk.
 *
 * Units: `bytes` is allocated space, the sum of st_blocks * 512 (what `du -B1 -s -x` prints);
 * `apparent_bytes` is the sum of st_size (`du -B1 -s -x --apparent-size`); `files` counts
 * inodes, each once (`du -s -x --inodes`). The top directory counts, as in du. An inode with
 * several hard links counts once (per walk), also when they are a million links to one file.
 *
 * The walk never follows a symlink, never opens anything but a directory (O_NOFOLLOW |
 * O_DIRECTORY; FIFOs, sockets and devices are only stat'ed), never enters another mount (by
 * st_dev and by mount id, so a bind mount from the same filesystem is not crossed either,
 * where `du -x` would), holds two directory fds at any depth (nesting is bounded by memory,
 * not by a stack or RLIMIT_NOFILE), and carries on when entries vanish or are swapped under it
 * (counted in `skipped`). It blocks: callers run it in a child process. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct DiskUsage {
        uint64_t bytes;          /* allocated: st_blocks * 512 */
        uint64_t apparent_bytes; /* st_size */
        uint64_t files;          /* inodes, counted once */
        uint64_t skipped;        /* vanished or swapped under the walk, mount points, unreadable */
        bool links_truncated;    /* the hard-link set was full: some links may count twice */
        bool cut_short;          /* stopped at the deadline: the figures are lower bounds */
} DiskUsage;

/* Walks dir_fd/name (a directory, or a single entry of any kind). -ENOENT when it does not
 * exist; other errors only when the top itself cannot be read. With deadline_usec (on
 * CLOCK_MONOTONIC; 0: none), stops once it has passed and says so in cut_short. */
int disk_usage_at(int dir_fd, const char *name, uint64_t deadline_usec, DiskUsage *ret);

/* For tests: the most distinct multiply-linked inodes remembered per walk. */
#define DISK_USAGE_MAX_LINKED (UINT64_C(1) << 22)
