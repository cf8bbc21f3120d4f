/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a sandbox's teardown looks at and leaves: the processes that outlive its kill, and the
 * removal of its workspace. Helpers of sandbox.c: they return values and call nothing of its
 * state machine. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "log.h"
#include "macro.h"
#include "context.h"
#include "disk-quota.h"
#include "remove-async.h"
#include "sandbox-internal.h"
#include "util.h"

/* Most throwaway workspaces are left empty: a few unlinks then, and no child process. Anything
 * more is a tree walk, which the remover does (ENOTEMPTY). */
static int remove_if_empty(int dir_fd, const char *name) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        if (unlinkat(fd, "meta.json", 0) < 0 && errno != ENOENT)
                return -errno;
        if (unlinkat(fd, "work", AT_REMOVEDIR) < 0 && errno != ENOENT)
                return -errno;
        return unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

/* Moves the workspace aside atomically, then removes it in a child process so that a huge tree
 * never blocks the event loop. */
void sandbox_remove_workspace(Sandbox *s) {
        Context *m = s->ctx;
        char trash[64];

        if (s->keep_workspace || s->memory_workspace)
                return;
        sandbox_quota_release(s);
        /* A throwaway has no record to lose half-way, and its workspace is mostly empty: if a
         * crash interrupts this, the next start removes what is left (state.c). */
        if ((s->ephemeral || s->transient) && remove_if_empty(m->state_fd, s->id) == 0)
                return;
        snprintf(trash, sizeof(trash), ".trash-%s", s->id);
        if (renameat(m->state_fd, s->id, m->state_fd, trash) < 0) {
                if (errno != ENOENT)
                        log_warning("sandbox %s: cannot move the workspace aside: %m", s->id);
                return;
        }
        if (remove_if_empty(m->state_fd, trash) == 0)
                return;
        (void) remove_async(m->event, m->run_helper_fd, m->state_fd, trash);
}

/* A process as {pid, comm, state} from /proc/PID/stat; nothing when it is gone. */
static void stuck_add_proc(pid_t pid, json_object *list) {
        char path[64], stat[512], *lp, *rp;
        json_object *o;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        /* "PID (COMM) S ...": the comm may hold ") ", so its end is the last ')'. */
        if (read_small_file(AT_FDCWD, path, true, stat, sizeof(stat)) < 0 || !(lp = strchr(stat, '(')) ||
            !(rp = strrchr(stat, ')')) || rp[1] != ' ' || !rp[2])
                return;
        *rp = '\0';
        o = json_object_new_object();
        json_object_object_add(o, "pid", json_object_new_int64(pid));
        json_object_object_add(o, "comm", json_object_new_string(lp + 1));
        json_object_object_add(o, "state", json_object_new_string_len(rp + 2, 1));
        json_object_array_add(list, o);
}

/* The processes left in the sandbox's cgroup and below (init, run-*; nothing inside can make
 * cgroups of its own): at most 16. */
#define STUCK_LISTED_MAX 16

json_object *sandbox_stuck_processes(Sandbox *s) {
        json_object *list = json_object_new_array();
        pid_t pids[STUCK_LISTED_MAX];
        int n = s->cg_fd >= 0 ? cg_list_pids(s->cg_fd, pids, STUCK_LISTED_MAX) : 0;

        for (int i = 0; i < n; i++)
                stuck_add_proc(pids[i], list);
        return list;
}

/* "pid 4242 cat (D), pid ..." into buf. */
void sandbox_stuck_summary(json_object *list, char *buf, size_t len) {
        size_t n = json_object_array_length(list), at = 0;

        buf[0] = '\0';
        for (size_t i = 0; i < n && at < len; i++) {
                json_object *o = json_object_array_get_idx(list, i), *pid, *comm, *state;
                json_object_object_get_ex(o, "pid", &pid);
                json_object_object_get_ex(o, "comm", &comm);
                json_object_object_get_ex(o, "state", &state);
                int k = snprintf(buf + at, len - at, "%spid %" PRId64 " %s (%s)", i ? ", " : "", json_object_get_int64(pid),
                                 json_object_get_string(comm), json_object_get_string(state));
                if (k < 0)
                        break;
                at += (size_t) k;
        }
}

int sandbox_teardown_error(Sandbox *s, ProtoError *err) {
        char what[160];
        size_t n = s->teardown_stuck ? json_object_array_length(s->teardown_stuck) : 0;

        sandbox_stuck_summary(s->teardown_stuck, what, sizeof(what));
        return proto_error_set(err, SBX_E_TEARDOWN_STUCK, "sandbox",
                               "sandbox %s: %s%zu process%s outlived the kill (%s); its teardown goes on, see inspect",
                               s->id, n >= STUCK_LISTED_MAX ? "at least " : "", n, n == 1 ? "" : "es",
                               n ? what : "not listed");
}
