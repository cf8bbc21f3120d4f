/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The trees a sandbox's root is built of, opened before its init (spawn.h: root_trees_open(),
 * init_trees_open()): detached clones of the host's directories (or an image's, or an overlay's
 * layers), every path opened without following a link, none on a filesystem a root must not
 * show (root_fs_refused()); and the probe of an overlay root's filesystems. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "macro.h"
#include "mount-compat.h"
#include "rm-rf.h"
#include "spawn.h"

#ifndef CONFIGFS_MAGIC
#define CONFIGFS_MAGIC 0x62656570
#endif
#ifndef FUSECTL_SUPER_MAGIC
#define FUSECTL_SUPER_MAGIC 0x65735543
#endif
#ifndef MQUEUE_MAGIC
#define MQUEUE_MAGIC 0x19800202
#endif

bool root_fs_refused(long f_type) {
        static const unsigned long refused[] = {
                PROC_SUPER_MAGIC,   SYSFS_MAGIC,    CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, DEBUGFS_MAGIC,
                TRACEFS_MAGIC,      SECURITYFS_MAGIC, SELINUX_MAGIC,    SMACK_MAGIC,         BPF_FS_MAGIC,
                DEVPTS_SUPER_MAGIC, EFIVARFS_MAGIC, PSTOREFS_MAGIC,     BINFMTFS_MAGIC,      NSFS_MAGIC,
                CONFIGFS_MAGIC,     FUSECTL_SUPER_MAGIC, MQUEUE_MAGIC,
        };
        for (size_t i = 0; i < ELEMENTSOF(refused); i++)
                if ((unsigned long) f_type == refused[i])
                        return true;
        return false;
}

int root_open_no_symlinks(int dir_fd, const char *path, uint64_t resolve) {
        struct open_how how = {
                .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                .resolve = resolve | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        return (int) syscall(SYS_openat2, dir_fd, path, &how, sizeof(how));
}

/* A detached copy of the one mount at path, without AT_RECURSIVE: nothing mounted below it
 * comes along (a procfs under /etc/x, another container's root under /usr/local/y). Private,
 * so that no later mount on the host propagates into it. */
static int root_tree_clone(int root_fd, const char *path) {
        struct mount_attr attr = {
                .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                .propagation = MS_PRIVATE,
        };
        _cleanup_close_ int dir = root_open_no_symlinks(root_fd, path, RESOLVE_BENEATH);
        _cleanup_close_ int tree = -EBADF;
        struct statfs sfs;

        if (dir < 0)
                return -1;
        tree = open_tree(dir, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (tree < 0 || fstatfs(tree, &sfs) < 0)
                return -1;
        if (root_fs_refused((long) sfs.f_type)) {
                errno = EMEDIUMTYPE;
                return -1;
        }
        if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
                return -1;
        return TAKE_FD(tree);
}

static int root_tree_put(RootTrees *t, int fd, const char *path) {
        if (fd < 0)
                return -1;
        if (t->n >= ROOT_TREES_MAX) {
                safe_close(fd);
                errno = E2BIG;
                return -1;
        }
        t->fd[t->n] = fd;
        t->path[t->n++] = path;
        return 0;
}

static int root_tree_add(RootTrees *t, int root_fd, const char *path) {
        return root_tree_put(t, root_tree_clone(root_fd, path), path);
}

/* The overlay of the tree at path: the read-only clone is its lower layer (which the overlay
 * holds on to). */
static int root_tree_add_overlay(RootTrees *t, int root_fd, RootOverlay *o, const char *path) {
        _cleanup_close_ int lower = -EBADF;

        o->step = "the root's read-only trees";
        lower = root_tree_clone(root_fd, path);
        if (lower < 0)
                return -1;
        return root_tree_put(t, root_overlay_mount(o, lower, path), path);
}

void root_trees_close(RootTrees *t) {
        for (unsigned i = 0; i < t->n; i++)
                safe_close(t->fd[i]);
        t->n = 0;
}

static int root_trees_add_all(RootTrees *t, int root_fd, const char *const *binds, RootOverlay *o) {
        struct stat st;

        for (const char *const *name = sandbox_root_base; *name; name++) {
                /* Absent, or a link that the init copies. */
                if (fstatat(root_fd, *name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                        continue;
                if ((o ? root_tree_add_overlay(t, root_fd, o, *name) : root_tree_add(t, root_fd, *name)) < 0)
                        return -1;
        }
        for (const char *const *name = root_upper_own; o && *name; name++)
                if (root_tree_put(t, root_overlay_own(o, *name), *name) < 0)
                        return -1;
        for (; binds && *binds; binds++)
                if (root_tree_add(t, root_fd, *binds + 1) < 0) /* without its leading '/' */
                        return -1;
        return 0;
}

int root_trees_open(const char *root_dir, const char *const *binds, RootOverlay *overlay, RootTrees *ret) {
        _cleanup_close_ int root_fd = open(root_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        int saved;

        *ret = (RootTrees) {};
        if (root_fd < 0)
                return -1;
        if (root_trees_add_all(ret, root_fd, binds, overlay) == 0)
                return 0;
        saved = errno;
        root_trees_close(ret);
        errno = saved;
        return -1;
}

/* The overlay of the whole root over an image's rootfs: its one lower layer is a plain clone
 * (root_overlay_mount() idmaps it: an idmapped mount cannot be idmapped again), opened after
 * root_overlay_open()'s unshare like every lower tree. The image's tree is never written: the
 * sandbox's writes go to upper/rootfs. */
static int image_trees_open(const char *image_root, RootOverlay *o, RootTrees *ret) {
        _cleanup_close_ int dir = -EBADF, lower = -EBADF;

        *ret = (RootTrees) {};
        o->step = "the image's rootfs";
        dir = open(image_root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir < 0)
                return -1;
        lower = root_tree_clone(dir, ".");
        if (lower < 0)
                return -1;
        return root_tree_put(ret, root_overlay_mount(o, lower, ROOT_OVERLAY_IMAGE), "/");
}

int init_trees_open(InitParams *p) {
        RootOverlay o;
        int r, saved;

        if (!p->root_upper.dir)
                return root_trees_open(p->root_dir, p->root_binds, NULL, &p->trees);
        r = root_overlay_open(&p->root_upper, &o);
        if (r == 0 && p->image_root)
                r = image_trees_open(p->image_root, &o, &p->trees);
        else if (r == 0)
                r = root_trees_open(p->root_dir, p->root_binds, &o, &p->trees);
        saved = errno;
        root_overlay_close(&o);
        errno = saved;
        return r;
}

static int probe_in(const char *root_dir, const char *image_root, const char *scratch, uid_t host_uid, unsigned count,
                    const char **ret_step) {
        RootUpper u = { .dir = scratch, .host_uid = host_uid, .count = count };
        RootOverlay o;
        RootTrees t;
        int r = 0;

        if (root_overlay_open(&u, &o) < 0)
                r = -errno;
        else if ((image_root ? image_trees_open(image_root, &o, &t) : root_trees_open(root_dir, NULL, &o, &t)) < 0)
                r = -errno;
        else
                root_trees_close(&t);
        *ret_step = r < 0 ? o.step : NULL;
        root_overlay_close(&o);
        return r;
}

/* In a child: root_overlay_open() leaves the caller's mount namespace, which must stay the
 * daemon's. It writes "ERRNO STEP" (0 when all went well) to the pipe. */
_Noreturn static void probe_child(int out, const char *root_dir, const char *image_root, const char *scratch, uid_t host_uid,
                                  unsigned count) {
        const char *step = NULL;
        int r = probe_in(root_dir, image_root, scratch, host_uid, count, &step);
        char line[256];
        int n = snprintf(line, sizeof(line), "%d %s", -r, step ? step : "");

        (void) !write(out, line, (size_t) (n < (int) sizeof(line) ? n : (int) sizeof(line) - 1));
        _exit(0);
}

static int probe_wait(pid_t pid, int in, char *ret_step, size_t len) {
        char line[256];
        ssize_t n = read(in, line, sizeof(line) - 1);
        int err = EIO, off = 0;

        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        line[n > 0 ? n : 0] = '\0';
        if (n <= 0 || sscanf(line, "%d %n", &err, &off) != 1) {
                snprintf(ret_step, len, "the probe's child process");
                return -EIO;
        }
        snprintf(ret_step, len, "%s", line + off);
        return -err;
}

int root_overlay_probe(const char *root_dir, const char *image_root, int state_fd, const char *state_path,
                       uid_t host_uid, unsigned count, char *ret_step, size_t len) {
        /* One name: what a daemon killed in the middle of it left is removed by the next. */
        static const char name[] = ".overlay-probe";
        char scratch[4096];
        int pfd[2], r;
        pid_t pid;

        (void) rm_rf_at(state_fd, name);
        snprintf(ret_step, len, "a scratch directory in the state directory");
        if (mkdirat(state_fd, name, 0700) < 0)
                return -errno;
        snprintf(scratch, sizeof(scratch), "%s/%s", state_path, name);
        if (pipe2(pfd, O_CLOEXEC) < 0) {
                r = -errno;
                (void) rm_rf_at(state_fd, name);
                return r;
        }
        pid = fork();
        if (pid == 0) {
                close(pfd[0]);
                probe_child(pfd[1], root_dir, image_root, scratch, host_uid, count);
        }
        close(pfd[1]);
        r = pid < 0 ? -errno : probe_wait(pid, pfd[0], ret_step, len);
        close(pfd[0]);
        (void) rm_rf_at(state_fd, name);
        return r;
}
