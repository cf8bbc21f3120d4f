/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The tar side of sandboxd-file-helper (file-tar.c): file.put extracts a tar stream beneath a
 * directory fd, file.get archives a tree walked from a directory fd (docs/design/files.md,
 * section 3). libarchive is the codec only: it never touches the disk, every entry is made or
 * opened by this code with *at() calls beneath the root's fd, never through a symlink. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <limits.h>

typedef struct TarStats {
        uint64_t entries; /* made (put) or archived (get) */
        uint64_t bytes;   /* of the tar stream, read or written */
        uint64_t skipped; /* devices, sockets (and, for get, entries that vanished mid-walk) */
        uint64_t changed; /* get: files that grew or shrank while archived */
} TarStats;

/* What a failure is about, where errno alone does not say it (file-helper.c maps these to its
 * FILE_REASON_TAR_*). */
typedef enum TarReason {
        TAR_REASON_NONE,
        TAR_REASON_EXISTS,        /* overwrite false, and the entry exists */
        TAR_REASON_ABSOLUTE,
        TAR_REASON_DOTDOT,
        TAR_REASON_EMPTY,
        TAR_REASON_LONG,          /* over PATH_MAX, or a component over NAME_MAX */
        TAR_REASON_UNDER_SYMLINK, /* a parent is a symlink (tar slip) */
        TAR_REASON_NOT_DIR,       /* a parent is not a directory */
        TAR_REASON_LINK,          /* a hard link whose target is no earlier entry beneath the root */
        TAR_REASON_FORMAT,        /* not a tar stream, or a damaged one */
        TAR_REASON_ENTRY,         /* any other errno, while making this entry */
} TarReason;

/* Why a put or a get stopped: errno, a TarReason, the entry (1-based; 0: none yet) and its name
 * as the stream spelled it (or libarchive's message, for TAR_REASON_FORMAT). */
typedef struct TarFail {
        int err;
        TarReason reason;
        uint64_t entry;
        char name[PATH_MAX + 1];
} TarFail;

/* The stream from src_fd into root_fd (an O_PATH directory). fresh: root_fd was made for this put
 * (a "./" entry's mode and mtime then apply to it). overwrite false: an existing non-directory
 * is EEXIST. A chunked file.put (file.chunk lines, another transfer source) feeds the same
 * extractor through src_fd: the daemon's end of a pipe. Returns 0 or -errno with *f set. */
typedef void (*TarProgressFn)(uint64_t stream_bytes);

/* progress (or NULL) is told the stream's bytes read so far, between entries and data blocks. */
int tar_put(int src_fd, int root_fd, bool fresh, bool overwrite, TarProgressFn progress, TarStats *st, TarFail *f);

/* Where file.get's stream goes: all of n bytes, or < 0. */
typedef int (*TarWriteFn)(const void *p, size_t n, void *userdata);

/* Archives dir_fd/name (name "": dir_fd itself, with data_fd its data when it is a regular file
 * opened by the caller, else -1) as arcname and, for a directory, everything below it, never
 * following a symlink, never entering a mount. Returns 0 or -errno with *f set. */
int tar_get(int dir_fd, const char *name, int data_fd, const char *arcname, TarWriteFn w, void *userdata, TarStats *st,
            TarFail *f);
