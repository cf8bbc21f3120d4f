/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl create: make a sandbox and print its id, so that `id=$(sandboxctl create)` works. */
#include <stdio.h>
#include <stdlib.h>

#include "sandboxctl.h"

static int verb_create_run(int argc, char *argv[]);

static const char *const create_field_options[] = {
        "name", "--name", "limits.memory", "--memory", "limits.pids", "--pids", "limits.cpus", "--cpus",
        "limits.timeout_s", "--timeout", "limits.output_bytes", "--output-bytes", "limits.disk", "--disk",
        "limits.files", "--files", "limits.file_size", "--file-size", "limits.open_files", "--open-files",
        "ttl", "--ttl", "idle", "--idle", "user", "--user", "from_snapshot", "--from-snapshot",
        "image", "--image", "root", "--root", NULL,
};

const Verb verb_create = {
        .name = "create",
        .args = "[OPTIONS]",
        .summary = "Create a sandbox and print its id",
        .help = "Options:\n"
                "  -n --name NAME         A name, unique among yours (1-64 of A-Z a-z 0-9 . _ -)\n"
                "     --memory SIZE       Memory limit (e.g. 256M, 1.5G)\n"
                "     --pids N            Most processes at once\n"
                "     --cpus X            CPU bandwidth in cores (e.g. 0.5)\n"
                "     --timeout DUR       Default wall-clock limit of runs (e.g. 30s, 2m)\n"
                "     --output-bytes SIZE Default cap per output stream of runs\n"
                "     --disk SIZE         Disk limit of workspace + snapshots (checked by the sweep)\n"
                "     --files N           The same in files and directories (default: one per 4K\n"
                "                         of --disk, or the configured default)\n"
                "     --file-size SIZE    Largest file a command may write (RLIMIT_FSIZE)\n"
                "     --open-files N      Most open files per process (RLIMIT_NOFILE; default 4096)\n"
                "     --ttl DUR           Destroyed by the sweep this long after creation\n"
                "     --idle DUR          Destroyed by the sweep after this long without runs\n"
                "  -e --env NAME=VALUE    Default environment of runs (repeatable)\n"
                "     --mount SRC:DST[:ro]  Your directory SRC at DST inside (beneath /work, /mnt,\n"
                "                         /opt, /srv or /home), opened with your own rights and\n"
                "                         idmapped: its files are the sandbox user's inside, what\n"
                "                         runs write there is yours (repeatable; :ro read-only)\n"
                "     --workspace-source DIR  Your directory DIR as /work itself, as --mount;\n"
                "                         such a sandbox has no snapshots\n"
                "     --network MODE      \"none\" (the default): loopback only\n"
                "     --egress all        A way out to everything but what sandboxd always denies\n"
                "                         (the host, its networks, link-local, other sandboxes)\n"
                "     --allow ADDR|NAME[:PORT[/tcp|/udp]]  A way out to these only (repeatable; e.g.\n"
                "                         203.0.113.0/24, 198.51.100.7:443, pypi.org, *.github.com:443);\n"
                "                         with a name, only the names listed resolve\n"
                "     --allow-sni NAME[:PORT]  A name whose TCP connections (80 and 443, or PORT)\n"
                "                         go through only when their TLS server name or HTTP Host\n"
                "                         is allowed: for names that share addresses (a CDN)\n"
                "     --deny-all          A way out with nothing allowed yet ('sandboxctl network'\n"
                "                         opens it while the sandbox runs)\n"
                "     --best-effort       Accept limits this host cannot enforce\n"
                "  -u --user USER         Who runs run as inside: \"sandbox\" (uid 1000, the default)\n"
                "                         or \"root\" (root of the sandbox's user namespace)\n"
                "     --image NAME        Its root is that image ('sandboxctl image list'), shared\n"
                "                         read-only, with its files' owners as the image has them\n"
                "     --root MODE         \"readonly\" (the default): the host's /usr and /etc,\n"
                "                         read-only; \"overlay\": writable by root inside, what it\n"
                "                         writes kept in the sandbox's own upper layer (apt, pip)\n"
                "     --from-snapshot SNAP  Start with a copy of a snapshot's tree: SANDBOX/SNAPSHOT\n"
                "                         or a snapshot id alone (see 'sandboxctl snapshots')\n"
                "  -v --verbose           Also print the limits and what is enforced, on stderr\n"
                "\nPrints only the id on stdout. Defaults and maximums come from sandboxd's\n"
                "configuration; see 'sandboxctl status' for what this host can enforce.\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_create_run,
        .field_options = create_field_options,
};

enum {
        ARG_MEMORY = ARG_VERB_FIRST,
        ARG_PIDS,
        ARG_CPUS,
        ARG_TIMEOUT,
        ARG_OUTPUT_BYTES,
        ARG_NETWORK,
        ARG_BEST_EFFORT,
        ARG_DISK,
        ARG_FILES,
        ARG_TTL,
        ARG_IDLE,
        ARG_FROM_SNAPSHOT,
        ARG_MOUNT,
        ARG_FILE_SIZE,
        ARG_OPEN_FILES,
        ARG_WORKSPACE_SOURCE,
        ARG_IMAGE,
        ARG_ROOT,
        ARG_EGRESS,
        ARG_ALLOW,
        ARG_ALLOW_SNI,
        ARG_DENY_ALL,
};

typedef struct CreateArgs {
        json_object *request, *limits, *env, *mounts, *allow;
        const char *network, *egress;
        bool verbose, deny_all;
} CreateArgs;

static void create_args_done(CreateArgs *a) {
        json_object_put(a->request);
        json_object_put(a->limits);
        json_object_put(a->env);
        json_object_put(a->mounts);
        json_object_put(a->allow);
}

static int create_option(CreateArgs *a, int c, const char *value) {
        switch (c) {
        case 'n':
                return check_sandbox_name(value) < 0 ? -EINVAL : add_string(a->request, "name", value);
        case ARG_MEMORY:
                return add_size(a->limits, "memory", "--memory", value);
        case ARG_DISK:
                return add_size(a->limits, "disk", "--disk", value);
        case ARG_FILES:
                return add_uint(a->limits, "files", "--files", value);
        case ARG_TTL:
                return add_duration(a->request, "ttl", "--ttl", value);
        case ARG_IDLE:
                return add_duration(a->request, "idle", "--idle", value);
        case ARG_PIDS:
                return add_uint(a->limits, "pids", "--pids", value);
        case ARG_CPUS:
                return add_cpus(a->limits, "cpus", "--cpus", value);
        case ARG_TIMEOUT:
                return add_duration(a->limits, "timeout_s", "--timeout", value);
        case ARG_OUTPUT_BYTES:
                return add_size(a->limits, "output_bytes", "--output-bytes", value);
        case 'e':
                return add_env(&a->env, value);
        case ARG_MOUNT:
                return add_mount(&a->mounts, value);
        case ARG_FILE_SIZE:
                return add_size(a->limits, "file_size", "--file-size", value);
        case ARG_OPEN_FILES:
                return add_uint(a->limits, "open_files", "--open-files", value);
        case ARG_WORKSPACE_SOURCE: {
                /* The same path rules as --mount's source. */
                _cleanup_json_ json_object *one = NULL;
                _cleanup_free_ char *spec = NULL;
                json_object *ws;
                if (asprintf(&spec, "%s:/work", value) < 0 || add_mount(&one, spec) < 0)
                        return -EINVAL;
                ws = json_object_new_object();
                json_object_object_add(ws, "source",
                                       json_object_get(json_object_object_get(json_object_array_get_idx(one, 0), "source")));
                json_object_object_add(a->request, "workspace", ws);
                return 0;
        }
        case ARG_NETWORK:
                a->network = value;
                return 0;
        case ARG_EGRESS:
                a->egress = value;
                return 0;
        case ARG_ALLOW:
                if (a->deny_all)
                        return log_error("--deny-all goes alone");
                return add_allow(&a->allow, value);
        case ARG_ALLOW_SNI:
                if (a->deny_all)
                        return log_error("--deny-all goes alone");
                return add_allow_sni(&a->allow, value);
        case ARG_DENY_ALL:
                if (a->allow)
                        return log_error("--deny-all goes alone");
                a->deny_all = true;
                return (a->allow = json_object_new_array()) ? 0 : log_error("out of memory");
        case ARG_BEST_EFFORT:
                json_object_object_add(a->request, "best_effort", json_object_new_boolean(true));
                return 0;
        case 'u':
                return add_string(a->request, "user", value);
        case ARG_FROM_SNAPSHOT:
                return add_string(a->request, "from_snapshot", value);
        case ARG_IMAGE:
                return add_string(a->request, "image", value);
        case ARG_ROOT:
                return add_string(a->request, "root", value);
        case 'v':
                a->verbose = true;
                return 0;
        default:
                return log_error("unhandled option %d", c);
        }
}

/* 1 to go on, 0 after --help, negative on error. */
static int create_parse(CreateArgs *a, int argc, char *argv[]) {
        static const struct option options[] = {
                COMMON_OPTIONS,
                { "name", required_argument, NULL, 'n' },
                { "memory", required_argument, NULL, ARG_MEMORY },
                { "pids", required_argument, NULL, ARG_PIDS },
                { "cpus", required_argument, NULL, ARG_CPUS },
                { "timeout", required_argument, NULL, ARG_TIMEOUT },
                { "output-bytes", required_argument, NULL, ARG_OUTPUT_BYTES },
                { "env", required_argument, NULL, 'e' },
                { "network", required_argument, NULL, ARG_NETWORK },
                { "egress", required_argument, NULL, ARG_EGRESS },
                { "allow", required_argument, NULL, ARG_ALLOW },
                { "allow-sni", required_argument, NULL, ARG_ALLOW_SNI },
                { "deny-all", no_argument, NULL, ARG_DENY_ALL },
                { "best-effort", no_argument, NULL, ARG_BEST_EFFORT },
                { "disk", required_argument, NULL, ARG_DISK },
                { "files", required_argument, NULL, ARG_FILES },
                { "ttl", required_argument, NULL, ARG_TTL },
                { "idle", required_argument, NULL, ARG_IDLE },
                { "user", required_argument, NULL, 'u' },
                { "from-snapshot", required_argument, NULL, ARG_FROM_SNAPSHOT },
                { "mount", required_argument, NULL, ARG_MOUNT },
                { "file-size", required_argument, NULL, ARG_FILE_SIZE },
                { "open-files", required_argument, NULL, ARG_OPEN_FILES },
                { "workspace-source", required_argument, NULL, ARG_WORKSPACE_SOURCE },
                { "image", required_argument, NULL, ARG_IMAGE },
                { "root", required_argument, NULL, ARG_ROOT },
                { "verbose", no_argument, NULL, 'v' },
                {},
        };
        int c, r;

        optind = 0;
        while ((c = getopt_long(argc, argv, "hn:e:u:v", options, NULL)) >= 0) {
                if (!is_common_option(c))
                        r = create_option(a, c, optarg);
                else if ((r = common_option(&verb_create, c)) == 0)
                        return 0; /* help shown */
                if (r < 0)
                        return r;
        }
        r = check_arg_count(&verb_create, argc, argv, 0, 0);
        if (r > 0 && add_network(a->request, a->network, a->egress, a->allow) < 0)
                return -EINVAL;
        return r;
}

/* One line on stderr: what the daemon made of the request. */
static void log_sandbox_summary(json_object *sbx) {
        json_object *limits = json_child(sbx, "limits");
        char m[FIELD_BUF], p[FIELD_BUF], c[FIELD_BUF], t[FIELD_BUF], o[FIELD_BUF], e[FIELD_BUF], n[FIELD_BUF];

        log_info("created %s name=%s memory=%s pids=%s cpus=%s timeout=%s output_bytes=%s enforced=%s network=%s",
                 json_str(sbx, "id") ?: "-", fmt_value(n, sbx, "name"), fmt_size(m, limits, "memory"),
                 fmt_value(p, limits, "pids"), fmt_value(c, limits, "cpus"), fmt_seconds(t, limits, "timeout_s"),
                 fmt_size(o, limits, "output_bytes"), fmt_enforced(e, json_child(sbx, "enforced")),
                 json_str(sbx, "network") ?: json_str(json_child(sbx, "network"), "address") ?: "-");
}

static int verb_create_run(int argc, char *argv[]) {
        _cleanup_(create_args_done) CreateArgs a = {
                .request = request_new("create"),
                .limits = json_object_new_object(),
        };
        _cleanup_json_ json_object *reply = NULL;
        json_object *sbx;
        int r = create_parse(&a, argc, argv);

        if (r <= 0)
                return r;
        add_object_unless_empty(a.request, "limits", TAKE_PTR(a.limits));
        add_object_unless_empty(a.request, "env", TAKE_PTR(a.env));
        if (a.mounts)
                json_object_object_add(a.request, "mounts", TAKE_PTR(a.mounts));
        r = daemon_request(TAKE_PTR(a.request), &reply);
        if (r < 0)
                return r;
        if (arg.json)
                return 0;
        sbx = json_child(reply, "sandbox");
        if (!json_str(sbx, "id"))
                return log_error("the reply to create names no sandbox id");
        printf("%s\n", esc(json_str(sbx, "id")));
        if (a.verbose)
                log_sandbox_summary(sbx);
        return 0;
}
