/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The tar side of sandboxd-file-helper (file-tar.c): file.put extracts a tar stream beneath a
 * directory fd, file.get archives a tree walked from a directory fd (docs/design/files.md,
 * section 3). libarchive is the codec only: it never touches the disk, every entry is made or
 * opened by this code with *at() calls beneath the root's fd, never through a symlink. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "file-helper.h"

typedef struct TarStats {
        uint64_t entries; /* made (put) or archived (get) */
        uint64_t bytes;   /* of the tar stream, read or written */
        uint64_t skipped; /* devices, sockets (and, for get, entries that vanished mid-walk) */
        uint64_t changed; /* get: files that grew or shrank while archived */
} TarStats;

/* Why a put or a get stopped: errno, a FileReason, the entry (1-based; 0: none yet) and its name
 * as the stream spelled it (or libarchive's message, for FILE_REASON_TAR_FORMAT). */
typedef struct TarFail {
        int err;
        FileReason reason;
        uint64_t entry;
        char name[FILE_RECORD_TEXT_MAX + 1];
} TarFail;

/* The stream from src_fd into root_fd (an O_PATH directory). fresh: root_fd was made for this put
 * (a "./" entry's mode and mtime then apply to it). overwrite false: an existing non-directory
 * is EEXIST. A chunked file.put (file.chunk lines, another transfer source) feeds the same
 * extractor through src_fd: the daemon's end of a pipe. Returns 0 or -errno with *f set. */
int tar_put(int src_fd, int root_fd, bool fresh, bool overwrite, TarStats *st, TarFail *f);

/* Where file.get's stream goes: all of n bytes, or < 0. */
typedef int (*TarWriteFn)(const void *p, size_t n, void *userdata);

/* Archives dir_fd/name (name "": dir_fd itself, with data_fd its data when it is a regular file
 * opened by the caller, else -1) as arcname and, for a directory, everything below it, never
 * following a symlink, never entering a mount. Returns 0 or -errno with *f set. */
int tar_get(int dir_fd, const char *name, int data_fd, const char *arcname, TarWriteFn w, void *userdata, TarStats *st,
            TarFail *f);
