/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "mount-compat.h"
#include "idmap.h"
#include "mount-source.h"
#include "spawn.h"

#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif

const char *mount_step_to_string(int step) {
        static const char *const names[_MOUNT_STEP_MAX] = {
                [MOUNT_STEP_NONE] = "none",       [MOUNT_STEP_CREDS] = "credentials", [MOUNT_STEP_ROOT] = "mount_root",
                [MOUNT_STEP_RESOLVE] = "resolve", [MOUNT_STEP_ACCESS] = "access",     [MOUNT_STEP_FSTYPE] = "fstype",
                [MOUNT_STEP_USERNS] = "userns",   [MOUNT_STEP_TREE] = "open_tree",    [MOUNT_STEP_IDMAP] = "idmap",
                [MOUNT_STEP_ATTACH] = "attach",
        };
        return step >= 0 && step < _MOUNT_STEP_MAX && names[step] ? names[step] : "unknown";
}

/* The child as the caller: raw syscalls, so that only this process changes identity. Sends the
 * O_PATH fd of the source, or {step, errno}, over fd. */
_Noreturn static void caller_child(const MountSource *m, int fd) {
        SpawnReport r = { .kind = REPORT_FAILED };
        struct open_how how = {
                .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        int root = -1, src = -1, mode = R_OK | (m->read_only ? 0 : W_OK);
        struct stat st;

        if (syscall(SYS_setgroups, (size_t) m->n_groups, m->groups) < 0 || syscall(SYS_setresgid, m->gid, m->gid, m->gid) < 0 ||
            syscall(SYS_setresuid, m->uid, m->uid, m->uid) < 0) {
                r.step = MOUNT_STEP_CREDS;
                goto fail;
        }
        /* The root itself is reached by the caller's own path walk (it may follow the links an
         * administrator configured); nothing beneath it may be a symlink. */
        root = open(m->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0) {
                r.step = MOUNT_STEP_ROOT;
                goto fail;
        }
        src = (int) syscall(SYS_openat2, root, m->rest, &how, sizeof(how));
        if (src < 0) {
                r.step = MOUNT_STEP_RESOLVE;
                goto fail;
        }
        /* A directory, or a regular file (the daemon says where one may be mounted): nothing
         * else, no device, socket or fifo. */
        if (fstat(src, &st) < 0) {
                r.step = MOUNT_STEP_RESOLVE;
                goto fail;
        }
        if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
                /* O_PATH|O_NOFOLLOW opens a last component that is a symlink as the link. */
                errno = S_ISLNK(st.st_mode) ? ELOOP : ENOTDIR;
                r.step = MOUNT_STEP_RESOLVE;
                goto fail;
        }
        /* Real and effective ids are the caller's now: the kernel's own check, as the caller. */
        if (S_ISDIR(st.st_mode) ? faccessat(src, ".", mode | X_OK, 0) < 0 : faccessat(src, "", mode, AT_EMPTY_PATH) < 0) {
                r.step = MOUNT_STEP_ACCESS;
                goto fail;
        }
        r.kind = REPORT_READY;
        _exit(report_send(fd, &r, src) < 0 ? 1 : 0);
fail:
        r.err = errno;
        (void) report_send(fd, &r, -1);
        _exit(1);
}

static int open_as_caller(const MountSource *m, MountStep *ret_step) {
        SpawnReport r = {};
        int sp[2], fd = -1, k, status;
        pid_t pid;

        *ret_step = MOUNT_STEP_CREDS;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return -1;
        pid = fork();
        if (pid < 0) {
                close(sp[0]);
                close(sp[1]);
                return -1;
        }
        if (pid == 0) {
                close(sp[0]);
                caller_child(m, sp[1]);
        }
        close(sp[1]);
        /* report_recv() does not wait; the daemon bounds how long we may (mount-open.h). */
        while ((k = poll(&(struct pollfd) { .fd = sp[0], .events = POLLIN }, 1, -1)) < 0 && errno == EINTR)
                ;
        k = k < 0 ? -errno : report_recv(sp[0], &r, &fd);
        close(sp[0]);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (k <= 0) {
                safe_close(fd);
                errno = k < 0 ? -k : EIO;
                return -1;
        }
        if (r.kind != REPORT_READY || fd < 0) {
                safe_close(fd);
                *ret_step = (MountStep) r.step;
                errno = r.err ? r.err : EIO;
                return -1;
        }
        return fd;
}

/* Not a kernel interface (procfs, sysfs, ...): never mounted in a sandbox. */
static int check_fstype(int src, MountStep *ret_step) {
        struct statfs sfs;

        *ret_step = MOUNT_STEP_FSTYPE;
        if (fstatfs(src, &sfs) < 0)
                return -1;
        if (root_fs_refused((long) sfs.f_type)) {
                errno = EMEDIUMTYPE;
                return -1;
        }
        return 0;
}

/* The user namespace of the idmap: ids from m->uid and m->gid on disk become m->map_uid and
 * m->map_gid on. */
static int open_userns(const MountSource *m, MountStep *ret_step) {
        *ret_step = MOUNT_STEP_USERNS;
        return idmap_userns_open(m->uid, m->map_uid, m->gid, m->map_gid, m->map_count ? m->map_count : 1);
}

/* That exact inode, without the mounts below it (no AT_RECURSIVE), idmapped with userns. */
static int clone_idmapped(int src, int userns, bool read_only, MountStep *ret_step) {
        _cleanup_close_ int tree = -EBADF;
        struct mount_attr attr = {
                .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (read_only ? MOUNT_ATTR_RDONLY : 0),
                .propagation = MS_PRIVATE,
                .userns_fd = (uint64_t) userns,
        };

        *ret_step = MOUNT_STEP_TREE;
        tree = open_tree(src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (tree < 0)
                return -1;
        *ret_step = MOUNT_STEP_IDMAP;
        if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
                return -1;
        *ret_step = MOUNT_STEP_NONE;
        return TAKE_FD(tree);
}

int mount_source_open(const MountSource *m, MountStep *ret_step) {
        _cleanup_close_ int src = -EBADF, userns = -EBADF;

        src = open_as_caller(m, ret_step);
        if (src < 0 || check_fstype(src, ret_step) < 0)
                return -1;
        if (m->path_only) {
                *ret_step = MOUNT_STEP_NONE;
                return TAKE_FD(src);
        }
        /* The caller's ids on disk become the sandbox user's (host ids). */
        userns = open_userns(m, ret_step);
        if (userns < 0)
                return -1;
        return clone_idmapped(src, userns, m->read_only && !m->read_only_later, ret_step);
}

/* A directory (the root of a sandbox), not the host's own root, that root may read and search,
 * and write unless read-only (EROFS for a read-only mount). */
static int check_tree(int tree, const MountSource *m, MountStep *ret_step) {
        struct stat st, host;

        *ret_step = MOUNT_STEP_RESOLVE;
        if (fstat(tree, &st) < 0 || stat("/", &host) < 0)
                return -1;
        if (!S_ISDIR(st.st_mode)) {
                errno = ENOTDIR;
                return -1;
        }
        if (st.st_dev == host.st_dev && st.st_ino == host.st_ino) {
                errno = EPERM;
                return -1;
        }
        *ret_step = MOUNT_STEP_ACCESS;
        return faccessat(tree, ".", R_OK | X_OK | (m->read_only ? 0 : W_OK), 0);
}

/* move_mount() takes a mount of another namespace only when it is the root of an anonymous one
 * (what OPEN_TREE_CLONE made), never one attached anywhere: so the tree is a detached one, and
 * attached here, in a namespace of this process alone (made private first: nothing propagates
 * back to the host's), it can be cloned again (Linux 6.1 clones only a mount of the caller's
 * namespace), without whatever the caller mounted below it. */
static int attach_private(int tree, MountStep *ret_step) {
        *ret_step = MOUNT_STEP_ATTACH;
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return -1;
        return move_mount(tree, "", AT_FDCWD, "/", MOVE_MOUNT_F_EMPTY_PATH);
}

/* The idmap's user namespace first: once a tree is mounted over "/", this process's root is no
 * longer its namespace's, and the kernel refuses a new user namespace to it (as to a chroot). */
int mount_tree_open(int tree, const MountSource *m, MountStep *ret_step) {
        _cleanup_close_ int userns = -EBADF;

        if (check_tree(tree, m, ret_step) < 0 || check_fstype(tree, ret_step) < 0)
                return -1;
        userns = open_userns(m, ret_step);
        if (userns < 0 || attach_private(tree, ret_step) < 0)
                return -1;
        return clone_idmapped(tree, userns, m->read_only && !m->read_only_later, ret_step);
}
