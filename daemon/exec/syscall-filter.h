/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The syscall filter every run's command gets right before execve: no_new_privs, then a
 * default-allow seccomp filter that refuses, with an errno, what a workload has no business
 * calling. docs/security.md is this table in prose; tests/security/t-seccomp.sh holds the two
 * together. */
#pragma once

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct SeccompRule {
        const char *syscall;  /* name as libseccomp knows it */
        const char *match;    /* "" for every call, else what is refused (for docs) */
        int error;            /* EPERM, or ENOSYS where a fallback must be taken */
        int arg;              /* argument compared under mask, or -1 for every call */
        uint64_t mask, datum; /* refused when (arg & mask) == datum */
        const char *why;
} SeccompRule;

extern const SeccompRule seccomp_rules[];
extern const size_t seccomp_rules_n;

/* The compiled filter: a classic BPF program, ready for seccomp(2). */
typedef struct SeccompProgram {
        struct sock_filter *insns;
        unsigned short len;
} SeccompProgram;

/* Builds the filter with libseccomp and compiles it, once, when the daemon starts: libseccomp
 * probes the kernel's API with several seccomp() calls and compiles through a memfd, which is
 * not work to repeat for every run. Returns 0, or -errno (errno is set too). */
int seccomp_prepare(SeccompProgram *ret);

/* Sets PR_SET_NO_NEW_PRIVS and installs the program in the calling thread. It allocates nothing,
 * so it can be the last step before execve. Inline, so that the run helper (a separate, small
 * binary) needs no libseccomp. Returns 0, or -errno (errno is set too, for child_fail()). */
static inline int seccomp_apply(const SeccompProgram *p) {
        struct sock_fprog prog = { .len = p->len, .filter = p->insns };

        /* Setuid and file-capability binaries inside must not gain privileges on exec; seccomp
         * also requires it of a caller without CAP_SYS_ADMIN in the initial user namespace. */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
                return -errno;
        return 0;
}
