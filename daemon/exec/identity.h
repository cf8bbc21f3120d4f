/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Who a run's command is inside its sandbox: the unprivileged user "sandbox" (uid/gid 1000,
 * the default) or root of the sandbox's user namespace ("user": "root"). The sandbox's uid range
 * maps inside uid N to host uid host_uid + N, so "sandbox" is host_uid + 1000 on the host and owns
 * the workspace. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#define SANDBOX_USER_UID 1000
#define SANDBOX_USER_GID 1000

typedef enum SandboxUser {
        SANDBOX_USER_UNSET,   /* a run that did not say: the sandbox's */
        SANDBOX_USER_SANDBOX, /* uid/gid 1000, no capabilities at all */
        SANDBOX_USER_ROOT,    /* uid 0 of the sandbox's user namespace (docs/security.md) */
} SandboxUser;

const char *sandbox_user_to_string(SandboxUser u);
SandboxUser sandbox_user_from_string(const char *s);

/* In the command's process, after it joined the sandbox as root of its user namespace and
 * before its seccomp filter: checks that it holds no supplementary group, clears the ambient
 * capabilities, and for SANDBOX_USER_SANDBOX empties the bounding set, switches to uid/gid 1000
 * and clears every capability set. Returns -1 with errno set on failure. */
int identity_apply(SandboxUser u);
/* The same with other ids of the sandbox's user namespace: SANDBOX_USER_ROOT with uid 0 (and
 * any gid) keeps root's capabilities; SANDBOX_USER_SANDBOX with any uid but 0 has none. */
int identity_apply_ids(SandboxUser u, uid_t uid, gid_t gid);
/* The same with n supplementary groups (gids of the sandbox's user namespace, whose setgroups
 * is allowed: sandbox_write_maps()), set after the check that none was held before. */
int identity_apply_groups(SandboxUser u, uid_t uid, gid_t gid, const uint32_t *groups, unsigned n);

/* The five capability sets a run asked for (bit c: capability c), as an OCI process's are. */
typedef enum CapSet { CAPS_BOUNDING, CAPS_EFFECTIVE, CAPS_INHERITABLE, CAPS_PERMITTED, CAPS_AMBIENT, _CAPS_MAX } CapSet;
typedef struct IdentityCaps {
        uint64_t set[_CAPS_MAX];
} IdentityCaps;
/* "CAP_CHOWN" → 0, ...; -1 for a name this table does not know. */
int identity_cap_from_name(const char *name);
const char *identity_cap_to_name(int cap);
/* As identity_apply_groups(), then exactly caps: the bounding set cut to caps->set[BOUNDING]
 * (before the uid switch: dropping needs CAP_SETPCAP), permitted kept across it for a uid other
 * than 0, then effective, permitted and inheritable set, and the ambient ones raised. Every
 * capability is over the sandbox's user namespace only. -1 with errno set. */
int identity_apply_caps(uid_t uid, gid_t gid, const uint32_t *groups, unsigned n, const IdentityCaps *caps);
