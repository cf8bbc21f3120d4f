/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd-run-helper: exec'd by sandboxd for every run (run-exec.c), never by hand. It takes
 * the run's parameters from its argv, then does what run_helper_main() says: joins the
 * sandbox, forks the command, reports its start and its end. A small, separate process, so
 * that the fork of the command copies almost nothing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run-exec.h"
#include "spawn.h"

extern char **environ;

int main(int argc, char **argv) {
        static struct sock_filter insns[BPF_MAXINSNS];
        SeccompProgram filter = { .insns = insns };
        RunParams p;
        size_t len;

        if (argc < 5 || run_exec_unhex(argv[1], &p, sizeof(p)) < 0) {
                fprintf(stderr, "%s: started by sandboxd only\n", RUN_HELPER_NAME);
                return 127;
        }
        len = strlen(argv[2]) / 2;
        if (len == 0 || len % sizeof(struct sock_filter) != 0 || len > sizeof(insns) ||
            run_exec_unhex(argv[2], insns, len) < 0) {
                fprintf(stderr, "%s: bad filter\n", RUN_HELPER_NAME);
                return 127;
        }
        filter.len = (unsigned short) (len / sizeof(struct sock_filter));
        p.filter = &filter;
        p.cwd = argv[3];
        p.argv = argv + 4;
        p.envp = environ;
        run_helper_main(&p);
}
