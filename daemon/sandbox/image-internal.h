/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What image.c (the store, an import's daemon side) and image-child.c (the import process) share,
 * and nobody else. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "caller.h"
#include "macro.h"
#include "image-import.h"
#include "image.h"

/* However small its caps, an import is work done as root off the event loop: one hour of it at
 * most (a stream of headers that make nothing, a slow or stalled source). */
#define IMPORT_MAX_USEC (3600 * USEC_PER_SEC)

typedef enum ImportRecordKind { RECORD_PROGRESS, RECORD_FAILED, RECORD_DONE } ImportRecordKind;

/* One per write on the pipe (under PIPE_BUF: never interleaved or split). */
typedef struct ImportRecord {
        uint32_t kind;
        int32_t err;
        uint32_t reason; /* ImageReason */
        uint32_t layer, n_layers;
        uint32_t reserved;
        ImageCounts counts;
        char name[512];
} ImportRecord;

/* What the import process is given (its ChildJobSpec's arg). */
typedef struct ImportArgs {
        int images_fd;            /* <state>/images */
        const char *tmp;          /* the .tmp-* directory it builds rootfs in */
        const char *kind;         /* "directory" or "oci" */
        int src_fd;
        const ImageBlob *layers;  /* an OCI layout's, in order */
        size_t n_layers;
        const SandboxCaller *caller; /* whose rights the source is read with */
        ImageCaps caps;
} ImportArgs;

/* The import process (a ChildJobSpec's fn, arg an ImportArgs): builds <images>/<tmp>/rootfs from
 * src_fd (a directory, or an OCI layout's layers), as the caller where it reads, within caps, and
 * says how far it is and how it ended in ImportRecords on out; the daemon renames the whole only
 * once it said done. */
int image_import_main(void *arg, int out);
