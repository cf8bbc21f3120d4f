/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd-oci: runc's global flags, then one verb from the table. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "oci.h"

OciArgs oci_arg = { .root = OCI_DEFAULT_ROOT };

static const OciVerb *const verbs[] = {
        &oci_verb_create, &oci_verb_start,  &oci_verb_state,  &oci_verb_kill,   &oci_verb_delete,   &oci_verb_exec,
        &oci_verb_ps,     &oci_verb_pause,  &oci_verb_resume, &oci_verb_update, &oci_verb_features, &oci_verb_list,
};

static void usage(FILE *f) {
        fprintf(f,
                "Usage: sandboxd-oci [GLOBAL OPTIONS] COMMAND [OPTIONS] ...\n"
                "An OCI runtime (runc's command line) whose containers are sandboxes of sandboxd.\n\n"
                "Global options:\n"
                "  --root DIR              state directory (default " OCI_DEFAULT_ROOT ")\n"
                "  --log FILE              errors as the engine reads them\n"
                "  --log-format text|json  its format (default text)\n"
                "  --systemd-cgroup, --cgroup-manager M   recorded only (disabled: --best-effort)\n"
                "  --socket PATH           sandboxd's socket (default $SANDBOXD_SOCKET, else /run/sandboxd/sandboxd.sock)\n"
                "  --best-effort           accept limits the host cannot enforce\n"
                "  --debug                 informational lines on stderr too\n\n"
                "Commands:\n");
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                fprintf(f, "  %-9s %s\n", verbs[i]->name, verbs[i]->usage);
}

/* fds 0-2 that the engine left closed are /dev/null: otherwise the daemon's socket could
 * become the container's stdout. */
static void fill_stdio(void) {
        for (int fd = 0; fd < 3; fd++)
                if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
                        int n = open("/dev/null", O_RDWR);
                        if (n >= 0 && n != fd) {
                                dup2(n, fd);
                                close(n);
                        }
                }
}

enum { ARG_ROOT = 0x100, ARG_LOG, ARG_LOG_FORMAT, ARG_SYSTEMD, ARG_CGMGR, ARG_SOCKET, ARG_BEST, ARG_DEBUG, ARG_IGNORED };

static int parse_global(int argc, char *argv[]) {
        static const struct option opts[] = {
                { "root", required_argument, NULL, ARG_ROOT },
                { "log", required_argument, NULL, ARG_LOG },
                { "log-format", required_argument, NULL, ARG_LOG_FORMAT },
                { "systemd-cgroup", no_argument, NULL, ARG_SYSTEMD },
                { "cgroup-manager", required_argument, NULL, ARG_CGMGR },
                { "socket", required_argument, NULL, ARG_SOCKET },
                { "best-effort", no_argument, NULL, ARG_BEST },
                { "debug", no_argument, NULL, ARG_DEBUG },
                { "rootless", required_argument, NULL, ARG_IGNORED },
                { "criu", required_argument, NULL, ARG_IGNORED },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'v' },
                {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "+hv", opts, NULL)) >= 0)
                switch (c) {
                case ARG_ROOT:
                        oci_arg.root = optarg;
                        break;
                case ARG_LOG:
                        oci_arg.log = optarg;
                        break;
                case ARG_LOG_FORMAT:
                        if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0)
                                return -EINVAL;
                        oci_arg.log_json = strcmp(optarg, "json") == 0;
                        break;
                case ARG_SYSTEMD:
                        oci_arg.cgroup_manager = "systemd";
                        break;
                case ARG_CGMGR:
                        oci_arg.cgroup_manager = optarg;
                        /* The engine runs without cgroups: what the host cannot enforce is
                         * accepted, as the engine itself would. */
                        if (strcmp(optarg, "disabled") == 0)
                                oci_arg.best_effort = true;
                        break;
                case ARG_SOCKET:
                        oci_arg.socket = optarg;
                        break;
                case ARG_BEST:
                        oci_arg.best_effort = true;
                        break;
                case ARG_DEBUG:
                        oci_arg.debug = true;
                        break;
                case ARG_IGNORED:
                        break;
                case 'h':
                        usage(stdout);
                        exit(0);
                case 'v':
                        printf("sandboxd-oci version %s\nspec: 1.0.2\n", PACKAGE_VERSION);
                        exit(0);
                default:
                        return -EINVAL;
                }
        return 0;
}

int main(int argc, char *argv[]) {
        fill_stdio();
        if (parse_global(argc, argv) < 0) {
                usage(stderr);
                return 1;
        }
        if (oci_log_open() < 0)
                fprintf(stderr, "sandboxd-oci: --log %s: %m\n", oci_arg.log);
        if (optind >= argc) {
                usage(stderr);
                return 1;
        }
        if (strlen(oci_arg.root) == 0 || oci_arg.root[0] != '/')
                return oci_error("--root %s: must be an absolute path", oci_arg.root);
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (strcmp(argv[optind], verbs[i]->name) == 0) {
                        char **vargv = argv + optind;
                        int vargc = argc - optind;
                        optind = 1;
                        return verbs[i]->run(vargc, vargv);
                }
        return oci_error("unknown command \"%s\"", argv[optind]);
}
