/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "btrfs.h"
#include "macro.h"
#include "storage-image.h"

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

/* An image's loop device, found by what the kernel says of it: the device and inode its backing
 * file had when it was attached (LOOP_GET_STATUS64), and its backing file's path (sysfs).
 * A path alone would be trusted after the image was replaced: a loop device still attached to
 * the earlier file, whose path now reads "IMAGE (deleted)", is named in stale, never used. */
typedef struct LoopOf {
        char dev[32];   /* /dev/loopN attached to the image's inode, "" when none */
        dev_t rdev;     /* its device number */
        char stale[32]; /* /dev/loopN attached to another inode that was at the image's path */
} LoopOf;

/* lo_device is the kernel's huge_encode_dev(), which is not glibc's makedev() above 12 bits. */
static bool lo_device_is(uint64_t lo, dev_t dev) {
        unsigned maj = (unsigned) ((lo & 0xfff00) >> 8), min = (unsigned) ((lo & 0xff) | ((lo >> 12) & 0xfff00));
        return maj == major(dev) && min == minor(dev);
}

static int read_backing_file(const char *loop, char *buf, size_t len) {
        static const char deleted[] = " (deleted)";
        char path[PATH_MAX];
        _cleanup_close_ int fd = -EBADF;
        ssize_t n;
        size_t l;

        snprintf(path, sizeof(path), "/sys/block/%.64s/loop/backing_file", loop);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, len - 1);
        if (n <= 0)
                return n < 0 ? -errno : -ENODATA;
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        l = strlen(buf);
        if (l > strlen(deleted) && strcmp(buf + l - strlen(deleted), deleted) == 0)
                buf[l - strlen(deleted)] = '\0';
        return 0;
}

static void loop_of(const char *image, LoopOf *ret) {
        _cleanup_free_ char *real = realpath(image, NULL);
        struct stat st;
        DIR *d;
        struct dirent *de;

        *ret = (LoopOf) {};
        if (!real || stat(real, &st) < 0)
                return;
        d = opendir("/sys/block");
        if (!d)
                return;
        while ((de = readdir(d)) && !ret->dev[0]) {
                struct loop_info64 info = {};
                char back[PATH_MAX], dev[32];
                _cleanup_close_ int fd = -EBADF;
                struct stat ds;
                bool same_path;

                if (strncmp(de->d_name, "loop", 4) != 0 || read_backing_file(de->d_name, back, sizeof(back)) < 0)
                        continue;
                same_path = strcmp(back, real) == 0;
                snprintf(dev, sizeof(dev), "/dev/%.26s", de->d_name);
                /* Opening a bound loop device does not clear it: its mount (or attacher) holds it. */
                fd = open(dev, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
                if (fd < 0 || ioctl(fd, LOOP_GET_STATUS64, &info) < 0 || fstat(fd, &ds) < 0 || !S_ISBLK(ds.st_mode))
                        continue;
                if (info.lo_inode == st.st_ino && lo_device_is(info.lo_device, st.st_dev)) {
                        snprintf(ret->dev, sizeof(ret->dev), "%s", dev);
                        ret->rdev = ds.st_rdev;
                } else if (same_path && !ret->stale[0])
                        snprintf(ret->stale, sizeof(ret->stale), "%s", dev);
        }
        closedir(d);
}

/* mountinfo escapes a space, a tab, a newline and a backslash in octal (\040). */
static void unescape_octal(char *s) {
        char *w = s;

        for (; *s; s++, w++) {
                if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
                        *w = (char) (((s[1] - '0') << 6) | ((s[2] - '0') << 3) | (s[3] - '0'));
                        s += 3;
                } else
                        *w = *s;
        }
        *w = '\0';
}

typedef struct MountAt {
        dev_t dev;         /* the superblock's device (st_dev: anonymous for btrfs) */
        char fstype[32];
        char source[PATH_MAX];
} MountAt;

/* The topmost mount on path (already resolved) in this mount namespace: 0, -ENOENT when none. */
static int mount_at(const char *path, MountAt *ret) {
        _cleanup_free_ char *line = NULL;
        size_t alloc = 0;
        FILE *f = fopen("/proc/self/mountinfo", "re");
        int r = -ENOENT;

        if (!f)
                return -errno;
        /* "36 25 7:0 / /var/lib/sandboxd/sandboxes rw,... - xfs /dev/loop0 rw,prjquota" */
        while (getline(&line, &alloc, f) >= 0) {
                char mnt[PATH_MAX], type[32], src[PATH_MAX];
                unsigned maj, min;
                const char *sep = strstr(line, " - ");

                if (!sep || sscanf(line, "%*s %*s %u:%u %*s %4095s", &maj, &min, mnt) != 3 ||
                    sscanf(sep + 3, "%31s %4095s", type, src) != 2)
                        continue;
                unescape_octal(mnt);
                if (strcmp(mnt, path) != 0)
                        continue;
                unescape_octal(src);
                ret->dev = makedev(maj, min);
                snprintf(ret->fstype, sizeof(ret->fstype), "%s", type);
                snprintf(ret->source, sizeof(ret->source), "%s", src);
                r = 0; /* later lines are mounts on top: the last one is what the path shows */
        }
        fclose(f);
        return r;
}

/* An earlier daemon's mount (in a mount namespace of its own, as under systemd) goes when its
 * last process has, and its loop device a moment later: XFS refuses a second mount of the same
 * filesystem (its UUID) meanwhile, and two mounts of one image must never be. Up to 10 s. */
static int wait_released(const char *image, char *why, size_t len) {
        LoopOf lo;

        for (int i = 0; i < 100; i++) {
                loop_of(image, &lo);
                if (!lo.dev[0])
                        return 0;
                usleep(100 * 1000);
        }
        snprintf(why, len, "%s is still attached to %s (mounted elsewhere, or by an earlier sandboxd still stopping)",
                 image, lo.dev);
        return -EBUSY;
}

/* IMAGE.loop, beside the image and outside it: the loop device it was last mounted through and
 * the image's inode then ("/dev/loop0 131 8:1"). It catches what the kernel cannot say: an image
 * moved away while kept sandboxes still hold it, whose loop device's backing file is no longer at
 * the image's path. Written once the image is mounted; a record that does not parse, or names a
 * device no longer attached to that inode, is stale and says nothing. */
static int record_write(const char *image, const char *dev, char *why, size_t len) {
        _cleanup_free_ char *path = NULL, *tmp = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        if (asprintf(&path, "%s.loop", image) < 0 || asprintf(&tmp, "%s.loop.new", image) < 0)
                return -ENOMEM;
        if (stat(image, &st) < 0) {
                snprintf(why, len, "cannot stat %s: %m", image);
                return -errno;
        }
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 || dprintf(fd, "%s %llu %u:%u\n", dev, (unsigned long long) st.st_ino, major(st.st_dev),
                              minor(st.st_dev)) < 0 || fsync(fd) < 0 || rename(tmp, path) < 0) {
                r = -errno;
                snprintf(why, len, "cannot write %s: %s", path, strerror(-r));
                (void) unlink(tmp);
                return r;
        }
        return 0;
}

static bool is_loop_dev_path(const char *s) {
        if (strncmp(s, "/dev/loop", 9) != 0 || !s[9])
                return false;
        for (s += 9; *s; s++)
                if (*s < '0' || *s > '9')
                        return false;
        return true;
}

static int record_check(const char *image, char *why, size_t len) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF, dfd = -EBADF;
        struct loop_info64 info = {};
        char buf[128], dev[32];
        unsigned long long ino;
        unsigned maj, min;
        struct stat st;
        ssize_t n;

        if (asprintf(&path, "%s.loop", image) < 0)
                return -ENOMEM;
        fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return 0;
        n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        if (sscanf(buf, "%31s %llu %u:%u", dev, &ino, &maj, &min) != 4 || !is_loop_dev_path(dev))
                return 0;
        dfd = open(dev, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (dfd < 0 || ioctl(dfd, LOOP_GET_STATUS64, &info) < 0 || info.lo_inode != ino ||
            !lo_device_is(info.lo_device, makedev(maj, min)))
                return 0;
        if (stat(image, &st) == 0 && st.st_ino == ino && st.st_dev == makedev(maj, min))
                return 0;
        snprintf(why, len,
                 "%s is %s, but %s is still attached to the image that was there (inode %llu on %u:%u), which "
                 "sandboxes kept from an earlier sandboxd may hold: put that file back at this path, or stop those "
                 "sandboxes so that %s is released",
                 image, access(image, F_OK) < 0 ? "missing" : "another file", dev, ino, maj, min, dev);
        return -ESTALE;
}

static int refuse_stale(const char *image, const LoopOf *lo, char *why, size_t len) {
        snprintf(why, len,
                 "%s is not the file %s is attached to, which still holds the filesystem of sandboxes kept from an "
                 "earlier sandboxd (the image was replaced or moved since): put the earlier image back at that path, "
                 "or stop those sandboxes so that %s is released",
                 image, lo->stale, lo->stale);
        return -ESTALE;
}

/* Something is mounted on target already (a daemon restarted in the same mount namespace): it is
 * used only if it is the image's own filesystem, through the loop device of the image's inode. */
static int check_mount(const char *image, bool btrfs, const char *target, const MountAt *m, LoopOf *ret, char *why,
                       size_t len) {
        const char *want = btrfs ? "btrfs" : "xfs";
        LoopOf lo;

        loop_of(image, &lo);
        if (!lo.dev[0]) {
                if (lo.stale[0])
                        return refuse_stale(image, &lo, why, len);
                snprintf(why, len, "%s is already a mount point (%s from %s), but %s is attached to no loop device: "
                         "not the image's filesystem. Unmount it, or set the storage it is meant for",
                         target, m->fstype, m->source, image);
                return -EEXIST;
        }
        /* xfs: the mount's device is the loop device; btrfs shows an anonymous device there, and
         * the device it was mounted from as its source. */
        if (strcmp(m->fstype, want) != 0 || (btrfs ? strcmp(m->source, lo.dev) != 0 : m->dev != lo.rdev)) {
                snprintf(why, len, "%s is already a mount point (%s from %s, device %u:%u), not of %s (%s on %s): "
                         "unmount it, or set the storage it is meant for",
                         target, m->fstype, m->source, major(m->dev), minor(m->dev), image, want, lo.dev);
                return -EEXIST;
        }
        *ret = lo;
        return 0;
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
        _cleanup_free_ char *real = realpath(target, NULL);
        struct stat st;
        MountAt m = {};
        LoopOf lo;
        int r;

        *ret = (StorageImage) { .btrfs = btrfs };
        if (!real) {
                snprintf(why, why_len, "cannot resolve %s: %m", target);
                return -errno;
        }
        r = mount_at(real, &m);
        if (r >= 0) {
                r = check_mount(image, btrfs, target, &m, &lo, why, why_len);
                if (r < 0)
                        return r;
                r = record_write(image, lo.dev, why, why_len);
                if (r < 0)
                        return r;
                _cleanup_close_ int fd = btrfs ? open(target, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -EBADF;
                ret->reused = true;
                ret->quota = btrfs && fd >= 0 && btrfs_quota_enable(fd) == 0;
                return 0;
        }
        if (r != -ENOENT) {
                snprintf(why, why_len, "cannot read /proc/self/mountinfo: %s", strerror(-r));
                return r;
        }
        r = dir_is_empty(target);
        if (r <= 0) {
                snprintf(why, why_len, "%s %s", target, r == 0 ? "is not empty" : "cannot be read");
                return r == 0 ? -ENOTEMPTY : r;
        }
        r = record_check(image, why, why_len);
        if (r < 0)
                return r;
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
         * which its kept sandboxes hold (their processes outlive it, and their mount namespaces
         * have their copy of the mount). That loop device's filesystem is mounted here too: the
         * same device is the same superblock, never a second one of the image. A loop device
         * still attached to another file that was at the image's path is refused. */
        loop_of(image, &lo);
        if (!lo.dev[0] && lo.stale[0])
                return refuse_stale(image, &lo, why, why_len);
        if (lo.dev[0]) {
                snprintf(ret->loop_dev, sizeof(ret->loop_dev), "%s", lo.dev);
                r = btrfs ? mount_loop_btrfs(ret->loop_dev, target, ret, why, why_len)
                          : mount_loop(ret->loop_dev, target, ret, why, why_len);
                if (r >= 0) {
                        ret->taken_over = true;
                        return record_write(image, ret->loop_dev, why, why_len);
                }
                ret->loop_dev[0] = '\0';
        }
        r = wait_released(image, why, why_len);
        if (r < 0)
                return r;
        r = attach_loop(image, ret->loop_dev, sizeof(ret->loop_dev), &loop_fd, why, why_len);
        if (r < 0)
                return r;
        /* On failure, closing loop_fd releases the device (autoclear). */
        r = btrfs ? mount_loop_btrfs(ret->loop_dev, target, ret, why, why_len)
                  : mount_loop(ret->loop_dev, target, ret, why, why_len);
        if (r < 0)
                return r;
        return record_write(image, ret->loop_dev, why, why_len);
}
