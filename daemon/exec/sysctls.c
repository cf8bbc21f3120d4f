/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A sandbox's sysctls (create's "sysctls"), written in its own namespaces: by its init, or for a
 * network namespace the helper made, by the helper (spawn.h, sandbox_sysctls_write()). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "spawn.h"

static int sysctl_write(const char *key, const char *value) {
        char path[sizeof("/proc/sys/") + 128];
        size_t n = strlen(value);
        int fd;

        if (snprintf(path, sizeof(path), "/proc/sys/%s", key) >= (int) sizeof(path)) {
                errno = ENAMETOOLONG;
                return -1;
        }
        for (char *c = path + sizeof("/proc/sys/") - 1; *c; c++)
                if (*c == '.')
                        *c = '/';
        fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -1;
        /* One write: the kernel parses a sysctl from a single write at offset 0. */
        ssize_t k = write(fd, value, n);
        int e = errno;
        close(fd);
        if (k != (ssize_t) n) {
                errno = k < 0 ? e : EIO;
                return -1;
        }
        return 0;
}

int sandbox_sysctls_write(const char *const *kv, bool net, bool other) {
        char key[129];

        for (; kv && *kv; kv++) {
                const char *eq = strchr(*kv, '=');
                size_t n = eq ? (size_t) (eq - *kv) : 0;
                if (n == 0 || n >= sizeof(key)) {
                        errno = EINVAL;
                        return -1;
                }
                memcpy(key, *kv, n);
                key[n] = 0;
                bool is_net = strncmp(key, "net.", 4) == 0;
                if ((is_net ? net : other) && sysctl_write(key, eq + 1) < 0)
                        return -1;
        }
        return 0;
}
