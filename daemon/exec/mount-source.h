/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A caller's directory made ready to be mounted in a sandbox (create's "mounts"): opened with
 * the caller's own credentials, resolved without following a symlink, then cloned as a detached
 * mount, idmapped so that the caller's uid and gid are the sandbox user's inside. Runs in a
 * process of its own (the run helper's "mount" mode, or a clone of the daemon without one):
 * it forks the child that takes the caller's identity and the one that holds the idmap's user
 * namespace. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#define MOUNT_GROUPS_MAX 64

typedef enum MountStep {
        MOUNT_STEP_NONE,
        MOUNT_STEP_CREDS,   /* setgroups/setresgid/setresuid to the caller's */
        MOUNT_STEP_ROOT,    /* the mount_roots entry (or /), opened as the caller */
        MOUNT_STEP_RESOLVE, /* source beneath it: openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS */
        MOUNT_STEP_ACCESS,  /* read and search (and write, unless read-only) as the caller */
        MOUNT_STEP_FSTYPE,  /* a kernel interface (procfs, sysfs, ...): refused */
        MOUNT_STEP_USERNS,  /* the user namespace that holds the idmap */
        MOUNT_STEP_TREE,    /* open_tree(OPEN_TREE_CLONE) */
        MOUNT_STEP_IDMAP,   /* mount_setattr(MOUNT_ATTR_IDMAP): the filesystem cannot be idmapped */
        MOUNT_STEP_ATTACH,  /* a caller's tree: move_mount() into a namespace of our own (not a detached tree) */
        _MOUNT_STEP_MAX,
} MountStep;

typedef struct MountSource {
        uid_t uid;               /* the caller's, as SO_PEERCRED and SO_PEERGROUPS said */
        gid_t gid;
        unsigned n_groups;
        gid_t groups[MOUNT_GROUPS_MAX];
        const char *root;        /* absolute: the mount_roots entry that holds the source, or "/" */
        const char *rest;        /* the source relative to root ("." for root itself) */
        bool read_only;
        /* With read_only: access is checked as for read-only, but the tree is left writable, for
         * the init to make the mount points in it before it makes it read-only (a read-only
         * root.path, as runc makes a read-only rootfs's mount points: sandbox-setup.c). */
        bool read_only_later;
        uid_t map_uid;           /* host ids the caller's become: the sandbox user's */
        gid_t map_gid;
        unsigned map_count;      /* ids mapped from uid and gid on: 0 or 1 for one (an image's tree: a whole range) */
        /* Only the source opened as the caller (O_PATH, checked as above), no tree cloned or
         * idmapped: what image.import reads (map_* unused). */
        bool path_only;
} MountSource;

/* Returns the detached, idmapped tree (O_CLOEXEC), or -1 with errno set and *ret_step saying
 * which step failed. */
int mount_source_open(const MountSource *m, MountStep *ret_step);
/* The same from a detached tree the caller made (open_tree(OPEN_TREE_CLONE) in a mount namespace
 * of its own, where the path shows what the daemon's namespace does not: an engine's rootfs)
 * instead of root and rest: a directory, not a kernel filesystem, and a detached tree (attached
 * first in a mount namespace of this process alone: call it in a process that may unshare one),
 * cloned again without the mounts below it, checked for access and idmapped as a path's tree is.
 * For a root caller only (no credentials are taken): m's uid, gid and groups are unused. */
int mount_tree_open(int tree, const MountSource *m, MountStep *ret_step);
const char *mount_step_to_string(int step);
