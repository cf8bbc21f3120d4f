/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd-file-helper (file-helper.c): the process that does a file operation inside a
 * sandbox (docs/design/files.md, section 5.1). The daemon starts it through the launch path of a
 * run (its own cgroup file-N, the sandbox's namespaces, the request's user, no_new_privs, the
 * runs' seccomp filter) and reads what it finds as records on its stdout pipe: hostile input,
 * checked by the reader (file-op.c). */
#pragma once

#include <stdint.h>

#define FILE_HELPER_NAME "sandboxd-file-helper"

/* Its argv after the run helper's first four (RunParams, filter, cwd): the op, the path as hex
 * (a path is bytes), then the op's options as NAME=VALUE words. */
#define FILE_OP_STAT "stat"
#define FILE_OP_LIST "list"
#define FILE_OP_MKDIR "mkdir"
#define FILE_OP_REMOVE "remove"
#define FILE_OP_READ "read"
#define FILE_OP_WRITE "write"
#define FILE_OP_PUT "put"
#define FILE_OP_GET "get"

typedef enum FileRecordKind {
        FILE_RECORD_ENTRY = 1, /* one file: stat's answer, one entry of a list */
        FILE_RECORD_DONE,      /* the op ended well: count (created, removed, entries), truncated */
        FILE_RECORD_ERROR,     /* it failed: err (errno), reason */
        FILE_RECORD_SIZE,      /* file.read: the file's size, and the offset and length it sends */
        FILE_RECORD_DATA,      /* file.read: length bytes at offset follow (at most FILE_DATA_MAX); file.get: the
                                * stream's bytes, offsets in order, no SIZE before them */
        FILE_RECORD_TAR,       /* file.put, file.get, before DONE or ERROR: count entries, size bytes of the
                                * stream, offset skipped, length changed */
        FILE_RECORD_READY,     /* file.write by chunks: the file is open, frames may come */
        FILE_RECORD_ACK,       /* file.write by chunks: frame count (its seq) is written; offset: bytes so far */
        FILE_RECORD_PROGRESS,  /* a transfer whose data the daemon does not see (an fd, a memfd): offset, the
                                * bytes so far (file.read: from its offset; file.put, file.get: of the stream);
                                * at most one per FILE_PROGRESS_BYTES and per FILE_PROGRESS_NSEC */
} FileRecordKind;

/* What an error is about, where errno alone does not say it. */
typedef enum FileReason {
        FILE_REASON_NONE,
        FILE_REASON_NOT_DIR,    /* a directory was needed */
        FILE_REASON_IS_DIR,
        FILE_REASON_MAGICLINK,  /* the path went through a /proc magic link */
        FILE_REASON_PROTECTED,  /* / or /work themselves */
        FILE_REASON_DOT,        /* ends in . or .. */
        FILE_REASON_EXISTS,
        FILE_REASON_NOT_EMPTY,
        FILE_REASON_FIFO,       /* not a regular file where one is needed */
        FILE_REASON_DEVICE,
        FILE_REASON_SOCKET,
        FILE_REASON_SYMLINK,    /* nofollow, and it is one */
        FILE_REASON_SWAPPED,    /* replaced between its check and its open */
        FILE_REASON_SHORT,      /* file.write: the source ended before size (count: what came) */
        FILE_REASON_SPACE,      /* file.write: size is more than the free space */
        /* file.put, about one entry (the ERROR record: offset its number, path its name) */
        FILE_REASON_TAR_ABSOLUTE,
        FILE_REASON_TAR_DOTDOT,
        FILE_REASON_TAR_EMPTY,
        FILE_REASON_TAR_LONG,         /* over PATH_MAX, or a component over NAME_MAX */
        FILE_REASON_TAR_UNDER_SYMLINK, /* a parent is a symlink (tar slip) */
        FILE_REASON_TAR_NOT_DIR,      /* a parent is not a directory */
        FILE_REASON_TAR_LINK,         /* a hard link whose target is no earlier entry beneath the root */
        FILE_REASON_TAR_FORMAT,       /* not a tar stream, or a damaged one (path: libarchive's words) */
        FILE_REASON_TAR_ENTRY,        /* any other errno, while making this entry */
} FileReason;

typedef enum FileType {
        FILE_TYPE_FILE = 1,
        FILE_TYPE_DIR,
        FILE_TYPE_SYMLINK,
        FILE_TYPE_FIFO,
        FILE_TYPE_SOCKET,
        FILE_TYPE_CHAR,
        FILE_TYPE_BLOCK,
} FileType;

#define FILE_RECORD_MOUNT 1u /* a mount point below the listed path: not entered */
#define FILE_RECORD_TAR_ENTRY 2u /* ERROR of file.put: about entry number offset, named by path */

/* A record; path_len bytes of path (the entry's path in the sandbox) and target_len bytes of a
 * symlink's target follow it. */
typedef struct FileRecord {
        uint32_t kind;
        int32_t err;
        uint32_t reason;
        uint32_t type;
        uint32_t mode;
        uint32_t uid, gid;
        uint32_t flags;
        uint64_t size, nlink, blocks_bytes, count;
        uint64_t offset, length; /* SIZE and DATA */
        int64_t mtime_ns;
        uint32_t path_len, target_len;
        uint32_t truncated;
        uint32_t pad;
} FileRecord;

#define FILE_RECORD_TEXT_MAX 4096 /* path_len and target_len: at most PATH_MAX */
#define FILE_DATA_MAX (1024u * 1024) /* a DATA record's bytes: SBX_FILE_CHUNK_BYTES */

/* PROGRESS records: both bounds hold (the rarer wins), so a fast copy sends ten a second and a
 * slow one one per 4 MiB; the daemon turns them into progress events at most every 200 ms. */
#define FILE_PROGRESS_BYTES (4u * 1024 * 1024)
#define FILE_PROGRESS_NSEC (100 * 1000 * 1000LL)

/* file.write by chunks ("chunks=1"): the daemon writes the decoded chunks to the helper's fd 2
 * (a pipe) as frames, each this header and then len bytes (at most FILE_DATA_MAX); zeros is a
 * hole after them. The helper answers READY once the file is open and an ACK per frame written
 * (file-chunks.c). */
#define FILE_FRAME_EOF 1u
typedef struct FileFrame {
        uint64_t seq;
        uint64_t zeros;
        uint32_t len;
        uint32_t flags;
} FileFrame;
