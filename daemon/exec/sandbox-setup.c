/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Runs inside a new sandbox, as its pid 1, before anything of the sandbox's own: builds the
 * sandbox's view of the world, reports, then reaps orphans until the cgroup is killed.
 * Steps in order (each failure is reported as {step, errno}):
 *   wait for the id maps -> become root of the new user namespace -> own cgroup namespace ->
 *   private propagation -> a tmpfs root holding the read-only trees of /usr, /etc and root_binds
 *   that the process cloning us made (root_trees_open; with "root": "overlay", overlays of them
 *   and the sandbox's own /var and /opt: root-overlay.h) ->
 *   a fresh /sys with our own cgroup2 -> /proc, /dev, /proc masks -> /tmp, /run, /work -> the caller's mounts -> masks
 *   -> pivot_root -> hostname -> loopback up -> into a child user and mount namespace, which
 *   locks every mount made above.
 * What a sandbox costs is mostly the kernel's work for its namespaces and mounts, so this makes
 * as few filesystems and mounts as it can: /tmp, /run and /dev/shm are directories of the root
 * tmpfs, one empty tmpfs serves every directory mask, /dev is one bind of the daemon's template,
 * and nothing here allocates (see setup_root_links). */
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

#include "identity.h"
#include "macro.h"
#include "mount-compat.h"
#include "rm-rf.h"
#include "spawn.h"

/* The new root is assembled on a private tmpfs mounted over /tmp in our own mount namespace;
 * the host's /tmp is untouched. */
#define NEWROOT "/tmp"

/* The names of root_dir a sandbox gets besides the root_binds: /usr and /etc, and the
 * merged-/usr links (bin -> usr/bin), copied as links, or on a host without merged /usr those
 * directories, bound. Nothing else of the host: not /home, /root, /var, /srv, /opt, /mnt,
 * /media, /boot, nor any mount below a bound directory. */
const char *const sandbox_root_base[] = { "usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32", NULL };

_Noreturn static void init_fail(int fd, SpawnStep step) {
        SpawnReport r = { .kind = REPORT_FAILED, .step = step, .err = errno ? errno : EIO };
        report_send(fd, &r, -1);
        _exit(1);
}

static int make_readonly(const char *path) {
        struct mount_attr attr = {
                .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        };
        return mount_setattr(AT_FDCWD, path, 0, &attr, sizeof(attr));
}

/* The writable places of the sandbox (/tmp, /run with /run/shm, which /dev/shm links to) are
 * directories of its root tmpfs, each bound onto itself with its own flags: one filesystem
 * instead of four, since making and tearing down a superblock is a good part of what a sandbox
 * costs. The root itself is remounted read-only (setup_pivot). */
static int bind_self(const char *path, uint64_t set, uint64_t clear) {
        struct mount_attr attr = { .attr_set = set, .attr_clr = clear };
        if (mount(path, path, NULL, MS_BIND, NULL) < 0)
                return -1;
        return mount_setattr(AT_FDCWD, path, 0, &attr, sizeof(attr));
}

/* mkdir with the mode as given, whatever the umask. */
static int make_dir(const char *path, mode_t mode) {
        if (mkdir(path, mode) < 0)
                return -1;
        return chmod(path, mode);
}

/* mkdir -p of a path below the new root; what exists already (a directory of a bound tree) is
 * fine. The links made on the root tmpfs are not followed when the tree is attached. */
static int make_dirs(char *path) {
        for (char *s = path + strlen(NEWROOT) + 1; (s = strchr(s, '/')); s++) {
                int r;
                *s = '\0';
                r = mkdir(path, 0755);
                *s = '/';
                if (r < 0 && errno != EEXIST)
                        return -1;
        }
        return mkdir(path, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

static int move_onto(int tree, int target_fd);

static int attach_tree(int tree, const char *path) {
        _cleanup_close_ int target = -EBADF;
        char dst[4096];

        if (snprintf(dst, sizeof(dst), NEWROOT "/%s", path) >= (int) sizeof(dst)) {
                errno = ENAMETOOLONG;
                return -1;
        }
        if (make_dirs(dst) < 0)
                return -1;
        target = root_open_no_symlinks(AT_FDCWD, dst, 0);
        if (target < 0)
                return -1;
        return move_onto(tree, target);
}

/* The merged-/usr links as root_dir has them. No allocation here or anywhere in the init's
 * setup: musl returns freed memory to the kernel at once, and page faults and munmaps were a
 * tenth of the init's time. */
static int setup_root_links(const char *root_dir) {
        _cleanup_close_ int fd = open(root_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        char dst[64], target[4096];

        if (fd < 0)
                return -1;
        for (const char *const *name = sandbox_root_base; *name; name++) {
                ssize_t n = readlinkat(fd, *name, target, sizeof(target) - 1);
                if (n < 0)
                        continue; /* a directory (a tree of its own) or absent */
                target[n] = '\0';
                snprintf(dst, sizeof(dst), NEWROOT "/%s", *name);
                if (symlink(target, dst) < 0)
                        return -1;
        }
        return 0;
}

/* /var/tmp and /var/run, links to the sandbox's /tmp and /run (programs that keep temporary files
 * in /var/tmp find a writable one). In an overlay root's own /var they are made at the first
 * start, and what the sandbox made of them later stays. */
static int setup_var_links(bool existing_ok) {
        if (symlink("/tmp", NEWROOT "/var/tmp") < 0 && !(existing_ok && errno == EEXIST))
                return -1;
        if (symlink("/run", NEWROOT "/var/run") < 0 && !(existing_ok && errno == EEXIST))
                return -1;
        return 0;
}

/* /home and /root are empty directories; /var is the sandbox's own, empty but for its links
 * (setup_var_links). A root_bind below /var adds what the host's configuration asks for. */
static int setup_root(const InitParams *p) {
        bool overlay = p->root_upper.dir;

        if (setup_root_links(p->root_dir) < 0 || mkdir(NEWROOT "/home", 0755) < 0 || mkdir(NEWROOT "/root", 0755) < 0 ||
            mkdir(NEWROOT "/var", 0755) < 0 || (!overlay && setup_var_links(false) < 0))
                return -1;
        for (unsigned i = 0; i < p->trees.n; i++)
                if (attach_tree(p->trees.fd[i], p->trees.path[i]) < 0)
                        return -1;
        return overlay ? setup_var_links(true) : 0;
}

static int bind_dev_node(const char *name) {
        char src[64], dst[64];
        int fd;
        snprintf(src, sizeof(src), "/dev/%s", name);
        snprintf(dst, sizeof(dst), NEWROOT "/dev/%s", name);
        fd = open(dst, O_CREAT | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd < 0)
                return -1;
        close(fd);
        return mount(src, dst, NULL, MS_BIND, NULL);
}

/* A minimal /dev, read-only: the harmless nodes, links, a private devpts for terminals, and
 * /dev/shm a link to /run/shm (a directory of the sandbox's own tmpfs), as Debian had it once. The
 * daemon's template (dev-template.h) has the nodes and links already: one bind. Without it, the
 * host's nodes are bound one by one into a directory of the root tmpfs. */
static int setup_dev_nodes(bool shm_dir) {
        static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty", NULL };
        static const char *const links[][2] = {
                { "/proc/self/fd", "fd" },       { "/proc/self/fd/0", "stdin" }, { "/proc/self/fd/1", "stdout" },
                { "/proc/self/fd/2", "stderr" }, { "pts/ptmx", "ptmx" },         { "/run/shm", "shm" },
        };
        struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
        char path[64];

        if (bind_self(NEWROOT "/dev", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, 0) < 0)
                return -1;
        for (const char *const *n = nodes; *n; n++)
                if (bind_dev_node(*n) < 0)
                        return -1;
        for (size_t i = 0; i < ELEMENTSOF(links) - (shm_dir ? 1 : 0); i++) {
                snprintf(path, sizeof(path), NEWROOT "/dev/%s", links[i][1]);
                if (symlink(links[i][0], path) < 0)
                        return -1;
        }
        if (mkdir(NEWROOT "/dev/pts", 0755) < 0)
                return -1;
        /* A root.path's /run is its own: /dev/shm is then a directory of the root tmpfs, bound
         * writable before /dev turns read-only. */
        if (shm_dir && (make_dir(NEWROOT "/dev/shm", 01777) < 0 ||
                        bind_self(NEWROOT "/dev/shm", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0) < 0))
                return -1;
        return mount_setattr(AT_FDCWD, NEWROOT "/dev", 0, &ro, sizeof(ro));
}

static int setup_dev_template(int dev_fd) {
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC };
        _cleanup_close_ int tree = open_tree(dev_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);

        if (tree < 0 || mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
                return -1;
        return move_mount(tree, "", AT_FDCWD, NEWROOT "/dev", MOVE_MOUNT_F_EMPTY_PATH);
}

static int mount_devpts(void) {
        return mount("devpts", NEWROOT "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620");
}

static int setup_dev(int dev_fd) {
        if ((dev_fd >= 0 ? setup_dev_template(dev_fd) : setup_dev_nodes(false)) < 0 || make_dir(NEWROOT "/run/shm", 01777) < 0)
                return -1;
        return mount_devpts();
}

/* A root.path's /dev: a directory of the root tmpfs (bound over the root's own by
 * setup_own_root()) with the nodes one by one and /dev/shm a directory of its own: the template's
 * shm link would point into the root's /run. */
static int setup_dev_own(void) {
        if (setup_dev_nodes(true) < 0)
                return -1;
        return mount_devpts();
}

/* The workspace arrives as an fd: its host path may be closed to the sandbox's uids. Without
 * one (a throwaway sandbox's), /work is a directory of the root tmpfs like /tmp: nothing on the
 * host's disk to make or remove, and what the run writes there counts against the tmpfs's size. */
static int setup_work(int workdir_fd) {
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
        _cleanup_close_ int tree = -EBADF;

        if (workdir_fd < 0) {
                if (chown(NEWROOT "/work", SANDBOX_USER_UID, SANDBOX_USER_GID) < 0 || chmod(NEWROOT "/work", 0755) < 0)
                        return -1;
                return bind_self(NEWROOT "/work", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0);
        }
        tree = open_tree(workdir_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (tree < 0)
                return -1;
        if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
                return -1;
        return move_mount(tree, "", AT_FDCWD, NEWROOT "/work", MOVE_MOUNT_F_EMPTY_PATH);
}

/* Host paths that must not be reachable from inside: the state directory (other sandboxes'
 * workspaces) and the control sockets. A directory gets an empty read-only tmpfs, a file or
 * socket gets /dev/null bound over it. */
static int mask_dir(int target_fd);

static int setup_masks(const char *const *paths) {
        char dst[4096];
        struct stat st;

        for (; paths && *paths; paths++) {
                snprintf(dst, sizeof(dst), NEWROOT "%s", *paths);
                if (lstat(dst, &st) < 0)
                        continue; /* not visible inside anyway */
                if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int fd = open(dst, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
                        if (fd < 0 || mask_dir(fd) < 0)
                                return -1;
                } else if (mount("/dev/null", dst, NULL, MS_BIND, NULL) < 0)
                        return -1;
        }
        return 0;
}

/* The host's account list is none of the sandbox's business, and uid 1000 inside should be called
 * what it is: /etc/passwd and /etc/group become three accounts, bound read-only from files made on
 * the new root's tmpfs (then unlinked there). A root without them keeps what it has. */
static int replace_etc_file(const char *name, const char *text) {
        char src[64], dst[64];
        struct stat st;
        ssize_t n;
        int fd;

        snprintf(dst, sizeof(dst), NEWROOT "/etc/%s", name);
        if (lstat(dst, &st) < 0 || !S_ISREG(st.st_mode))
                return 0;
        snprintf(src, sizeof(src), NEWROOT "/.%s", name);
        fd = open(src, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return -1;
        n = write(fd, text, strlen(text));
        close(fd);
        if (n != (ssize_t) strlen(text))
                return -1;
        /* /etc is the host's, and groupadd or passwd may rename a new file over this one at any
         * moment: a mount onto the name just replaced fails with ENOENT (the kernel refuses an
         * unlinked mount point), and is tried again on the file that took its place. */
        for (int i = 0;; i++) {
                if (mount(src, dst, NULL, MS_BIND, NULL) == 0)
                        break;
                if (errno != ENOENT || i == 16)
                        return -1;
                if (lstat(dst, &st) < 0 || !S_ISREG(st.st_mode))
                        return unlink(src); /* gone: nothing of the host's to hide */
        }
        if (make_readonly(dst) < 0)
                return -1;
        return unlink(src);
}

/* An overlay root has its own passwd and group in its upper layer (root-overlay.h), which root
 * inside may edit (useradd in a package's script): no bind over them. */
static int setup_accounts(bool overlay) {
        if (overlay)
                return 0;
        if (replace_etc_file("passwd", SANDBOX_PASSWD) < 0)
                return -1;
        return replace_etc_file("group", SANDBOX_GROUP);
}

/* The host's /sys would show the host's whole cgroup tree (other sandboxes' cgroups, and the
 * machine's cgroup v1 hierarchies) and its devices. A fresh sysfs shows the devices of our own
 * network namespace; on top of it, a cgroup2 mount is rooted at our cgroup namespace: the sandbox
 * sees its own subtree only. A namespace from the daemon's pool (netns-pool.h) is the host's, so
 * the helper mounted its sysfs (sysfs_fd) and it is moved here; one of our own we mount
 * ourselves. The kernel refuses a new sysfs unless an unmasked one is visible in this mount
 * namespace: the host's /sys still is (the old root), so this runs before pivot_root. */
static int setup_sys(int sysfs_fd) {
        const unsigned long flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;

        if (sysfs_fd >= 0) {
                if (move_mount(sysfs_fd, "", AT_FDCWD, NEWROOT "/sys", MOVE_MOUNT_F_EMPTY_PATH) < 0)
                        return -1;
        } else if (mount("sysfs", NEWROOT "/sys", "sysfs", flags, NULL) < 0) {
                if (errno != EPERM)
                        return -1;
                /* Nothing of the host rather than the host's: an empty read-only /sys. */
                return mount("tmpfs", NEWROOT "/sys", "tmpfs", flags, "size=4k,mode=0755");
        }
        /* No cgroup2 (or a kernel refusing it in a user namespace): an empty directory is fine. */
        if (mount("cgroup2", NEWROOT "/sys/fs/cgroup", "cgroup2", flags, NULL) < 0 && errno != EPERM &&
            errno != ENODEV && errno != ENOENT)
                return -1;
        return 0;
}

/* Mask and read-only targets are opened O_PATH|O_NOFOLLOW beneath a filesystem we just mounted
 * and must be of the expected type; mounts then go onto the fd, never through a path again. */
static int open_beneath(int dir_fd, const char *name, long magic) {
        struct statfs sfs;
        int fd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -1;
        if (fstatfs(fd, &sfs) < 0 || (unsigned long) sfs.f_type != (unsigned long) magic) {
                close(fd);
                errno = EXDEV;
                return -1;
        }
        return fd;
}

static int move_onto(int tree, int target_fd) {
        return move_mount(tree, "", target_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
}

/* The new /dev/null, checked to be char 1:3 (ESC-05: a mask source must not be a look-alike). */
static int open_dev_null(void) {
        struct stat st;
        int fd = open(NEWROOT "/dev/null", O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -1;
        if (fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode) || st.st_rdev != makedev(1, 3)) {
                close(fd);
                errno = EXDEV;
                return -1;
        }
        return fd;
}

static int mask_file(int target_fd, int null_fd) {
        _cleanup_close_ int tree = open_tree(null_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (tree < 0)
                return -1;
        return move_onto(tree, target_fd);
}

/* An empty read-only tmpfs: made once (the first mask), then bound again for every other. */
static int empty_fs = -EBADF;

static int mask_dir(int target_fd) {
        _cleanup_close_ int tree = -EBADF;
        _cleanup_close_ int fs = -EBADF;

        if (empty_fs >= 0) {
                tree = open_tree(empty_fs, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
                return tree < 0 ? -1 : move_onto(tree, target_fd);
        }
        fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
        if (fs < 0)
                return -1;
        if (fsconfig(fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0555", 0) < 0 ||
            fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -1;
        tree = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        if (tree < 0 || move_onto(tree, target_fd) < 0)
                return -1;
        /* Attached now: the fd is a mount of our namespace, which open_tree can clone. */
        empty_fs = TAKE_FD(tree);
        return 0;
}

/* A read-only bind of the entry onto itself. */
static int bind_ro_self(int target_fd) {
        struct mount_attr attr = {
                .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
        };
        _cleanup_close_ int tree = open_tree(target_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (tree < 0 || mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
                return -1;
        return move_onto(tree, target_fd);
}

/* create's masked_paths and readonly_paths, runc's way: resolved in the new root (a symlink
 * followed only within it, no magic link), a missing one skipped. */
static int open_in_newroot(int root_fd, const char *path) {
        struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
        int fd = -1;

        for (int i = 0; i < 64; i++) {
                fd = (int) syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
                if (fd >= 0 || errno != EAGAIN)
                        break;
        }
        return fd;
}

/* Read-only with whatever is mounted below it (a clone without them would be refused where they
 * are locked, and would uncover what they hide). */
static int bind_ro_tree(int target_fd) {
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY };
        _cleanup_close_ int tree = open_tree(target_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
        if (tree < 0 || mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0)
                return -1;
        return move_onto(tree, target_fd);
}

static int mask_path(int root_fd, const char *path, int *null_fd) {
        _cleanup_close_ int fd = open_in_newroot(root_fd, path);
        struct stat st;

        if (fd < 0)
                return errno == ENOENT ? 0 : -1;
        if (fstat(fd, &st) < 0)
                return -1;
        if (S_ISDIR(st.st_mode))
                return mask_dir(fd);
        if (*null_fd < 0 && (*null_fd = open_dev_null()) < 0)
                return -1;
        return mask_file(fd, *null_fd);
}

static int setup_config_paths(const char *const *masked, const char *const *readonly) {
        _cleanup_close_ int root_fd = -EBADF, null_fd = -EBADF;

        if ((!masked || !*masked) && (!readonly || !*readonly))
                return 0;
        root_fd = open(NEWROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return -1;
        for (; masked && *masked; masked++)
                if (mask_path(root_fd, *masked, &null_fd) < 0)
                        return -1;
        for (; readonly && *readonly; readonly++) {
                _cleanup_close_ int fd = open_in_newroot(root_fd, *readonly);
                if (fd < 0 && errno != ENOENT)
                        return -1;
                if (fd >= 0 && bind_ro_tree(fd) < 0)
                        return -1;
        }
        return 0;
}

typedef enum MaskKind { MASK_NULL, MASK_EMPTY_DIR, MASK_READONLY } MaskKind;

typedef struct Mask {
        const char *name; /* beneath the filesystem's root */
        MaskKind kind;
} Mask;

/* runc's default masked and read-only paths (GHSA-9493-h29p-rfm2). Files read back nothing
 * (kcore: kernel memory; keys: other users' key descriptions; timer_list, sched_debug,
 * timer_stats, latency_stats: host task names, pids and timing), directories of host hardware
 * turn empty; the sysctl, bus, fs and irq trees and sysrq-trigger are read-only so that nothing
 * can change the host through them even where a kernel check is missing; sysrq-trigger is
 * read-only rather than /dev/null so that a write fails loudly (EROFS). */
static const Mask proc_masks[] = {
        { "kcore", MASK_NULL },           { "keys", MASK_NULL },          { "timer_list", MASK_NULL },
        { "timer_stats", MASK_NULL },     { "sched_debug", MASK_NULL },   { "latency_stats", MASK_NULL },
        { "acpi", MASK_EMPTY_DIR },       { "scsi", MASK_EMPTY_DIR },     { "asound", MASK_EMPTY_DIR },
        { "sysrq-trigger", MASK_READONLY }, { "sys", MASK_READONLY },     { "bus", MASK_READONLY },
        { "fs", MASK_READONLY },          { "irq", MASK_READONLY },
};

/* firmware: ACPI tables, EFI variables, DMI; powercap: energy counters (the PLATYPUS side
 * channel). Hiding them also makes the kernel refuse a nested sysfs mount that would show them. */
static const Mask sys_masks[] = {
        { "firmware", MASK_EMPTY_DIR },
        { "devices/virtual/powercap", MASK_EMPTY_DIR },
};

static int apply_mask(int root_fd, long magic, const Mask *m, int null_fd) {
        _cleanup_close_ int fd = open_beneath(root_fd, m->name, magic);
        if (fd < 0)
                return errno == ENOENT ? 0 : -1; /* this kernel has no such entry */
        switch (m->kind) {
        case MASK_NULL:
                return mask_file(fd, null_fd);
        case MASK_EMPTY_DIR:
                return mask_dir(fd);
        case MASK_READONLY:
                return bind_ro_self(fd);
        }
        return 0;
}

static int apply_masks(const char *root, long magic, const Mask *masks, size_t n, int null_fd) {
        _cleanup_close_ int root_fd = open_beneath(AT_FDCWD, root, magic);
        if (root_fd < 0)
                return errno == EXDEV && magic == SYSFS_MAGIC ? 0 : -1; /* /sys fell back to tmpfs */
        for (size_t i = 0; i < n; i++)
                if (apply_mask(root_fd, magic, &masks[i], null_fd) < 0)
                        return -1;
        return 0;
}

/* Runs before any process of the sandbox exists (ESC-05): every target lies in a procfs or
 * sysfs we mounted a moment ago in a mount namespace no one else has entered, and the mask
 * source is the /dev/null we bound ourselves, so nothing can swap a target or the source under
 * us; the fd checks are a second line. No pty or console is bound anywhere, before or after.
 * lock_mounts() makes them impossible to unmount or remount for anyone inside, root included. */
static int setup_kernel_masks(void) {
        _cleanup_close_ int null_fd = open_dev_null();
        if (null_fd < 0)
                return -1;
        if (apply_masks(NEWROOT "/proc", PROC_SUPER_MAGIC, proc_masks, ELEMENTSOF(proc_masks), null_fd) < 0)
                return -1;
        return apply_masks(NEWROOT "/sys", SYSFS_MAGIC, sys_masks, ELEMENTSOF(sys_masks), null_fd);
}

/* The new root read-only but where it is an overlay root over an image, which is the sandbox's
 * own to write. */
static int setup_pivot(bool writable_root) {
        if (chdir(NEWROOT) < 0)
                return -1;
        /* pivot_root(".", ".") stacks the old root under the new one; detach it right away. */
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                return -1;
        if (umount2(".", MNT_DETACH) < 0)
                return -1;
        if (chdir("/") < 0)
                return -1;
        return writable_root ? 0 : make_readonly("/");
}

static int setup_loopback(void) {
        struct ifreq ifr = {};
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        strcpy(ifr.ifr_name, "lo");
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                return -1;
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        return ioctl(fd, SIOCSIFFLAGS, &ifr);
}

/* The root tmpfs holds what the sandbox writes outside /work (/tmp, /run, /dev/shm): its size
 * and inode count are capped, so that filling it is ENOSPC for the sandbox rather than an OOM
 * kill (tmpfs pages are charged to its cgroup and cannot be reclaimed) or, where the memory
 * controller is missing, the host's memory. One inode per page of its size. */
static int mount_root_tmpfs(uint64_t size) {
        char opts[96];
        uint64_t pages = (size + 4095) / 4096;

        if (size == 0)
                return mount("tmpfs", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
        snprintf(opts, sizeof(opts), "mode=0755,size=%" PRIu64 ",nr_inodes=%" PRIu64, pages * 4096,
                 pages < 1024 ? 1024 : pages);
        return mount("tmpfs", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV, opts);
}

/* A target's last component: a directory, or a file that is there (the daemon's /etc/resolv.conf
 * of a sandbox with egress is a file's tree), opened without following a symlink either way. */
static int open_target(int dir, const char *comp) {
        struct open_how how = {
                .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        int fd = root_open_no_symlinks(dir, comp, RESOLVE_BENEATH);

        if (fd >= 0 || errno != ENOTDIR)
                return fd;
        return (int) syscall(SYS_openat2, dir, comp, &how, sizeof(how));
}

/* The caller's directories (create's "mounts"), detached idmapped trees the daemon made
 * (mount-source.h): each target made below the new root one component at a time, none of which
 * may be a symlink (a restored workspace may hold one planted to redirect it), then the tree
 * moved onto it. Before lock_mounts(): root inside can neither unmount one nor remount a
 * read-only one writable. */
static int setup_caller_mounts(const InitMounts *mounts) {
        for (unsigned i = 0; i < mounts->n; i++) {
                char path[4096];
                _cleanup_close_ int dir = root_open_no_symlinks(AT_FDCWD, NEWROOT, 0);
                char *comp, *next_comp, *save = NULL;
                struct stat src, dst;

                if (dir < 0 || fstat(mounts->fd[i], &src) < 0)
                        return -1;
                snprintf(path, sizeof(path), "%s", mounts->target[i]);
                for (comp = strtok_r(path, "/", &save); comp; comp = next_comp) {
                        int next;

                        next_comp = strtok_r(NULL, "/", &save);
                        if (strcmp(comp, ".") == 0 || strcmp(comp, "..") == 0) {
                                errno = EINVAL;
                                return -1;
                        }
                        /* A file's target (a root.path's only: sandbox_open_mounts()) is an empty
                         * file, made where there is none; every other component a directory. */
                        if (!next_comp && S_ISREG(src.st_mode)) {
                                int fd = openat(dir, comp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
                                if (fd < 0 && errno != EEXIST)
                                        return -1;
                                safe_close(fd);
                        } else if (mkdirat(dir, comp, 0755) < 0 && errno != EEXIST)
                                return -1;
                        next = open_target(dir, comp);
                        if (next < 0)
                                return -1;
                        safe_close(dir);
                        dir = next;
                }
                /* Never onto a symlink (O_PATH|O_NOFOLLOW opens the link itself), and a file onto a
                 * file, a directory onto a directory. */
                if (fstat(dir, &dst) < 0)
                        return -1;
                if (S_ISLNK(dst.st_mode)) {
                        errno = ELOOP;
                        return -1;
                }
                if (S_ISDIR(src.st_mode) != S_ISDIR(dst.st_mode) || (!S_ISDIR(dst.st_mode) && !S_ISREG(dst.st_mode))) {
                        errno = S_ISDIR(src.st_mode) ? ENOTDIR : EISDIR;
                        return -1;
                }
                if (move_onto(mounts->fd[i], dir) < 0)
                        return -1;
        }
        return 0;
}

/* A directory of the root tmpfs (which the image's tree covers by then), bound onto the image's
 * directory of that name: the sandbox's own writable /tmp, /run (and /work, /dev where nothing
 * else is mounted there), while the image stays read-only and shared. */
static int bind_scratch(int scratch_fd, const char *name) {
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
        _cleanup_close_ int tree = open_tree(scratch_fd, name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        _cleanup_close_ int target = -EBADF;
        char dst[64];

        snprintf(dst, sizeof(dst), NEWROOT "/%s", name);
        if (tree < 0 || mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
                return -1;
        target = root_open_no_symlinks(AT_FDCWD, dst, 0);
        return target < 0 ? -1 : move_onto(tree, target);
}

/* The image's tree (the daemon's: detached, read-only, idmapped onto our uid range; or, for an
 * overlay root, the overlay over it the helper made) becomes the new root, over the root tmpfs,
 * which keeps the writable directories. The image has a directory for each
 * (image_root_finish() made the missing ones at import). */
static int setup_image_root(int tree, bool own_dev, bool own_work) {
        _cleanup_close_ int scratch = -EBADF;

        if (make_dir(NEWROOT "/tmp", 01777) < 0 || make_dir(NEWROOT "/run", 0755) < 0 ||
            make_dir(NEWROOT "/work", 0755) < 0 || make_dir(NEWROOT "/dev", 0755) < 0)
                return -1;
        scratch = open(NEWROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (scratch < 0 || move_mount(tree, "", AT_FDCWD, NEWROOT, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return -1;
        /* The mount points below are reached by path: each must be a directory of the image, not
         * a symlink, which an overlay root's upper layer (the sandbox's to write) could hold. */
        for (const char *const *d = (const char *const[]) { "proc", "dev", "sys", "tmp", "run", "work", NULL }; *d; d++) {
                char path[64];
                int fd;

                snprintf(path, sizeof(path), NEWROOT "/%s", *d);
                fd = root_open_no_symlinks(AT_FDCWD, path, 0);
                if (fd < 0)
                        return -1;
                close(fd);
        }
        if (bind_scratch(scratch, "tmp") < 0 || bind_scratch(scratch, "run") < 0)
                return -1;
        if ((own_work && bind_scratch(scratch, "work") < 0) || (own_dev && bind_scratch(scratch, "dev") < 0))
                return -1;
        return 0;
}

/* A root.path's tree (the daemon's: detached, idmapped with the same ids, writable even when
 * read-only is asked: setup_pivot() makes it so once the mount points are made, as runc does)
 * becomes the new root, over the root tmpfs, whose "dev" directory is bound over the root's
 * /dev. Everything else is the root's own, /tmp and /run included. /proc and /dev must be
 * directories of it (made where missing); /sys too unless read-only, else it is mounted where it
 * has one. None may be a symlink. */
static int setup_own_root(int tree, bool read_only) {
        _cleanup_close_ int scratch = -EBADF;

        if (make_dir(NEWROOT "/dev", 0755) < 0)
                return -1;
        scratch = open(NEWROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (scratch < 0 || move_mount(tree, "", AT_FDCWD, NEWROOT, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return -1;
        for (const char *const *d = (const char *const[]) { "proc", "dev", "sys", NULL }; *d; d++) {
                char path[64];
                int fd;

                snprintf(path, sizeof(path), NEWROOT "/%s", *d);
                if ((strcmp(*d, "sys") != 0 || !read_only) && mkdir(path, 0755) < 0 && errno != EEXIST)
                        return -1;
                fd = root_open_no_symlinks(AT_FDCWD, path, 0);
                if (fd < 0 && errno == ENOENT && strcmp(*d, "sys") == 0)
                        continue;
                if (fd < 0)
                        return -1;
                close(fd);
        }
        return bind_scratch(scratch, "dev");
}

static bool own_root_has_sys(void) {
        int fd = root_open_no_symlinks(AT_FDCWD, NEWROOT "/sys", 0);

        if (fd < 0)
                return false;
        close(fd);
        return true;
}

/* The root the go brought (target "/", first): taken out of the caller's mounts. -1: none. */
static int take_root_tree(InitMounts *mounts) {
        int fd;

        if (mounts->n == 0 || strcmp(mounts->target[0], "/") != 0)
                return -1;
        fd = mounts->fd[0];
        mounts->n--;
        memmove(mounts->target, mounts->target + 1, sizeof(mounts->target[0]) * mounts->n);
        memmove(mounts->fd, mounts->fd + 1, sizeof(mounts->fd[0]) * mounts->n);
        return fd;
}

/* The host's minimal view (setup_root) or an image's tree (setup_image_root) on the root tmpfs,
 * with the mount points of the sandbox's own filesystems. */
static int setup_base(const InitParams *p, int root_tree, int workdir_fd, int dev_fd) {
        if (mount_root_tmpfs(p->tmpfs_size) < 0)
                return -1;
        if (root_tree >= 0 && p->own_root)
                return setup_own_root(root_tree, p->own_root_read_only);
        if (root_tree >= 0)
                return setup_image_root(root_tree, dev_fd < 0, workdir_fd < 0);
        if (setup_root(p) < 0)
                return -1;
        for (const char *const *d = (const char *const[]) { "proc", "dev", "tmp", "run", "work", "sys", NULL }; *d; d++) {
                char path[64];
                snprintf(path, sizeof(path), NEWROOT "/%s", *d);
                if (mkdir(path, 0755) < 0)
                        return -1;
        }
        return 0;
}

static int setup_mounts(const InitParams *p, InitMounts *mounts, int workdir_fd, int dev_fd) {
        /* An overlay root over an image came with the trees (init_trees_open()), not with the go. */
        _cleanup_close_ int root_tree = p->image_root ? p->trees.fd[0] : take_root_tree(mounts);

        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return STEP_MOUNT_PRIVATE;
        if (setup_base(p, root_tree, workdir_fd, dev_fd) < 0)
                return STEP_ROOT;
        if ((!p->own_root || own_root_has_sys()) && setup_sys(p->sysfs_fd) < 0)
                return STEP_ROOT;
        if (mount("proc", NEWROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                return STEP_PROC;
        if ((p->own_root ? setup_dev_own() : setup_dev(dev_fd)) < 0)
                return STEP_DEV;
        if (setup_kernel_masks() < 0)
                return STEP_MASK;
        if (root_tree < 0 && (chmod(NEWROOT "/tmp", 01777) < 0 ||
                              bind_self(NEWROOT "/tmp", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0) < 0 ||
                              bind_self(NEWROOT "/run", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0) < 0))
                return STEP_TMP;
        /* A root.path has no /work of the daemon's (a mount may make one). */
        if (!p->own_root && setup_work(workdir_fd) < 0)
                return STEP_WORK;
        if (setup_caller_mounts(mounts) < 0)
                return STEP_MOUNTS;
        /* After the mounts, so that a path beneath one is masked too. */
        if (setup_config_paths(p->masked_paths, p->readonly_paths) < 0)
                return STEP_MASK;
        /* An image's accounts are its own (its packages' users among them). */
        if (setup_masks(p->mask_paths) < 0 || (root_tree < 0 && setup_accounts(p->root_upper.dir) < 0))
                return STEP_MASK;
        if (setup_pivot(p->image_root || (p->own_root && !p->own_root_read_only)) < 0)
                return STEP_PIVOT;
        return STEP_NONE;
}

static int read_map_count(const char *file, unsigned *ret) {
        unsigned inside, outside, count;
        char buf[128];
        ssize_t n;
        _cleanup_close_ int fd = open(file, O_RDONLY | O_CLOEXEC);

        if (fd < 0 || (n = read(fd, buf, sizeof(buf) - 1)) < 0)
                return -1;
        buf[n] = '\0';
        if (sscanf(buf, "%u %u %u", &inside, &outside, &count) != 3 || inside != 0) {
                errno = EBADMSG;
                return -1;
        }
        *ret = count;
        return 0;
}

static int write_file(const char *path, const char *text) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        return write(fd, text, strlen(text)) == (ssize_t) strlen(text) ? 0 : -1;
}

/* The child that stays in the outer user namespace, where CAP_SETUID over the inner one is held,
 * and maps the inner one's ids 1:1 onto the outer ones once the init has made it. It shares our
 * memory (CLONE_VM, on a stack of its own): no page table is copied and no copy-on-write fault
 * follows, which a fork here cost. It touches nothing of ours but its arguments; errno it sets
 * only on its failure paths, after which the init fails with EPERM whatever errno says. */
typedef struct MapWriter {
        int go_fd;
        pid_t parent;
        unsigned count;
} MapWriter;

static int map_writer(void *userdata) {
        const MapWriter *w = userdata;
        char path[64], map[64];
        char c;

        if (read(w->go_fd, &c, 1) != 1)
                return 1;
        snprintf(map, sizeof(map), "0 0 %u\n", w->count);
        snprintf(path, sizeof(path), "/proc/%d/uid_map", (int) w->parent);
        if (write_file(path, map) < 0)
                return 1;
        snprintf(path, sizeof(path), "/proc/%d/gid_map", (int) w->parent);
        return write_file(path, map) < 0 ? 1 : 0;
}

/* Mounts made in a mount namespace are not locked for whoever owns it: root of the sandbox
 * ("user":"root") could unmount the /proc and /sys masks above, or remount /proc/sys writable.
 * A copy of the mount table into a new mount namespace owned by a new, child, user namespace
 * is: the kernel marks every mount MNT_LOCKED and locks its ro, nosuid, nodev and noexec flags
 * (lock_mnt_tree), so neither umount nor remount nor mount_setattr undoes them there. So the
 * init moves last into such a pair, and runs join it there. The pid, network, ipc, uts and
 * cgroup namespaces stay owned by the outer user namespace, which no process keeps: root inside
 * cannot change the hostname or the network, or mount a procfs or sysfs, even in a nested
 * mount namespace. setgroups is inherited (allowed: sandbox_write_maps() says why). */
static int lock_mounts(void) {
        char stack[8192] __attribute__((aligned(16))); /* the setup above has touched these pages already */
        int go[2], status = 0;
        MapWriter w = { .parent = getpid() };
        pid_t pid;

        if (read_map_count("/proc/self/uid_map", &w.count) < 0 || pipe2(go, O_CLOEXEC) < 0)
                return -1;
        w.go_fd = go[0];
        /* The writer (our uid) must be able to open our /proc files: nothing else of the
         * sandbox exists yet to take advantage of it. */
        (void) prctl(PR_SET_DUMPABLE, 1);
        pid = clone(map_writer, stack + sizeof(stack), CLONE_VM | SIGCHLD, &w);
        close(go[0]);
        if (pid < 0 || unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) {
                int saved = errno;
                close(go[1]);
                if (pid > 0)
                        (void) waitpid(pid, NULL, 0);
                (void) prctl(PR_SET_DUMPABLE, 0);
                errno = saved;
                return -1;
        }
        (void) !write(go[1], "g", 1);
        close(go[1]);
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -1;
        (void) prctl(PR_SET_DUMPABLE, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                errno = EPERM;
                return -1;
        }
        return 0;
}

_Noreturn static void reap_forever(void) {
        sigset_t set;
        sigfillset(&set);
        sigprocmask(SIG_SETMASK, &set, NULL);
        sigemptyset(&set);
        sigaddset(&set, SIGCHLD);
        for (;;) {
                siginfo_t si;
                while (waitpid(-1, NULL, WNOHANG) > 0)
                        ;
                (void) sigwaitinfo(&set, &si);
        }
}

_Noreturn void sandbox_init_main(const InitParams *p) {
        static char go[INIT_GO_MAX];
        SpawnReport r = { .kind = REPORT_READY };
        InitMounts mounts;
        int step, workdir_fd, dev_fd;

        spawn_set_name("sandboxd-init");

        /* Not dumpable: nothing in the sandbox may ptrace us or open our /proc/1/exe. No parent-
         * death signal either: a daemon restart must not take the sandbox's processes with it. */
        (void) prctl(PR_SET_DUMPABLE, 0);
        /* The daemon writes our uid/gid maps, then says go, with the trees of the caller's
         * directories to attach. */
        if (init_go_recv(p->sync_fd, go, &mounts) < 0)
                init_fail(p->sync_fd, STEP_SYNC);
        /* Opened while we are still host uid 0 (the owner of the state directories) and inside
         * our own mount namespace: a mount can only be cloned from the namespace it lives in. */
        workdir_fd = p->workdir ? open(p->workdir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -EBADF;
        if (p->workdir && workdir_fd < 0)
                init_fail(p->sync_fd, STEP_WORK);
        /* Likewise the /dev template, which the new root's tmpfs may hide (a state directory
         * below /tmp). */
        dev_fd = p->dev_dir ? open(p->dev_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -EBADF;
        if (p->dev_dir && dev_fd < 0)
                init_fail(p->sync_fd, STEP_DEV);
        if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
                init_fail(p->sync_fd, STEP_SETUID);
        /* Root of our user namespace, in the ipc namespace it owns (and a network namespace of our
         * own where none was joined): through the host's /proc still here, before any mask. A
         * joined network namespace had its sysctls from the helper, which owns it. */
        if (sandbox_sysctls_write(p->sysctls, p->netns_fd < 0, true) < 0)
                init_fail(p->sync_fd, STEP_SYSCTL);
        /* Our own cgroup namespace, rooted at the sandbox's cgroup (clone3 would root it at the
         * daemon's). */
        if (!p->cgroupns_ready && unshare(CLONE_NEWCGROUP) < 0)
                init_fail(p->sync_fd, STEP_CGROUPNS);
        step = setup_mounts(p, &mounts, workdir_fd, dev_fd);
        if (step != STEP_NONE)
                init_fail(p->sync_fd, step);
        if (sethostname(p->hostname, strlen(p->hostname)) < 0)
                init_fail(p->sync_fd, STEP_HOSTNAME);
        /* A namespace from the pool came with its loopback up (and is not ours to change). */
        if (p->sysfs_fd < 0 && setup_loopback() < 0)
                init_fail(p->sync_fd, STEP_LOOPBACK);
        if (p->lock_mounts && lock_mounts() < 0)
                init_fail(p->sync_fd, STEP_MASK);
        (void) prctl(PR_SET_NAME, "sandbox-init");
        report_send(p->sync_fd, &r, -1);
        /* Keep nothing of the daemon's open. */
        (void) syscall(SYS_close_range, 0U, ~0U, 0U);
        reap_forever();
}
