/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl: the command-line client of sandboxd. Global options, then a verb from the table;
 * each verb parses its own options and talks to the daemon through libsandbox. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "sandboxctl.h"

static int verb_help_run(int argc, char *argv[]);

static const Verb verb_help_entry = {
        .name = "help",
        .args = "[VERB]",
        .summary = "Show the help of sandboxctl or of one verb",
        .help = "",
        .failure_status = EXIT_FAILURE,
        .run = verb_help_run,
};

static const Verb *const verbs[] = {
        &verb_status, &verb_create,  &verb_run,   &verb_list,  &verb_inspect,
        &verb_destroy, &verb_kill, &verb_reattach,   &verb_shell, &verb_exec,   &verb_attach,
        &verb_sessions, &verb_session,
        &verb_cp,      &verb_cat,    &verb_ls,     &verb_rm,
        &verb_port,    &verb_network, &verb_image,
        &verb_snapshot, &verb_snapshots, &verb_restore, &verb_snapshot_delete,
        &verb_sweep,   &verb_top,    &verb_doctor, &verb_hello, &verb_health, &verb_call, &verb_help_entry,
};

static const Verb *verb_find(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (strcmp(verbs[i]->name, name) == 0)
                        return verbs[i];
        return NULL;
}

static void help(void) {
        printf("sandboxctl [OPTIONS] VERB [ARGS...]\n\n"
               "Create sandboxes and run commands in them through sandboxd.\n\n"
               "Verbs:\n");
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                printf("  %-15s %s\n", verbs[i]->name, verbs[i]->summary);
        printf("\nOptions:\n"
               "  -h --help          Show this help\n"
               "     --version       Show the version\n"
               "     --json          Print the daemon's replies as JSON\n"
               "     --socket PATH   sandboxd's socket (default: $SANDBOXD_SOCKET, else\n"
               "                     " SBX_DEFAULT_SOCKET ")\n\n"
               "See 'sandboxctl VERB --help' for the options of a verb.\n");
}

static int verb_help_run(int argc, char *argv[]) {
        const Verb *v;
        int r = parse_common_only(&verb_help_entry, argc, argv, 0, 1);

        if (r <= 0)
                return r;
        if (optind == argc) {
                help();
                return 0;
        }
        v = verb_find(argv[optind]);
        if (!v)
                return log_error("unknown verb '%s' (see 'sandboxctl --help')", argv[optind]);
        verb_help(v);
        return 0;
}

/* 1 and optind at the verb to go on, 0 when done (help, version), negative on error. */
static int parse_global(int argc, char *argv[]) {
        enum { ARG_VERSION = ARG_VERB_FIRST };
        static const struct option options[] = {
                COMMON_OPTIONS,
                { "version", no_argument, NULL, ARG_VERSION },
                {},
        };
        int c;

        /* '+': stop at the verb, whose options are its own. */
        while ((c = getopt_long(argc, argv, "+h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("sandboxctl %s (protocol %d)\n", PACKAGE_VERSION, SBX_PROTOCOL_VERSION);
                        return 0;
                case ARG_JSON:
                        arg.json = true;
                        break;
                case ARG_SOCKET:
                        arg.socket = optarg;
                        break;
                default:
                        return log_error("see 'sandboxctl --help'");
                }
        if (optind >= argc)
                return log_error("missing verb (see 'sandboxctl --help')");
        return 1;
}

static int dispatch(int argc, char *argv[], const char *program) {
        const Verb *v = verb_find(argv[0]);
        int r;

        if (!v) {
                log_error("unknown verb '%s' (see 'sandboxctl --help')", argv[0]);
                return EXIT_FAILURE;
        }
        /* getopt names argv[0] in its messages: make that the program, not the verb. */
        argv[0] = (char *) program;
        arg.verb = v;
        r = v->run(argc, argv);
        if (fflush(stdout) != 0 && r >= 0) {
                log_error_errno(negative_errno(), "writing to stdout: %m");
                return v->failure_status;
        }
        return r < 0 ? v->failure_status : r;
}

int main(int argc, char *argv[]) {
        int r = parse_global(argc, argv);

        if (r <= 0)
                return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
        return dispatch(argc - optind, argv + optind, "sandboxctl");
}
