/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl doctor: what this host lets sandboxd do. Each check adds one verdict line with a fix
 * in plain words; the worst impact of them all is doctor's exit status. The host checks need no
 * daemon; the socket check talks to it when it can, and later checks use its hello reply. */
#pragma once

#include <json-c/json.h>
#include <stddef.h>

#include "macro.h"

typedef enum { CHECK_OK, CHECK_WARN, CHECK_FAIL } CheckStatus;

/* What a problem means for sandboxes; the exit status of doctor is the worst of them. */
typedef enum {
        IMPACT_NONE = 0,        /* sandboxes run with every limit enforced */
        IMPACT_BEST_EFFORT = 1, /* they run, but some limits cannot be enforced */
        IMPACT_CANNOT_RUN = 2,  /* they cannot run at all */
} CheckImpact;

typedef struct Check {
        const char *name;
        CheckStatus status;
        CheckImpact impact;
        char *message;
        char *fix; /* NULL when there is nothing to do */
} Check;

/* The controllers whose limits sandboxd writes, as masks. */
enum { DOC_MEMORY = 1 << 0, DOC_PIDS = 1 << 1, DOC_CPU = 1 << 2, DOC_ALL = 7 };
extern const char *const doctor_controllers[3];

typedef struct Doctor {
        Check checks[24];
        size_t n_checks;
        /* Found by earlier checks, used by later ones. */
        char *cg_mount;          /* NULL: no cgroup2 */
        unsigned v2_controllers; /* offered at the cgroup2 root */
        json_object *hello;      /* the daemon's hello reply; NULL when it is not reachable */
        const char *socket;
        const char *state_dir;
} Doctor;

void doctor_done(Doctor *d);
Check *doctor_add(Doctor *d, const char *name, CheckStatus status, CheckImpact impact, const char *fmt, ...)
        _printf_(5, 6);
void check_fix(Check *c, const char *fmt, ...) _printf_(2, 3);
/* "memory, pids" for a mask. */
const char *doctor_mask_names(char *buf, size_t len, unsigned mask);
unsigned doctor_parse_controllers(const char *list);

/* doctor-checks.c: the host, in this order. */
void doctor_check_cgroup2(Doctor *d);
void doctor_check_controllers(Doctor *d);
void doctor_check_userns(Doctor *d);
void doctor_check_kernel(Doctor *d);
void doctor_check_disk(Doctor *d);
