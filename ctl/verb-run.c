/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl run, kill: run a command in a sandbox and pass its output and exit status through;
 * send a signal to a run. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxctl.h"
#include "util.h"

static int verb_run_run(int argc, char *argv[]);
static int verb_kill_run(int argc, char *argv[]);
static int verb_reattach_run(int argc, char *argv[]);

static const char *const run_field_options[] = {
        "sandbox", "--sandbox", "command", "--command", "cwd", "--cwd", "user", "--user",
        "memory", "--memory", "pids", "--pids", "limits.memory", "--memory", "limits.pids", "--pids",
        "limits.cpus", "--cpus", "timeout_s", "--timeout", "cpu_s", "--cpu-time",
        "output_bytes", "--output-bytes", "file_size", "--file-size", "open_files", "--open-files",
        "workspace", "--workspace", "image", "--image", NULL,
};

const Verb verb_run = {
        .name = "run",
        .args = "[OPTIONS] [--] ARGV... | -c COMMAND",
        .summary = "Run a command in a sandbox and pass its output and exit status through",
        .help = "Options:\n"
                "  -s --sandbox ID|NAME   Run in this sandbox (default: a throwaway sandbox,\n"
                "                         created for this run and destroyed after it)\n"
                "  -c --command COMMAND   Run /bin/sh -c COMMAND instead of ARGV\n"
                "     --memory SIZE       Memory limit (e.g. 256M, 1.5G)\n"
                "     --pids N            Most processes at once\n"
                "     --cpus X            CPU bandwidth in cores (e.g. 0.5); only for a throwaway\n"
                "                         sandbox, an existing one keeps the value it was created with\n"
                "     --timeout DUR       Wall-clock limit (e.g. 30s, 2m); exit status 124 when hit\n"
                "     --cpu-time DUR      CPU time limit of all the run's processes together\n"
                "     --output-bytes SIZE Cap per output stream; the head and the tail are kept\n"
                "     --file-size SIZE    Largest file the command may write (RLIMIT_FSIZE)\n"
                "     --open-files N      Most open files per process (RLIMIT_NOFILE)\n"
                "  -e --env NAME=VALUE    Environment (repeatable); when given, it replaces the\n"
                "                         sandbox's default environment\n"
                "  -w --cwd DIR           Working directory, /work or beneath it (default /work)\n"
                "  -u --user USER         \"sandbox\" (uid 1000) or \"root\" (root of the sandbox's\n"
                "                         user namespace); default: the sandbox's (\"sandbox\")\n"
                "     --stdin             Send sandboxctl's own standard input to the command\n"
                "     --stdin-file FILE   Send FILE as the command's standard input\n"
                "     --network MODE      Network of a throwaway sandbox: \"none\" (the default)\n"
                "     --egress all        ... or a way out to all but what sandboxd always denies\n"
                "     --allow ADDR|NAME[:PORT[/tcp|/udp]]  ... or to these only (repeatable)\n"
                "     --workspace WHERE   /work of a throwaway sandbox: \"memory\" (the default: its\n"
                "                         tmpfs, half of --memory with /tmp) or \"disk\" (the state dir)\n"
                "     --best-effort       Accept limits this host cannot enforce (throwaway only)\n"
                "     --mount SRC:DST[:ro]  Your directory SRC at DST in a throwaway sandbox, as\n"
                "                         'sandboxctl create --mount' (repeatable)\n"
                "     --image NAME        The root of a throwaway sandbox: that image\n"
                "  -v --verbose           Print the run's id on stderr as it starts, then an account\n"
                "                         of the run (reason, exit status, time, CPU, peak memory,\n"
                "                         ids) and note truncated output\n"
                "     --stream            Print the output as it is produced, not at the end\n"
                "\nThe command's stdout and stderr are written to sandboxctl's, byte for byte, once\n"
                "it has ended (or as they arrive with --stream; then nothing is dropped). A\n"
                "stream past --output-bytes keeps its head and tail, with a line '[... N bytes\n"
                "dropped ...]' between them in that stream. Without --stdin or --stdin-file its\n"
                "standard input is empty; with them, it is at most the daemon's max_stdin_bytes\n"
                "(3M by default; binary input counts a third more): copy larger input in with\n"
                "'sandboxctl cp' and redirect it.\n"
                "Put -- before ARGV when it starts with an option.\n"
                "\nExit status: the command's own; 128+N when a signal N killed it; 124 when the\n"
                "timeout hit. 125 when the command could not be run: sandboxctl or sandboxd\n"
                "failed (bad option, daemon not reachable, an error reply such as spawn_failed,\n"
                "limit_unenforceable or not_found). With --json the reply is printed and the exit\n"
                "status is the same.\n",
        .failure_status = EXIT_RUNNER_FAILED,
        .run = verb_run_run,
        .field_options = run_field_options,
};

const Verb verb_kill = {
        .name = "kill",
        .args = "[-s SIGNAL] RUN_ID",
        .summary = "Send a signal to a run (default KILL: its whole cgroup)",
        .help = "Options:\n"
                "  -s --signal SIGNAL     KILL (default), TERM, INT, 15, SIGTERM, ...\n"
                "\nKILL kills every process of the run; other signals go to its main process.\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_kill_run,
};

const Verb verb_reattach = {
        .name = "reattach",
        .args = "[-v] RUN_ID",
        .summary = "Get the output and exit status of a run that outlived a restart of sandboxd",
        .help = "Options:\n"
                "  -v --verbose           Print the run's account on stderr, as 'run -v' does\n"
                "\nA run whose client lost its connection when sandboxd restarted goes on where\n"
                "sandboxd keeps it (systemd's fd store, or its holder across a stop and start).\n"
                "reattach (run.attach) prints what its capture holds of its stdout and stderr, a\n"
                "note where the middle was dropped (past its output_bytes), then the rest as it\n"
                "comes, and exits with the run's status as 'run' does. A run that ended meanwhile\n"
                "keeps its result for run_result_keep (sandboxd.conf(5)), for one reattach; one the\n"
                "restart interrupted is said so. A 'run' whose connection ends before its reply\n"
                "names the run and this command.\n",
        .failure_status = EXIT_RUNNER_FAILED,
        .run = verb_reattach_run,
};

enum {
        ARG_MEMORY = ARG_VERB_FIRST,
        ARG_PIDS,
        ARG_CPUS,
        ARG_TIMEOUT,
        ARG_CPU_TIME,
        ARG_OUTPUT_BYTES,
        ARG_STDIN,
        ARG_STDIN_FILE,
        ARG_NETWORK,
        ARG_WORKSPACE,
        ARG_BEST_EFFORT,
        ARG_STREAM,
        ARG_MOUNT,
        ARG_FILE_SIZE,
        ARG_OPEN_FILES,
        ARG_IMAGE,
        ARG_EGRESS,
        ARG_ALLOW,
};

/* Strings as given; validated while the request is built, once all options are known (where
 * memory goes depends on --sandbox). */
typedef struct RunArgs {
        const char *sandbox, *command, *cwd, *network, *egress, *workspace, *stdin_file, *user, *image;
        const char *memory, *pids, *cpus, *timeout, *cpu_time, *output_bytes, *file_size, *open_files;
        bool read_stdin, best_effort, verbose, stream;
        json_object *env, *mounts, *allow;
        char **argv; /* NULL-terminated, from argv */
        int argc;
} RunArgs;

static void run_args_done(RunArgs *a) {
        json_object_put(a->env);
        json_object_put(a->mounts);
        json_object_put(a->allow);
}

static int run_option(RunArgs *a, int c, const char *value) {
        switch (c) {
        case 's': a->sandbox = value; break;
        case 'c': a->command = value; break;
        case 'w': a->cwd = value; break;
        case 'u': a->user = value; break;
        case 'e': return add_env(&a->env, value);
        case 'v': a->verbose = true; break;
        case ARG_MEMORY: a->memory = value; break;
        case ARG_PIDS: a->pids = value; break;
        case ARG_CPUS: a->cpus = value; break;
        case ARG_TIMEOUT: a->timeout = value; break;
        case ARG_CPU_TIME: a->cpu_time = value; break;
        case ARG_OUTPUT_BYTES: a->output_bytes = value; break;
        case ARG_STDIN: a->read_stdin = true; break;
        case ARG_STDIN_FILE: a->stdin_file = value; break;
        case ARG_NETWORK: a->network = value; break;
        case ARG_EGRESS: a->egress = value; break;
        case ARG_ALLOW: return add_allow(&a->allow, value);
        case ARG_WORKSPACE: a->workspace = value; break;
        case ARG_BEST_EFFORT: a->best_effort = true; break;
        case ARG_STREAM: a->stream = true; break;
        case ARG_MOUNT: return add_mount(&a->mounts, value);
        case ARG_FILE_SIZE: a->file_size = value; break;
        case ARG_OPEN_FILES: a->open_files = value; break;
        case ARG_IMAGE: a->image = value; break;
        default: return log_error("unhandled option %d", c);
        }
        return 0;
}

/* 1 to go on, 0 after --help, negative on error. */
static int run_parse(RunArgs *a, int argc, char *argv[]) {
        static const struct option options[] = {
                COMMON_OPTIONS,
                { "sandbox", required_argument, NULL, 's' },
                { "command", required_argument, NULL, 'c' },
                { "cwd", required_argument, NULL, 'w' },
                { "user", required_argument, NULL, 'u' },
                { "env", required_argument, NULL, 'e' },
                { "verbose", no_argument, NULL, 'v' },
                { "memory", required_argument, NULL, ARG_MEMORY },
                { "pids", required_argument, NULL, ARG_PIDS },
                { "cpus", required_argument, NULL, ARG_CPUS },
                { "timeout", required_argument, NULL, ARG_TIMEOUT },
                { "cpu-time", required_argument, NULL, ARG_CPU_TIME },
                { "output-bytes", required_argument, NULL, ARG_OUTPUT_BYTES },
                { "stdin", no_argument, NULL, ARG_STDIN },
                { "stdin-file", required_argument, NULL, ARG_STDIN_FILE },
                { "network", required_argument, NULL, ARG_NETWORK },
                { "egress", required_argument, NULL, ARG_EGRESS },
                { "allow", required_argument, NULL, ARG_ALLOW },
                { "workspace", required_argument, NULL, ARG_WORKSPACE },
                { "best-effort", no_argument, NULL, ARG_BEST_EFFORT },
                { "stream", no_argument, NULL, ARG_STREAM },
                { "mount", required_argument, NULL, ARG_MOUNT },
                { "file-size", required_argument, NULL, ARG_FILE_SIZE },
                { "open-files", required_argument, NULL, ARG_OPEN_FILES },
                { "image", required_argument, NULL, ARG_IMAGE },
                {},
        };
        int c, r;

        optind = 0;
        /* '+': the first non-option starts the command, whose options are its own. */
        while ((c = getopt_long(argc, argv, "+hs:c:w:e:u:v", options, NULL)) >= 0) {
                if (!is_common_option(c))
                        r = run_option(a, c, optarg);
                else if ((r = common_option(&verb_run, c)) == 0)
                        return 0; /* help shown */
                if (r < 0)
                        return r;
        }
        a->argv = argv + optind;
        a->argc = argc - optind;
        return 1;
}

/* ---- Building the request ---------------------------------------------------------------- */

static int run_add_command(json_object *req, const RunArgs *a) {
        json_object *argv;

        if (a->command && a->argc > 0)
                return log_error("run: give either -c COMMAND or ARGV, not both ('%s')", a->argv[0]);
        if (a->command)
                return add_string(req, "command", a->command);
        if (a->argc == 0)
                return log_error("run: missing command (usage: sandboxctl run [OPTIONS] -- ARGV... or -c COMMAND)");
        argv = json_object_new_array();
        json_object_object_add(req, "argv", argv);
        for (int i = 0; i < a->argc; i++) {
                if (!utf8_is_valid(a->argv[i], strlen(a->argv[i])))
                        return log_error("run: argument %d is not valid UTF-8", i + 1);
                json_object_array_add(argv, json_object_new_string(a->argv[i]));
        }
        return 0;
}

/* In an existing sandbox, memory and pids are per-run fields that may only tighten the sandbox's;
 * the CPU weight, network and best_effort belong to the sandbox and are set when creating it. */
static int run_add_existing_sandbox_limits(json_object *req, const RunArgs *a) {
        int r = 0;

        if (a->cpus)
                return log_error("run: --cpus is a limit of the sandbox; set it with 'sandboxctl create --cpus' "
                                 "or run without --sandbox");
        if (a->network || a->egress || a->allow)
                return log_error("run: --network, --egress and --allow only apply to a throwaway sandbox (without "
                                 "--sandbox)");
        if (a->workspace)
                return log_error("run: --workspace only applies to a throwaway sandbox (without --sandbox)");
        if (a->image)
                return log_error("run: --image only applies to a throwaway sandbox (without --sandbox); a sandbox's "
                                 "image is chosen with 'sandboxctl create --image'");
        if (a->best_effort)
                return log_error("run: --best-effort only applies to a throwaway sandbox (without --sandbox)");
        r = add_string(req, "sandbox", a->sandbox);
        if (r >= 0 && a->memory)
                r = add_size(req, "memory", "--memory", a->memory);
        if (r >= 0 && a->pids)
                r = add_uint(req, "pids", "--pids", a->pids);
        return r;
}

static int run_add_throwaway_limits(json_object *req, const RunArgs *a) {
        _cleanup_json_ json_object *limits = json_object_new_object();
        int r = 0;

        if (a->memory)
                r = add_size(limits, "memory", "--memory", a->memory);
        if (r >= 0 && a->pids)
                r = add_uint(limits, "pids", "--pids", a->pids);
        if (r >= 0 && a->cpus)
                r = add_cpus(limits, "cpus", "--cpus", a->cpus);
        if (r >= 0)
                r = add_network(req, a->network, a->egress, a->allow);
        if (r >= 0 && a->workspace)
                r = add_string(req, "workspace", a->workspace);
        if (r >= 0 && a->image)
                r = add_string(req, "image", a->image);
        if (r < 0)
                return r;
        if (a->best_effort)
                json_object_object_add(req, "best_effort", json_object_new_boolean(true));
        add_object_unless_empty(req, "limits", TAKE_PTR(limits));
        return 0;
}

static int run_add_run_limits(json_object *req, const RunArgs *a) {
        int r = 0;

        if (a->timeout)
                r = add_duration(req, "timeout_s", "--timeout", a->timeout);
        if (r >= 0 && a->cpu_time)
                r = add_duration(req, "cpu_s", "--cpu-time", a->cpu_time);
        if (r >= 0 && a->output_bytes)
                r = add_size(req, "output_bytes", "--output-bytes", a->output_bytes);
        /* The run's own: at most its sandbox's (a throwaway one has the defaults). */
        if (r >= 0 && a->file_size)
                r = add_size(req, "file_size", "--file-size", a->file_size);
        if (r >= 0 && a->open_files)
                r = add_uint(req, "open_files", "--open-files", a->open_files);
        return r;
}

static int read_stdin_source(const RunArgs *a, char **ret, size_t *ret_len) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (a->read_stdin || strcmp(a->stdin_file, "-") == 0) {
                r = read_all(STDIN_FILENO, ret, ret_len);
                return r < 0 ? log_error_errno(r, "reading standard input: %m") : 0;
        }
        fd = open(a->stdin_file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return log_error_errno(negative_errno(), "%s: %m", a->stdin_file);
        r = read_all(fd, ret, ret_len);
        return r < 0 ? log_error_errno(r, "%s: %m", a->stdin_file) : 0;
}

/* JSON strings cannot hold NUL (the protocol refuses \u0000) or invalid UTF-8: those go base64. */
static int run_add_stdin(json_object *req, const RunArgs *a) {
        _cleanup_free_ char *data = NULL, *b64 = NULL;
        size_t len;
        int r;

        if (!a->read_stdin && !a->stdin_file)
                return 0;
        if (a->read_stdin && a->stdin_file)
                return log_error("run: give either --stdin or --stdin-file, not both");
        r = read_stdin_source(a, &data, &len);
        if (r < 0 || len == 0)
                return r;
        if (len > INT_MAX / 2) /* json-c strings are int-sized, and base64 grows by a third */
                return log_error("run: standard input too large (%zu bytes)", len);
        if (utf8_is_valid(data, len) && !memchr(data, 0, len)) {
                json_object_object_add(req, "stdin", json_object_new_string_len(data, (int) len));
                return 0;
        }
        b64 = base64_encode(data, len);
        if (!b64)
                return log_error_errno(-ENOMEM, "%m");
        json_object_object_add(req, "stdin", json_object_new_string(b64));
        json_object_object_add(req, "stdin_encoding", json_object_new_string("base64"));
        return 0;
}

static int run_build_request(const RunArgs *a, json_object **ret) {
        _cleanup_json_ json_object *req = request_new("run");
        int r;

        r = run_add_command(req, a);
        if (r >= 0)
                r = a->sandbox ? run_add_existing_sandbox_limits(req, a) : run_add_throwaway_limits(req, a);
        if (r >= 0)
                r = run_add_run_limits(req, a);
        if (r >= 0 && a->env)
                json_object_object_add(req, "env", json_object_get(a->env));
        if (r >= 0 && a->mounts)
                json_object_object_add(req, "mounts", json_object_get(a->mounts));
        if (r >= 0 && a->cwd)
                r = add_string(req, "cwd", a->cwd);
        if (r >= 0 && a->user)
                r = add_string(req, "user", a->user);
        if (r >= 0)
                r = run_add_stdin(req, a);
        if (r >= 0 && a->stream)
                json_object_object_add(req, "stream", json_object_new_boolean(1));
        if (r < 0)
                return r;
        *ret = TAKE_PTR(req);
        return 0;
}

/* ---- The reply --------------------------------------------------------------------------- */

static int write_stream(json_object *reply, const char *name, int fd) {
        json_object *v = json_child(reply, name);
        char key[32];
        const char *encoding;
        _cleanup_free_ void *decoded = NULL;
        size_t len;
        int r;

        if (!v)
                return 0;
        if (!json_object_is_type(v, json_type_string))
                return log_error("the reply's %s is not a string", name);
        snprintf(key, sizeof(key), "%s_encoding", name);
        encoding = json_str(reply, key);
        len = (size_t) json_object_get_string_len(v);
        if (encoding && strcmp(encoding, "base64") == 0) {
                r = base64_decode(json_object_get_string(v), len, &decoded, &len);
                if (r < 0)
                        return log_error_errno(r, "the reply's %s is not valid base64", name);
        } else if (encoding && strcmp(encoding, "utf-8") != 0)
                return log_error("the reply's %s has an unknown encoding '%s'", name, encoding);
        r = write_all(fd, decoded ?: json_object_get_string(v), len);
        if (r < 0 && fd != STDERR_FILENO)
                return log_error_errno(r, "writing the command's %s: %m", name);
        return 0;
}

static void log_truncation(json_object *reply, const char *name) {
        char key[32], buf[FIELD_BUF];

        snprintf(key, sizeof(key), "%s_truncated", name);
        if (!json_true(reply, key))
                return;
        snprintf(key, sizeof(key), "%s_bytes", name);
        log_info("%s truncated: %s bytes total", name, fmt_value(buf, reply, key));
}

static const char *fmt_cpu(char buf[static FIELD_BUF], json_object *reply) {
        double user = 0, sys = 0;
        bool have_user = json_number(reply, "cpu_user_s", &user), have_sys = json_number(reply, "cpu_system_s", &sys);

        if (!have_user && !have_sys)
                return "-";
        return format_duration(buf, FIELD_BUF, (uint64_t) ((user + sys) * (double) USEC_PER_SEC + 0.5));
}

/* reason=exited exit=0 [signal=KILL] [oom_killed=yes] [pids_limit_hit=yes] time=0.012s cpu=0.004s peak_mem=1.2M pids_peak=1 run=run-.. sandbox=sbx-.. */
static void log_run_account(json_object *reply) {
        char e[FIELD_BUF], t[FIELD_BUF], c[FIELD_BUF], m[FIELD_BUF], p[FIELD_BUF], s[FIELD_BUF + 16] = "";

        if (json_str(reply, "signal"))
                snprintf(s, sizeof(s), " signal=%s", json_str(reply, "signal"));
        log_info("reason=%s exit=%s%s%s%s time=%s cpu=%s peak_mem=%s pids_peak=%s run=%s sandbox=%s",
                 json_str(reply, "reason") ?: "-", fmt_value(e, reply, "exit_code"), s,
                 json_true(reply, "oom_killed") ? " oom_killed=yes" : "",
                 json_true(reply, "pids_limit_hit") ? " pids_limit_hit=yes" : "", fmt_seconds(t, reply, "duration_s"),
                 fmt_cpu(c, reply), fmt_size(m, reply, "memory_peak_bytes"), fmt_value(p, reply, "pids_peak"),
                 json_str(reply, "run_id") ?: "-", json_str(reply, "sandbox") ?: "-");
}

static int run_exit_status(json_object *reply) {
        int64_t code;

        if (!json_int(reply, "exit_code", &code) || code < 0 || code > 255)
                return log_error("the run ended without an exit status (reason=%s)", json_str(reply, "reason") ?: "-");
        return (int) code;
}

/* --stream: each output event is written out as it arrives ({"event":"stdout","data":..}). */
static int on_run_event(json_object *event, void *userdata) {
        const char *kind = json_str(event, "event");
        int fd;

        if (!kind)
                return 0;
        if (strcmp(kind, "stdout") == 0)
                fd = STDOUT_FILENO;
        else if (strcmp(kind, "stderr") == 0)
                fd = STDERR_FILENO;
        else
                return 0;
        return write_stream(event, "data", fd);
}

/* reattach: the output events, and a note for what the capture dropped. */
static int on_reattach_event(json_object *event, void *userdata) {
        const char *kind = json_str(event, "event");
        char buf[FIELD_BUF];

        if (kind && strcmp(kind, "attached") == 0)
                *(bool *) userdata = true;
        if (kind && strcmp(kind, "dropped") == 0) {
                log_info("[... %s bytes of %s dropped ...]", fmt_value(buf, event, "bytes"), json_str(event, "stream") ?: "-");
                return 0;
        }
        return on_run_event(event, userdata);
}

/* What the run verb keeps of its events: the run's id from "started", for the advice when the
 * connection ends before the final reply (a restart of sandboxd: the run may go on). */
typedef struct RunEvents {
        bool stream, verbose;
        char run_id[64];
} RunEvents;

/* -v says the run's id as it starts, for 'sandboxctl kill' while it runs. */
static int on_run_events(json_object *event, void *userdata) {
        RunEvents *e = userdata;
        const char *kind = json_str(event, "event"), *id = json_str(event, "run_id");

        if (kind && strcmp(kind, "started") == 0 && id) {
                snprintf(e->run_id, sizeof(e->run_id), "%s", id);
                if (e->verbose)
                        log_info("run=%s started", esc(id));
        }
        return e->stream ? on_run_event(event, NULL) : 0;
}

static int run_output(json_object *reply, bool verbose, bool streamed) {
        int r;

        if (!streamed) {
                r = write_stream(reply, "stdout", STDOUT_FILENO);
                if (r < 0)
                        return r;
                r = write_stream(reply, "stderr", STDERR_FILENO);
                if (r < 0)
                        return r;
        }
        if (verbose) {
                log_truncation(reply, "stdout");
                log_truncation(reply, "stderr");
                log_run_account(reply);
        }
        return run_exit_status(reply);
}

/* A request line past the daemon's max_line_bytes is refused before its fields are read: too_large
 * with no field. With --stdin, that is the stdin's doing. */
static bool run_stdin_too_large(json_object *reply, const RunArgs *a) {
        const char *code = sbx_reply_error_code(reply);
        return (a->read_stdin || a->stdin_file) && code && strcmp(code, "too_large") == 0 &&
               !json_str(json_child(reply, "error"), "field");
}

static int verb_run_run(int argc, char *argv[]) {
        _cleanup_(run_args_done) RunArgs a = {};
        _cleanup_(sbx_client_freep) SbxClient *c = NULL;
        _cleanup_json_ json_object *req = NULL, *reply = NULL;
        int r = run_parse(&a, argc, argv);

        if (r <= 0)
                return r;
        r = run_build_request(&a, &req);
        if (r < 0)
                return r;
        if ((r = daemon_connect(&c)) < 0)
                return r;
        RunEvents ev = { .stream = a.stream && !arg.json, .verbose = a.verbose && !arg.json };
        r = daemon_call_events(c, TAKE_PTR(req), on_run_events, &ev, &reply);
        bool cut_off = (r == -ECONNRESET || r == -EPIPE) && ev.run_id[0];
        if (cut_off && a.sandbox)
                log_error("the run %s may go on where sandboxd keeps runs across a restart (systemd's fd store, or its "
                          "holder across a stop and start; not a standalone SIGKILL): 'sandboxctl reattach %s' gets the rest "
                          "of its output and its exit status, or says it was interrupted", ev.run_id, ev.run_id);
        else if (cut_off)
                log_error("the run %s ended with its throwaway sandbox (a throwaway run never outlives a restart)", ev.run_id);
        if (r < 0)
                return r;
        if (arg.json)
                print_json(reply);
        if ((r = reply_check(reply)) < 0) {
                if (run_stdin_too_large(reply, &a))
                        log_error("the request was too long for sandboxd because of %s: a run's standard input goes "
                                  "inside its request line (as base64, a third larger, when it is binary), at most "
                                  "max_stdin_bytes (3M by default) in a line of max_line_bytes (4M). Larger input: copy "
                                  "it in ('sandboxctl cp FILE SBX:/work/input') and redirect it in the command "
                                  "('< /work/input')",
                                  a.read_stdin ? "--stdin" : "--stdin-file");
                return r;
        }
        if (arg.json)
                return run_exit_status(reply);
        return run_output(reply, a.verbose, a.stream);
}

/* ---- kill -------------------------------------------------------------------------------- */

static int kill_parse(int argc, char *argv[], const char **ret_signal) {
        static const struct option options[] = {
                COMMON_OPTIONS,
                { "signal", required_argument, NULL, 's' },
                {},
        };
        int c, r;

        optind = 0;
        while ((c = getopt_long(argc, argv, "hs:", options, NULL)) >= 0) {
                if (c == 's') {
                        *ret_signal = optarg;
                        continue;
                }
                r = common_option(&verb_kill, c);
                if (r <= 0)
                        return r;
        }
        return check_arg_count(&verb_kill, argc, argv, 1, 1);
}

/* By name when it has one ("TERM"), which any daemon understands; else the number. */
static int add_signal(json_object *req, const char *value) {
        int sig = signal_from_string(value);
        const char *name;

        if (sig < 0)
                return log_error("unknown signal '%s' (use e.g. KILL, TERM, INT or a number)", value);
        name = signal_to_name(sig);
        json_object_object_add(req, "signal", name ? json_object_new_string(name) : json_object_new_int(sig));
        return 0;
}

static int verb_kill_run(int argc, char *argv[]) {
        _cleanup_json_ json_object *req = request_new("kill"), *reply = NULL;
        const char *sig = NULL;
        int r = kill_parse(argc, argv, &sig);

        if (r <= 0)
                return r;
        r = add_string(req, "run_id", argv[optind]);
        if (r >= 0 && sig)
                r = add_signal(req, sig);
        if (r < 0)
                return r;
        return daemon_request(TAKE_PTR(req), &reply);
}

/* ---- reattach ---------------------------------------------------------------------------- */

static int reattach_parse(int argc, char *argv[], bool *ret_verbose) {
        static const struct option options[] = {
                COMMON_OPTIONS,
                { "verbose", no_argument, NULL, 'v' },
                {},
        };
        int c, r;

        optind = 0;
        while ((c = getopt_long(argc, argv, "hv", options, NULL)) >= 0) {
                if (c == 'v') {
                        *ret_verbose = true;
                        continue;
                }
                r = common_option(&verb_reattach, c);
                if (r <= 0)
                        return r;
        }
        return check_arg_count(&verb_reattach, argc, argv, 1, 1);
}

static int verb_reattach_run(int argc, char *argv[]) {
        _cleanup_json_ json_object *req = request_new("run.attach"), *reply = NULL;
        bool verbose = false, attached = false;
        int r = reattach_parse(argc, argv, &verbose);

        if (r <= 0)
                return r;
        r = add_string(req, "run_id", argv[optind]);
        if (r < 0)
                return r;
        r = daemon_request_events(TAKE_PTR(req), arg.json ? NULL : on_reattach_event, &attached, &reply);
        if (r < 0)
                return r;
        if (arg.json)
                return run_exit_status(reply);
        /* A run in flight streams its output ("attached" first); a kept result has it in the reply. */
        return run_output(reply, verbose, attached);
}
