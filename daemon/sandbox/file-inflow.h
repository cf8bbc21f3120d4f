/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The bytes of a transfer in by chunks (docs/protocol.md, "file.write by chunks"): the
 * file.chunk lines of one request, found by its id on its connection (an Inlet of its reply),
 * checked against the window and the order, decoded one at a time and written as frames to the
 * helper's pipe (file-helper.h); the helper's acknowledgements go back to the client as ack
 * events. It holds at most window chunks, whatever the file's size. A file op says it takes
 * chunks and owns one of these: file.write now, file.put's tar stream the same way. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "proto.h"
#include "reply.h"

typedef struct FileInflow FileInflow;

typedef struct FileInflowParams {
        sd_event *event;
        Reply *reply;           /* the request's: its id routes the chunks; referenced */
        int pipe_fd;            /* taken: the write end of the helper's data pipe */
        uint64_t size;          /* the announced total, UINT64_MAX for none */
        size_t chunk_bytes;     /* at most SBX_FILE_CHUNK_BYTES */
        unsigned window;
        uint64_t timeout_usec;  /* no chunk and no ack for this long: abandoned */
        /* The transfer must end with err (the client's fault, or no progress): the owner kills
         * the helper and answers err once it has ended. Called once; the inflow is ended then. */
        void (*failed)(void *userdata, const ProtoError *err);
        void *userdata;
} FileInflowParams;

/* -EEXIST (err: invalid_request, field id) when the connection has a transfer with this id in
 * flight already. Chunks that come before file_inflow_ready() end the transfer. */
int file_inflow_new(const FileInflowParams *p, FileInflow **ret, ProtoError *err);
/* The helper has the file open: the ready event goes out. -EPROTO when it was ready already. */
int file_inflow_ready(FileInflow *in);
/* The helper wrote chunk seq (bytes in all so far): the ack event goes out. -EPROTO when the
 * helper acknowledges what it was not sent, or out of order. */
int file_inflow_ack(FileInflow *in, uint64_t seq, uint64_t bytes);
/* No more chunks: later ones with its id are dropped silently; the pipe is closed. */
void file_inflow_end(FileInflow *in);
FileInflow *file_inflow_free(FileInflow *in);
