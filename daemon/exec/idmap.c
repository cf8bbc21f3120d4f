/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The user namespace an idmapped mount takes (MOUNT_ATTR_IDMAP): for a caller's directory
 * (mount-source.c) and for the lower layers of an overlay root (root-overlay.c). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "idmap.h"

static int write_map(pid_t pid, const char *file, unsigned from, unsigned to, unsigned count) {
        char path[64], map[64];
        int fd, n, w;

        snprintf(path, sizeof(path), "/proc/%d/%s", (int) pid, file);
        n = snprintf(map, sizeof(map), "%u %u %u\n", from, to, count);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        w = (int) write(fd, map, (size_t) n);
        close(fd);
        return w == n ? 0 : -1;
}

/* A user namespace for an idmap: held by a child that waits, its maps written from here (crun
 * and systemd do the same), its /proc/PID/ns/user kept, the child ended. */
int idmap_userns_open(uid_t uid_from, uid_t uid_to, gid_t gid_from, gid_t gid_to, unsigned count) {
        int go[2], ready[2], fd = -1, saved = 0;
        char c, path[64];
        pid_t pid;

        if (pipe2(go, O_CLOEXEC) < 0)
                return -1;
        if (pipe2(ready, O_CLOEXEC) < 0) {
                close(go[0]);
                close(go[1]);
                return -1;
        }
        pid = fork();
        if (pid == 0) {
                close(go[1]);
                close(ready[0]);
                if (unshare(CLONE_NEWUSER) < 0)
                        _exit(1);
                (void) !write(ready[1], "r", 1);
                (void) !read(go[0], &c, 1);
                _exit(0);
        }
        close(go[0]);
        close(ready[1]);
        if (pid > 0 && read(ready[0], &c, 1) == 1 && write_map(pid, "uid_map", uid_from, uid_to, count) == 0 &&
            write_map(pid, "gid_map", gid_from, gid_to, count) == 0) {
                snprintf(path, sizeof(path), "/proc/%d/ns/user", (int) pid);
                fd = open(path, O_RDONLY | O_CLOEXEC);
        }
        if (fd < 0)
                saved = pid < 0 ? errno : (errno ? errno : EPERM);
        close(go[1]);
        close(ready[0]);
        if (pid > 0)
                while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        if (fd < 0)
                errno = saved;
        return fd;
}

