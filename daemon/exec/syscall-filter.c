/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdlib.h>
#include <linux/btrfs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "macro.h"
#include "syscall-filter.h"

/* The kernel reads ioctl's command as an unsigned int, so only the low 32 bits may be compared:
 * TIOCSTI | (1 << 32) must be refused like TIOCSTI (snapd CVE-2019-10063). */
#define IOCTL_CMD_MASK UINT64_C(0xffffffff)

#define DENY(name, reason) \
        { .syscall = name, .match = "", .error = EPERM, .arg = -1, .why = reason }
#define DENY_IF(name, what, argi, m, d, reason) \
        { .syscall = name, .match = what, .error = EPERM, .arg = argi, .mask = m, .datum = d, .why = reason }

/* Default allow: this is a list of kernel attack surface and host-wide knobs, not a whitelist.
 * mount, umount2, pivot_root and unshare(CLONE_NEWNS) stay allowed on purpose: root of the
 * sandbox owns its mount namespace (a user namespace of its own), so they only rearrange its own
 * view; the host's mounts are out of reach whatever it does there. Every other namespace a
 * command could make would be owned by the sandbox's user namespace and hand root inside the
 * capabilities over it (CAP_NET_ADMIN and CAP_NET_RAW in a network namespace of its own): one
 * rule per flag, since a flag set in the argument is what is refused. */
#define DENY_NS(name, flag, reason) DENY_IF(name, #flag, 0, flag, flag, reason)
const SeccompRule seccomp_rules[] = {
        DENY("add_key", "kernel keyrings are not namespaced: they hold keys of other users and services, and keyctl has a long CVE history (CVE-2016-0728)"),
        DENY("request_key", "kernel keyrings are not namespaced (as add_key); also calls out to /sbin/request-key on the host"),
        DENY("keyctl", "kernel keyrings are not namespaced (as add_key)"),
        DENY("bpf", "eBPF programs and maps: verifier bugs are a standing route to kernel code execution (CVE-2021-3490, CVE-2023-2163)"),
        DENY("perf_event_open", "host-wide profiling events; a recurring source of privilege escalations (CVE-2013-2094) and side channels"),
        DENY("userfaultfd", "lets a process stall the kernel in the middle of a copy, which turns kernel races into reliable exploits"),
        DENY("kexec_load", "replaces the running kernel"),
        DENY("kexec_file_load", "replaces the running kernel"),
        DENY("init_module", "loads code into the kernel"),
        DENY("finit_module", "loads code into the kernel"),
        DENY("delete_module", "unloads kernel code the host relies on"),
        DENY("reboot", "in a pid namespace it kills the sandbox's init, destroying the sandbox under the daemon; on the host it reboots"),
        DENY("swapon", "host-wide swap configuration"),
        DENY("swapoff", "host-wide swap configuration"),
        DENY("acct", "process accounting is host-wide, and writes to a file of the caller's choosing"),
        DENY("quotactl", "disk quotas of host filesystems"),
        DENY("lookup_dcookie", "turns profiling cookies into host paths"),
        DENY("open_by_handle_at", "opens any inode of a filesystem by its handle, ignoring the sandbox's root: the \"shocker\" breakout"),
        DENY("iopl", "raw I/O port access"),
        DENY("ioperm", "raw I/O port access"),
        DENY("nfsservctl", "gone from the kernel since 3.1: nothing legitimate calls it"),
        DENY("io_uring_setup", "io_uring runs operations from kernel workers that this filter never sees, e.g. AF_VSOCK sockets (ESC-18, isolate 2.6)"),
        DENY("io_uring_enter", "io_uring bypasses the filter (as io_uring_setup)"),
        DENY("io_uring_register", "io_uring bypasses the filter (as io_uring_setup)"),
        DENY_NS("unshare", CLONE_NEWUSER,
                "nested user namespaces hand out capabilities over kernel code that is otherwise root-only (CVE-2022-0185, CVE-2022-0492)"),
        DENY_NS("unshare", CLONE_NEWNET,
                "a network namespace of its own gives root inside CAP_NET_ADMIN and CAP_NET_RAW: netfilter, netlink, raw and packet sockets, the usual road to a kernel exploit"),
        DENY_NS("unshare", CLONE_NEWUTS, "root inside would own the hostname; nothing documented needs it"),
        DENY_NS("unshare", CLONE_NEWIPC, "root inside would own an IPC namespace (mqueue mounts, IPC_OWNER); nothing documented needs it"),
        DENY_NS("unshare", CLONE_NEWCGROUP, "root inside would own a cgroup namespace and could mount a cgroup2 of its own"),
        DENY_NS("unshare", CLONE_NEWPID, "root inside would own a pid namespace; nothing documented needs it"),
        DENY_NS("unshare", CLONE_NEWTIME, "root inside would set the clocks its children see; nothing documented needs it"),
        DENY_NS("clone", CLONE_NEWUSER, "nested user namespaces (as unshare)"),
        DENY_NS("clone", CLONE_NEWNET, "a network namespace of its own (as unshare)"),
        DENY_NS("clone", CLONE_NEWUTS, "a UTS namespace of its own (as unshare)"),
        DENY_NS("clone", CLONE_NEWIPC, "an IPC namespace of its own (as unshare)"),
        DENY_NS("clone", CLONE_NEWCGROUP, "a cgroup namespace of its own (as unshare)"),
        DENY_NS("clone", CLONE_NEWPID, "a pid namespace of its own (as unshare)"),
        DENY("setns", "from inside, only the sandbox's own namespaces and ones its processes made can be reached; an nsfd with nstype 0 names no type a rule could check, and nothing documented needs it"),
        { .syscall = "clone3", .match = "", .error = ENOSYS, .arg = -1,
          .why = "its flags are in memory, out of seccomp's reach: ENOSYS makes glibc fall back to clone, whose flags are checked (as Docker and crun do)" },
        DENY_IF("ioctl", "TIOCSTI", 1, IOCTL_CMD_MASK, TIOCSTI,
                "pushes input into a terminal that a more privileged process reads (bubblewrap CVE-2017-5226)"),
        DENY_IF("ioctl", "TIOCLINUX", 1, IOCTL_CMD_MASK, TIOCLINUX,
                "virtual console copy and paste, the same injection (CVE-2023-28100, CVE-2023-1523)"),
        /* On btrfs storage a workspace is a subvolume in the sandbox's qgroup; a subvolume or
         * snapshot the sandbox made itself would be in none, its writes past limits.disk. */
        DENY_IF("ioctl", "BTRFS_IOC_SUBVOL_CREATE", 1, IOCTL_CMD_MASK, BTRFS_IOC_SUBVOL_CREATE,
                "a btrfs subvolume made inside would be outside the sandbox's qgroup: writes there past limits.disk"),
        DENY_IF("ioctl", "BTRFS_IOC_SUBVOL_CREATE_V2", 1, IOCTL_CMD_MASK, BTRFS_IOC_SUBVOL_CREATE_V2,
                "as BTRFS_IOC_SUBVOL_CREATE (its qgroup_inherit is chosen by the caller)"),
        DENY_IF("ioctl", "BTRFS_IOC_SNAP_CREATE", 1, IOCTL_CMD_MASK, BTRFS_IOC_SNAP_CREATE,
                "a snapshot of /work made inside would be a subvolume outside the sandbox's qgroup"),
        DENY_IF("ioctl", "BTRFS_IOC_SNAP_CREATE_V2", 1, IOCTL_CMD_MASK, BTRFS_IOC_SNAP_CREATE_V2,
                "as BTRFS_IOC_SNAP_CREATE"),
};
const size_t seccomp_rules_n = ELEMENTSOF(seccomp_rules);

static void seccomp_releasep(scmp_filter_ctx *ctx) {
        if (*ctx)
                seccomp_release(*ctx);
}

static int seccomp_add(scmp_filter_ctx ctx, const SeccompRule *r) {
        int nr = seccomp_syscall_resolve_name(r->syscall);

        /* A libseccomp older than the syscall does not know it: nothing to refuse then. */
        if (nr == __NR_SCMP_ERROR)
                return 0;
        if (r->arg < 0)
                return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(r->error), nr, 0);
        return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(r->error), nr, 1,
                                SCMP_CMP((unsigned) r->arg, SCMP_CMP_MASKED_EQ, r->mask, r->datum));
}

/* Only the native ABI is in the filter. A 32-bit (int 0x80) or x32 syscall would not be checked
 * against any rule, and a workload built for this machine never makes one: the only reason to is
 * to go around the filter (ESC-18), so the process is killed (SIGSYS) rather than told EPERM. */
static int seccomp_build(scmp_filter_ctx ctx) {
        int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r < 0)
                return r;
        for (size_t i = 0; i < seccomp_rules_n; i++) {
                r = seccomp_add(ctx, &seccomp_rules[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* libseccomp 2.5 exports BPF to an fd only (seccomp_export_bpf_mem is 2.6): a memfd it is. */
static int seccomp_export(scmp_filter_ctx ctx, SeccompProgram *ret) {
        _cleanup_close_ int fd = memfd_create("sandboxd-seccomp", MFD_CLOEXEC);
        _cleanup_free_ struct sock_filter *insns = NULL;
        struct stat st;
        int r;

        if (fd < 0)
                return -errno;
        r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return r;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) != 0 ||
            st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS)
                return -EBADMSG;
        insns = malloc((size_t) st.st_size);
        if (!insns)
                return -ENOMEM;
        if (pread(fd, insns, (size_t) st.st_size, 0) != st.st_size)
                return -EIO;
        ret->len = (unsigned short) (st.st_size / sizeof(struct sock_filter));
        ret->insns = TAKE_PTR(insns);
        return 0;
}

static int seccomp_compile(SeccompProgram *ret) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        int r;

        if (!ctx)
                return -ENOMEM;
        r = seccomp_build(ctx);
        if (r < 0)
                return r;
        return seccomp_export(ctx, ret);
}

/* libseccomp (which does not load it: seccomp_apply() does) reports through its return value
 * only; the child's error report reads errno. */
int seccomp_prepare(SeccompProgram *ret) {
        int r = seccomp_compile(ret);
        if (r < 0)
                errno = -r;
        return r;
}
