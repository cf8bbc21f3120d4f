/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* create's "root": "overlay": the sandbox's root directories writable, each an overlayfs of its
 * read-only tree (the lower layer) with an upper layer of the sandbox's own, kept in
 * <sandbox>/root-upper beside its workspace:
 *
 *   root-upper/upper/<name>   what the sandbox wrote over the tree at /<name> (usr, etc, ...);
 *                             snapshots, forks and restores copy upper/ whole
 *   root-upper/upper/var, opt the sandbox's own /var and /opt, bound writable (no lower: the
 *                             host view has none of the host's there)
 *   root-upper/upper/rootfs   over an image ("image" with "root": "overlay"): what the sandbox
 *                             wrote over the image's whole rootfs, its one lower layer
 *   root-upper/work/<name>    overlayfs's work directories, never copied
 *   root-upper/lower          where a lower tree is attached while its overlay is made
 *
 * The overlays are mounted by host root in the host's user namespace (the run helper, or the
 * daemon without one), detached, before the init exists; the init moves them into place like
 * the read-only trees. Privileged overlayfs because its ownership is right without anything
 * from inside: a file the sandbox creates is owned on disk by the creator's host uid (uid 0
 * inside is host_uid), as the workspace's files are, so forks shift owners the same way
 * (copy-tree.h) and nothing inside needs user.* xattrs (tmpfs before 6.6 has none).
 *
 * A lower tree other than /etc is idmapped first (host uid 0.. shown as host_uid..): root inside
 * owns the distribution's files of /usr and may change them (pip install into /usr/local), as an
 * image's root owns the image's. /etc is not idmapped: it holds what only the host's root may
 * read (shadow, ssh host keys), which root inside must not; its top directory is the upper's
 * (owned by root inside), so new files and renames over the host's work there, and passwd and
 * group are the sandbox's own files of the upper, written at the first start.
 *
 * Over an image, the one lower layer is the image's whole rootfs, idmapped the same way: its
 * files are the image's, /etc included, so all of them are owned inside as the image has them. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The account files a sandbox gets in place of the host's (sandbox-setup.c binds them read-only
 * over a read-only /etc; an overlay root has them as files of its upper). */
#define SANDBOX_PASSWD                                                 \
        "root:x:0:0:root:/work:/bin/sh\n"                              \
        "sandbox:x:1000:1000:sandbox:/work:/bin/sh\n"                  \
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
#define SANDBOX_GROUP "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n"

typedef struct RootUpper {
        const char *dir;   /* host path of <sandbox>/root-upper */
        uid_t host_uid;    /* what uid 0 inside is on the host */
        unsigned count;    /* the sandbox's uid range */
} RootUpper;

/* The name of the one overlay of an image's root (upper/rootfs, work/rootfs). */
#define ROOT_OVERLAY_IMAGE "rootfs"

/* What root_overlay_*() share while one sandbox's trees are made. */
typedef struct RootOverlay {
        const RootUpper *u;
        int upper_fd, work_fd; /* root-upper/upper, root-upper/work */
        int stage_fd;          /* root-upper/lower: where lower trees are attached a moment */
        int userns_fd;         /* the idmap: host ids 0.. -> host_uid.. */
        const char *step;      /* what was being done when the last call failed */
} RootOverlay;

/* The directories of upper/ a sandbox gets writable as they are (no lower tree). */
extern const char *const root_upper_own[];

/* Moves the calling process into a mount namespace of its own (the run helper, or a child made
 * for it: never the daemon), opens u's directories (none of them through a symlink) and makes
 * the idmap's user namespace. -1 with errno set; root_overlay_close() in every case. */
int root_overlay_open(const RootUpper *u, RootOverlay *ret);
void root_overlay_close(RootOverlay *o);

/* A detached overlay (nosuid, nodev, writable) of the detached read-only tree lower (which it
 * keeps a reference to; the caller closes its fd), for the root directory name ("usr"):
 * upper/<name> and work/<name> made where missing. Returns its fd or -1 with errno set. */
int root_overlay_mount(RootOverlay *o, int lower, const char *name);
/* upper/<name> (made where missing) as a detached writable tree: /var, /opt. */
int root_overlay_own(RootOverlay *o, const char *name);

