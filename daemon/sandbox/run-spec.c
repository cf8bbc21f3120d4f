/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A run request (or a session's) read into a RunSpec, and resolved against its sandbox; with the
 * "user" and "env" fields a create request shares. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "context.h"
#include "run-spec.h"
#include "sandbox.h"
#include "util.h"

#define RUN_MAX_ARGS 4096
#define RUN_MAX_ARG_LEN (128 * 1024)
#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

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
            (r = proto_get_size(req, "file_size", &spec->file_size, err)) < 0 ||
            (r = proto_get_uint(req, "open_files", 16, INT32_MAX, &spec->open_files, err)) < 0 ||
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
        if (json_object_object_get_ex(req, "file_size", NULL) && spec->file_size == 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "file_size", "'file_size' must be positive");
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
        /* A run may lower its sandbox's rlimits, never raise them. */
        if (spec->file_size && s->limits.file_size && spec->file_size > s->limits.file_size)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "file_size",
                                       "'file_size' must not exceed the sandbox's (%" PRIu64 ")", s->limits.file_size);
        if (spec->open_files && spec->open_files > s->limits.open_files)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "open_files",
                                       "'open_files' must not exceed the sandbox's (%" PRIu64 ")", s->limits.open_files);
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

/* An environment of at most this many bytes ("NAME=value\0" each): what the kernel's exec takes
 * with room to spare, and a sandbox's record (meta.json, state.c) stays below its 1 MiB even
 * when JSON escapes every byte (6 for 1: 384 KiB) beside its interrupted runs (run-record.c). */
#define ENV_MAX_BYTES (64u * 1024)

int sandbox_env_check(json_object *env, ProtoError *err) {
        size_t bytes = 0;

        if (!env)
                return 0;
        if (json_object_object_length(env) > 1024)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "env", "field 'env' has more than 1024 variables");
        json_object_object_foreach(env, k, v) {
                if (!*k || strchr(k, '=') || strlen(k) > 1024)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "env",
                                               "environment variable names must be non-empty, without '='");
                if (!json_object_is_type(v, json_type_string))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "env", "environment values must be strings");
                bytes += strlen(k) + 1 + (size_t) json_object_get_string_len(v) + 1;
        }
        if (bytes > ENV_MAX_BYTES)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "env", "field 'env' has %zu bytes, more than %u",
                                       bytes, ENV_MAX_BYTES);
        return 0;
}
