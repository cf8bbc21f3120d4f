/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The kernel's mount API (fsopen, fsconfig, fsmount, open_tree, move_mount, mount_setattr) and
 * renameat2 for a C library without wrappers for them: musl, which the run helper is built with
 * where it is available (its static startup is about 0.3 ms shorter than glibc's, whose CPUID
 * probing is slow under a hypervisor: docs/performance.md). glibc >= 2.36 declares them itself. */
#pragma once

#ifndef __GLIBC__
#include <linux/mount.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

static inline int fsopen(const char *fs_name, unsigned int flags) {
        return (int) syscall(__NR_fsopen, fs_name, flags);
}
static inline int fsconfig(int fd, unsigned int cmd, const char *key, const void *value, int aux) {
        return (int) syscall(__NR_fsconfig, fd, cmd, key, value, aux);
}
static inline int fsmount(int fd, unsigned int flags, unsigned int attr_flags) {
        return (int) syscall(__NR_fsmount, fd, flags, attr_flags);
}
static inline int open_tree(int dfd, const char *path, unsigned int flags) {
        return (int) syscall(__NR_open_tree, dfd, path, flags);
}
static inline int move_mount(int from_dfd, const char *from, int to_dfd, const char *to, unsigned int flags) {
        return (int) syscall(__NR_move_mount, from_dfd, from, to_dfd, to, flags);
}
static inline int mount_setattr(int dfd, const char *path, unsigned int flags, struct mount_attr *attr, size_t size) {
        return (int) syscall(__NR_mount_setattr, dfd, path, flags, attr, size);
}
static inline int renameat2(int olddfd, const char *old, int newdfd, const char *new, unsigned int flags) {
        return (int) syscall(__NR_renameat2, olddfd, old, newdfd, new, flags);
}
#endif
