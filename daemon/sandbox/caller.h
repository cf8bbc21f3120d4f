/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Who asks, and where their own rights reach: a client's ids (SO_PEERCRED, SO_PEERGROUPS), with
 * which its sandboxes' caller mounts and its image imports are opened, and the mount root
 * (mount_roots in sandboxd.conf; "/" for root) that a host path of theirs lies beneath. Its own
 * module so that image.c and sandbox-init.c share it without one including the other. */
#pragma once

#include <sys/types.h>

#include "context.h"

#define SANDBOX_GROUPS_MAX 64

/* Who asked for a sandbox: SO_PEERCRED's uid and gid, SO_PEERGROUPS' groups. */
typedef struct SandboxCaller {
        uid_t uid;
        gid_t gid;
        unsigned n_groups;
        gid_t groups[SANDBOX_GROUPS_MAX];
} SandboxCaller;

/* Which mount_roots entry holds source (absolute, lexically), "/" for root; NULL: none. The rest
 * of source beneath it in *ret_rest ("." for the entry itself). A caller's mounts and a non-root
 * admin's image.import sources are opened as the caller beneath it. */
const char *caller_mount_root(Context *m, uid_t uid, const char *source, const char **ret_rest);
