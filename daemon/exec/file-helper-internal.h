/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What sandboxd-file-helper's files share (file-helper.c: records, resolution, the ops;
 * file-helper-write.c: file.write), and nobody else. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "file-helper.h"

typedef struct FileArgs {
        const char *op;
        char path[FILE_RECORD_TEXT_MAX + 1];
        bool follow, recursive, parents, missing_ok, nofollow, sink, exclusive, in_place, sync, has_mode, has_size,
                chunks;
        bool overwrite;
        unsigned mode, max_depth;
        uint64_t max_entries, offset, length, size;
} FileArgs;

/* file.read into the client's fd (its fd 2, file-op.c), or -1. */
extern int helper_data_fd;

/* Fails the op: its record sent, the helper's end (exit 1). */
_Noreturn void helper_fail(int err, FileReason reason);
/* Done: count (and truncated) sent, the helper's end (exit 0). */
_Noreturn void helper_done(uint64_t count, bool truncated);
/* One record out, with its path and link target texts. */
int helper_record_send(FileRecord *r, const char *path, const char *target);
/* bytes more done: a progress record now and then. */
void helper_progress_note(uint64_t bytes);
/* path opened beneath the sandbox's root (flags for openat2), or -errno. */
int helper_resolve(const char *path, int flags);
/* path's parent opened beneath the root, its last name in *ret_name; or -errno. */
int helper_resolve_parent(char *path, const char **ret_name);
/* mkdir -p of path's parents (mkdir.parents, write.parents). */
void helper_make_parents_of(char *path);
/* Fails unless st is a regular file. */
void helper_need_regular(const struct stat *st);
/* Where the data at or after pos ends up (SEEK_DATA/SEEK_HOLE within end): its start, its end in
 * *ret_data_end. */
uint64_t helper_next_data(int fd, uint64_t pos, uint64_t end, uint64_t *ret_data_end);
/* file.write. */
void op_write(FileArgs *a);
