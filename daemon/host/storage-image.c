/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/loop.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "btrfs.h"
#include "macro.h"
#include "storage-image.h"

#ifndef XFS_SUPER_MAGIC
#define XFS_SUPER_MAGIC 0x58465342
#endif
#ifndef LOOP_CONFIGURE
#define LOOP_CONFIGURE 0x4C0A
#endif

/* mkfs.xfs -q -m reflink=1 PATH (crc=1 is its default, and reflink needs it), or mkfs.btrfs -q
 * PATH, waited for. */
static int run_mkfs(const char *path, bool btrfs, char *why, size_t len) {
        char *xfs[] = { (char *) "mkfs.xfs", (char *) "-q", (char *) "-m", (char *) "reflink=1", (char *) path, NULL };
        char *bt[] = { (char *) "mkfs.btrfs", (char *) "-q", (char *) path, NULL };
        char **argv = btrfs ? bt : xfs;
        int status;
        pid_t pid = fork();

        if (pid < 0) {
                snprintf(why, len, "cannot fork for mkfs.xfs: %m");
                return -errno;
        }
        if (pid == 0) {
                execvp(argv[0], argv);
                _exit(127);
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
                snprintf(why, len, "cannot run %s: install %s", argv[0], btrfs ? "btrfs-progs" : "xfsprogs");
                return -ENOENT;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                snprintf(why, len, "%s %s failed (status %d)", btrfs ? "mkfs.btrfs" : "mkfs.xfs -m reflink=1", path, status);
                return -EIO;
        }
        return 0;
}

/* NAME.new, sparse, formatted, then renamed: an image at NAME is always a whole filesystem. */
static int create_image(const char *image, uint64_t size, bool btrfs, char *why, size_t len) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (asprintf(&tmp, "%s.new", image) < 0)
                return -ENOMEM;
        (void) unlink(tmp);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 || ftruncate(fd, (off_t) size) < 0) {
                r = -errno;
                snprintf(why, len, "cannot make %s of %llu bytes: %s", tmp, (unsigned long long) size, strerror(-r));
                (void) unlink(tmp);
                return r;
        }
        r = run_mkfs(tmp, btrfs, why, len);
        if (r >= 0 && (fsync(fd) < 0 || rename(tmp, image) < 0)) {
                r = -errno;
                snprintf(why, len, "cannot rename %s to %s: %s", tmp, image, strerror(-r));
        }
        if (r < 0)
                (void) unlink(tmp);
        return r;
}

/* A loop device on the image's fd, autoclear: it is released with the last unmount. */
static int attach_loop(const char *image, char *dev, size_t dev_len, int *ret_fd, char *why, size_t len) {
        _cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC), img = -EBADF;
        struct loop_config cfg = { .info = { .lo_flags = LO_FLAGS_AUTOCLEAR } };

        if (ctl < 0) {
                snprintf(why, len, "cannot open /dev/loop-control: %m");
                return -errno;
        }
        img = open(image, O_RDWR | O_CLOEXEC);
        if (img < 0) {
                snprintf(why, len, "cannot open %s: %m", image);
                return -errno;
        }
        cfg.fd = (unsigned) img;
        snprintf((char *) cfg.info.lo_file_name, sizeof(cfg.info.lo_file_name), "%s", image);
        /* Another process may take the free device between the two calls: then try the next. */
        for (int tries = 0; tries < 16; tries++) {
                int n = ioctl(ctl, LOOP_CTL_GET_FREE), fd;
                if (n < 0) {
                        snprintf(why, len, "no free loop device: %m");
                        return -errno;
                }
                snprintf(dev, dev_len, "/dev/loop%d", n);
                fd = open(dev, O_RDWR | O_CLOEXEC);
                if (fd < 0) {
                        snprintf(why, len, "cannot open %s: %m", dev);
                        return -errno;
                }
                if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0) {
                        *ret_fd = fd;
                        return 0;
                }
                int e = errno;
                close(fd);
                if (e != EBUSY) {
                        snprintf(why, len, "LOOP_CONFIGURE on %s: %s", dev, strerror(e));
                        return -e;
                }
        }
        snprintf(why, len, "every free loop device was taken before it could be configured");
        return -EBUSY;
}

/* The loop device an image is attached to, if any ("" when none). */
static void loop_of(const char *image, char *dev, size_t len) {
        _cleanup_free_ char *real = realpath(image, NULL);
        DIR *d = opendir("/sys/block");
        struct dirent *de;

        dev[0] = '\0';
        if (!d || !real) {
                if (d)
                        closedir(d);
                return;
        }
        while ((de = readdir(d)) && !dev[0]) {
                char path[PATH_MAX], back[PATH_MAX];
                ssize_t n;
                int fd;

                if (strncmp(de->d_name, "loop", 4) != 0)
                        continue;
                snprintf(path, sizeof(path), "/sys/block/%.64s/loop/backing_file", de->d_name);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                n = read(fd, back, sizeof(back) - 1);
                close(fd);
                if (n <= 0)
                        continue;
                back[n] = '\0';
                back[strcspn(back, "\n")] = '\0';
                if (strcmp(back, real) == 0)
                        snprintf(dev, len, "/dev/%.32s", de->d_name);
        }
        closedir(d);
}

/* An earlier daemon's mount (in a mount namespace of its own, as under systemd) goes when its
 * last process has, and its loop device a moment later: XFS refuses a second mount of the same
 * filesystem (its UUID) meanwhile, and two mounts of one image must never be. Up to 10 s. */
static int wait_released(const char *image, char *why, size_t len) {
        char dev[64];

        for (int i = 0; i < 100; i++) {
                loop_of(image, dev, sizeof(dev));
                if (!dev[0])
                        return 0;
                usleep(100 * 1000);
        }
        snprintf(why, len, "%s is still attached to %s (mounted elsewhere, or by an earlier sandboxd still stopping)",
                 image, dev);
        return -EBUSY;
}

static bool is_mount_point_of(const char *target, bool btrfs) {
        _cleanup_free_ char *parent = NULL;
        struct statfs sf;
        struct stat a, b;

        if (asprintf(&parent, "%s/..", target) < 0 || stat(target, &a) < 0 || stat(parent, &b) < 0)
                return false;
        return a.st_dev != b.st_dev && statfs(target, &sf) == 0 &&
               (unsigned long) sf.f_type == (btrfs ? BTRFS_SUPER_MAGIC : XFS_SUPER_MAGIC);
}

static int dir_is_empty(const char *path) {
        DIR *d = opendir(path);
        struct dirent *de;
        int r = 1;

        if (!d)
                return -errno;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
                        r = 0;
                        break;
                }
        closedir(d);
        return r;
}

/* btrfs: its limits are qgroups, turned on once mounted (a no-op when they are on already). */
static int mount_loop_btrfs(const char *dev, const char *target, StorageImage *ret, char *why, size_t len) {
        _cleanup_close_ int fd = -EBADF;

        if (mount(dev, target, "btrfs", MS_NOSUID | MS_NODEV | MS_NOATIME, NULL) < 0) {
                snprintf(why, len, "cannot mount %s (btrfs) on %s: %m", dev, target);
                return -errno;
        }
        fd = open(target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ret->quota = fd >= 0 && btrfs_quota_enable(fd) == 0;
        return 0;
}

static int mount_loop(const char *dev, const char *target, StorageImage *ret, char *why, size_t len) {
        const unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOATIME;

        if (mount(dev, target, "xfs", flags, "prjquota") == 0) {
                ret->quota = true;
                return 0;
        }
        /* EINVAL: "quota support not available in this kernel"; the rest is worth having. */
        if (errno != EINVAL || mount(dev, target, "xfs", flags, NULL) < 0) {
                snprintf(why, len, "cannot mount %s (xfs) on %s: %m", dev, target);
                return -errno;
        }
        return 0;
}

int storage_image_mount(const char *image, uint64_t size, bool btrfs, const char *target, StorageImage *ret,
                        char *why, size_t why_len) {
        _cleanup_close_ int loop_fd = -EBADF;
        struct stat st;
        int r;

        *ret = (StorageImage) { .btrfs = btrfs };
        if (is_mount_point_of(target, btrfs)) {
                _cleanup_close_ int fd = btrfs ? open(target, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -EBADF;
                ret->reused = true;
                ret->quota = btrfs && fd >= 0 && btrfs_quota_enable(fd) == 0;
                return 0;
        }
        r = dir_is_empty(target);
        if (r <= 0) {
                snprintf(why, why_len, "%s %s", target, r == 0 ? "is not empty" : "cannot be read");
                return r == 0 ? -ENOTEMPTY : r;
        }
        if (stat(image, &st) < 0) {
                if (errno != ENOENT) {
                        snprintf(why, why_len, "cannot stat %s: %m", image);
                        return -errno;
                }
                r = create_image(image, size, btrfs, why, why_len);
                if (r < 0)
                        return r;
                ret->created = true;
        }
        /* Still attached: an earlier daemon's mount, in a mount namespace of its own (systemd's),
         * which its sandboxes keep alive across a restart (their processes outlive it). That
         * loop device's filesystem is mounted here too: the same device is the same superblock,
         * never a second one of the image. */
        loop_of(image, ret->loop_dev, sizeof(ret->loop_dev));
        if (ret->loop_dev[0]) {
                r = btrfs ? mount_loop_btrfs(ret->loop_dev, target, ret, why, why_len)
                          : mount_loop(ret->loop_dev, target, ret, why, why_len);
                if (r >= 0)
                        return 0;
                ret->loop_dev[0] = '\0';
        }
        r = wait_released(image, why, why_len);
        if (r < 0)
                return r;
        r = attach_loop(image, ret->loop_dev, sizeof(ret->loop_dev), &loop_fd, why, why_len);
        if (r < 0)
                return r;
        /* On failure, closing loop_fd releases the device (autoclear). */
        return btrfs ? mount_loop_btrfs(ret->loop_dev, target, ret, why, why_len)
                     : mount_loop(ret->loop_dev, target, ret, why, why_len);
}
