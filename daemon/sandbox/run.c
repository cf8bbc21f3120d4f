/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "connection.h"
#include "log.h"
#include "macro.h"
#include "context.h"
#include "run-record.h"
#include "run-exec.h"
#include "run.h"
#include "sandbox.h"
#include "snapshot-job.h"
#include "spawn.h"
#include "util.h"

#define RUN_MAX_ARGS 4096
#define RUN_MAX_ARG_LEN (128 * 1024)
#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

/* ---- Parsing ----------------------------------------------------------------------------- */

static char **strv_from_borrowed(const char **v, size_t n) {
        char **out = calloc(n + 1, sizeof(char *));
        for (size_t i = 0; out && i < n; i++)
                if (!(out[i] = strdup(v[i]))) {
                        for (size_t k = 0; k < i; k++)
                                free(out[k]);
                        free(out);
                        return NULL;
                }
        return out;
}

static void strv_free(char **v) {
        for (char **p = v; p && *p; p++)
                free(*p);
        free(v);
}

static int parse_command(json_object *req, RunSpec *spec, ProtoError *err) {
        _cleanup_free_ const char **argv = NULL;
        const char *command = NULL;
        size_t n = 0;
        int r;

        if ((r = proto_get_strv(req, "argv", RUN_MAX_ARGS, RUN_MAX_ARG_LEN, &argv, &n, err)) < 0 ||
            (r = proto_get_string(req, "command", RUN_MAX_ARG_LEN, &command, err)) < 0)
                return r;
        if (argv && command)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "argv", "give either 'argv' or 'command', not both");
        /* Blank is refused as an empty argv[0] is: "sh -c ''" would run nothing and exit 0. */
        if (command && command[strspn(command, " \t\n\r\v\f")] == '\0')
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "command", "'command' must not be empty or blank");
        if (command) {
                const char *sh[] = { "/bin/sh", "-c", command };
                spec->argv = strv_from_borrowed(sh, 3);
        } else if (argv && n > 0 && argv[0][0])
                spec->argv = strv_from_borrowed(argv, n);
        else
                return proto_error_set(err, SBX_E_INVALID_REQUEST, argv ? "argv" : "argv",
                                       "'argv' must hold at least one non-empty string (or give 'command')");
        return spec->argv ? 0 : proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
}

static char **envp_from_object(json_object *env) {
        size_t n = env ? (size_t) json_object_object_length(env) : 0, i = 0;
        bool have_path = false, have_home = false;
        char **envp = calloc(n + 3, sizeof(char *));

        if (!envp)
                return NULL;
        if (env) {
                json_object_object_foreach(env, k, v) {
                        if (asprintf(&envp[i], "%s=%s", k, json_object_get_string(v)) < 0) {
                                envp[i] = NULL;
                                strv_free(envp);
                                return NULL;
                        }
                        have_path = have_path || strcmp(k, "PATH") == 0;
                        have_home = have_home || strcmp(k, "HOME") == 0;
                        i++;
                }
        }
        if ((!have_path && !(envp[i++] = strdup("PATH=" DEFAULT_PATH))) ||
            (!have_home && !(envp[i++] = strdup("HOME=/work")))) {
                strv_free(envp);
                return NULL;
        }
        return envp;
}

static int parse_env(json_object *req, RunSpec *spec, ProtoError *err) {
        json_object *env;
        int r;
        if (!json_object_object_get_ex(req, "env", &env) || json_object_is_type(env, json_type_null))
                return 0;
        r = sandbox_env_check(env, err);
        if (r < 0)
                return r;
        spec->envp = envp_from_object(env);
        return spec->envp ? 0 : proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
}

/* "/work/a/../b" -> "/work/b"; anything that ends up outside /work is refused here, and the
 * kernel refuses symlinks that lead out (openat2 RESOLVE_BENEATH) when the run starts. */
static int normalize_cwd(const char *in, char **ret) {
        _cleanup_free_ char *out = malloc(strlen(in) + 2);
        _cleanup_free_ char *copy = strdup(in);
        char *save = NULL;
        size_t len = 0;

        if (!out || !copy)
                return -ENOMEM;
        if (in[0] != '/')
                return -EINVAL;
        out[0] = '\0';
        for (char *seg = strtok_r(copy, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
                if (strcmp(seg, ".") == 0)
                        continue;
                if (strcmp(seg, "..") == 0) {
                        char *slash = strrchr(out, '/');
                        if (!slash)
                                return -EINVAL;
                        *slash = '\0';
                        len = (size_t) (slash - out);
                        continue;
                }
                len += (size_t) sprintf(out + len, "/%s", seg);
        }
        if (strcmp(out, "/work") != 0 && strncmp(out, "/work/", 6) != 0)
                return -EXDEV;
        *ret = TAKE_PTR(out);
        return 0;
}

static int parse_cwd(json_object *req, RunSpec *spec, ProtoError *err) {
        const char *cwd = "/work";
        int r = proto_get_string(req, "cwd", 4096, &cwd, err);
        if (r < 0)
                return r;
        r = normalize_cwd(cwd, &spec->cwd);
        if (r == -ENOMEM)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        if (r < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "cwd",
                                       "'cwd' must be an absolute path at or beneath /work");
        return 0;
}

static int parse_stdin(json_object *req, RunSpec *spec, uint64_t max, ProtoError *err) {
        const char *data = NULL, *enc = "utf-8";
        json_object *v;
        int r;

        if ((r = proto_get_string(req, "stdin", SIZE_MAX, &data, err)) < 0 ||
            (r = proto_get_string(req, "stdin_encoding", 16, &enc, err)) < 0)
                return r;
        if (!data)
                return 0;
        (void) json_object_object_get_ex(req, "stdin", &v);
        if (strcmp(enc, "base64") == 0) {
                void *buf;
                if (base64_decode(data, (size_t) json_object_get_string_len(v), &buf, &spec->stdin_len) < 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "stdin", "'stdin' is not valid base64");
                spec->stdin_data = buf;
        } else if (strcmp(enc, "utf-8") == 0) {
                spec->stdin_len = (size_t) json_object_get_string_len(v);
                spec->stdin_data = malloc(spec->stdin_len + 1);
                if (!spec->stdin_data)
                        return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
                memcpy(spec->stdin_data, data, spec->stdin_len);
        } else
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "stdin_encoding",
                                       "'stdin_encoding' must be \"utf-8\" or \"base64\"");
        if (spec->stdin_len > max)
                return proto_error_set(err, SBX_E_TOO_LARGE, "stdin", "'stdin' is larger than %" PRIu64 " bytes", max);
        return 0;
}

int sandbox_user_parse(json_object *req, SandboxUser *ret, ProtoError *err) {
        const char *s = NULL;
        SandboxUser u;
        int r = proto_get_string(req, "user", 16, &s, err);

        if (r < 0 || !s)
                return r;
        u = sandbox_user_from_string(s);
        if (u == SANDBOX_USER_UNSET)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "user",
                                       "'user' must be \"sandbox\" (uid 1000, the default) or \"root\" "
                                       "(root of the sandbox's user namespace)");
        *ret = u;
        return 0;
}

int run_spec_parse(json_object *req, uint64_t max_stdin, RunSpec *spec, ProtoError *err) {
        int r;
        *spec = (RunSpec) {};
        if ((r = parse_command(req, spec, err)) < 0 || (r = parse_env(req, spec, err)) < 0 ||
            (r = parse_stdin(req, spec, max_stdin, err)) < 0 ||
            (r = parse_cwd(req, spec, err)) < 0 ||
            (r = proto_get_duration(req, "timeout_s", &spec->timeout_usec, err)) < 0 ||
            (r = proto_get_duration(req, "cpu_s", &spec->cpu_usec, err)) < 0 ||
            (r = proto_get_size(req, "output_bytes", &spec->output_bytes, err)) < 0 ||
            (r = proto_get_size(req, "memory", &spec->memory, err)) < 0 ||
            (r = proto_get_uint(req, "pids", 1, UINT32_MAX, &spec->pids, err)) < 0 ||
            (r = proto_get_bool(req, "stream", &spec->stream, err)) < 0 ||
            (r = sandbox_user_parse(req, &spec->user, err)) < 0)
                return r;
        /* Absent means the sandbox's value (no CPU limit for cpu_s); 0 given is no limit either
         * way, and refused as create refuses it (THREATS PRO-03). */
        if (json_object_object_get_ex(req, "timeout_s", NULL) && spec->timeout_usec == 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "timeout_s", "'timeout_s' must be positive");
        if (json_object_object_get_ex(req, "cpu_s", NULL) && spec->cpu_usec == 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "cpu_s", "'cpu_s' must be positive");
        if (json_object_object_get_ex(req, "output_bytes", NULL) && spec->output_bytes == 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "output_bytes", "'output_bytes' must be at least 2");
        if (json_object_object_get_ex(req, "memory", NULL) && spec->memory == 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "memory", "'memory' must be at least 1M");
        return 0;
}

int run_spec_resolve(RunSpec *spec, Sandbox *s, ProtoError *err) {
        const Config *c = &s->ctx->config;

        if (!spec->timeout_usec)
                spec->timeout_usec = s->limits.timeout_usec;
        if (spec->user == SANDBOX_USER_UNSET)
                spec->user = s->user;
        if (spec->user == SANDBOX_USER_ROOT && s->unprivileged_only)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "user",
                                       "sandbox %s is a throwaway sandbox made for a run as \"sandbox\": its mounts are not "
                                       "locked against root, so \"user\":\"root\" needs a sandbox of its own "
                                       "(a throwaway run that asks for it, or create)", s->id);
        if (!spec->output_bytes)
                spec->output_bytes = s->limits.output_bytes;
        if (spec->timeout_usec > c->max_timeout_usec)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "timeout_s", "'timeout_s' exceeds the maximum of %" PRIu64 "s",
                                       c->max_timeout_usec / USEC_PER_SEC);
        if (spec->output_bytes < 2 || spec->output_bytes > c->max_output_bytes)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "output_bytes",
                                       "'output_bytes' must be between 2 and %" PRIu64, c->max_output_bytes);
        if (spec->memory && (spec->memory > s->limits.memory || spec->memory < (1u << 20)))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "memory",
                                       "'memory' must be at least 1M and at most the sandbox's (%" PRIu64 ")", s->limits.memory);
        if (spec->pids && spec->pids > s->limits.pids)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "pids",
                                       "'pids' must not exceed the sandbox's (%" PRIu64 ")", s->limits.pids);
        if (!spec->envp && !(spec->envp = envp_from_object(s->env)))
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        return 0;
}

/* The most its reply can take: both streams at their cap, as base64 (output that is not UTF-8),
 * with room for the JSON around them; and its stdin until written. */
uint64_t run_spec_held(const RunSpec *spec) {
        return 2 * (4 * ((spec->output_bytes + 2) / 3) + 256) + spec->stdin_len;
}

void run_spec_done(RunSpec *spec) {
        strv_free(spec->argv);
        strv_free(spec->envp);
        free(spec->cwd);
        free(spec->stdin_data);
        *spec = (RunSpec) {};
}

/* ---- Lifecycle --------------------------------------------------------------------------- */

static void run_link(Run **list, Run *r) {
        r->prev = NULL;
        r->next = *list;
        if (*list)
                (*list)->prev = r;
        *list = r;
}

static void run_unlink(Run **list, Run *r) {
        if (r->prev)
                r->prev->next = r->next;
        else if (*list == r)
                *list = r->next;
        else
                return;
        if (r->next)
                r->next->prev = r->prev;
        r->next = r->prev = NULL;
}

static void run_mark_in_flight(Run *r) {
        Sandbox *s = r->sandbox;
        if (r->in_flight)
                return;
        run_link(&s->runs, r);
        s->n_runs++;
        r->in_flight = true;
}

int run_new(Sandbox *s, Connection *c, json_object *id, RunSpec *spec, Run **ret) {
        uint8_t b[6];
        Run *r = calloc(1, sizeof(*r));

        if (!r)
                return -ENOMEM;
        if (getrandom(b, sizeof(b), 0) != sizeof(b)) {
                free(r);
                return -EIO;
        }
        snprintf(r->id, sizeof(r->id), "run-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5]);
        r->sandbox = s;
        r->conn = connection_ref(c);
        r->conn->n_runs++;
        r->reserved = run_spec_held(spec);
        r->conn->run_reserved += r->reserved;
        r->req_id = json_object_get(id);
        r->spec = *spec;
        *spec = (RunSpec) {};
        r->cg_fd = r->kill_fd = r->pidfd = r->main_pidfd = r->report_fd = r->stdin_fd = -EBADF;
        r->out_fd[0] = r->out_fd[1] = -EBADF;
        output_init(&r->out[0], r->spec.output_bytes);
        output_init(&r->out[1], r->spec.output_bytes);
        if (s->state == SANDBOX_READY)
                run_mark_in_flight(r);
        else
                run_link(&s->pending_runs, r);
        *ret = r;
        return 0;
}

static void run_close_io(Run *r) {
        for (int i = 0; i < 2; i++) {
                r->out_source[i] = sd_event_source_disable_unref(r->out_source[i]);
                r->out_fd[i] = safe_close(r->out_fd[i]);
        }
        r->stdin_source = sd_event_source_disable_unref(r->stdin_source);
        r->stdin_fd = safe_close(r->stdin_fd);
        r->report_source = sd_event_source_disable_unref(r->report_source);
        r->report_fd = safe_close(r->report_fd);
        r->timeout_source = sd_event_source_disable_unref(r->timeout_source);
        r->cpu_source = sd_event_source_disable_unref(r->cpu_source);
}

Run *run_free(Run *r) {
        Sandbox *s;
        if (!r)
                return NULL;
        s = r->sandbox;
        if (r->in_flight) {
                run_record_end(r);
                run_unlink(&s->runs, r);
                s->n_runs--;
        } else
                run_unlink(&s->pending_runs, r);
        run_close_io(r);
        r->child_source = sd_event_source_disable_unref(r->child_source);
        safe_close(r->pidfd);
        safe_close(r->main_pidfd);
        safe_close(r->kill_fd);
        safe_close(r->cg_fd);
        if (r->conn) {
                r->conn->n_runs--;
                r->conn->run_reserved -= r->reserved;
                connection_unref(r->conn);
        }
        json_object_put(r->req_id);
        output_done(&r->out[0]);
        output_done(&r->out[1]);
        run_spec_done(&r->spec);
        free(r);
        return NULL;
}

/* Every run is looked at, found or not, as in manager_find_sandbox(). */
Run *manager_find_run(Context *m, const char *id) {
        Run *found = NULL;

        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry))
                for (Run *r = s->runs; r; r = r->next)
                        if (!found && strcmp(r->id, id) == 0)
                                found = r;
        return found;
}

/* ---- Finishing --------------------------------------------------------------------------- */

static const char *reason_name(RunReason why) {
        static const char *const names[] = {
                [REASON_NONE] = "exited",       [REASON_EXITED] = "exited",   [REASON_SIGNALED] = "signaled",
                [REASON_TIMEOUT] = "timeout",   [REASON_CPU_LIMIT] = "cpu_limit", [REASON_OOM] = "oom",
                [REASON_KILLED] = "killed",     [REASON_DESTROYED] = "destroyed",
        };
        return names[why];
}

/* ---- Streaming --------------------------------------------------------------------------- */

static void run_send_output(Run *r, int i, const char *data, size_t n, bool last) {
        char buf[65536 + 4];
        StreamCarry *c = &r->carry[i];
        json_object *ev;
        size_t len = c->len, keep;

        if (r->answered)
                return;
        memcpy(buf, c->bytes, c->len);
        memcpy(buf + len, data, n);
        len += n;
        keep = last ? 0 : utf8_incomplete_tail(buf, len);
        c->len = keep;
        memcpy(c->bytes, buf + len - keep, keep);
        len -= keep;
        if (len == 0)
                return;
        ev = proto_event(r->req_id, i == 0 ? "stdout" : "stderr");
        json_object_object_add(ev, "seq", json_object_new_int64((int64_t) r->seq++));
        proto_add_bytes(ev, "data", buf, len);
        connection_send_take(r->conn, ev);
}

static void run_set_reading(Run *r, bool on) {
        for (int i = 0; i < 2; i++)
                if (r->out_source[i])
                        (void) sd_event_source_set_enabled(r->out_source[i], on ? SD_EVENT_ON : SD_EVENT_OFF);
        r->paused = !on;
}

static void run_output_chunk(Run *r, int i, const char *data, size_t n) {
        output_append(&r->out[i], data, n);
        if (!r->spec.stream)
                return;
        run_send_output(r, i, data, n, false);
        if (!r->conn->dead && connection_backlog(r->conn) > STREAM_PAUSE_BYTES)
                run_set_reading(r, false);
}

void run_resume_streams(Registry *reg, Connection *c) {
        for (Sandbox *s = registry_first(reg); s; s = registry_next(&s->entry))
                for (Run *r = s->runs; r; r = r->next)
                        if (r->conn == c && r->paused && r->started)
                                run_set_reading(r, true);
}

static void drain_fd(Run *r, int i) {
        char buf[65536];
        while (r->out_fd[i] >= 0) {
                ssize_t n = read(r->out_fd[i], buf, sizeof(buf));
                if (n <= 0) {
                        if (n < 0 && errno == EINTR)
                                continue;
                        break;
                }
                run_output_chunk(r, i, buf, (size_t) n);
        }
        if (r->spec.stream && r->carry[i].len)
                run_send_output(r, i, "", 0, true);
}

static void add_u64_or_null(json_object *o, const char *key, int r, uint64_t v) {
        json_object_object_add(o, key, r < 0 ? NULL : json_object_new_int64((int64_t) v));
}

static bool run_oom_killed(Run *r) {
        uint64_t kills = 0;
        return (r->sandbox->enforced & CG_MEMORY) && cg_read_keyed(r->cg_fd, "memory.events", "oom_kill", &kills) >= 0 &&
               kills > 0;
}

/* A fork refused by a pids limit while the run ran, from pids.events "max": counted in the run's
 * cgroup (the forker's, before Linux 6.11; its own limit's, since) or, since 6.11, in the
 * sandbox's when the sandbox's limit was hit. Null where pids is not enforced. */
static void run_add_pids_limit_hit(Run *r, json_object *o) {
        uint64_t run_max = 0, sandbox_max = 0;
        int k;

        if (!(r->sandbox->enforced & CG_PIDS)) {
                json_object_object_add(o, "pids_limit_hit", NULL);
                return;
        }
        k = cg_read_keyed(r->cg_fd, "pids.events", "max", &run_max);
        if (k >= 0)
                k = cg_read_keyed(r->sandbox->cg_fd, "pids.events", "max", &sandbox_max);
        json_object_object_add(o, "pids_limit_hit",
                               k < 0 ? NULL : json_object_new_boolean(run_max > 0 || sandbox_max > r->sandbox_pids_max_events));
}

static void run_add_stats(Run *r, json_object *o) {
        CgroupRoot *cg = &r->sandbox->ctx->cg;
        uint64_t user = 0, sys = 0, peak = 0, pids = 0;
        int ru = cg_read_keyed(r->cg_fd, "cpu.stat", "user_usec", &user);
        int rs = cg_read_keyed(r->cg_fd, "cpu.stat", "system_usec", &sys);
        int rm = cg->has_memory_peak && (r->sandbox->enforced & CG_MEMORY) ? cg_read_u64(r->cg_fd, "memory.peak", &peak)
                                                                           : -ENODATA;
        int rp = cg->has_pids_peak && (r->sandbox->enforced & CG_PIDS) ? cg_read_u64(r->cg_fd, "pids.peak", &pids)
                                                                       : -ENODATA;

        json_object_object_add(o, "duration_s",
                               json_object_new_double((double) (now_usec(CLOCK_MONOTONIC) - r->start_usec) / 1e6));
        json_object_object_add(o, "cpu_user_s", ru < 0 ? NULL : json_object_new_double((double) user / 1e6));
        json_object_object_add(o, "cpu_system_s", rs < 0 ? NULL : json_object_new_double((double) sys / 1e6));
        add_u64_or_null(o, "memory_peak_bytes", rm, peak);
        add_u64_or_null(o, "pids_peak", rp, pids);
        run_add_pids_limit_hit(r, o);
}

/* The budget ended it whatever came first: the daemon's cgroup.kill is forced already, but the
 * RLIMIT_CPU guard (SIGXCPU, then SIGKILL), a handler of SIGXCPU that exits, or a shell that
 * passes on 128+N may beat it. Only a run that exited 0 is not said to have been cut short. */
static bool run_cpu_spent(Run *r) {
        uint64_t used = 0;
        return r->spec.cpu_usec && r->exited && !(r->wait_code == CLD_EXITED && r->wait_status == 0) &&
               cg_read_keyed(r->cg_fd, "cpu.stat", "usage_usec", &used) >= 0 && used >= r->spec.cpu_usec;
}

/* How it ended: what we did to it first, then the kernel's OOM account, the CPU budget, then the
 * wait status. */
static void run_add_outcome(Run *r, json_object *o, bool oom) {
        RunReason why = r->forced;
        char sigbuf[12];
        int sig = 0, code = 0;

        if (why == REASON_NONE && oom)
                why = REASON_OOM;
        if (why == REASON_NONE && run_cpu_spent(r))
                why = REASON_CPU_LIMIT;
        if (why == REASON_NONE && r->exited && r->wait_code == CLD_EXITED) {
                why = REASON_EXITED;
                code = r->wait_status;
        } else if (why == REASON_NONE && r->exited) {
                why = REASON_SIGNALED;
                sig = r->wait_status;
        } else if (why == REASON_NONE)
                why = REASON_KILLED, sig = SIGKILL;
        else if (r->exited && r->wait_code != CLD_EXITED)
                sig = r->wait_status;
        else if (r->exited)
                code = r->wait_status;
        else
                sig = SIGKILL;
        if (sig)
                code = 128 + sig;
        if (why == REASON_TIMEOUT)
                code = 124;
        json_object_object_add(o, "exit_code", json_object_new_int(code));
        json_object_object_add(o, "signal", sig > 0 ? json_object_new_string(signal_to_string(sig, sigbuf)) : NULL);
        json_object_object_add(o, "reason", json_object_new_string(reason_name(why)));
        json_object_object_add(o, "timed_out", json_object_new_boolean(why == REASON_TIMEOUT));
        json_object_object_add(o, "oom_killed", json_object_new_boolean(oom));
}

static void run_reply_failure(Run *r) {
        ProtoError err;
        json_object *reply;

        if (r->fail_step == STEP_CWD && (r->fail_errno == EXDEV || r->fail_errno == ENOENT || r->fail_errno == ENOTDIR ||
                                         r->fail_errno == ELOOP))
                proto_error_set(&err, SBX_E_INVALID_REQUEST, "cwd", "'cwd' %s: %s", r->spec.cwd,
                                r->fail_errno == EXDEV ? "resolves outside /work" : strerror(r->fail_errno));
        else {
                proto_error_set(&err, SBX_E_SPAWN_FAILED, NULL, "%s failed for '%s': %s", spawn_step_to_string(r->fail_step),
                                r->spec.argv[0], strerror(r->fail_errno));
                proto_error_set_spawn(&err, spawn_step_to_string(r->fail_step), r->fail_errno);
        }
        reply = proto_reply_error(r->req_id, &err);
        json_object_object_add(reply, "run_id", json_object_new_string(r->id));
        connection_send_take(r->conn, reply);
}

static void run_reply(Run *r) {
        json_object *o = proto_reply_ok(r->req_id);
        bool oom = run_oom_killed(r);

        json_object_object_add(o, "run_id", json_object_new_string(r->id));
        json_object_object_add(o, "sandbox", json_object_new_string(r->sandbox->id));
        run_add_outcome(r, o, oom);
        output_to_json(&r->out[0], o, "stdout");
        output_to_json(&r->out[1], o, "stderr");
        run_add_stats(r, o);
        connection_send_take(r->conn, o);
}

static void run_collect_reports(Run *r);

static void run_finish(Run *r) {
        Sandbox *s = r->sandbox;

        if (r->finished)
                return;
        r->finished = true;
        /* Its output is about to become its reply: counted once, as unread reply bytes. */
        r->conn->run_reserved -= r->reserved;
        r->reserved = 0;
        run_collect_reports(r);
        drain_fd(r, 0);
        drain_fd(r, 1);
        if (r->answered)
                ; /* told teardown_stuck already */
        else if (!r->started && r->fail_step != STEP_NONE && r->forced == REASON_NONE)
                run_reply_failure(r);
        else if (!r->started && r->forced == REASON_NONE && !run_oom_killed(r)) {
                ProtoError err;
                proto_error_set(&err, SBX_E_SPAWN_FAILED, NULL, "the run's helper died before the command started");
                connection_reply_error(r->conn, r->req_id, &err);
        } else
                run_reply(r);
        /* Background processes keep the run's cgroup until the sandbox goes; an empty one goes now. */
        if (cg_populated(r->cg_fd) == 0)
                (void) unlinkat(s->cg_fd, r->cg_name, AT_REMOVEDIR);
        run_free(r);
        sandbox_run_finished(s, NULL);
}

/* ---- Events ------------------------------------------------------------------------------ */

/* Tells the client the run's id while it is in flight, so that it (or another connection of
 * the same user) can kill it. */
static void run_send_started(Run *r) {
        json_object *ev;

        if (r->answered)
                return;
        ev = proto_event(r->req_id, "started");
        json_object_object_add(ev, "run_id", json_object_new_string(r->id));
        json_object_object_add(ev, "sandbox", json_object_new_string(r->sandbox->id));
        connection_send_take(r->conn, ev);
}

static void run_handle_report(Run *r, const SpawnReport *rep, int fd) {
        switch (rep->kind) {
        case REPORT_STARTED:
                r->started = true;
                r->main_pidfd = fd;
                run_send_started(r);
                /* Streamed output waited in the pipe so that "started" comes first. */
                if (r->spec.stream && connection_backlog(r->conn) <= STREAM_PAUSE_BYTES)
                        run_set_reading(r, true);
                return;
        case REPORT_EXITED:
                r->exited = true;
                r->wait_code = rep->code;
                r->wait_status = rep->status;
                break;
        case REPORT_FAILED:
                r->fail_step = rep->step;
                r->fail_errno = rep->err;
                break;
        }
        safe_close(fd);
}

/* Direct: the report socket closes at the command's exec (CLOEXEC), or when it dies; either way,
 * without a failure reported first, it is started, and it is the process we made. */
static void run_report_eof(Run *r) {
        SpawnReport rep = { .kind = REPORT_STARTED };
        if (!r->direct || r->started || r->fail_step != STEP_NONE)
                return;
        run_handle_report(r, &rep, fcntl(r->pidfd, F_DUPFD_CLOEXEC, 3));
}

static void run_collect_reports(Run *r) {
        SpawnReport rep;
        int fd, k = -EAGAIN;
        while (r->report_fd >= 0 && (k = report_recv(r->report_fd, &rep, &fd)) > 0)
                run_handle_report(r, &rep, fd);
        if (k == 0)
                run_report_eof(r);
}

static int on_report(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Run *r = userdata;
        SpawnReport rep;
        int passed, k = report_recv(fd, &rep, &passed);
        if (k > 0)
                run_handle_report(r, &rep, passed);
        else if (k == 0 || (k < 0 && k != -EAGAIN && k != -EINTR)) {
                if (k == 0)
                        run_report_eof(r);
                r->report_source = sd_event_source_disable_unref(r->report_source);
        }
        return 0;
}

static int on_output(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Run *r = userdata;
        int i = fd == r->out_fd[0] ? 0 : 1;
        char buf[65536];
        ssize_t n;

        if (!r->spec.stream && output_reads_direct(&r->out[i]))
                n = output_read(&r->out[i], fd);
        else if ((n = read(fd, buf, sizeof(buf))) > 0) {
                run_output_chunk(r, i, buf, (size_t) n);
                return 0;
        }

        if (n > 0)
                return 0;
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        r->out_source[i] = sd_event_source_disable_unref(r->out_source[i]);
        r->out_fd[i] = safe_close(r->out_fd[i]);
        return 0;
}

static int on_stdin(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Run *r = userdata;
        ssize_t n = write(fd, r->spec.stdin_data + r->stdin_off, r->spec.stdin_len - r->stdin_off);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n > 0)
                r->stdin_off += (size_t) n;
        if (n < 0 || r->stdin_off >= r->spec.stdin_len) {
                r->stdin_source = sd_event_source_disable_unref(r->stdin_source);
                r->stdin_fd = safe_close(r->stdin_fd);
        }
        return 0;
}

static int on_helper_exit(sd_event_source *src, const siginfo_t *si, void *userdata) {
        Run *r = userdata;
        r->child_source = sd_event_source_disable_unref(r->child_source);
        if (r->direct) {
                /* Direct, the helper was the command: its end is the run's. */
                run_collect_reports(r);
                if (r->started) {
                        r->exited = true;
                        r->wait_code = si->si_code;
                        r->wait_status = si->si_status;
                }
        }
        run_finish(r);
        return 0;
}

static int on_timeout(sd_event_source *src, uint64_t usec, void *userdata) {
        run_kill(userdata, SIGKILL, REASON_TIMEOUT);
        return 0;
}

static void run_timeout_pause(Run *r, uint64_t now) {
        uint64_t t;
        int enabled = SD_EVENT_OFF;

        if (r->timeout_paused || !r->timeout_source || sd_event_source_get_enabled(r->timeout_source, &enabled) < 0 ||
            enabled == SD_EVENT_OFF || sd_event_source_get_time(r->timeout_source, &t) < 0)
                return;
        r->timeout_left = t > now ? t - now : 0;
        r->timeout_paused = sd_event_source_set_enabled(r->timeout_source, SD_EVENT_OFF) >= 0;
}

void run_timeouts_pause(Sandbox *s) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        for (Run *r = s->runs; r; r = r->next)
                run_timeout_pause(r, now);
}

void run_timeouts_resume(Sandbox *s) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        for (Run *r = s->runs; r; r = r->next) {
                if (!r->timeout_paused)
                        continue;
                r->timeout_paused = false;
                if (sd_event_source_set_time(r->timeout_source, now + r->timeout_left) < 0 ||
                    sd_event_source_set_enabled(r->timeout_source, SD_EVENT_ONESHOT) < 0)
                        run_kill(r, SIGKILL, REASON_TIMEOUT); /* a timeout that cannot be kept is over */
        }
}

static int on_cpu_check(sd_event_source *src, uint64_t usec, void *userdata) {
        Run *r = userdata;
        uint64_t used = 0, left, next;
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

        if (cg_read_keyed(r->cg_fd, "cpu.stat", "usage_usec", &used) >= 0 && used >= r->spec.cpu_usec) {
                run_kill(r, SIGKILL, REASON_CPU_LIMIT);
                return 0;
        }
        /* The budget cannot be spent faster than all CPUs at once: sleep until that could be. */
        left = r->spec.cpu_usec - used;
        next = left / (uint64_t) (ncpu > 0 ? ncpu : 1);
        next = next < 10 * USEC_PER_MSEC ? 10 * USEC_PER_MSEC : next > USEC_PER_SEC ? USEC_PER_SEC : next;
        (void) sd_event_source_set_time_relative(src, next);
        (void) sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
        return 0;
}

void run_answer_stuck(Run *r, const ProtoError *err) {
        json_object *reply;

        if (r->finished || r->answered)
                return;
        reply = proto_reply_error(r->req_id, err);
        json_object_object_add(reply, "run_id", json_object_new_string(r->id));
        connection_send_take(r->conn, reply);
        r->answered = true;
}

int run_kill(Run *r, int sig, RunReason why) {
        if (r->finished)
                return 0;
        if (sig == SIGKILL) {
                if (r->forced == REASON_NONE)
                        r->forced = why;
                /* A helper born outside the run's cgroup (run_cgroup_frozen()) may not be in it yet. */
                if (!r->started && r->pidfd >= 0)
                        (void) syscall(SYS_pidfd_send_signal, r->pidfd, SIGKILL, NULL, 0);
                return r->cg_fd >= 0 ? cg_kill_at(r->kill_fd, r->cg_fd) : 0;
        }
        if (r->main_pidfd < 0)
                return -ESRCH;
        return syscall(SYS_pidfd_send_signal, r->main_pidfd, sig, NULL, 0) < 0 ? -errno : 0;
}

/* ---- Starting ---------------------------------------------------------------------------- */

static int run_make_cgroup(Run *r) {
        Sandbox *s = r->sandbox;
        Context *m = s->ctx;
        CgLimits l = {
                .memory = r->spec.memory ? r->spec.memory : s->limits.memory,
                .swap = m->config.swap_max,
                .pids = r->spec.pids,
                .oom_group = true, /* an OOM kill takes the whole run, never half of it */
        };
        int k;

        snprintf(r->cg_name, sizeof(r->cg_name), "run-%u", ++s->next_run_no);
        k = cg_create(s->cg_fd, r->cg_name, &r->cg_fd);
        if (k < 0)
                return k;
        /* A run that could not be killed later (its timeout, say, with the daemon out of fds)
         * does not start. */
        k = cg_open_kill(r->cg_fd);
        if (k < 0 && k != -ENOENT)
                return k;
        r->kill_fd = k;
        return cg_apply_limits_at(r->cg_fd, &m->cg, &l, s->enforced);
}

/* rlimits are the second guard where the kernel's cgroup limit is not available (pids and
 * memory: the run's own limits, 0 for the sandbox's). Shared with sessions (pty.c). */
void run_params_guard(Sandbox *s, uint64_t pids, uint64_t memory, RunParams *p) {
        if (!(s->enforced & CG_PIDS)) {
                rlim_t n = (rlim_t) (pids ? pids : s->limits.pids);
                p->rl_nproc = (struct rlimit) { n, n };
                p->rl_nproc_set = true;
        }
        if (!(s->enforced & CG_MEMORY)) {
                rlim_t n = (rlim_t) (memory ? memory : s->limits.memory);
                p->rl_as = (struct rlimit) { n, n };
                p->rl_as_set = true;
        }
        /* The daemon raised its own soft limit (main.c); the command gets the usual one back. */
        if (s->ctx->config.nofile_soft && getrlimit(RLIMIT_NOFILE, &p->rl_nofile) == 0 &&
            p->rl_nofile.rlim_cur != s->ctx->config.nofile_soft) {
                p->rl_nofile.rlim_cur = (rlim_t) s->ctx->config.nofile_soft;
                p->rl_nofile_set = true;
        }
        /* Signals the daemon ignores stay ignored across exec unless the command resets them. */
        p->reset_signals = s->ctx->ignored_signals;
        p->reset_oom_score = s->ctx->oom_score_negative;
        p->parent = getpid();
        p->filter = &s->ctx->filter;
}

static void run_rlimits(Run *r, RunParams *p) {
        /* A second above the budget, so that the daemon's own check (on_cpu_check) ends the run
         * first; the rlimit only guards a run the daemon could not watch. */
        if (r->spec.cpu_usec) {
                rlim_t sec = (rlim_t) ((r->spec.cpu_usec + USEC_PER_SEC - 1) / USEC_PER_SEC) + 1;
                p->rl_cpu = (struct rlimit) { sec, sec + 1 };
                p->rl_cpu_set = true;
        }
        run_params_guard(r->sandbox, r->spec.pids, r->spec.memory, p);
}

#define RUN_PIPE_SIZE (1 << 20)

void run_fds_close_child(RunFds *f) {
        f->in[0] = safe_close(f->in[0]);
        f->out[1] = safe_close(f->out[1]);
        f->err[1] = safe_close(f->err[1]);
        f->rep[1] = safe_close(f->rep[1]);
}

void run_fds_close_all(RunFds *f) {
        run_fds_close_child(f);
        f->in[1] = safe_close(f->in[1]);
        f->out[0] = safe_close(f->out[0]);
        f->err[0] = safe_close(f->err[0]);
        f->rep[0] = safe_close(f->rep[0]);
}

static int run_fds_open(RunFds *f) {
        *f = RUN_FDS_NONE;
        if (pipe2(f->in, O_CLOEXEC) < 0 || pipe2(f->out, O_CLOEXEC) < 0 || pipe2(f->err, O_CLOEXEC) < 0 ||
            socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, f->rep) < 0)
                return -errno;
        return 0;
}

/* The helper is a vfork-style child (run-exec.c): we wait in clone3 until it has exec'd. Born in a
 * frozen cgroup, it would be frozen before it could, and we with it, until a thaw that only we
 * would do (a snapshot's). So where the run's cgroup is frozen (by the snapshot's freeze of the
 * sandbox, or by anyone's of the sandbox or above: cgroup.events says so at once for a new empty
 * cgroup), the helper is born in ours and moves itself (RunParams.cgroup_fd), then waits there for
 * the thaw while we go on. Unreadable counts as frozen. */
static bool run_cgroup_frozen(Run *r) {
        return snapshot_job_frozen(r->sandbox) || cg_frozen(r->cg_fd) != 0;
}

static int run_spawn(Run *r, RunFds *f) {
        Context *m = r->sandbox->ctx;
        RunParams p = {
                .init_pidfd = r->sandbox->init_pidfd,
                .cgroup_fd = -1,
                .report_fd = f->rep[1],
                .stdio = { f->in[0], f->out[1], f->err[1] },
                .argv = r->spec.argv,
                .envp = r->spec.envp,
                .cwd = r->spec.cwd,
                .user = r->spec.user,
        };
        pid_t pid;

        run_rlimits(r, &p);
        if (m->run_helper_fd >= 0) {
                bool born_in = run_exec_into_cgroup() && !run_cgroup_frozen(r);

                if (!born_in)
                        p.cgroup_fd = r->cg_fd;
                /* Born in the sandbox's pid namespace, the helper can become the command itself:
                 * no fork, and no helper waiting for it. setns(CLONE_NEWPID) only sets where our
                 * children are born; we stay where we are, and set it back at once. */
                else if (m->self_pidns_fd >= 0 && setns(r->sandbox->init_pidfd, CLONE_NEWPID) == 0)
                        p.direct = true;
                pid = run_exec_helper(m->run_helper_fd, &p, born_in ? r->cg_fd : -1, &r->pidfd);
                /* Our later children (other sandboxes' inits among them) must never be born in
                 * this sandbox: there is no way on if we cannot undo it (and the kernel always
                 * allows a return to our own). */
                if (p.direct && setns(m->self_pidns_fd, CLONE_NEWPID) < 0) {
                        log_error("cannot set our children's pid namespace back to our own: %m");
                        abort();
                }
                r->direct = p.direct;
                if (pid < 0)
                        return pid;
                r->pid = pid;
                return 0;
        }
        pid = clone3_pidfd(0, r->cg_fd, &r->pidfd);
        if (pid == 0)
                run_helper_main(&p);
        if (pid < 0)
                return pid;
        r->pid = pid;
        return 0;
}

static int run_watch(Run *r, RunFds *f) {
        sd_event *e = r->sandbox->ctx->event;
        int k;

        r->out_fd[0] = TAKE_FD(f->out[0]);
        r->out_fd[1] = TAKE_FD(f->err[0]);
        r->report_fd = TAKE_FD(f->rep[0]);
        r->stdin_fd = TAKE_FD(f->in[1]);
        for (int i = 0; i < 2; i++) {
                (void) fcntl(r->out_fd[i], F_SETFL, O_NONBLOCK);
                /* A flood is read in fewer, larger pieces (a pipe's pages are only taken when
                 * filled, so a quiet run costs nothing more). */
                (void) fcntl(r->out_fd[i], F_SETPIPE_SZ, RUN_PIPE_SIZE);
                if ((k = sd_event_add_io(e, &r->out_source[i], r->out_fd[i], EPOLLIN, on_output, r)) < 0)
                        return k;
        }
        if ((k = sd_event_add_io(e, &r->report_source, r->report_fd, EPOLLIN, on_report, r)) < 0)
                return k;
        /* A streaming run's output is not read before its "started" event is out. */
        if (r->spec.stream)
                run_set_reading(r, false);
        if (r->spec.stdin_len > 0) {
                (void) fcntl(r->stdin_fd, F_SETFL, O_NONBLOCK);
                if ((k = sd_event_add_io(e, &r->stdin_source, r->stdin_fd, EPOLLOUT, on_stdin, r)) < 0)
                        return k;
        } else
                r->stdin_fd = safe_close(r->stdin_fd);
        if ((k = sd_event_add_time_relative(e, &r->timeout_source, CLOCK_MONOTONIC, r->spec.timeout_usec, 1000,
                                            on_timeout, r)) < 0)
                return k;
        /* Started while its sandbox is frozen for a snapshot: the clock starts at the thaw. */
        if (snapshot_job_frozen(r->sandbox))
                run_timeout_pause(r, now_usec(CLOCK_MONOTONIC));
        if (r->spec.cpu_usec &&
            (k = sd_event_add_time_relative(e, &r->cpu_source, CLOCK_MONOTONIC, 10 * USEC_PER_MSEC, 1000, on_cpu_check, r)) < 0)
                return k;
        return sd_event_add_child_pidfd(e, &r->child_source, r->pidfd, WEXITED, on_helper_exit, r);
}

static void run_fail_start(Run *r, const char *what, int k) {
        ProtoError err;
        Sandbox *s = r->sandbox;

        proto_error_set(&err, SBX_E_SPAWN_FAILED, NULL, "%s: %s", what, strerror(-k));
        connection_reply_error(r->conn, r->req_id, &err);
        if (r->pid > 0) {
                /* The helper is ours and unreaped: kill it and the run's cgroup (it may not be in
                 * it yet), then wait for it (SIGKILL ends a frozen or stopped process too). */
                (void) syscall(SYS_pidfd_send_signal, r->pidfd, SIGKILL, NULL, 0);
                (void) cg_kill_at(r->kill_fd, r->cg_fd);
                (void) waitid(P_PIDFD, (id_t) r->pidfd, &(siginfo_t) {}, WEXITED);
        }
        if (r->cg_fd >= 0)
                (void) unlinkat(s->cg_fd, r->cg_name, AT_REMOVEDIR);
        run_free(r);
        sandbox_run_finished(s, NULL);
}

void run_start(Run *r) {
        RunFds f;
        int k;

        run_mark_in_flight(r);
        run_record_start(r);
        r->start_usec = now_usec(CLOCK_MONOTONIC);
        if ((k = run_make_cgroup(r)) < 0)
                return run_fail_start(r, "cannot create the run's cgroup", k);
        if (r->sandbox->enforced & CG_PIDS)
                (void) cg_read_keyed(r->sandbox->cg_fd, "pids.events", "max", &r->sandbox_pids_max_events);
        if ((k = run_fds_open(&f)) < 0) {
                run_fds_close_all(&f); /* some may have been made before the fds ran out */
                return run_fail_start(r, "cannot create pipes", k);
        }
        k = run_spawn(r, &f);
        run_fds_close_child(&f);
        if (k >= 0)
                k = run_watch(r, &f);
        run_fds_close_all(&f); /* what run_watch() did not take */
        if (k < 0)
                return run_fail_start(r, "cannot start the run", k);
}
