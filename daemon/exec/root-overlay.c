/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The writable root of create's "root": "overlay" (root-overlay.h says what and why). Runs as
 * host root in the host's user namespace: in the run helper that clones the init, or in the
 * daemon without one. Everything below <sandbox>/root-upper/upper is the sandbox's and hostile:
 * it is reached from directory fds one component at a time, never through a symlink, and
 * overlayfs gets each directory as /proc/self/fd/N, never as a path to resolve again. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "idmap.h"
#include "macro.h"
#include "mount-compat.h"
#include "root-overlay.h"

#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif

const char *const root_upper_own[] = { "var", "opt", NULL };

static int open_dir_beneath(int dir_fd, const char *name) {
        struct open_how how = {
                .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        return (int) syscall(SYS_openat2, dir_fd, name, &how, sizeof(how));
}

/* name below dir_fd, made with owner and mode when missing; what is there already stays as it is
 * (what the sandbox made of it, or a restored copy). */
static int make_dir_at(int dir_fd, const char *name, uid_t uid, mode_t mode) {
        _cleanup_close_ int fd = -EBADF;
        char path[32];

        if (mkdirat(dir_fd, name, mode) < 0) {
                if (errno != EEXIST)
                        return -1;
                return open_dir_beneath(dir_fd, name);
        }
        fd = open_dir_beneath(dir_fd, name);
        if (fd < 0)
                return -1;
        /* An O_PATH fd takes neither fchown nor fchmod: AT_EMPTY_PATH, and its name in /proc. */
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        if (fchownat(fd, "", uid, uid, AT_EMPTY_PATH) < 0 || chmod(path, mode) < 0)
                return -1;
        return TAKE_FD(fd);
}

/* Kernels before 6.15 take no detached mount as an overlayfs layer (clone_private_mount() wants
 * a mount of the caller's mount namespace, EINVAL otherwise: seen on Debian's 6.1), so each lower
 * tree is attached for the moment its overlay is made, on root-upper/lower, in a mount namespace
 * of our own where nothing propagates to the host. Every directory is opened after the unshare:
 * an fd opened before would name a mount of the old namespace. */
static int enter_own_mount_ns(void) {
        if (unshare(CLONE_NEWNS) < 0)
                return -1;
        return mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
}

int root_overlay_open(const RootUpper *u, RootOverlay *ret) {
        _cleanup_close_ int dir = -EBADF;

        *ret = (RootOverlay) { .u = u, .upper_fd = -EBADF, .work_fd = -EBADF, .stage_fd = -EBADF, .userns_fd = -EBADF,
                               .step = "a mount namespace of our own" };
        if (enter_own_mount_ns() < 0)
                return -1;
        ret->step = "the upper layer's directories";
        dir = open(u->dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir < 0)
                return -1;
        ret->stage_fd = make_dir_at(dir, "lower", 0, 0700);
        if (ret->stage_fd < 0)
                return -1;
        ret->upper_fd = make_dir_at(dir, "upper", 0, 0755);
        if (ret->upper_fd < 0)
                return -1;
        ret->work_fd = make_dir_at(dir, "work", 0, 0700);
        if (ret->work_fd < 0)
                return -1;
        ret->step = "the idmap's user namespace";
        ret->userns_fd = idmap_userns_open(0, u->host_uid, 0, u->host_uid, u->count);
        return ret->userns_fd < 0 ? -1 : 0;
}

void root_overlay_close(RootOverlay *o) {
        o->upper_fd = safe_close(o->upper_fd);
        o->work_fd = safe_close(o->work_fd);
        o->stage_fd = safe_close(o->stage_fd);
        o->userns_fd = safe_close(o->userns_fd);
}

/* The sandbox's passwd and group in upper/etc at its first start; what it has made of them
 * since (edited, removed: a whiteout) stays. */
static int write_account_file(int etc_fd, const char *name, const char *text, uid_t uid) {
        _cleanup_close_ int fd = openat(etc_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        size_t n = strlen(text);

        if (fd < 0)
                return errno == EEXIST ? 0 : -1;
        if (write(fd, text, n) != (ssize_t) n || fchown(fd, uid, uid) < 0 || fchmod(fd, 0644) < 0)
                return -1;
        return 0;
}

static int setup_upper_etc(RootOverlay *o, int etc_fd) {
        _cleanup_close_ int dir = openat(etc_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0)
                return -1;
        if (write_account_file(dir, "passwd", SANDBOX_PASSWD, o->u->host_uid) < 0)
                return -1;
        return write_account_file(dir, "group", SANDBOX_GROUP, o->u->host_uid);
}

static int idmap_tree(RootOverlay *o, int tree) {
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t) o->userns_fd };
        return mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr));
}

static int fs_set_fd(int fs, const char *key, int fd) {
        char path[32];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        return fsconfig(fs, FSCONFIG_SET_STRING, key, path, 0);
}

static int overlay_fsmount(int lower, int upper, int work) {
        _cleanup_close_ int fs = fsopen("overlay", FSOPEN_CLOEXEC);

        if (fs < 0)
                return -1;
        /* lowerdir by path: "lowerdir+" with an fd is 6.5's, the VM's kernel is 6.1. */
        if (fs_set_fd(fs, "lowerdir", lower) < 0 || fs_set_fd(fs, "upperdir", upper) < 0 ||
            fs_set_fd(fs, "workdir", work) < 0 || fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -1;
        return fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
}

/* Stacked on root-upper/lower (enter_own_mount_ns() says why); the fd names the mount it is,
 * attached now. The overlay keeps a private clone of it: the staged one goes again. */
static int stage_tree(RootOverlay *o, int tree) {
        return move_mount(tree, "", o->stage_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
}

static void unstage_tree(int tree) {
        char path[32];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", tree);
        (void) umount2(path, MNT_DETACH);
}

int root_overlay_mount(RootOverlay *o, int lower, const char *name) {
        bool etc = strcmp(name, "etc") == 0;
        _cleanup_close_ int upper = make_dir_at(o->upper_fd, name, o->u->host_uid, 0755);
        _cleanup_close_ int work = -EBADF;
        int r, saved;

        o->step = "the upper layer's directories";
        if (upper < 0)
                return -1;
        work = make_dir_at(o->work_fd, name, 0, 0700);
        if (work < 0)
                return -1;
        o->step = etc ? "the sandbox's passwd and group"
              : strcmp(name, ROOT_OVERLAY_IMAGE) == 0
                      ? "an idmapped lower layer (the image store's filesystem cannot be idmapped?)"
                      : "an idmapped lower layer (the host root's filesystem cannot be idmapped?)";
        if (etc ? setup_upper_etc(o, upper) < 0 : idmap_tree(o, lower) < 0)
                return -1;
        o->step = "attaching a lower layer";
        if (stage_tree(o, lower) < 0)
                return -1;
        o->step = "the overlayfs mount (overlayfs missing, or the state directory's filesystem unfit for an upper layer?)";
        r = overlay_fsmount(lower, upper, work);
        saved = errno;
        unstage_tree(lower);
        errno = saved;
        return r;
}

int root_overlay_own(RootOverlay *o, const char *name) {
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, .propagation = MS_PRIVATE };
        _cleanup_close_ int dir = make_dir_at(o->upper_fd, name, o->u->host_uid, 0755);
        _cleanup_close_ int tree = -EBADF;

        o->step = "the upper layer's own directories";
        if (dir < 0)
                return -1;
        tree = open_tree(dir, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (tree < 0 || mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
                return -1;
        return TAKE_FD(tree);
}
