/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tries one thing that the run filter (daemon/exec/syscall-filter.c) refuses, and prints "blocked ENAME" or
 * "allowed". Where it can, it calls with arguments the kernel itself would reject with another
 * errno (EFAULT, EINVAL, ENOTTY), so that EPERM can only have come from the filter, as
 * bubblewrap's tests/try-syscall.c does. Linked statically: it runs inside the sandbox. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/keyctl.h>
#include <linux/sched.h>
#include <sched.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int report(long rc) {
        if (rc >= 0) {
                puts("allowed");
                return 0;
        }
        printf("blocked %s\n", strerrorname_np(errno) ?: "?");
        return 0;
}

static long try_keyctl(void) {
        return syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
}

static long try_bpf(void) {
        struct bpf_insn prog[] = {
                { .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
                { .code = BPF_JMP | BPF_EXIT },
        };
        union bpf_attr attr = {
                .prog_type = BPF_PROG_TYPE_SOCKET_FILTER,
                .insns = (uint64_t) (uintptr_t) prog,
                .insn_cnt = 2,
                .license = (uint64_t) (uintptr_t) "GPL",
        };
        return syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr));
}

/* A NULL attr: the kernel says EFAULT. */
static long try_perf(void) {
        return syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0);
}

/* Unknown flags: the kernel says EINVAL (or EPERM when unprivileged_userfaultfd=0). */
static long try_userfaultfd(void) {
        return syscall(SYS_userfaultfd, ~0);
}

static long try_unshare_user(void) {
        return unshare(CLONE_NEWUSER);
}

static long try_clone_user(void) {
        long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
        if (pid == 0)
                _exit(0);
        if (pid > 0)
                (void) waitpid((pid_t) pid, NULL, 0);
        return pid;
}

/* Namespace flags with a flag unshare(2) does not take (CLONE_VFORK): the kernel says EINVAL
 * before it looks at privileges or makes anything, so EPERM can only be the filter's, for root of
 * the sandbox and for the default user alike. */
static long try_unshare_ns(int flag) {
        return unshare(flag | CLONE_VFORK);
}
static long try_unshare_net(void) { return try_unshare_ns(CLONE_NEWNET); }
static long try_unshare_uts(void) { return try_unshare_ns(CLONE_NEWUTS); }
static long try_unshare_ipc(void) { return try_unshare_ns(CLONE_NEWIPC); }
static long try_unshare_cgroup(void) { return try_unshare_ns(CLONE_NEWCGROUP); }
static long try_unshare_pid(void) { return try_unshare_ns(CLONE_NEWPID); }
static long try_unshare_time(void) { return try_unshare_ns(CLONE_NEWTIME); }
static long try_unshare_mnt(void) { return try_unshare_ns(CLONE_NEWNS); }

/* CLONE_THREAD without CLONE_SIGHAND: the kernel says EINVAL before anything is made. */
static long try_clone_ns(int flag) {
        long pid = syscall(SYS_clone, flag | CLONE_THREAD | SIGCHLD, 0, 0, 0, 0);
        if (pid == 0)
                _exit(0);
        return pid;
}
static long try_clone_net(void) { return try_clone_ns(CLONE_NEWNET); }
static long try_clone_uts(void) { return try_clone_ns(CLONE_NEWUTS); }
static long try_clone_ipc(void) { return try_clone_ns(CLONE_NEWIPC); }
static long try_clone_cgroup(void) { return try_clone_ns(CLONE_NEWCGROUP); }
static long try_clone_pid(void) { return try_clone_ns(CLONE_NEWPID); }

/* A bad fd: the kernel says EBADF. */
static long try_setns(void) {
        return setns(-1, 0);
}

/* The real thing, as unshare(1) -n does: for root of the sandbox the kernel would say yes. */
static long try_unshare_net_real(void) {
        return unshare(CLONE_NEWNET);
}

/* Joining the network namespace of our own process through a pidfd, and through an nsfd with
 * nstype 0 (any type): refused whatever the namespace. */
static long try_setns_pidfd(void) {
        int fd = (int) syscall(SYS_pidfd_open, getpid(), 0);
        return fd < 0 ? -1 : setns(fd, CLONE_NEWNET);
}
static long try_setns_nsfd(void) {
        int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        return fd < 0 ? -1 : setns(fd, 0);
}

/* clone3 asking for a network namespace, with a valid struct: ENOSYS, so that libc falls back to
 * clone, whose flags the filter reads. */
static long try_clone3_net(void) {
        struct clone_args args = { .flags = CLONE_NEWNET, .exit_signal = SIGCHLD };
        long pid = syscall(SYS_clone3, &args, sizeof(args));
        if (pid == 0)
                _exit(0);
        if (pid > 0)
                (void) waitpid((pid_t) pid, NULL, 0);
        return pid;
}

/* A NULL args: the kernel says EFAULT (or EINVAL for the size). */
static long try_clone3(void) {
        return syscall(SYS_clone3, NULL, 0);
}

/* On fd 0 (a pipe or /dev/null in a run): the kernel says ENOTTY. */
static long try_tiocsti(void) {
        char c = 'x';
        return syscall(SYS_ioctl, 0, TIOCSTI, &c);
}

/* The high bits the kernel drops (CVE-2019-10063): must be refused as well. */
static long try_tiocsti_high(void) {
        char c = 'x';
        return syscall(SYS_ioctl, 0, (0x123UL << 32) | TIOCSTI, &c);
}

static long try_tioclinux(void) {
        char sub = 2; /* TIOCL_SETSEL */
        return syscall(SYS_ioctl, 0, TIOCLINUX, &sub);
}

/* Harmless ioctl on the same fd: must still reach the kernel (ENOTTY). */
static long try_tcgets(void) {
        char buf[64];
        return syscall(SYS_ioctl, 0, TCGETS, buf);
}

static long try_init_module(void) {
        return syscall(SYS_init_module, NULL, 0, "");
}

static long try_finit_module(void) {
        return syscall(SYS_finit_module, -1, "", 0);
}

static long try_kexec(void) {
        return syscall(SYS_kexec_load, 0, 0, NULL, 0);
}

static long try_open_by_handle(void) {
        return syscall(SYS_open_by_handle_at, -1, NULL, 0);
}

/* NULL params: the kernel says EFAULT. */
static long try_io_uring(void) {
        return syscall(SYS_io_uring_setup, 1, NULL);
}

static long try_reboot(void) {
        return syscall(SYS_reboot, 0, 0, 0, NULL); /* bad magic: the kernel says EINVAL */
}

/* getpid through the 32-bit entry point: the filter kills the process with SIGSYS. */
static long try_int80(void) {
        long rc = 20; /* __NR_getpid on i386 */
        __asm__ volatile("int $0x80" : "+a"(rc) : : "memory");
        if (rc < 0) {
                errno = (int) -rc;
                return -1;
        }
        return rc;
}

/* getpid through the x32 ABI (bit 30 of the number): killed too, or ENOSYS without x32. */
static long try_x32(void) {
        return syscall(0x40000000 | SYS_getpid);
}

static int print_nnp(void) {
        char line[256];
        FILE *f = fopen("/proc/self/status", "re");

        if (!f)
                return report(-1);
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, "NoNewPrivs:", 11) == 0)
                        printf("%d\n", atoi(line + 11));
        fclose(f);
        return 0;
}

/* No controlling terminal (the run is its own session, on pipes): ENXIO. */
static long try_tty(void) {
        long fd = open("/dev/tty", O_RDWR | O_CLOEXEC);
        if (fd >= 0)
                close((int) fd);
        return fd;
}

/* A terminal of the sandbox's own devpts: TIOCSTI into it is refused all the same. */
static long try_tiocsti_pty(void) {
        char c = 'x', name[64];
        int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC), s;
        if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, name, sizeof(name)) != 0)
                return -1;
        s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (s < 0)
                return -1;
        return syscall(SYS_ioctl, s, TIOCSTI, &c);
}

static const struct {
        const char *name;
        long (*fn)(void);
} probes[] = {
        { "tty", try_tty },
        { "tiocsti-pty", try_tiocsti_pty },
        { "keyctl", try_keyctl },
        { "bpf", try_bpf },
        { "perf_event_open", try_perf },
        { "userfaultfd", try_userfaultfd },
        { "unshare-user", try_unshare_user },
        { "clone-user", try_clone_user },
        { "clone3", try_clone3 },
        { "clone3-net", try_clone3_net },
        { "unshare-net", try_unshare_net },
        { "unshare-uts", try_unshare_uts },
        { "unshare-ipc", try_unshare_ipc },
        { "unshare-cgroup", try_unshare_cgroup },
        { "unshare-pid", try_unshare_pid },
        { "unshare-time", try_unshare_time },
        { "unshare-mnt", try_unshare_mnt },
        { "unshare-net-real", try_unshare_net_real },
        { "clone-net", try_clone_net },
        { "clone-uts", try_clone_uts },
        { "clone-ipc", try_clone_ipc },
        { "clone-cgroup", try_clone_cgroup },
        { "clone-pid", try_clone_pid },
        { "setns", try_setns },
        { "setns-pidfd", try_setns_pidfd },
        { "setns-nsfd", try_setns_nsfd },
        { "tiocsti", try_tiocsti },
        { "tiocsti-high", try_tiocsti_high },
        { "tioclinux", try_tioclinux },
        { "tcgets", try_tcgets },
        { "init_module", try_init_module },
        { "finit_module", try_finit_module },
        { "kexec_load", try_kexec },
        { "open_by_handle_at", try_open_by_handle },
        { "io_uring_setup", try_io_uring },
        { "reboot", try_reboot },
        { "int80", try_int80 },
        { "x32", try_x32 },
};

/* ---- Probes that take an argument (a pid, a path, a port) ---- */

static long try_ptrace(const char *arg) {
        pid_t pid = (pid_t) atoi(arg);
        long rc = ptrace(PTRACE_ATTACH, pid, NULL, NULL);
        if (rc == 0) {
                (void) waitpid(pid, NULL, __WALL);
                (void) ptrace(PTRACE_DETACH, pid, NULL, NULL);
        }
        return rc;
}

static long try_vmread(const char *arg) {
        char buf[8];
        struct iovec local = { buf, sizeof(buf) }, remote = { (void *) 0x10000, sizeof(buf) };
        return (long) process_vm_readv((pid_t) atoi(arg), &local, 1, &remote, 1, 0);
}

static long try_open_w(const char *arg) {
        long fd = open(arg, O_WRONLY | O_CLOEXEC);
        if (fd >= 0)
                close((int) fd);
        return fd;
}

static long try_open_r(const char *arg) {
        long fd = open(arg, O_RDONLY | O_CLOEXEC);
        if (fd >= 0)
                close((int) fd);
        return fd;
}

static long try_umount(const char *arg) {
        return umount2(arg, MNT_DETACH);
}

/* A read-only mount made writable again. */
static long try_remount_rw(const char *arg) {
        return mount(NULL, arg, NULL, MS_REMOUNT | MS_BIND, NULL);
}

/* "ADDR:PORT", IPv4. */
static long try_tcp(const char *arg) {
        char host[64];
        const char *colon = strrchr(arg, ':');
        struct sockaddr_in sa = { .sin_family = AF_INET };
        int fd;

        if (!colon || (size_t) (colon - arg) >= sizeof(host))
                return errno = EINVAL, -1;
        memcpy(host, arg, (size_t) (colon - arg));
        host[colon - arg] = '\0';
        sa.sin_port = htons((uint16_t) atoi(colon + 1));
        if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
                return errno = EINVAL, -1;
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        return connect(fd, (struct sockaddr *) &sa, sizeof(sa));
}

/* An abstract Unix socket name (without the leading '@'). */
static long try_abstract(const char *arg) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        size_t n = strlen(arg);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return -1;
        if (n + 1 > sizeof(sa.sun_path))
                n = sizeof(sa.sun_path) - 1;
        memcpy(sa.sun_path + 1, arg, n);
        return connect(fd, (struct sockaddr *) &sa, (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + n));
}

static const struct {
        const char *name;
        long (*fn)(const char *arg);
} arg_probes[] = {
        { "ptrace", try_ptrace },       { "vmread", try_vmread }, { "open-w", try_open_w },
        { "open-r", try_open_r },       { "umount", try_umount }, { "remount-rw", try_remount_rw },
        { "tcp", try_tcp },             { "abstract", try_abstract },
};

int main(int argc, char **argv) {
        if (argc == 3) {
                for (size_t i = 0; i < sizeof(arg_probes) / sizeof(arg_probes[0]); i++)
                        if (strcmp(argv[1], arg_probes[i].name) == 0) {
                                errno = 0;
                                return report(arg_probes[i].fn(argv[2]));
                        }
                fprintf(stderr, "%s: unknown probe %s\n", argv[0], argv[1]);
                return 2;
        }
        if (argc != 2) {
                fprintf(stderr, "usage: %s nnp|PROBE [ARG]\n", argv[0]);
                return 2;
        }
        if (strcmp(argv[1], "nnp") == 0)
                return print_nnp();
        for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
                if (strcmp(argv[1], probes[i].name) == 0) {
                        errno = 0;
                        return report(probes[i].fn());
                }
        fprintf(stderr, "%s: unknown probe %s\n", argv[0], argv[1]);
        return 2;
}
