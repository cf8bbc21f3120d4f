/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* copy_tree() on a tree with everything a hostile workspace can hold: modes, owners, times,
 * setuid files, dangling and absolute symlinks, hard links, empty directories, a FIFO, a socket,
 * a device node, 255-byte names, a path far deeper than PATH_MAX and than the fd budget, a sparse
 * file and a mount point. Both the openat2 walk and the O_NOFOLLOW fallback. Needs root (owners,
 * mknod, mount); skipped otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <dirent.h>
#include <signal.h>
#include <linux/fs.h>
#include <unistd.h>

#include "copy-tree.h"
#include "tap.h"

#define DEEP 150
#define DEEP_NAME_LEN 100

static char base[] = "/tmp/test-copy-tree.XXXXXX";

static void must(int r, const char *what) {
        if (r < 0) {
                printf("Bail out! %s: %s\n", what, strerror(errno));
                exit(1);
        }
}

static void write_file(int dir, const char *name, const char *text, mode_t mode, uid_t uid, gid_t gid) {
        int fd = openat(dir, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        must(fd, name);
        must((int) write(fd, text, strlen(text)), "write");
        must(fchown(fd, uid, gid), "fchown");
        must(fchmod(fd, mode), "fchmod");
        close(fd);
}

static void set_mtime(int dir, const char *name, time_t sec) {
        struct timespec ts[2] = { { sec, 0 }, { sec, 0 } };
        must(utimensat(dir, name, ts, AT_SYMLINK_NOFOLLOW), "utimensat");
}

static void make_socket(int dir) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        /* A relative name: the test's base directory may be longer than sun_path. */
        snprintf(sa.sun_path, sizeof(sa.sun_path), "sock");
        must(fchdir(dir), "fchdir");
        must(fd, "socket");
        must(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), "bind");
        must(fchdir(cwd), "fchdir back");
        close(cwd);
        close(fd);
}

static char deep_name[DEEP_NAME_LEN + 1];

static void make_deep(int dir) {
        int fd = dup(dir);
        for (int i = 0; i < DEEP; i++) {
                must(mkdirat(fd, deep_name, 0755), "mkdir deep");
                int next = openat(fd, deep_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                must(next, "open deep");
                close(fd);
                fd = next;
        }
        write_file(fd, "leaf", "bottom\n", 0644, 0, 0);
        /* Two names of one inode, both too deep for a path to link to: copied as two files. */
        write_file(fd, "deep-link", "deep\n", 0644, 0, 0);
        must(linkat(fd, "deep-link", fd, "deep-link2", 0), "deep link");
        close(fd);
}

static void make_tree(const char *path) {
        int d = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char longname[256];
        int fd;

        must(d, "open src");
        must(mkdirat(d, "d", 0750), "mkdir d");
        must(fchownat(d, "d", 1000, 1001, 0), "chown d");
        int dd = openat(d, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        write_file(dd, "f", "hello\n", 0640, 1000, 1001);
        set_mtime(dd, "f", 1000000000);
        write_file(d, "suid", "#!/bin/sh\n", 04755, 1000, 1000);
        write_file(d, "sgid", "#!/bin/sh\n", 02755, 1000, 1000);
        must(symlinkat("nowhere/at/all", d, "dangling"), "symlink");
        must(symlinkat("/etc/passwd", d, "abs"), "symlink");
        must(symlinkat("/", d, "root"), "symlink");
        must(fchownat(d, "abs", 1002, 1003, AT_SYMLINK_NOFOLLOW), "lchown");
        write_file(d, "h1", "linked\n", 0600, 1000, 1000);
        must(linkat(d, "h1", dd, "h2", 0), "link");
        must(mkdirat(d, "empty", 0711), "mkdir empty");
        must(mkfifoat(d, "fifo", 0620), "mkfifo");
        must(fchmodat(d, "fifo", 0620, 0), "chmod fifo");
        must(mknodat(d, "null", S_IFCHR | 0666, makedev(1, 3)), "mknod");
        memset(longname, 'n', 255);
        longname[255] = '\0';
        write_file(d, longname, "long\n", 0644, 0, 0);
        fd = openat(d, "sparse", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        must(fd, "sparse");
        must((int) pwrite(fd, "end", 3, 1 << 20), "pwrite");
        close(fd);
        set_mtime(dd, ".", 1100000000);
        make_deep(d);
        make_socket(d);
        must(mkdirat(d, "mnt", 0755), "mkdir mnt");
        close(dd);
        close(d);
}

static int open_dir(const char *p) {
        int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        must(fd, p);
        return fd;
}

static bool lstat_at(int dir, const char *name, struct stat *st) {
        return fstatat(dir, name, st, AT_SYMLINK_NOFOLLOW) == 0;
}

static char *read_text(int dir, const char *name) {
        static char buf[256];
        int fd = openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        ssize_t n;
        if (fd < 0)
                return NULL;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n < 0)
                return NULL;
        buf[n] = '\0';
        return buf;
}

static void check_links(int d, const char *mode) {
        struct stat a, b;
        char target[PATH_MAX];
        ssize_t n;

        n = readlinkat(d, "dangling", target, sizeof(target) - 1);
        target[n < 0 ? 0 : n] = '\0';
        is_str(target, "nowhere/at/all", "%s: a dangling symlink is copied as it is", mode);
        n = readlinkat(d, "abs", target, sizeof(target) - 1);
        target[n < 0 ? 0 : n] = '\0';
        is_str(target, "/etc/passwd", "%s: an absolute symlink is copied, not followed", mode);
        ok(lstat_at(d, "abs", &a) && a.st_uid == 1002 && a.st_gid == 1003, "%s: a symlink keeps its owner", mode);
        ok(lstat_at(d, "root", &a) && S_ISLNK(a.st_mode), "%s: a symlink to / stays a symlink", mode);
        ok(lstat_at(d, "h1", &a) && lstat_at(d, "d/h2", &b) && a.st_ino == b.st_ino && a.st_nlink >= 2,
           "%s: hard links stay one inode", mode);
}

static void check_special(int d, const char *mode) {
        struct stat st;
        char longname[256];

        ok(lstat_at(d, "fifo", &st) && S_ISFIFO(st.st_mode) && (st.st_mode & 07777) == 0620,
           "%s: the FIFO is recreated with its mode", mode);
        ok(!lstat_at(d, "null", &st), "%s: the device node is skipped", mode);
        ok(!lstat_at(d, "sock", &st), "%s: the socket is skipped", mode);
        ok(!lstat_at(d, "mnt/inside-the-mount", &st), "%s: nothing of the other mount is copied", mode);
        memset(longname, 'n', 255);
        longname[255] = '\0';
        is_str(read_text(d, longname), "long\n", "%s: a 255-byte name", mode);
        ok(lstat_at(d, "sparse", &st) && st.st_size == (1 << 20) + 3, "%s: the sparse file has its size", mode);
        ok(st.st_blocks < 64, "%s: and its hole stays a hole (%lld blocks)", mode, (long long) st.st_blocks);
        ok(lstat_at(d, "empty", &st) && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0711,
           "%s: the empty directory with its mode", mode);
}

static void check_modes(int d, const char *mode) {
        struct stat st;

        ok(lstat_at(d, "d", &st) && (st.st_mode & 07777) == 0750 && st.st_uid == 1000 && st.st_gid == 1001 &&
                   st.st_mtim.tv_sec == 1100000000,
           "%s: a directory keeps mode, owner and mtime", mode);
        ok(lstat_at(d, "d/f", &st) && (st.st_mode & 07777) == 0640 && st.st_uid == 1000 && st.st_gid == 1001 &&
                   st.st_mtim.tv_sec == 1000000000,
           "%s: a file keeps mode, owner and mtime", mode);
        is_str(read_text(d, "d/f"), "hello\n", "%s: and its content", mode);
        ok(lstat_at(d, "suid", &st) && (st.st_mode & 07777) == 0755, "%s: setuid is dropped", mode);
        ok(lstat_at(d, "sgid", &st) && (st.st_mode & 07777) == 0755, "%s: setgid is dropped", mode);
}

static void check_deep(int d, const char *mode) {
        int fd = dup(d);
        struct stat st;
        bool all = true;
        for (int i = 0; i < DEEP && all; i++) {
                int next = openat(fd, deep_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                close(fd);
                fd = next;
                all = fd >= 0;
        }
        ok(all, "%s: %d levels of %d-byte names (%d bytes of path) are copied", mode, DEEP, DEEP_NAME_LEN,
           DEEP * (DEEP_NAME_LEN + 1));
        is_str(all ? read_text(fd, "leaf") : NULL, "bottom\n", "%s: with the file at the bottom", mode);
        is_str(all ? read_text(fd, "deep-link2") : NULL, "deep\n",
               "%s: a hard link too deep to link to is copied as a file", mode);
        ok(all && lstat_at(fd, "deep-link", &st) && st.st_nlink == 1, "%s: the other name too", mode);
        if (fd >= 0)
                close(fd);
}

static void run_copy(const char *src, const char *mode, bool no_openat2) {
        char dst[PATH_MAX];
        CopyOptions o = { .no_openat2 = no_openat2 };
        CopyStats st;
        int s, d, r;

        snprintf(dst, sizeof(dst), "%s/dst-%s", base, mode);
        must(mkdir(dst, 0700), "mkdir dst");
        s = open_dir(src);
        d = open_dir(dst);
        r = copy_tree(s, d, &o, &st);
        is_int(r, 0, "%s: copy_tree succeeds", mode);
        /* d/f suid sgid dangling abs root h1 fifo long sparse leaf deep-link deep-link2 */
        is_uint64(st.files, 13, "%s: 13 files counted (each inode once)", mode);
        is_uint64(st.links, 1, "%s: 1 extra link made", mode);
        is_uint64(st.skipped, 3, "%s: socket, device and mount point skipped", mode);
        is_uint64(st.bytes, 6 + 10 + 10 + 7 + 5 + (1 << 20) + 3 + 7 + 5 + 5, "%s: bytes are the files' sizes", mode);
        check_modes(d, mode);
        check_links(d, mode);
        check_special(d, mode);
        check_deep(d, mode);
        close(s);
        close(d);
}

static void run_shift(const char *src) {
        char dst[PATH_MAX];
        CopyOptions o = { .shift_ids = true, .id_from = 1000, .id_count = 65536, .id_to = 300000 };
        CopyStats st;
        struct stat a;
        int s, d;

        snprintf(dst, sizeof(dst), "%s/dst-shift", base);
        must(mkdir(dst, 0700), "mkdir dst");
        s = open_dir(src);
        d = open_dir(dst);
        is_int(copy_tree(s, d, &o, &st), 0, "shift: copy_tree succeeds");
        ok(lstat_at(d, "d/f", &a) && a.st_uid == 300000 && a.st_gid == 300001, "shift: owners move with the range");
        ok(lstat_at(d, "abs", &a) && a.st_uid == 300002 && a.st_gid == 300003, "shift: symlinks' owners too");
        ok(lstat_at(d, "sparse", &a) && a.st_uid == 300000, "shift: an owner outside the range becomes the new root");
        ok(fstat(d, &a) == 0 && a.st_uid == 300000, "shift: the root directory too");
        close(s);
        close(d);
}

/* ---- An overlayfs upper layer (overlay_upper): whiteouts and the opaque mark are kept, any
 * other device is still skipped; without the option a whiteout is skipped like any device. */
static void run_overlay_upper(void) {
        char src[PATH_MAX], dst[PATH_MAX], plain[PATH_MAX];
        CopyOptions o = { .overlay_upper = true, .shift_ids = true, .id_from = 1000, .id_count = 65536, .id_to = 300000 };
        CopyStats st;
        struct stat a;
        char v[8] = "";
        int s, d;

        snprintf(src, sizeof(src), "%s/upper-src", base);
        snprintf(dst, sizeof(dst), "%s/upper-dst", base);
        snprintf(plain, sizeof(plain), "%s/upper-plain", base);
        must(mkdir(src, 0755), "mkdir upper-src");
        s = open_dir(src);
        must(mknodat(s, "gone", S_IFCHR | 0, makedev(0, 0)), "mknod whiteout");
        must(mknodat(s, "null", S_IFCHR | 0666, makedev(1, 3)), "mknod null");
        must(mkdirat(s, "opaque", 0755), "mkdir opaque");
        must(fchownat(s, "opaque", 1001, 1001, 0), "chown opaque");
        {
                char path[PATH_MAX + 16];
                snprintf(path, sizeof(path), "%s/opaque", src);
                if (setxattr(path, "trusted.overlay.opaque", "y", 1, 0) < 0)
                        diag("cannot set trusted.overlay.opaque here: %s", strerror(errno));
        }
        must(mkdir(dst, 0700), "mkdir upper-dst");
        d = open_dir(dst);
        is_int(copy_tree(s, d, &o, &st), 0, "overlay upper: copy_tree succeeds");
        ok(lstat_at(d, "gone", &a) && S_ISCHR(a.st_mode) && a.st_rdev == makedev(0, 0) && a.st_uid == 300000,
           "overlay upper: the whiteout is made again (0:0), its owner moved");
        ok(!lstat_at(d, "null", &a), "overlay upper: another device node is still skipped");
        is_uint64(st.skipped, 1, "overlay upper: one skipped");
        {
                char path[PATH_MAX + 16];
                snprintf(path, sizeof(path), "%s/opaque", dst);
                ok(getxattr(path, "trusted.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y',
                   "overlay upper: the opaque directory keeps its mark");
        }
        close(d);
        must(mkdir(plain, 0700), "mkdir upper-plain");
        d = open_dir(plain);
        is_int(copy_tree(s, d, &(CopyOptions) {}, &st), 0, "without overlay_upper: copy_tree succeeds");
        ok(!lstat_at(d, "gone", &a), "without overlay_upper: the whiteout is skipped like any device");
        {
                char path[PATH_MAX + 16];
                snprintf(path, sizeof(path), "%s/opaque", plain);
                ok(getxattr(path, "trusted.overlay.opaque", v, sizeof(v)) < 0, "without overlay_upper: no xattr copied");
        }
        close(d);
        close(s);
}

/* ---- The symlink-swap race (CVE-2018-15664): a process swaps a directory of the source with a
 * symlink to a canary directory outside it, as fast as it can, while the tree is copied over and
 * over. Nothing of the canary may ever be read into a copy, nor anything written through. */

static bool tree_has_canary(int dir) {
        int fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        bool found = false;
        if (!d)
                return false;
        while (!found && (de = readdir(d))) {
                struct stat st;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (strcmp(de->d_name, "canary-secret") == 0)
                        found = true;
                else if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
                        int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0) {
                                found = tree_has_canary(sub);
                                close(sub);
                        }
                }
        }
        closedir(d);
        return found;
}

static void run_race(void) {
        char src[PATH_MAX], canary[PATH_MAX], dst[PATH_MAX + 32];
        int s, c, leaks = 0, errors = 0, runs = 300, swapped = 0;
        struct stat before, after;
        pid_t racer;

        snprintf(src, sizeof(src), "%s/race-src", base);
        snprintf(canary, sizeof(canary), "%s/canary", base);
        must(mkdir(src, 0755), "mkdir race-src");
        must(mkdir(canary, 0755), "mkdir canary");
        c = open_dir(canary);
        write_file(c, "canary-secret", "CANARY\n", 0644, 0, 0);
        must(fstatat(c, "canary-secret", &before, 0), "stat canary");
        close(c);
        s = open_dir(src);
        must(mkdirat(s, "d", 0755), "mkdir d");
        must(mkdirat(s, "d/sub", 0755), "mkdir d/sub");
        write_file(s, "d/sub/file", "mine\n", 0644, 0, 0);
        must(symlinkat(canary, s, "link"), "symlink to the canary");
        racer = fork();
        must(racer, "fork");
        if (racer == 0) {
                for (;;)
                        (void) syscall(SYS_renameat2, s, "d", s, "link", RENAME_EXCHANGE);
        }
        for (int i = 0; i < runs; i++) {
                CopyOptions o = { .no_openat2 = i % 2 == 1 };
                int d;
                snprintf(dst, sizeof(dst), "%s/race-dst-%d", base, i);
                must(mkdir(dst, 0700), "mkdir race dst");
                d = open_dir(dst);
                if (copy_tree(s, d, &o, NULL) < 0)
                        errors++; /* ESTALE and friends are fine: the tree changed under us */
                leaks += tree_has_canary(d);
                {
                        struct stat st;
                        swapped += fstatat(d, "d", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
                }
                close(d);
        }
        kill(racer, SIGKILL);
        waitpid(racer, NULL, 0);
        is_int(leaks, 0, "race: in %d copies of a tree whose directory is swapped with a symlink to a canary, "
                         "the canary never appears (%d copies failed cleanly)", runs, errors);
        c = open_dir(canary);
        ok(fstatat(c, "canary-secret", &after, 0) == 0 && after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
                   after.st_mtim.tv_nsec == before.st_mtim.tv_nsec && after.st_size == before.st_size,
           "race: the canary is unchanged");
        is_str(read_text(c, "canary-secret"), "CANARY\n", "race: its content too");
        ok(swapped > 0, "race: the swap was seen (%d of %d copies have the symlink where the directory was)", swapped,
           runs);
        close(c);
        close(s);
}

int main(void) {
        char src[PATH_MAX], mnt[PATH_MAX + 64];

        if (geteuid() != 0)
                skip_all("needs root (owners, mknod, mount)");
        must(mkdtemp(base) ? 0 : -1, "mkdtemp");
        memset(deep_name, 'x', DEEP_NAME_LEN);
        snprintf(src, sizeof(src), "%s/src", base);
        must(mkdir(src, 0755), "mkdir src");
        must(chown(src, 1000, 1000), "chown src");
        make_tree(src);
        snprintf(mnt, sizeof(mnt), "%s/mnt", src);
        must(mount("tmpfs", mnt, "tmpfs", 0, "size=1m"), "mount tmpfs");
        snprintf(mnt, sizeof(mnt), "%s/mnt/inside-the-mount", src);
        must(close(open(mnt, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)), "file in mount");
        /* A FIFO opened without a writer would block forever: the copy must not open it. */
        alarm(120);

        run_copy(src, "openat2", false);
        run_copy(src, "fallback", true);
        run_shift(src);
        run_overlay_upper();
        run_race();

        snprintf(mnt, sizeof(mnt), "%s/mnt", src);
        umount2(mnt, MNT_DETACH);
        {
                char cmd[PATH_MAX + 64];
                snprintf(cmd, sizeof(cmd), "rm -rf --one-file-system '%s'", base);
                if (system(cmd) != 0)
                        diag("could not remove %s", base);
        }
        return done_testing();
}
