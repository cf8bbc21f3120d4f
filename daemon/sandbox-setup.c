/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Runs inside a new sandbox, as its pid 1, before anything of the sandbox's own: builds the
 * sandbox's view of the world, reports, then reaps orphans until the cgroup is killed.
 * Steps in order (each failure is reported as {step, errno}):
 *   wait for the id maps -> become root of the new user namespace -> own cgroup namespace ->
 *   private propagation -> a tmpfs root holding read-only binds of the host root's directories ->
 *   /proc, /dev, /tmp, /run, /work -> masks -> pivot_root -> hostname -> loopback up. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "spawn.h"

/* The new root is assembled on a private tmpfs mounted over /tmp in our own mount namespace;
 * the host's /tmp is untouched. */
#define NEWROOT "/tmp"

static const char *const root_skip[] = { "proc", "dev", "tmp", "run", "work", "sys", "lost+found", NULL };

_Noreturn static void init_fail(int fd, SpawnStep step) {
        SpawnReport r = { .kind = REPORT_FAILED, .step = step, .err = errno ? errno : EIO };
        report_send(fd, &r, -1);
        _exit(1);
}

static bool skipped(const char *name) {
        for (const char *const *s = root_skip; *s; s++)
                if (strcmp(*s, name) == 0)
                        return true;
        return false;
}

static int make_readonly(const char *path, bool recursive) {
        struct mount_attr attr = {
                .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        };
        return mount_setattr(AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &attr, sizeof(attr));
}

static int bind_readonly(const char *src, const char *dst) {
        if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
                return -1;
        return make_readonly(dst, true);
}

/* Every directory of the host root is bound read-only; symlinks (/bin -> usr/bin) are copied. */
static int setup_root(const char *root_dir) {
        _cleanup_(freep) char *src = NULL;
        DIR *d = opendir(root_dir);
        struct dirent *de;
        char dst[4096], target[4096];

        if (!d)
                return -1;
        while ((de = readdir(d))) {
                struct stat st;
                if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
                        continue;
                if (skipped(de->d_name) || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                snprintf(dst, sizeof(dst), NEWROOT "/%s", de->d_name);
                free(src);
                if (asprintf(&src, "%s/%s", strcmp(root_dir, "/") == 0 ? "" : root_dir, de->d_name) < 0)
                        goto fail;
                if (S_ISLNK(st.st_mode)) {
                        ssize_t n = readlinkat(dirfd(d), de->d_name, target, sizeof(target) - 1);
                        if (n < 0)
                                continue;
                        target[n] = '\0';
                        if (symlink(target, dst) < 0)
                                goto fail;
                } else if (S_ISDIR(st.st_mode)) {
                        if (mkdir(dst, 0755) < 0 || bind_readonly(src, dst) < 0)
                                goto fail;
                }
        }
        closedir(d);
        return 0;
fail:
        closedir(d);
        return -1;
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

/* A minimal /dev: the harmless nodes, a private devpts for terminals, /dev/shm. */
static int setup_dev(void) {
        static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty", NULL };
        static const char *const links[][2] = {
                { "/proc/self/fd", "fd" },       { "/proc/self/fd/0", "stdin" }, { "/proc/self/fd/1", "stdout" },
                { "/proc/self/fd/2", "stderr" }, { "pts/ptmx", "ptmx" },
        };
        char path[64];

        if (mount("tmpfs", NEWROOT "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") < 0)
                return -1;
        for (const char *const *n = nodes; *n; n++)
                if (bind_dev_node(*n) < 0)
                        return -1;
        for (size_t i = 0; i < ELEMENTSOF(links); i++) {
                snprintf(path, sizeof(path), NEWROOT "/dev/%s", links[i][1]);
                if (symlink(links[i][0], path) < 0)
                        return -1;
        }
        if (mkdir(NEWROOT "/dev/pts", 0755) < 0 || mkdir(NEWROOT "/dev/shm", 01777) < 0)
                return -1;
        if (mount("devpts", NEWROOT "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                  "newinstance,ptmxmode=0666,mode=0620") < 0)
                return -1;
        if (mount("tmpfs", NEWROOT "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=01777") < 0)
                return -1;
        return 0;
}

/* The workspace arrives as an fd: its host path may be closed to the sandbox's uids. */
static int setup_work(int workdir_fd) {
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
        _cleanup_close_ int tree = open_tree(workdir_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (tree < 0)
                return -1;
        if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
                return -1;
        return move_mount(tree, "", AT_FDCWD, NEWROOT "/work", MOVE_MOUNT_F_EMPTY_PATH);
}

/* Host paths that must not be reachable from inside: the state directory (other sandboxes'
 * workspaces) and the control sockets. A directory gets an empty read-only tmpfs, a file or
 * socket gets /dev/null bound over it. */
static int setup_masks(const char *const *paths) {
        char dst[4096];
        struct stat st;

        for (; paths && *paths; paths++) {
                snprintf(dst, sizeof(dst), NEWROOT "%s", *paths);
                if (lstat(dst, &st) < 0)
                        continue; /* not visible inside anyway */
                if (S_ISDIR(st.st_mode)) {
                        if (mount("tmpfs", dst, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0755") < 0)
                                return -1;
                } else if (mount("/dev/null", dst, NULL, MS_BIND, NULL) < 0)
                        return -1;
        }
        return 0;
}

static int setup_pivot(void) {
        if (chdir(NEWROOT) < 0)
                return -1;
        /* pivot_root(".", ".") stacks the old root under the new one; detach it right away. */
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                return -1;
        if (umount2(".", MNT_DETACH) < 0)
                return -1;
        if (chdir("/") < 0)
                return -1;
        return make_readonly("/", false);
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

static int setup_mounts(const InitParams *p, int workdir_fd) {
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return STEP_MOUNT_PRIVATE;
        if (mount("tmpfs", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") < 0 ||
            setup_root(p->root_dir) < 0)
                return STEP_ROOT;
        for (const char *const *d = (const char *const[]) { "proc", "dev", "tmp", "run", "work", "sys", NULL }; *d; d++) {
                char path[64];
                snprintf(path, sizeof(path), NEWROOT "/%s", *d);
                if (mkdir(path, 0755) < 0)
                        return STEP_ROOT;
        }
        if (bind_readonly("/sys", NEWROOT "/sys") < 0)
                return STEP_ROOT;
        if (mount("proc", NEWROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                return STEP_PROC;
        if (setup_dev() < 0)
                return STEP_DEV;
        if (mount("tmpfs", NEWROOT "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=01777") < 0 ||
            mount("tmpfs", NEWROOT "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0)
                return STEP_TMP;
        if (setup_work(workdir_fd) < 0)
                return STEP_WORK;
        if (setup_masks(p->mask_paths) < 0)
                return STEP_MASK;
        if (setup_pivot() < 0)
                return STEP_PIVOT;
        return STEP_NONE;
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
        SpawnReport r = { .kind = REPORT_READY };
        int step, workdir_fd;
        char c;

        /* Not dumpable: nothing in the sandbox may ptrace us or open our /proc/1/exe. No parent-
         * death signal either: a daemon restart must not take the sandbox's processes with it. */
        (void) prctl(PR_SET_DUMPABLE, 0);
        /* The daemon writes our uid/gid maps, then says go. */
        if (read(p->sync_fd, &c, 1) != 1)
                init_fail(p->sync_fd, STEP_SYNC);
        /* Opened while we are still host uid 0 (the owner of the state directories) and inside
         * our own mount namespace: a mount can only be cloned from the namespace it lives in. */
        workdir_fd = open(p->workdir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (workdir_fd < 0)
                init_fail(p->sync_fd, STEP_WORK);
        if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
                init_fail(p->sync_fd, STEP_SETUID);
        /* Our own cgroup namespace, rooted at the sandbox's cgroup (clone3 would root it at the
         * daemon's). */
        if (unshare(CLONE_NEWCGROUP) < 0)
                init_fail(p->sync_fd, STEP_CGROUPNS);
        step = setup_mounts(p, workdir_fd);
        if (step != STEP_NONE)
                init_fail(p->sync_fd, step);
        if (sethostname(p->hostname, strlen(p->hostname)) < 0)
                init_fail(p->sync_fd, STEP_HOSTNAME);
        if (setup_loopback() < 0)
                init_fail(p->sync_fd, STEP_LOOPBACK);
        (void) prctl(PR_SET_NAME, "sandbox-init");
        report_send(p->sync_fd, &r, -1);
        /* Keep nothing of the daemon's open. */
        (void) syscall(SYS_close_range, 0U, ~0U, 0U);
        reap_forever();
}
