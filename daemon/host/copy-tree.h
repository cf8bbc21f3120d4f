/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A copier for trees that belong to someone hostile (a sandbox's workspace, a snapshot of it).
 *
 * Every entry is reached from the directory fd of its parent, one component at a time, with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV) as
 * an O_PATH fd, and its type is read from that fd, never from a path again. So a directory
 * swapped for a symlink between readdir and open is copied as the symlink it became, and nothing
 * outside the source tree is read, nothing outside the destination written. Where openat2 is
 * missing (ENOSYS), openat(O_PATH | O_NOFOLLOW) plus a mount id check does the same.
 *
 * What is made of each kind of entry:
 *   directory      made, with its mode (setgid and sticky kept), owner and times, even empty
 *   regular file   FICLONE where the filesystem shares extents, else copy_file_range over the
 *                  data segments (holes stay holes); setuid and setgid dropped
 *   symlink        readlink + symlink, never followed; dangling and absolute ones alike
 *   FIFO           recreated with mkfifo, never opened
 *   socket, device skipped (counted), never opened: a socket is useless in a copy and a device
 *                  node is nothing a sandbox may own; but with overlay_upper, a whiteout (the
 *                  character device 0:0 overlayfs makes for a removed name) is made again
 *   mount point    skipped (counted): the copy never crosses into another mount
 * Hard links stay hard links (a map of dev/ino for every entry with more than one link).
 * Owners are kept, or shifted from one uid range to another. Extended attributes, ACLs and file
 * capabilities are not copied, but for overlayfs's opaque and redirect marks on directories
 * (overlay_upper).
 *
 * The walk is iterative with an explicit stack; at most COPY_TREE_MAX_OPEN directories keep fds
 * open, deeper ones are closed and reopened by their parent's fd and name (and checked to be the
 * same inode), so depth is bounded by memory only. It blocks: the daemon runs it in a child. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#define COPY_TREE_MAX_OPEN 64

typedef struct CopyStats {
        uint64_t bytes;   /* apparent size of the regular files, each inode once */
        uint64_t files;   /* non-directories made: files, symlinks, FIFOs (each inode once) */
        uint64_t dirs;    /* directories below the root */
        uint64_t links;   /* extra names of an inode made with link() */
        uint64_t skipped; /* sockets, device nodes, mount points */
} CopyStats;

typedef struct CopyOptions {
        /* Owners in [id_from, id_from + id_count) become id_to + (id - id_from); others become
         * id_to (the new range's root). Only with shift_ids. */
        bool shift_ids;
        uid_t id_from, id_to;
        uint64_t id_count;
        bool no_openat2; /* use the fallback walk (tests; kernels before 5.6) */
        /* The tree is an overlayfs upper layer (root-overlay.h): whiteouts and opaque
         * directories are copied as such */
        bool overlay_upper;
        /* When set, asked before a directory is listed or a regular file read (path_fd: its
         * O_PATH fd): a negative errno stops the copy with it. A copy done for someone who
         * must not read what root may (image.import of a non-root admin). */
        int (*may_read)(int path_fd, const struct stat *st, void *userdata);
        /* Called at most every progress_usec (and never when NULL); a negative return stops. */
        int (*progress)(const CopyStats *st, void *userdata);
        void *userdata;
        uint64_t progress_usec;
} CopyOptions;

/* Copies what is in the directory src_fd into the empty directory dst_fd, then gives dst_fd the
 * mode, owner and times of src_fd. Stats (also on failure: what was done) in ret_stats. */
int copy_tree(int src_fd, int dst_fd, const CopyOptions *o, CopyStats *ret_stats);
