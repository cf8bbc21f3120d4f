/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Limit files are written through libcgroup; this is the one file that includes <libcgroup.h>,
 * and it translates libcgroup's ECG* codes into negative errno.
 *
 * libcgroup 2.0 follows whatever hierarchy a controller is mounted on: on a hybrid host it would
 * write a "memory" value into the v1 memory hierarchy (HOST.md). So it is only ever asked about
 * controllers that appear in our cgroup2 subtree (root->enforceable), and only with paths below
 * the cgroup2 mount. */
#include <errno.h>
#include <inttypes.h>
#include <libcgroup.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cgroup.h"
#include "macro.h"

static int ecg_to_errno(int ecg) {
        switch (ecg) {
        case 0:
                return 0;
        case ECGOTHER:
                return -cgroup_get_last_errno() ?: -EIO;
        case ECGROUPNOTEXIST:
                return -ENOENT;
        case ECGROUPNOTMOUNTED:
        case ECGROUPSUBSYSNOTMOUNTED:
                return -ENODEV;
        case ECGROUPNOTALLOWED:
        case ECGROUPNOTOWNER:
                return -EPERM;
        case ECGINVAL:
                return -EINVAL;
        case ECGROUPVALUENOTEXIST:
                return -EOPNOTSUPP;
        default:
                return -EIO;
        }
}

static int cg_lib_init(void) {
        static int result = 1;
        if (result > 0)
                result = ecg_to_errno(cgroup_init());
        return result;
}

static void cgroup_freep(struct cgroup **cg) {
        if (*cg)
                cgroup_free(cg);
}

static int add_value(struct cgroup *cg, const char *controller, const char *file, const char *value) {
        struct cgroup_controller *c = cgroup_get_controller(cg, controller);
        if (!c)
                c = cgroup_add_controller(cg, controller);
        if (!c)
                return -ENOMEM;
        return ecg_to_errno(cgroup_add_value_string(c, file, value));
}

static int add_limit_values(struct cgroup *cg, const CgLimits *l, unsigned mask) {
        char buf[64];
        int r = 0;

        if ((mask & CG_MEMORY) && l->memory) {
                snprintf(buf, sizeof(buf), "%" PRIu64, l->memory);
                r = r ?: add_value(cg, "memory", "memory.max", buf);
                snprintf(buf, sizeof(buf), "%" PRIu64, l->swap);
                r = r ?: add_value(cg, "memory", "memory.swap.max", buf);
                r = r ?: add_value(cg, "memory", "memory.oom.group", l->oom_group ? "1" : "0");
        }
        if ((mask & CG_PIDS) && l->pids) {
                snprintf(buf, sizeof(buf), "%" PRIu64, l->pids);
                r = r ?: add_value(cg, "pids", "pids.max", buf);
        }
        if ((mask & CG_CPU) && l->millicpus) {
                /* quota per 100ms period: 1000 millicpus = one full core. */
                snprintf(buf, sizeof(buf), "%" PRIu64 " 100000", l->millicpus * 100);
                r = r ?: add_value(cg, "cpu", "cpu.max", buf);
        }
        return r;
}

int cg_apply_limits(const CgroupRoot *root, const char *path, const CgLimits *l, unsigned mask) {
        _cleanup_(cgroup_freep) struct cgroup *cg = NULL;
        size_t n = strlen(root->mount);
        int r;

        mask &= root->enforceable;
        if (!mask)
                return 0;
        /* Only below the cgroup2 mount (HOST.md: never a v1 hierarchy). */
        if (strncmp(path, root->mount, n) != 0 || path[n] != '/' || strstr(path, "/../"))
                return -EINVAL;
        r = cg_lib_init();
        if (r < 0)
                return r;
        /* libcgroup wants the path relative to the controller's mount point. */
        cg = cgroup_new_cgroup(path + n);
        if (!cg)
                return -ENOMEM;
        r = add_limit_values(cg, l, mask);
        if (r < 0)
                return r;
        return ecg_to_errno(cgroup_modify_cgroup(cg));
}
