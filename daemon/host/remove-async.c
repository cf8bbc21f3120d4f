/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "remove-async.h"
#include "rm-rf.h"
#include "run-exec.h"
#include "spawn.h"

static int on_remover_exit(sd_event_source *src, const siginfo_t *si, void *userdata) {
        if (si->si_code != CLD_EXITED || si->si_status != 0)
                log_warning("removal of %s did not complete (status %d); retried at the next start", (char *) userdata,
                            si->si_status);
        free(userdata);
        sd_event_source_disable_unref(src);
        return 0;
}

int remove_async(sd_event *event, int run_helper_fd, int dir_fd, const char *name) {
        sd_event_source *src = NULL;
        int pidfd = -EBADF, r;
        char *tag;
        pid_t pid = run_helper_fd >= 0 ? run_exec_rm(run_helper_fd, dir_fd, name, &pidfd) : clone3_pidfd(0, -1, &pidfd);

        if (pid == 0) {
                int keep[] = { 2, dir_fd };
                close_all_fds_except(keep, ELEMENTSOF(keep));
                (void) prctl(PR_SET_NAME, "sandboxd-rm");
                _exit(rm_rf_at(dir_fd, name) < 0 ? 1 : 0);
        }
        if (pid < 0) {
                log_warning("cannot start a remover for %s: %s", name, strerror(-pid));
                return pid;
        }
        tag = strdup(name);
        r = sd_event_add_child_pidfd(event, &src, pidfd, WEXITED, on_remover_exit, tag);
        if (r < 0) {
                free(tag);
                close(pidfd);
                return r;
        }
        (void) sd_event_source_set_child_pidfd_own(src, true);
        (void) sd_event_source_set_child_process_own(src, true);
        return 0;
}
