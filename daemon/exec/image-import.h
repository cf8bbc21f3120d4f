/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The archive side of image.import (image-import.c): one tar stream (a rootfs tarball, or one
 * layer of an OCI image, plain or gzip, xz, bzip2 or zstd: libarchive's built-in filters, never
 * one that runs a program) applied beneath the image's
 * new root, a directory fd of the daemon's temporary tree. It runs in the import's child process
 * (sandbox/image.c), as host root, and treats the archive as hostile:
 *   - every name is normalised relative to the root ('..' refused, a leading '/' dropped) and
 *     every parent opened with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS): a name through a
 *     symlink (the archive's own, an earlier layer's) is refused, never followed;
 *   - hard links only to a regular file of the tree, reached the same way;
 *   - device nodes are skipped (counted) unless allow_devices; sockets always;
 *   - setuid and setgid bits are dropped, extended attributes (file capabilities) never written;
 *   - owners outside [0, id_count) become 65534 (nobody): nothing is owned by an id the
 *     sandbox's idmapped view cannot show;
 *   - the sum of the files' sizes (what they claim, so a sparse 10 GB claim counts 10 GB) and the
 *     number of entries are capped: E2BIG.
 * With whiteouts (an OCI layer), ".wh.NAME" removes NAME of the layers below and ".wh..wh..opq"
 * empties its directory. libarchive is the codec only: nothing is made through it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "blob-digest.h"

typedef struct ImageCaps {
        uint64_t max_bytes;  /* sum of regular files' sizes */
        uint64_t max_files;  /* headers read (made, skipped, whiteouts, the root), over every layer */
        uint64_t deadline_usec; /* CLOCK_MONOTONIC: past it between two entries, IMAGE_REASON_TOO_SLOW; 0: none */
        uint64_t id_count;   /* owners at or above become 65534 */
        bool allow_devices;
} ImageCaps;

typedef struct ImageCounts {
        uint64_t bytes;          /* sizes of the regular files made (apparent) */
        uint64_t files;          /* entries made */
        uint64_t entries;        /* headers read, whatever became of them */
        uint64_t stream_bytes;   /* of the archives, compressed, read so far */
        uint64_t skipped;        /* device nodes and sockets left out */
        uint64_t setid_dropped;  /* files whose setuid or setgid bit was dropped */
        uint64_t whiteouts;      /* applied */
} ImageCounts;

typedef enum ImageReason {
        IMAGE_REASON_NONE,
        IMAGE_REASON_DOTDOT,        /* a name or link target with '..' */
        IMAGE_REASON_UNDER_SYMLINK, /* a parent is a symlink (or not a directory) */
        IMAGE_REASON_LINK,          /* a hard link to no regular file of the tree */
        IMAGE_REASON_TOO_BIG,       /* max_bytes */
        IMAGE_REASON_TOO_MANY,      /* max_files */
        IMAGE_REASON_FORMAT,        /* not a tar stream, or a damaged one */
        IMAGE_REASON_ENTRY,         /* any other errno while making an entry */
        IMAGE_REASON_DIGEST,        /* an OCI blob whose sha256 is not its descriptor's */
        IMAGE_REASON_SIZE,          /* an OCI blob whose size is not its descriptor's */
        IMAGE_REASON_TOO_SLOW,      /* past caps->deadline_usec */
        IMAGE_REASON_UNREADABLE,    /* a source entry its caller may not read (sandbox/image.c) */
        _IMAGE_REASON_MAX,
} ImageReason;

typedef struct ImageFail {
        int err;
        ImageReason reason;
        char name[512]; /* the entry, as the archive spelled it (or libarchive's message) */
} ImageFail;

const char *image_reason_to_string(ImageReason r);

/* Called between entries, at most every 100 ms of the caller's choosing (it checks time). */
typedef void (*ImageProgressFn)(const ImageCounts *c, void *userdata);

/* An OCI descriptor of a blob: what the blob must be. */
typedef struct ImageBlob {
        char path[96]; /* blobs/sha256/<hex>, beneath the layout */
        uint64_t size;
        uint8_t sha256[SHA256_LEN];
} ImageBlob;

/* Applies the archive read from src_fd beneath root_fd (a directory, O_RDONLY). whiteouts: an
 * OCI layer. With blob, the bytes are hashed as libarchive reads them (one pass, whatever it
 * leaves after the end of the archive read too) and must be blob's size and sha256: else
 * IMAGE_REASON_SIZE or IMAGE_REASON_DIGEST, f->name the blob's path (what was applied by then
 * is the caller's to throw away). Returns 0 or -errno with *f set; counts accumulate over calls. */
int image_layer_apply(int src_fd, const ImageBlob *blob, int root_fd, bool whiteouts, const ImageCaps *caps, ImageCounts *c,
                      ImageProgressFn progress, void *userdata, ImageFail *f);

/* The directories every image root has for the sandbox's own mounts (proc, dev, sys, tmp, run,
 * work, and home, root, var beside them), made where the image lacks them. */
int image_root_finish(int root_fd);
