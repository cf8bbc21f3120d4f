/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The syscall filter every run's command gets right before execve: no_new_privs, then a
 * default-allow seccomp filter that refuses, with an errno, what a workload has no business
 * calling. docs/security.md is this table in prose; tests/security/t-seccomp.sh holds the two
 * together. */
#pragma once

#include <linux/filter.h>
#include <stddef.h>
#include <stdint.h>

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

/* Builds the filter with libseccomp and compiles it. It allocates, so it runs before the run's
 * rlimits are set (RLIMIT_AS would make it fail, as it does ASan's shadow mappings). Returns 0,
 * or -errno (errno is set too, for child_fail()). */
int seccomp_prepare(SeccompProgram *ret);

/* Sets PR_SET_NO_NEW_PRIVS and installs the program in the calling thread. It allocates nothing,
 * so it can be the last step before execve. Returns 0, or -errno (errno is set too, for
 * child_fail()). */
int seccomp_apply(const SeccompProgram *p);
