/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's own storage: an image file formatted XFS with reflinks (mkfs.xfs -m reflink=1),
 * loop-mounted with project quotas over a directory of the state directory, so that disk
 * limits are enforced at write time and copies share blocks on a host whose state filesystem
 * offers neither (ext4 without -O project,quota, the common case).
 *
 * storage_image_mount() makes the image when it is missing (sparse: a 200G image takes what its
 * files take; made as NAME.new and renamed once formatted, so a cut mkfs leaves nothing to
 * trust), attaches a loop device (LOOP_CONFIGURE, autoclear: the device goes with the last
 * unmount) and mounts it nosuid,nodev with prjquota. A kernel that refuses quotas on it (no
 * CONFIG_QUOTA) gets it mounted without, and is told in *ret_note: reflinks still work, the
 * limits are the sweep's. An image already mounted there (a daemon restarted in the same mount
 * namespace) is used as it is, once the mount is proven to be the image's: its device is the loop
 * device attached to the image's inode (LOOP_GET_STATUS64's device and inode, never the path
 * alone); anything else mounted there is refused (-EEXIST). An image whose loop device is still
 * attached, though mounted nowhere here (an earlier daemon's mount in a mount namespace of its
 * own, systemd's, which the sandboxes it left running still hold), is mounted again from that
 * device: the same superblock, so the sandboxes and the daemon share one filesystem. A loop
 * device attached to a file that was at the image's path but is another inode (the image
 * replaced since) is refused (-ESTALE), and so is an image missing or replaced while the loop
 * device recorded in IMAGE.loop (written at each mount: the device and the image's inode) is
 * still attached to the inode recorded there (the image moved away while kept sandboxes hold it). It blocks (mkfs); the daemon calls it once, before serving.
 *
 * With btrfs ("storage = image:SIZE:btrfs"), the image is made by mkfs.btrfs and mounted
 * nosuid,nodev with quotas (qgroups) turned on (btrfs.h): subvolume snapshots instead of
 * reflinked copies, qgroup limits instead of project quotas. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 300 MiB: mkfs.xfs refuses smaller filesystems. */
#define STORAGE_IMAGE_MIN (UINT64_C(300) << 20)

typedef struct StorageImage {
        bool created;      /* made and formatted now */
        bool reused;       /* already mounted there (checked to be the image's, by its loop device) */
        bool taken_over;   /* its loop device was still attached (an earlier daemon's mount, which
                            * kept sandboxes hold): mounted again from it, the same filesystem */
        bool btrfs;        /* a btrfs image */
        bool quota;        /* mounted with prjquota; btrfs: qgroups on */
        char loop_dev[32]; /* /dev/loopN, "" when reused */
} StorageImage;

/* image: the file's path; target: an existing directory, which must be empty unless the image
 * is mounted there already (-ENOTEMPTY: what it holds would be hidden). Errors in why. */
int storage_image_mount(const char *image, uint64_t size, bool btrfs, const char *target, StorageImage *ret,
                        char *why, size_t why_len);
