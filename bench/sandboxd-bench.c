/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd-bench: latency (median, p99) and throughput of sandboxd's operations, measured through
 * libsandbox, with the machine's floor (posix_spawn+waitpid) measured in the same program run.
 * Not a test: `make bench` (bench/run-bench.sh) starts a private daemon and runs this. */
#include "bench.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
        const char *name;
        int (*fn)(Bench *b);
} scenarios[] = {
        { "floor", scenario_floor },
        { "run", scenario_run },
        { "throwaway", scenario_throwaway },
        { "bwrap", scenario_bwrap },
        { "create", scenario_create },
        { "many", scenario_many },
        { "bigout", scenario_bigout },
        { "files", scenario_files },
        { "ports", scenario_ports },
        { "images", scenario_images },
        { "egress", scenario_egress },
};

static void usage(FILE *f) {
        fputs("Usage: sandboxd-bench [OPTIONS]\n\n"
              "  --socket PATH       sandboxd's socket (default $SANDBOXD_SOCKET, else the system one)\n"
              "  --runs N            measured requests per row (default 500; a tenth more as warm-up)\n"
              "  --clients LIST      concurrent clients, comma-separated (default 1,2,8)\n"
              "  --sandboxes N       sandboxes alive at once in the 'many' scenario (default 200)\n"
              "  --best-effort       create sandboxes with best_effort (hosts without cgroup controllers)\n"
              "  --daemon-pid PID    the daemon, for its RSS (default: the socket's peer, else the only sandboxd)\n"
              "  --only NAME[,NAME] only these scenarios: floor, run, throwaway, bwrap, create,\n"
              "                      many, bigout, files, ports, egress\n"
              "  --json              print the rows as a JSON array instead of a markdown table\n"
              "  -h, --help          this help\n",
              f);
}

static int parse_uint(const char *s, unsigned max, unsigned *ret) {
        char *end;
        unsigned long v;

        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno || end == s || *end || v == 0 || v > max)
                return -EINVAL;
        *ret = (unsigned) v;
        return 0;
}

static int parse_clients(Bench *b, const char *s) {
        char *copy = strdup(s), *save = NULL;
        int r = copy ? 0 : -ENOMEM;

        b->n_clients = 0;
        for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t && r >= 0; t = strtok_r(NULL, ",", &save)) {
                if (b->n_clients == sizeof(b->clients) / sizeof(b->clients[0]))
                        r = -E2BIG;
                else
                        r = parse_uint(t, BENCH_MAX_CLIENTS, &b->clients[b->n_clients++]);
        }
        free(copy);
        return r < 0 ? r : b->n_clients ? 0 : -EINVAL;
}

static int parse_args(Bench *b, int argc, char **argv) {
        enum { O_SOCKET = 256, O_RUNS, O_CLIENTS, O_SANDBOXES, O_BEST, O_PID, O_ONLY, O_JSON };
        static const struct option opts[] = {
                { "socket", required_argument, NULL, O_SOCKET },   { "runs", required_argument, NULL, O_RUNS },
                { "clients", required_argument, NULL, O_CLIENTS }, { "sandboxes", required_argument, NULL, O_SANDBOXES },
                { "best-effort", no_argument, NULL, O_BEST },      { "daemon-pid", required_argument, NULL, O_PID },
                { "only", required_argument, NULL, O_ONLY },       { "json", no_argument, NULL, O_JSON },
                { "help", no_argument, NULL, 'h' },                {},
        };
        unsigned pid;
        int c, idx = 0, r = 0;

        while (r >= 0 && (c = getopt_long(argc, argv, "h", opts, &idx)) >= 0)
                switch (c) {
                case O_SOCKET: b->socket = optarg; break;
                case O_RUNS: r = parse_uint(optarg, 10000000, &b->runs); break;
                case O_CLIENTS: r = parse_clients(b, optarg); break;
                case O_SANDBOXES: r = parse_uint(optarg, 100000, &b->sandboxes); break;
                case O_BEST: b->best_effort = true; break;
                case O_PID:
                        r = parse_uint(optarg, 1u << 30, &pid);
                        b->daemon_pid = (pid_t) pid;
                        break;
                case O_ONLY: b->only = optarg; break;
                case O_JSON: b->json = true; break;
                case 'h': usage(stdout); exit(EXIT_SUCCESS);
                default: return -EINVAL;
                }
        if (r < 0)
                fprintf(stderr, "sandboxd-bench: invalid value for --%s: '%s'\n", opts[idx].name, optarg);
        if (r >= 0 && optind < argc) {
                fprintf(stderr, "sandboxd-bench: unexpected argument '%s'\n", argv[optind]);
                r = -EINVAL;
        }
        return r;
}

static int scenario_index(const char *name) {
        for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
                if (strcmp(scenarios[i].name, name) == 0)
                        return (int) i;
        return -1;
}

/* --only takes a comma-separated list of scenario names. */
static bool only_has(const char *list, const char *name) {
        size_t n = strlen(name);
        for (const char *p = list; *p;) {
                const char *end = strchrnul(p, ',');
                if ((size_t) (end - p) == n && strncmp(p, name, n) == 0)
                        return true;
                p = *end ? end + 1 : end;
        }
        return false;
}

static bool only_valid(const char *list) {
        for (const char *p = list; *p;) {
                const char *end = strchrnul(p, ',');
                char name[32];
                snprintf(name, sizeof(name), "%.*s", (int) (end - p), p);
                if (scenario_index(name) < 0)
                        return false;
                p = *end ? end + 1 : end;
        }
        return true;
}

/* Resolves the daemon's pid once, up front, from a throwaway connection. */
static void find_daemon(Bench *b) {
        SbxClient *c = NULL;

        if (bench_connect(b, &c) < 0)
                return;
        if (bench_find_daemon(b, c) < 0)
                fprintf(stderr, "sandboxd-bench: cannot tell the daemon's pid (use --daemon-pid); no RSS figures\n");
        sbx_client_free(c);
}

int main(int argc, char **argv) {
        Bench b = { .runs = 500, .clients = { 1, 2, 8 }, .n_clients = 3, .sandboxes = 200 };
        int failed = 0;

        b.socket = getenv(SBX_SOCKET_ENV);
        if (parse_args(&b, argc, argv) < 0) {
                usage(stderr);
                return 2;
        }
        if (b.only && !only_valid(b.only)) {
                fprintf(stderr, "sandboxd-bench: unknown scenario in '%s'\n", b.only);
                return 2;
        }
        b.rows = json_object_new_array();
        find_daemon(&b);
        if (!b.json)
                printf("| scenario | median ms | p99 ms | runs/s | notes |\n|---|---:|---:|---:|---|\n");
        for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
                if (b.only && !only_has(b.only, scenarios[i].name))
                        continue;
                int r = scenarios[i].fn(&b);
                if (r < 0) {
                        fprintf(stderr, "sandboxd-bench: scenario %s failed: %s\n", scenarios[i].name, strerror(-r));
                        failed = 1;
                }
        }
        if (b.json)
                printf("%s\n", json_object_to_json_string_ext(b.rows, JSON_C_TO_STRING_PRETTY));
        json_object_put(b.rows);
        return failed;
}
