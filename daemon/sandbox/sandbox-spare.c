/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The cgroup of a sandbox's next run, made ahead: when the sandbox is ready, and by each run once
 * its helper is started (launch.c), while the command runs on another CPU. A run then starts
 * without the mkdir of its cgroup and its limit writes on its path (the kernel fills a new
 * cgroup's directory with every controller's files: 45 us on a host without the memory
 * controller, more with it). Only "run" cgroups are made ahead; sessions and file operations make
 * theirs as before. A daemon that stops removes its sandboxes' spares (sandbox_spare_drop()); one
 * that crashed leaves an empty cgroup, counted by the next daemon's run numbers and removed with
 * its sandbox. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "context.h"
#include "log.h"
#include "macro.h"
#include "sandbox-internal.h"
#include "sandbox.h"

#define SPARE_KIND "run"

CgLimits sandbox_run_limits(const Sandbox *s, uint64_t memory, uint64_t pids) {
        return (CgLimits) {
                .memory = memory ? memory : s->limits.memory,
                .swap = s->ctx->config.swap_max,
                .pids = pids,
                .oom_group = true, /* an OOM kill takes the whole run, never half of it */
        };
}

void sandbox_spare_init(SandboxSpare *sp) {
        *sp = (SandboxSpare) { .cg_fd = -EBADF, .kill_fd = -EBADF };
}

static bool limits_same(const CgLimits *a, const CgLimits *b) {
        return a->memory == b->memory && a->swap == b->swap && a->pids == b->pids && a->millicpus == b->millicpus &&
               a->oom_group == b->oom_group;
}

static void spare_close(SandboxSpare *sp) {
        sp->name[0] = '\0';
        sp->cg_fd = safe_close(sp->cg_fd);
        sp->kill_fd = safe_close(sp->kill_fd);
}

/* As launch_make_cgroup() makes a run's, with the sandbox's own limits (a run that asks for others
 * has them written when it takes it). */
static int spare_make(Sandbox *s) {
        SandboxSpare *sp = &s->spare;
        CgLimits lim = sandbox_run_limits(s, 0, 0);
        int k;

        snprintf(sp->name, sizeof(sp->name), SPARE_KIND "-%u", s->next_run_no + 1);
        k = cg_create(s->cg_fd, sp->name, &sp->cg_fd);
        if (k < 0) {
                sp->name[0] = '\0';
                return k;
        }
        s->next_run_no++;
        k = cg_open_kill(sp->cg_fd);
        if (k < 0 && k != -ENOENT)
                goto fail;
        sp->kill_fd = k;
        if ((k = cg_apply_limits_at(sp->cg_fd, &s->ctx->cg, &lim, s->enforced)) < 0)
                goto fail;
        sp->lim = lim;
        sp->mask = s->enforced;
        return 0;
fail:
        (void) unlinkat(s->cg_fd, sp->name, AT_REMOVEDIR);
        spare_close(sp);
        return k;
}

void sandbox_spare_make(Sandbox *s) {
        int k;

        if (s->spare.name[0] || s->state != SANDBOX_READY || (s->ephemeral && !s->pooled) || s->cg_fd < 0)
                return;
        /* Not made: the next run makes its own, and says why if it cannot. */
        if ((k = spare_make(s)) < 0)
                log_debug_errno(k, "sandbox %s: cannot make the next run's cgroup ahead: %m", s->id);
}

const char *sandbox_spare_name(Sandbox *s, const char *kind) {
        return s->spare.name[0] && strcmp(kind, SPARE_KIND) == 0 ? s->spare.name : NULL;
}

int sandbox_spare_take(Sandbox *s, const char *kind, const CgLimits *lim, unsigned mask, char *name, size_t len,
                      int *ret_cg_fd, int *ret_kill_fd) {
        SandboxSpare *sp = &s->spare;
        bool same;

        if (!sandbox_spare_name(s, kind) || strlen(sp->name) >= len)
                return 0;
        same = mask == sp->mask && limits_same(lim, &sp->lim);
        strcpy(name, sp->name);
        *ret_cg_fd = TAKE_FD(sp->cg_fd);
        *ret_kill_fd = TAKE_FD(sp->kill_fd);
        sp->name[0] = '\0';
        if (!same) {
                int k = cg_apply_limits_at(*ret_cg_fd, &s->ctx->cg, lim, mask);
                if (k < 0)
                        return k;
        }
        return 1;
}

void sandbox_spare_drop(Sandbox *s) {
        if (s->spare.name[0] && s->cg_fd >= 0)
                (void) unlinkat(s->cg_fd, s->spare.name, AT_REMOVEDIR);
        spare_close(&s->spare);
}
