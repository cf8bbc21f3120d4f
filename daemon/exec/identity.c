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

/* Everything but keep (CAP_SETPCAP of the namespace's root allows it); past this kernel's last
 * capability, EINVAL. */
static int cut_bounding_set(uint64_t keep) {
        for (int cap = 0; cap <= 63; cap++) {
                if (keep & (UINT64_C(1) << cap))
                        continue;
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
                        return errno == EINVAL ? 0 : -1;
        }
        return 0;
}

/* The bounding set limits what any later execve could grant; with no_new_privs nothing should,
 * but an empty set makes it so whatever the binary (CAP_SETPCAP of the namespace's root is what
 * allows this, hence before the uid switch). */
static int drop_bounding_set(void) {
        return cut_bounding_set(0);
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
        return identity_apply_groups(u, uid, gid, NULL, 0);
}

/* Root of the sandbox's user namespace sets them (CAP_SETGID there); the kernel takes only gids
 * its map has. */
static int set_groups(const uint32_t *groups, unsigned n) {
        gid_t g[32];

        if (n == 0)
                return 0;
        if (n > sizeof(g) / sizeof(g[0])) {
                errno = E2BIG;
                return -1;
        }
        for (unsigned i = 0; i < n; i++)
                g[i] = (gid_t) groups[i];
        return (int) syscall(SYS_setgroups, (size_t) n, g);
}

int identity_apply_groups(SandboxUser u, uid_t uid, gid_t gid, const uint32_t *groups, unsigned n) {
        /* Fail closed first: whatever the run asks, nothing of the daemon's may be held. */
        if (check_no_groups() < 0 || set_groups(groups, n) < 0)
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

static const char *const cap_names[] = {
        "CAP_CHOWN",           "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER",         "CAP_FSETID",
        "CAP_KILL",            "CAP_SETGID",       "CAP_SETUID",          "CAP_SETPCAP",        "CAP_LINUX_IMMUTABLE",
        "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN",      "CAP_NET_RAW",        "CAP_IPC_LOCK",
        "CAP_IPC_OWNER",       "CAP_SYS_MODULE",   "CAP_SYS_RAWIO",       "CAP_SYS_CHROOT",     "CAP_SYS_PTRACE",
        "CAP_SYS_PACCT",       "CAP_SYS_ADMIN",    "CAP_SYS_BOOT",        "CAP_SYS_NICE",       "CAP_SYS_RESOURCE",
        "CAP_SYS_TIME",        "CAP_SYS_TTY_CONFIG", "CAP_MKNOD",         "CAP_LEASE",          "CAP_AUDIT_WRITE",
        "CAP_AUDIT_CONTROL",   "CAP_SETFCAP",      "CAP_MAC_OVERRIDE",    "CAP_MAC_ADMIN",      "CAP_SYSLOG",
        "CAP_WAKE_ALARM",      "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",     "CAP_PERFMON",        "CAP_BPF",
        "CAP_CHECKPOINT_RESTORE",
};

int identity_cap_from_name(const char *name) {
        for (size_t i = 0; i < sizeof(cap_names) / sizeof(cap_names[0]); i++)
                if (strcmp(name, cap_names[i]) == 0)
                        return (int) i;
        return -1;
}

const char *identity_cap_to_name(int cap) {
        return cap >= 0 && (size_t) cap < sizeof(cap_names) / sizeof(cap_names[0]) ? cap_names[cap] : NULL;
}

static int set_capabilities(const IdentityCaps *c) {
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[2] = {};

        for (int i = 0; i < 2; i++) {
                d[i].effective = (uint32_t) (c->set[CAPS_EFFECTIVE] >> (32 * i));
                d[i].permitted = (uint32_t) (c->set[CAPS_PERMITTED] >> (32 * i));
                d[i].inheritable = (uint32_t) (c->set[CAPS_INHERITABLE] >> (32 * i));
        }
        return (int) syscall(SYS_capset, &h, d);
}

static int raise_ambient(uint64_t ambient) {
        for (int cap = 0; cap <= 63; cap++)
                if ((ambient & (UINT64_C(1) << cap)) && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) < 0)
                        return -1;
        return 0;
}

int identity_apply_caps(uid_t uid, gid_t gid, const uint32_t *groups, unsigned n, const IdentityCaps *caps) {
        if (check_no_groups() < 0 || set_groups(groups, n) < 0)
                return -1;
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return -1;
        if (cut_bounding_set(caps->set[CAPS_BOUNDING]) < 0)
                return -1;
        /* A uid other than 0 keeps its permitted set across the switch only so (runc's way). */
        if (uid != 0 && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
                return -1;
        if (setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
                return -1;
        if (uid != 0 && prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
                return -1;
        if (set_capabilities(caps) < 0 || raise_ambient(caps->set[CAPS_AMBIENT]) < 0)
                return -1;
        /* Fail closed: a uid other than 0 that was not given CAP_SETUID cannot come back. */
        if (uid != 0 && !(caps->set[CAPS_PERMITTED] & (UINT64_C(1) << CAP_SETUID)) && setresuid(0, 0, 0) == 0) {
                errno = EPERM;
                return -1;
        }
        return 0;
}
