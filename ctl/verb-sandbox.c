/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl list, inspect, destroy: the caller's sandboxes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxctl.h"

static int verb_list_run(int argc, char *argv[]);
static int verb_inspect_run(int argc, char *argv[]);
static int verb_destroy_run(int argc, char *argv[]);
static int verb_network_run(int argc, char *argv[]);

const Verb verb_list = {
        .name = "list",
        .args = "[-q]",
        .summary = "List your sandboxes",
        .help = "Options:\n"
                "  -q --quiet             Print the ids only, one a line\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_list_run,
};

static const char *const network_field_options[] = {
        "network", "--allow", "network.egress", "--allow", "network.egress.allow", "--allow", NULL,
};

const Verb verb_network = {
        .name = "network",
        .args = "SANDBOX --allow ENTRY... | --egress all | --deny-all",
        .summary = "Change a running sandbox's way out; connections it no longer allows are cut",
        .help = "Options:\n"
                "     --allow ADDR|NAME[:PORT[/tcp|/udp]]  A way out to these only (repeatable):\n"
                "                         the new list replaces the old one as a whole\n"
                "     --allow-sni NAME[:PORT]  A name matched on its TLS server name or HTTP Host\n"
                "                         (TCP 80 and 443, or PORT), as at create\n"
                "     --egress all        A way out to all but what sandboxd always denies\n"
                "     --deny-all          No way out at all (names resolve to nothing)\n"
                "\nThe sandbox must have been made with a way out (--allow, --egress all or\n"
                "--deny-all at create). The new list is in force at once, in one nftables\n"
                "commit; a name on both lists keeps the addresses it resolved to; open\n"
                "connections the new list does not allow are cut, and the line printed says\n"
                "how many.\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_network_run,
        .field_options = network_field_options,
};

const Verb verb_inspect = {
        .name = "inspect",
        .args = "SANDBOX",
        .summary = "Show a sandbox (by id or name): limits, what is enforced, usage, sessions, ports",
        .help = "",
        .failure_status = EXIT_FAILURE,
        .run = verb_inspect_run,
};

const Verb verb_destroy = {
        .name = "destroy",
        .args = "SANDBOX...",
        .summary = "Kill everything in sandboxes (by id or name) and remove them",
        .help = "Destroying a sandbox by its id once it is gone is not an error (\"ID was already\n"
                "gone\"); a name that names no sandbox is not_found (it may be a typo). Exits 1\n"
                "when any sandbox could not be destroyed. With --json prints each reply on its\n"
                "own line.\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_destroy_run,
};

/* ---- list -------------------------------------------------------------------------------- */

static int list_add_row(Table *t, json_object *sbx) {
        json_object *limits = json_child(sbx, "limits");
        char n[FIELD_BUF], m[FIELD_BUF], p[FIELD_BUF], c[FIELD_BUF], e[FIELD_BUF];
        const char *row[] = {
                json_str(sbx, "id"),
                fmt_value(n, sbx, "name"),
                json_str(sbx, "state"),
                fmt_size(m, limits, "memory"),
                fmt_value(p, limits, "pids"),
                fmt_value(c, limits, "cpus"),
                fmt_enforced(e, json_child(sbx, "enforced")),
                json_str(sbx, "created"),
        };

        return table_add_row(t, row);
}

static int list_print(json_object *sandboxes) {
        static const char *const headers[] = { "ID", "NAME", "STATE", "MEMORY", "PIDS", "CPUS", "ENFORCED", "CREATED" };
        _cleanup_table_ Table *t = table_new(ELEMENTSOF(headers), headers);
        size_t n = json_object_array_length(sandboxes);

        if (!t)
                return log_error_errno(-ENOMEM, "%m");
        for (size_t i = 0; i < n; i++)
                if (list_add_row(t, json_object_array_get_idx(sandboxes, i)) < 0)
                        return log_error_errno(-ENOMEM, "%m");
        if (n == 0) {
                printf("No sandboxes.\n");
                return 0;
        }
        table_print(t);
        return 0;
}

static void list_print_ids(json_object *sandboxes) {
        size_t n = json_object_array_length(sandboxes);

        for (size_t i = 0; i < n; i++) {
                const char *id = json_str(json_object_array_get_idx(sandboxes, i), "id");
                if (id)
                        printf("%s\n", esc(id));
        }
}

static int list_parse(int argc, char *argv[], bool *quiet) {
        const VerbOption options[] = { { "quiet", 'q', .flag = quiet }, {} };
        return parse_verb_options(&verb_list, argc, argv, "hq", options, 0, 0);
}

static int verb_list_run(int argc, char *argv[]) {
        _cleanup_json_ json_object *reply = NULL;
        json_object *sandboxes;
        bool quiet = false;
        int r = list_parse(argc, argv, &quiet);

        if (r <= 0)
                return r;
        r = daemon_request(request_new("list"), &reply);
        if (r < 0 || arg.json)
                return r;
        sandboxes = json_child(reply, "sandboxes");
        if (!json_object_is_type(sandboxes, json_type_array))
                return log_error("the reply to list has no sandboxes array");
        if (quiet) {
                list_print_ids(sandboxes);
                return 0;
        }
        return list_print(sandboxes);
}

/* ---- inspect ----------------------------------------------------------------------------- */

static void print_limit(json_object *sbx, const char *key, const char *controller, const char *label) {
        json_object *limits = json_child(sbx, "limits"), *enforced = json_child(sbx, "enforced");
        char buf[FIELD_BUF];
        const char *v = strcmp(key, "memory") == 0 ? fmt_size(buf, limits, key) : fmt_value(buf, limits, key);

        if (!json_child(limits, key) || !json_child(enforced, controller))
                print_kv(label, "%s", v);
        else
                print_kv(label, "%s (%s)", v, json_true(enforced, controller) ? "enforced" : "NOT enforced");
}

static void print_env(json_object *env) {
        const char *key = "env";

        if (!json_object_is_type(env, json_type_object))
                return;
        json_object_object_foreach(env, name, value) {
                print_kv(key, "%s=%s", name, json_object_get_string(value));
                key = "";
        }
}

static void print_usage(json_object *usage) {
        char buf[FIELD_BUF];

        if (!usage)
                return;
        print_kv("memory usage", "%s", fmt_size(buf, usage, "memory_bytes"));
        print_kv("processes", "%s", fmt_value(buf, usage, "pids"));
        print_kv("cpu time", "%s", fmt_seconds(buf, usage, "cpu_s"));
}

/* Whole hours, minutes or seconds as one writes them to create ("24h", "90m"); else as
 * fmt_seconds() has it. */
static const char *fmt_span(char buf[static FIELD_BUF], json_object *o, const char *key) {
        static const struct {
                uint64_t secs;
                char unit;
        } units[] = { { 3600, 'h' }, { 60, 'm' }, { 1, 's' } };
        double d;

        if (!json_number(o, key, &d) || d < 1 || d > 1e15 || d != (double) (uint64_t) d)
                return fmt_seconds(buf, o, key);
        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                if ((uint64_t) d % units[i].secs == 0) {
                        snprintf(buf, FIELD_BUF, "%" PRIu64 "%c", (uint64_t) d / units[i].secs, units[i].unit);
                        break;
                }
        return buf;
}

/* What the sweep applies: "disk limit: 2G", "disk used: 1.2M (at the last sweep)", "ttl: 1h
 * (expires at ...)", "idle: 30m"; "none" where the sandbox has none. */
static void print_sweep_limits(json_object *sbx) {
        json_object *limits = json_child(sbx, "limits");
        char buf[FIELD_BUF];

        print_kv("disk limit", "%s", json_child(limits, "disk") ? fmt_size(buf, limits, "disk") : "none");
        if (json_child(sbx, "disk_bytes"))
                print_kv("disk used", "%s (at the last sweep)%s", fmt_size(buf, sbx, "disk_bytes"),
                         json_true(sbx, "disk_refused") ? "; over the limit: runs are refused" : "");
        else
                print_kv("disk used", "not measured yet (the next sweep does)");
        if (json_child(sbx, "ttl_s"))
                print_kv("ttl", "%s (expires at %s)", fmt_span(buf, sbx, "ttl_s"), json_str(sbx, "expires_at") ?: "-");
        else
                print_kv("ttl", "none");
        if (json_child(sbx, "idle_s"))
                print_kv("idle", "%s without a run, then destroyed", fmt_span(buf, sbx, "idle_s"));
        else
                print_kv("idle", "none");
}

static void print_snapshots(json_object *snaps) {
        size_t n;
        json_object *last;

        if (!json_object_is_type(snaps, json_type_array))
                return;
        n = json_object_array_length(snaps);
        if (n == 0) {
                print_kv("snapshots", "none");
                return;
        }
        last = json_object_array_get_idx(snaps, n - 1);
        print_kv("snapshots", "%zu (latest %s, %s)", n, json_str(last, "id") ?: "-", json_str(last, "created_at") ?: "-");
}

/* "sh -l": the words of an argv array, as many as fit (print_kv() escapes them). */
static const char *join_argv(char *cmd, size_t size, json_object *argv) {
        size_t len = 0;

        cmd[0] = '\0';
        for (size_t k = 0; json_object_is_type(argv, json_type_array) && k < json_object_array_length(argv); k++) {
                int w = snprintf(cmd + len, size - len, "%s%s", k ? " " : "",
                                 json_object_get_string(json_object_array_get_idx(argv, k)));
                if (w < 0 || (size_t) w >= size - len)
                        break;
                len += (size_t) w;
        }
        return cmd;
}

/* One line a session: "pty-ID running, 1 attached: sh -l". */
static void print_sessions(json_object *sessions) {
        const char *key = "sessions";
        size_t n;

        if (!json_object_is_type(sessions, json_type_array))
                return;
        n = json_object_array_length(sessions);
        if (n == 0) {
                print_kv(key, "none");
                return;
        }
        for (size_t i = 0; i < n; i++) {
                json_object *p = json_object_array_get_idx(sessions, i);
                char cmd[256];

                print_kv(key, "%s %s, %d attached: %s", json_str(p, "id") ?: "-", json_str(p, "state") ?: "-",
                         json_object_get_int(json_child(p, "attached")), join_argv(cmd, sizeof(cmd), json_child(p, "argv")));
                key = "";
        }
}

/* One line a published port: "8000 unix /run/sandboxd/ports/sbx-..-8000.sock, 1 connection". */
static void print_ports(json_object *ports) {
        const char *key = "ports";

        if (!json_object_is_type(ports, json_type_array))
                return;
        if (json_object_array_length(ports) == 0)
                print_kv(key, "none");
        for (size_t i = 0; i < json_object_array_length(ports); i++) {
                json_object *p = json_object_array_get_idx(ports, i);
                int n = json_object_get_int(json_child(p, "connections"));

                print_kv(key, "%d %s %s, %d connection%s", json_object_get_int(json_child(p, "port")),
                         json_str(p, "listen") ?: "-", json_str(p, "path") ?: json_str(p, "address") ?: "-", n,
                         n == 1 ? "" : "s");
                key = "";
        }
}

/* One line a run or session a daemon's death cut short: "run-ID started 2026-..: sleep 1000". */
static void print_interrupted(json_object *runs) {
        const char *key = "interrupted";

        for (size_t i = 0; json_object_is_type(runs, json_type_array) && i < json_object_array_length(runs); i++) {
                json_object *p = json_object_array_get_idx(runs, i);
                char cmd[256];

                print_kv(key, "%s started %s (%s): %s", json_str(p, "id") ?: "-", json_str(p, "started_at") ?: "-",
                         json_str(p, "reason") ?: "-", join_argv(cmd, sizeof(cmd), json_child(p, "argv")));
                key = "";
        }
}

/* "teardown stuck  for 12.0 s: pid 4242 cat (D), ..." */
static void print_teardown_stuck(json_object *t) {
        json_object *procs = json_child(t, "processes");
        char buf[512];
        size_t at = 0;

        if (!t)
                return;
        buf[0] = '\0';
        for (size_t i = 0; procs && i < json_object_array_length(procs) && at < sizeof(buf); i++) {
                json_object *p = json_object_array_get_idx(procs, i);
                int w = snprintf(buf + at, sizeof(buf) - at, "%spid %lld %s (%s)", i ? ", " : "",
                                 (long long) json_object_get_int64(json_child(p, "pid")),
                                 json_str(p, "comm") ?: "?", json_str(p, "state") ?: "?");
                if (w < 0)
                        break;
                at += (size_t) w;
        }
        print_kv("teardown stuck", "for %.1f s: %s", json_object_get_double(json_child(t, "since_s")), buf[0] ? buf : "-");
}

/* The names its relay answered last, each with its first address: "a.example (198.51.100.7), ...". */
static void print_names_resolved(json_object *names) {
        char buf[1024] = "";
        size_t at = 0;

        if (!json_object_is_type(names, json_type_array) || json_object_array_length(names) == 0)
                return;
        for (size_t i = 0; i < json_object_array_length(names) && at < sizeof(buf); i++) {
                json_object *e = json_object_array_get_idx(names, i);
                json_object *addrs = json_child(e, "addresses");
                const char *a = json_object_is_type(addrs, json_type_array) && json_object_array_length(addrs) > 0
                                        ? json_object_get_string(json_object_array_get_idx(addrs, 0)) : "-";
                int w = snprintf(buf + at, sizeof(buf) - at, "%s%s (%s%s)", i ? ", " : "", json_str(e, "name") ?: "?", a,
                                 json_object_array_length(addrs) > 1 ? ", ..." : "");
                if (w < 0)
                        break;
                at += (size_t) w;
        }
        print_kv("names resolved", "%s", esc(buf));
}

/* "none", or egress: what it reaches, then its address, gateway, interface and resolver. */
static void print_network(json_object *n) {
        json_object *eg = json_child(n, "egress"), *allow = json_child(eg, "allow");
        char buf[1024] = "";
        size_t at = 0;

        if (!eg) {
                print_kv("network", "%s", json_object_get_string(n) ?: "none");
                return;
        }
        for (size_t i = 0; allow && i < json_object_array_length(allow) && at < sizeof(buf); i++) {
                json_object *e = json_object_array_get_idx(allow, i);
                json_object *port = json_child(e, "port");
                int w = json_child(e, "name")
                                ? snprintf(buf + at, sizeof(buf) - at, "%s%s%s%s (sni)", i ? ", " : "", json_str(e, "name") ?: "?",
                                           port ? ":" : "", port ? json_object_get_string(port) : "")
                                : snprintf(buf + at, sizeof(buf) - at, "%s%s", i ? ", " : "", json_object_get_string(e));
                if (w < 0)
                        break;
                at += (size_t) w;
        }
        print_kv("network", "egress to %s", !allow ? "all (but what sandboxd always denies)"
                                            : at == 0 ? "nothing (sandboxctl network opens it)" : esc(buf));
        if (json_str(n, "address"))
                print_kv("address", "%s via %s (%s), resolver %s", esc(json_str(n, "address")), esc(json_str(n, "gateway") ?: "-"),
                         esc(json_str(n, "interface") ?: "-"), esc(json_str(n, "dns") ?: "none"));
        json_object *conns = json_child(n, "connections");
        if (conns)
                print_kv("connections", "%" PRId64 " open", json_object_get_int64(conns));
        print_names_resolved(json_child(n, "names_resolved"));
        json_object *q = json_child(n, "dns_queries");
        if (q)
                print_kv("dns queries", "%" PRId64 " relayed, %" PRId64 " answered, %" PRId64 " refused, %" PRId64 " dropped",
                         json_object_get_int64(json_child(q, "relayed")), json_object_get_int64(json_child(q, "answered")),
                         json_object_get_int64(json_child(q, "refused")), json_object_get_int64(json_child(q, "dropped")));
        json_object *sni = json_child(n, "sni");
        if (sni)
                print_kv("sni connections", "%" PRId64 " admitted, %" PRId64 " refused, %" PRId64 " being checked",
                         json_object_get_int64(json_child(sni, "admitted")), json_object_get_int64(json_child(sni, "refused")),
                         json_object_get_int64(json_child(sni, "checking")));
}

static void print_sandbox(json_object *sbx) {
        static const char *const plain[][2] = {
                { "id", "id" },           { "name", "name" },       { "state", "state" },
                { "owner_uid", "owner uid" }, { "created", "created" },
                { "workdir", "workdir" }, { "cgroup", "cgroup" }, { "root", "root" },
        };
        json_object *limits = json_child(sbx, "limits");
        char buf[FIELD_BUF];

        for (size_t i = 0; i < ELEMENTSOF(plain); i++)
                print_kv(plain[i][1], "%s", fmt_value(buf, sbx, plain[i][0]));
        print_network(json_child(sbx, "network"));
        print_limit(sbx, "memory", "memory", "memory limit");
        print_limit(sbx, "pids", "pids", "pids limit");
        print_limit(sbx, "cpus", "cpu", "cpus limit");
        print_kv("run timeout", "%s", fmt_seconds(buf, limits, "timeout_s"));
        print_kv("run output cap", "%s", fmt_size(buf, limits, "output_bytes"));
        print_sweep_limits(sbx);
        print_env(json_child(sbx, "env"));
        if (json_child(sbx, "runs_in_flight"))
                print_kv("runs in flight", "%s", fmt_value(buf, sbx, "runs_in_flight"));
        print_usage(json_child(sbx, "usage"));
        print_snapshots(json_child(sbx, "snapshots"));
        print_sessions(json_child(sbx, "sessions"));
        print_ports(json_child(sbx, "ports"));
        print_teardown_stuck(json_child(sbx, "teardown_stuck"));
        print_interrupted(json_child(sbx, "interrupted_runs"));
}

static int verb_inspect_run(int argc, char *argv[]) {
        _cleanup_json_ json_object *req = request_new("inspect"), *reply = NULL;
        int r = parse_common_only(&verb_inspect, argc, argv, 1, 1);

        if (r <= 0)
                return r;
        r = add_string(req, "sandbox", argv[optind]);
        if (r < 0)
                return r;
        r = daemon_request(TAKE_PTR(req), &reply);
        if (r < 0 || arg.json)
                return r;
        print_sandbox(json_child(reply, "sandbox"));
        return 0;
}

/* ---- destroy ----------------------------------------------------------------------------- */

static int destroy_one(SbxClient *c, const char *sandbox) {
        _cleanup_json_ json_object *req = request_new("destroy"), *reply = NULL;
        int r = add_string(req, "sandbox", sandbox);

        if (r < 0)
                return r;
        r = daemon_call(c, TAKE_PTR(req), &reply);
        if (r < 0)
                return r;
        if (arg.json)
                print_json(reply);
        r = reply_check(reply);
        if (r < 0 || arg.json)
                return r;
        if (json_true(reply, "destroyed"))
                printf("destroyed %s\n", esc(sandbox));
        else
                printf("%s was already gone\n", esc(sandbox));
        return 0;
}

static int verb_destroy_run(int argc, char *argv[]) {
        _cleanup_(sbx_client_freep) SbxClient *c = NULL;
        int r = parse_common_only(&verb_destroy, argc, argv, 1, -1), ret = 0;

        if (r <= 0)
                return r;
        r = daemon_connect(&c);
        if (r < 0)
                return r;
        for (int i = optind; i < argc; i++) {
                r = destroy_one(c, argv[i]);
                if (r == -EREMOTEIO || r == -EINVAL)
                        ret = r; /* that sandbox failed: go on with the others */
                else if (r < 0)
                        return r; /* the connection is gone */
        }
        return ret;
}

/* ---- network ----------------------------------------------------------------------------- */

static int verb_network_run(int argc, char *argv[]) {
        enum { ARG_ALLOW = ARG_VERB_FIRST, ARG_ALLOW_SNI, ARG_EGRESS, ARG_DENY_ALL };
        static const struct option options[] = {
                COMMON_OPTIONS,
                { "allow", required_argument, NULL, ARG_ALLOW },
                { "allow-sni", required_argument, NULL, ARG_ALLOW_SNI },
                { "egress", required_argument, NULL, ARG_EGRESS },
                { "deny-all", no_argument, NULL, ARG_DENY_ALL },
                {},
        };
        _cleanup_json_ json_object *req = request_new("sandbox.update"), *reply = NULL, *allow = NULL;
        const char *egress = NULL;
        bool deny_all = false;
        json_object *sbx;
        int c, r;

        optind = 0;
        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                switch (c) {
                case ARG_ALLOW:
                        if ((r = add_allow(&allow, optarg)) < 0)
                                return r;
                        break;
                case ARG_ALLOW_SNI:
                        if ((r = add_allow_sni(&allow, optarg)) < 0)
                                return r;
                        break;
                case ARG_EGRESS:
                        egress = optarg;
                        break;
                case ARG_DENY_ALL:
                        deny_all = true;
                        break;
                default:
                        if ((r = common_option(&verb_network, c)) <= 0)
                                return r;
                }
        }
        if ((r = check_arg_count(&verb_network, argc, argv, 1, 1)) <= 0)
                return r;
        if (!egress && !allow && !deny_all)
                return log_error("network: give the new way out: --allow ENTRY (repeatable), --egress all or --deny-all");
        if (deny_all && (egress || allow))
                return log_error("--deny-all goes alone");
        if (deny_all)
                allow = json_object_new_array();
        if ((r = add_string(req, "sandbox", argv[optind])) < 0 || (r = add_network(req, NULL, egress, allow)) < 0)
                return r;
        if ((r = daemon_request(TAKE_PTR(req), &reply)) < 0)
                return r;
        if (arg.json)
                return 0;
        sbx = json_child(reply, "sandbox");
        print_network(json_child(sbx, "network"));
        json_object *cut = json_child(reply, "connections_cut");
        if (cut)
                print_kv("connections cut", "%" PRId64, json_object_get_int64(cut));
        else
                print_kv("connections cut", "unknown (the connection table could not be read: see the daemon's log)");
        return 0;
}
