/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <linux/capability.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "identity.h"

const char *sandbox_user_to_string(SandboxUser u) {
        return u == SANDBOX_USER_ROOT ? "root" : "sandbox";
}

SandboxUser sandbox_user_from_string(const char *s) {
        if (strcmp(s, "sandbox") == 0)
                return SANDBOX_USER_SANDBOX;
        if (strcmp(s, "root") == 0)
                return SANDBOX_USER_ROOT;
        return SANDBOX_USER_UNSET;
}

/* setgroups() is denied in the sandbox's user namespace (CVE-2014-8989), so a group the daemon
 * still held could never be dropped here: the daemon drops them at start (and the helper before
 * joining); this is the fail-closed check that it did (THREATS ESC-14a). */
static int check_no_groups(void) {
        gid_t g[1];
        int n = getgroups(1, g);
        if (n < 0)
                return -1;
        if (n > 0) {
                errno = EPERM;
                return -1;
        }
        return 0;
}

/* The bounding set limits what any later execve could grant; with no_new_privs nothing should,
 * but an empty set makes it so whatever the binary (CAP_SETPCAP of the namespace's root is what
 * allows this, hence before the uid switch). */
static int drop_bounding_set(void) {
        for (int cap = 0; cap <= 63; cap++)
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
                        if (errno == EINVAL)
                                return 0; /* past this kernel's last capability */
                        return -1;
                }
        return 0;
}

/* The uid switch already cleared permitted and effective; inheritable survives it. */
static int clear_capabilities(void) {
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[2] = {};
        return (int) syscall(SYS_capset, &h, d);
}

int identity_apply(SandboxUser u) {
        return u == SANDBOX_USER_ROOT ? identity_apply_ids(u, 0, 0)
                                      : identity_apply_ids(u, SANDBOX_USER_UID, SANDBOX_USER_GID);
}

int identity_apply_ids(SandboxUser u, uid_t uid, gid_t gid) {
        if (check_no_groups() < 0)
                return -1;
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return -1;
        if (u == SANDBOX_USER_ROOT) {
                /* uid 0 with another group: root's capabilities stay (setresgid keeps them). */
                if (uid != 0) {
                        errno = EINVAL;
                        return -1;
                }
                return gid != 0 && setresgid(gid, gid, gid) < 0 ? -1 : 0;
        }
        if (uid == 0) {
                errno = EINVAL;
                return -1;
        }
        if (drop_bounding_set() < 0)
                return -1;
        if (setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
                return -1;
        if (clear_capabilities() < 0)
                return -1;
        /* Fail closed: nothing may bring uid 0 back. */
        if (setresuid(0, 0, 0) == 0) {
                errno = EPERM;
                return -1;
        }
        return 0;
}
