/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One file operation of a sandbox (file.stat, file.list, file.mkdir, file.remove): the file
 * helper started through the launch path (its own cgroup file-N in the sandbox, the sandbox's
 * namespaces, the request's user), its records read off its stdout pipe as hostile input, and
 * the answer. A member of its sandbox: destroy kills it. docs/design/files.md, section 5. */
#pragma once

#include <stdbool.h>

#include "identity.h"
#include "proto.h"
#include "reply.h"

typedef struct Sandbox Sandbox;

typedef struct FileOpSpec {
        const char *op;            /* FILE_OP_* (file-helper.h) */
        const char *path;          /* absolute, checked by file_path_check() */
        SandboxUser user;          /* SANDBOX_USER_UNSET: the sandbox's */
        const char *const *options; /* NAME=VALUE words for the helper, NULL-terminated */
        int data_fd;               /* >= 0: the client's fd (checked) the helper writes the data to */
        bool chunks;               /* the data comes in file.chunk lines (file-inflow.h) */
        uint64_t size;             /* file.write: the announced total, UINT64_MAX for none */
        bool transfer;             /* counted as a file transfer (reply_account_transfer()) */
} FileOpSpec;

/* Starts it; the answer goes to reply later. < 0 with err set when it cannot start. */
int file_op_start(Sandbox *s, const FileOpSpec *spec, Reply *reply, ProtoError *err);
