/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A run request (or a session's) read into a RunSpec, and resolved against its sandbox; with the
 * "user" and "env" fields a create request shares. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fdpass.h"
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

static char **envp_from_object(json_object *env, bool defaults) {
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
        if (!defaults)
                return envp;
        if ((!have_path && !(envp[i++] = strdup("PATH=" DEFAULT_PATH))) ||
            (!have_home && !(envp[i++] = strdup("HOME=/work")))) {
                strv_free(envp);
                return NULL;
        }
        return envp;
}

static int parse_env(json_object *req, RunSpec *spec, ProtoError *err) {
        json_object *env;
        bool defaults = true;
        int r = proto_get_bool(req, "env_defaults", &defaults, err);

        if (r < 0)
                return r;
        spec->env_exact = !defaults;
        if (!json_object_object_get_ex(req, "env", &env) || json_object_is_type(env, json_type_null))
                env = NULL;
        /* Without defaults the environment is exactly env, and absent is empty: not the sandbox's. */
        if (!env && defaults)
                return 0;
        r = sandbox_env_check(env, err);
        if (r < 0)
                return r;
        spec->envp = envp_from_object(env, defaults);
        return spec->envp ? 0 : proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
}

/* "/work/a/../b" -> "/work/b"; 1 for a path that ends up outside /work (refused unless the
 * sandbox's root is its own: run_spec_resolve()), and the helper refuses symlinks that lead out
 * of /work when the run starts. */
static int normalize_cwd(const char *in, char **ret) {
        _cleanup_free_ char *out = malloc(strlen(in) + 2);
        _cleanup_free_ char *copy = strdup(in);
        char *save = NULL;
        size_t len = 0;
        int r;

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
        if (!out[0])
                strcpy(out, "/");
        r = strcmp(out, "/work") != 0 && strncmp(out, "/work/", 6) != 0;
        *ret = TAKE_PTR(out);
        return r;
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
        spec->cwd_outside = r > 0;
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

/* "user.groups": supplementary gids of the sandbox's user namespace (checked against its range
 * in run_spec_resolve()). */
static int parse_user_groups(json_object *user, RunSpec *spec, ProtoError *err) {
        json_object *g;
        size_t n;

        if (!json_object_object_get_ex(user, "groups", &g) || json_object_is_type(g, json_type_null))
                return 0;
        if (!json_object_is_type(g, json_type_array) || (n = json_object_array_length(g)) > RUN_GROUPS_MAX)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "user",
                                       "'user.groups' must be an array of at most %d gids", RUN_GROUPS_MAX);
        for (size_t i = 0; i < n; i++) {
                json_object *v = json_object_array_get_idx(g, i);
                int64_t x = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : -1;
                if (x < 0 || x > 65535)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "user",
                                               "'user.groups[%zu]' must be an integer from 0 to 65535", i);
                spec->groups[i] = (uint32_t) x;
        }
        spec->n_groups = n;
        return 0;
}

/* "user": {"uid": U, "gid": G, "groups": [...]}, ids of the sandbox's user namespace (checked
 * against its range in run_spec_resolve()). */
static int parse_user_ids(json_object *user, RunSpec *spec, ProtoError *err) {
        ProtoError e = {};
        uint64_t uid, gid;
        int r;

        json_object_object_foreach(user, k, v) {
                (void) v;
                if (strcmp(k, "uid") != 0 && strcmp(k, "gid") != 0 && strcmp(k, "groups") != 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "user",
                                               "unknown field 'user.%.64s' (a user is {\"uid\", \"gid\", \"groups\"})", k);
        }
        if (proto_get_uint(user, "uid", 0, 65535, &uid, &e) <= 0 || proto_get_uint(user, "gid", 0, 65535, &gid, &e) <= 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "user",
                                       "'user' as an object needs 'uid' and 'gid', integers from 0 to 65535");
        if ((r = parse_user_groups(user, spec, err)) < 0)
                return r;
        spec->ids_set = true;
        spec->uid = (uint32_t) uid;
        spec->gid = (uint32_t) gid;
        /* uid 0 has what "root" has; any other uid what "sandbox" has: no capabilities. */
        spec->user = uid == 0 ? SANDBOX_USER_ROOT : SANDBOX_USER_SANDBOX;
        return 0;
}

static int parse_user(json_object *req, RunSpec *spec, ProtoError *err) {
        json_object *v;

        if (json_object_object_get_ex(req, "user", &v) && json_object_is_type(v, json_type_object))
                return parse_user_ids(v, spec, err);
        return sandbox_user_parse(req, &spec->user, err);
}

int sandbox_user_parse(json_object *req, SandboxUser *ret, ProtoError *err) {
        const char *s = NULL;
        SandboxUser u;
        json_object *v;
        int r;

        /* A run's {"uid", "gid"} (checked by run_spec_parse()), for the throwaway sandbox made for
         * it: uid 0 is a run as root, any other one as "sandbox". Other requests' fields refuse
         * an object before this. */
        if (json_object_object_get_ex(req, "user", &v) && json_object_is_type(v, json_type_object)) {
                json_object *uid = json_object_object_get(v, "uid");
                *ret = uid && json_object_is_type(uid, json_type_int) && json_object_get_int64(uid) == 0 ? SANDBOX_USER_ROOT
                                                                                                   : SANDBOX_USER_SANDBOX;
                return 0;
        }
        r = proto_get_string(req, "user", 16, &s, err);

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

/* "tty": {"rows", "cols"}: a terminal of the sandbox's whose master goes to the client. */
static int parse_tty(json_object *req, RunSpec *spec, ProtoError *err) {
        json_object *tty;
        ProtoError e = {};
        uint64_t rows, cols;

        if (!json_object_object_get_ex(req, "tty", &tty) || json_object_is_type(tty, json_type_null))
                return 0;
        json_object_object_foreach(tty, k, v) {
                (void) v;
                if (strcmp(k, "rows") != 0 && strcmp(k, "cols") != 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "tty", "unknown field 'tty.%.64s'", k);
        }
        if (proto_get_uint(tty, "rows", 1, 1000, &rows, &e) <= 0 || proto_get_uint(tty, "cols", 1, 4096, &cols, &e) <= 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "tty",
                                       "'tty' needs 'rows' (1 to 1000) and 'cols' (1 to 4096)");
        spec->tty = true;
        spec->rows = (unsigned short) rows;
        spec->cols = (unsigned short) cols;
        return 0;
}

static const char *const rlimit_names[RUN_RLIMITS_MAX] = {
        [RLIMIT_CPU] = "CPU",         [RLIMIT_FSIZE] = "FSIZE",   [RLIMIT_DATA] = "DATA",
        [RLIMIT_STACK] = "STACK",     [RLIMIT_CORE] = "CORE",     [RLIMIT_RSS] = "RSS",
        [RLIMIT_NPROC] = "NPROC",     [RLIMIT_NOFILE] = "NOFILE", [RLIMIT_MEMLOCK] = "MEMLOCK",
        [RLIMIT_AS] = "AS",           [RLIMIT_LOCKS] = "LOCKS",   [RLIMIT_SIGPENDING] = "SIGPENDING",
        [RLIMIT_MSGQUEUE] = "MSGQUEUE", [RLIMIT_NICE] = "NICE",   [RLIMIT_RTPRIO] = "RTPRIO",
        [RLIMIT_RTTIME] = "RTTIME",
};

static int rlimit_from_name(const char *name) {
        for (int r = 0; r < RUN_RLIMITS_MAX; r++)
                if (rlimit_names[r] && strcmp(rlimit_names[r], name) == 0)
                        return r;
        return -1;
}

/* An integer (UINT64_MAX, as OCI writes RLIM_INFINITY, is that) or "unlimited". */
static int rlimit_value(json_object *v, rlim_t *ret) {
        if (json_object_is_type(v, json_type_string) && strcmp(json_object_get_string(v), "unlimited") == 0) {
                *ret = RLIM_INFINITY;
                return 0;
        }
        if (!json_object_is_type(v, json_type_int))
                return -EINVAL;
        int64_t x = json_object_get_int64(v);
        if (x < 0)
                return -EINVAL;
        *ret = x == INT64_MAX ? (rlim_t) json_object_get_uint64(v) : (rlim_t) x;
        return 0;
}

/* With "rlimits_lower": a limit above what the run may have is set to that maximum (never a
 * weaker sandbox: a lower limit only takes from the command) and noted for "started". */
static void rlimit_lower_to(RunSpec *spec, int r, rlim_t max) {
        struct rlimit *l = &spec->rlimit[r];

        if (l->rlim_max > max)
                l->rlim_max = max;
        if (l->rlim_cur > l->rlim_max)
                l->rlim_cur = l->rlim_max;
        spec->rlimit_lowered |= UINT32_C(1) << r;
}

/* "rlimits": {"NOFILE": [soft, hard], ...}: soft <= hard <= the daemon's own hard limit (what
 * the command could never raise itself to is refused, not cut, unless "rlimits_lower"). */
static int parse_rlimit(const char *name, json_object *v, RunSpec *spec, ProtoError *err) {
        char field[32];
        struct rlimit have;
        rlim_t soft, hard;
        int r = rlimit_from_name(name);

        snprintf(field, sizeof(field), "rlimits.%.16s", name);
        if (r < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "rlimits",
                                       "unknown rlimit '%.32s' (the names are RLIMIT_* without the prefix: NOFILE, NPROC, ...)",
                                       name);
        if (!json_object_is_type(v, json_type_array) || json_object_array_length(v) != 2 ||
            rlimit_value(json_object_array_get_idx(v, 0), &soft) < 0 || rlimit_value(json_object_array_get_idx(v, 1), &hard) < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                       "'%s' must be [soft, hard], each an integer or \"unlimited\"", field);
        if (soft > hard)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field, "'%s': the soft limit is above the hard one", field);
        spec->rlimit[r] = (struct rlimit) { soft, hard };
        spec->rlimit_mask |= UINT32_C(1) << r;
        if (getrlimit(r, &have) == 0 && hard > have.rlim_max) {
                if (!spec->rlimits_lower)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                               "'%s': the hard limit is above the daemon's own (%llu)", field,
                                               (unsigned long long) have.rlim_max);
                rlimit_lower_to(spec, r, have.rlim_max);
        }
        return 0;
}

static int parse_rlimits(json_object *req, RunSpec *spec, ProtoError *err) {
        json_object *o;
        int r;

        if ((r = proto_get_bool(req, "rlimits_lower", &spec->rlimits_lower, err)) < 0)
                return r;
        if (!json_object_object_get_ex(req, "rlimits", &o) || json_object_is_type(o, json_type_null))
                return 0;
        json_object_object_foreach(o, k, v)
                if ((r = parse_rlimit(k, v, spec, err)) < 0)
                        return r;
        return 0;
}

static bool has_field(json_object *req, const char *name) {
        json_object *v;
        return json_object_object_get_ex(req, name, &v) && !json_object_is_type(v, json_type_null);
}

/* With the client's own stdio or a terminal handed over, nothing goes through the daemon. */
static int check_own_stdio(json_object *req, RunSpec *spec, ProtoError *err) {
        const char *not_with[] = { "stdin", "stream", "output_bytes" };
        bool stdio = has_field(req, "stdio");

        if (stdio && spec->tty)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "tty", "give either 'stdio' or 'tty', not both");
        if (has_field(req, "extra_fds") && !stdio && !spec->tty)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "extra_fds", "'extra_fds' needs 'stdio' or 'tty'");
        if (!stdio && !spec->tty)
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(not_with); i++)
                if (has_field(req, not_with[i]))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, not_with[i],
                                               "'%s' is refused with '%s': the command's stdio is the client's", not_with[i],
                                               stdio ? "stdio" : "tty");
        return 0;
}

/* One of "capabilities"' sets: an array of "CAP_*" names. */
static int parse_cap_set(json_object *caps, const char *name, uint64_t *ret, ProtoError *err) {
        json_object *a;
        size_t n;

        *ret = 0;
        if (!json_object_object_get_ex(caps, name, &a) || json_object_is_type(a, json_type_null))
                return 0;
        if (!json_object_is_type(a, json_type_array) || (n = json_object_array_length(a)) > 64)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "capabilities",
                                       "'capabilities.%s' must be an array of capability names", name);
        for (size_t i = 0; i < n; i++) {
                json_object *c = json_object_array_get_idx(a, i);
                int cap = json_object_is_type(c, json_type_string) ? identity_cap_from_name(json_object_get_string(c)) : -1;
                if (cap < 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "capabilities",
                                               "'capabilities.%s[%zu]' is not a capability name (CAP_CHOWN, ...)", name, i);
                *ret |= UINT64_C(1) << cap;
        }
        return 0;
}

/* "capabilities": {"bounding", "effective", "inheritable", "permitted", "ambient"}, each absent
 * one empty: exactly these, over the sandbox's user namespace (none is more than its root has).
 * What the kernel would refuse is refused here, naming it. */
static int parse_caps(json_object *req, RunSpec *spec, ProtoError *err) {
        static const char *const names[_CAPS_MAX] = { [CAPS_BOUNDING] = "bounding", [CAPS_EFFECTIVE] = "effective",
                                                      [CAPS_INHERITABLE] = "inheritable", [CAPS_PERMITTED] = "permitted",
                                                      [CAPS_AMBIENT] = "ambient" };
        json_object *caps;
        int r;

        if (!json_object_object_get_ex(req, "capabilities", &caps) || json_object_is_type(caps, json_type_null))
                return 0;
        json_object_object_foreach(caps, k, v) {
                (void) v;
                bool known = false;
                for (int i = 0; i < _CAPS_MAX; i++)
                        known |= strcmp(k, names[i]) == 0;
                if (!known)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "capabilities",
                                               "unknown field 'capabilities.%.32s' (bounding, effective, inheritable, "
                                               "permitted, ambient)", k);
        }
        for (int i = 0; i < _CAPS_MAX; i++)
                if ((r = parse_cap_set(caps, names[i], &spec->caps.set[i], err)) < 0)
                        return r;
        const uint64_t *c = spec->caps.set;
        if (c[CAPS_EFFECTIVE] & ~c[CAPS_PERMITTED])
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "capabilities",
                                       "'capabilities.effective' must be within 'capabilities.permitted'");
        if (c[CAPS_AMBIENT] & ~(c[CAPS_PERMITTED] & c[CAPS_INHERITABLE]))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "capabilities",
                                       "'capabilities.ambient' must be within both 'permitted' and 'inheritable'");
        spec->caps_set = true;
        return 0;
}

/* "pid_namespace": "sandbox" (the default: the sandbox's, where the init is pid 1) or "own". */
static int parse_pid_namespace(json_object *req, RunSpec *spec, ProtoError *err) {
        json_object *v;
        const char *s;

        if (!json_object_object_get_ex(req, "pid_namespace", &v) || json_object_is_type(v, json_type_null))
                return 0;
        s = json_object_get_string(v);
        if (!json_object_is_type(v, json_type_string) || (strcmp(s, "own") != 0 && strcmp(s, "sandbox") != 0))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "pid_namespace",
                                       "'pid_namespace' is \"sandbox\" (the default) or \"own\" (the command is pid 1 of a "
                                       "pid namespace of its own)");
        spec->own_pidns = strcmp(s, "own") == 0;
        return 0;
}

static int parse_process(json_object *req, RunSpec *spec, ProtoError *err) {
        uint64_t mask;
        int r;

        spec->umask = -1;
        if ((r = proto_get_uint(req, "umask", 0, 0777, &mask, err)) < 0)
                return r;
        if (r > 0)
                spec->umask = (int) mask;
        if ((r = proto_get_bool(req, "no_timeout", &spec->no_timeout, err)) < 0)
                return r;
        if (spec->no_timeout && has_field(req, "timeout_s"))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "no_timeout", "give either 'no_timeout' or 'timeout_s', not both");
        if ((r = parse_tty(req, spec, err)) < 0 || (r = check_own_stdio(req, spec, err)) < 0 ||
            (r = parse_caps(req, spec, err)) < 0 || (r = parse_pid_namespace(req, spec, err)) < 0)
                return r;
        return parse_rlimits(req, spec, err);
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
            (r = parse_user(req, spec, err)) < 0 || (r = parse_process(req, spec, err)) < 0)
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

/* One entry of "stdio" or "extra_fds": an index into the line's fds (marked used), or null for
 * /dev/null; what the command gets is a copy of ours. */
static int take_fd(json_object *v, const char *field, const int *fds, size_t n_fds, bool *used, int *ret,
                   ProtoError *err) {
        const char *reason = NULL;
        int64_t i;
        int fd;

        if (!v || json_object_is_type(v, json_type_null))
                fd = open("/dev/null", O_RDWR | O_CLOEXEC | O_NOCTTY);
        else {
                if (!json_object_is_type(v, json_type_int))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                               "'%s' holds indexes into the request's fds, or null", field);
                i = json_object_get_int64(v);
                if (i < 0 || (uint64_t) i >= n_fds)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                               "'%s': fd %" PRId64 " did not come with this request (%zu did)", field, i, n_fds);
                if (sbx_fd_check(fds[i], SBX_FD_STDIO, &reason) < 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, field, "'%s': fd %" PRId64 " %s", field, i,
                                               reason ? reason : "is refused");
                used[i] = true;
                fd = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
        }
        if (fd < 0)
                return proto_error_set(err, SBX_E_INTERNAL, field, "cannot hold the fd: %s", strerror(errno));
        *ret = fd;
        return 0;
}

static int take_fd_list(json_object *req, const char *field, size_t min, size_t max, const int *fds, size_t n_fds,
                        bool *used, int *ret, size_t *ret_n, ProtoError *err) {
        json_object *a;
        size_t n;
        int r;

        if (!json_object_object_get_ex(req, field, &a) || json_object_is_type(a, json_type_null))
                return 0;
        if (!json_object_is_type(a, json_type_array))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field, "'%s' must be an array", field);
        n = json_object_array_length(a);
        if (n < min || n > max)
                return min == max ? proto_error_set(err, SBX_E_INVALID_REQUEST, field, "'%s' must hold %zu entries", field, min)
                                  : proto_error_set(err, SBX_E_INVALID_REQUEST, field, "'%s' holds at most %zu entries",
                                                    field, max);
        for (size_t i = 0; i < n; i++) {
                if ((r = take_fd(json_object_array_get_idx(a, i), field, fds, n_fds, used, &ret[i], err)) < 0)
                        return r;
                (*ret_n)++; /* owned by the spec from here: run_spec_done() closes it */
        }
        return 0;
}

int run_spec_take_fds(json_object *req, const int *fds, size_t n_fds, RunSpec *spec, ProtoError *err) {
        bool used[SBX_FDS_PER_MESSAGE] = {};
        int r;

        if (n_fds > SBX_FDS_PER_MESSAGE)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "fds", "too many file descriptors");
        if ((r = take_fd_list(req, "stdio", 3, 3, fds, n_fds, used, spec->stdio_fd, &spec->n_stdio, err)) < 0 ||
            (r = take_fd_list(req, "extra_fds", 0, RUN_EXTRA_FDS_MAX, fds, n_fds, used, spec->extra_fd, &spec->n_extra,
                              err)) < 0)
                return r;
        /* An fd nobody named would be accepted and ignored: refused instead. */
        for (size_t i = 0; i < n_fds; i++)
                if (!used[i])
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "fds",
                                               "fd %zu came with this request but neither 'stdio' nor 'extra_fds' names it", i);
        return 0;
}

/* rlimits.NOFILE and .FSIZE at most the sandbox's open_files and file_size (max; 0: none). */
static int rlimit_within(RunSpec *spec, int r, uint64_t max, const char *what, ProtoError *err) {
        const char *name = r == RLIMIT_NOFILE ? "NOFILE" : "FSIZE";

        if (!(spec->rlimit_mask & (UINT32_C(1) << r)) || !max || spec->rlimit[r].rlim_max <= max)
                return 0;
        if (spec->rlimits_lower) {
                rlimit_lower_to(spec, r, (rlim_t) max);
                return 0;
        }
        return proto_error_set(err, SBX_E_INVALID_REQUEST, r == RLIMIT_NOFILE ? "rlimits.NOFILE" : "rlimits.FSIZE",
                               "'rlimits.%s' must not exceed the sandbox's %s (%" PRIu64 ")", name, what, max);
}

/* The run's user and its rlimits against what its sandbox allows. */
static int resolve_identity(RunSpec *spec, Sandbox *s, ProtoError *err) {
        const Config *c = &s->ctx->config;
        int r;

        if (spec->user == SANDBOX_USER_UNSET)
                spec->user = s->user;
        if (spec->ids_set && (spec->uid >= c->uid_range || spec->gid >= c->uid_range))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "user",
                                       "'user': uid %u / gid %u is not mapped in the sandbox (it has ids 0 to %" PRIu64 ")",
                                       spec->uid, spec->gid, c->uid_range - 1);
        for (size_t i = 0; i < spec->n_groups; i++)
                if (spec->groups[i] >= c->uid_range)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "user",
                                               "'user.groups': gid %u is not mapped in the sandbox (it has ids 0 to %" PRIu64 ")",
                                               spec->groups[i], c->uid_range - 1);
        /* A run may lower its sandbox's rlimits, never raise them (as open_files and file_size). */
        if ((r = rlimit_within(spec, RLIMIT_NOFILE, s->limits.open_files, "open_files", err)) < 0 ||
            (r = rlimit_within(spec, RLIMIT_FSIZE, s->limits.file_size, "file_size", err)) < 0)
                return r;
        if (spec->cwd_outside && !sandbox_has_own_root(s))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "cwd",
                                       "'cwd' must be an absolute path at or beneath /work (anywhere only in a sandbox "
                                       "with a root of its own: an image)");
        return 0;
}

int run_spec_resolve(RunSpec *spec, Sandbox *s, ProtoError *err) {
        const Config *c = &s->ctx->config;
        int r;

        if (!spec->timeout_usec && !spec->no_timeout)
                spec->timeout_usec = s->limits.timeout_usec;
        if ((r = resolve_identity(spec, s, err)) < 0)
                return r;
        /* Any capability there could undo its unlocked masks, whatever the uid. */
        if (spec->caps_set && (spec->caps.set[CAPS_PERMITTED] || spec->caps.set[CAPS_AMBIENT]) && s->unprivileged_only)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "capabilities",
                                       "sandbox %s is a throwaway sandbox made for a run as \"sandbox\": its mounts are not "
                                       "locked, so a run with capabilities needs a sandbox of its own", s->id);
        if (spec->user == SANDBOX_USER_ROOT && s->unprivileged_only)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "user",
                                       "sandbox %s is a throwaway sandbox made for a run as \"sandbox\": its mounts are not "
                                       "locked against root, so \"user\":\"root\" needs a sandbox of its own "
                                       "(a throwaway run that asks for it, or create)", s->id);
        if (!spec->output_bytes)
                spec->output_bytes = run_spec_own_stdio(spec) ? 2 : s->limits.output_bytes;
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
        if (!spec->envp && !(spec->envp = envp_from_object(s->env, true)))
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        return 0;
}

/* The most its reply can take: both streams at their cap, as base64 (output that is not UTF-8),
 * with room for the JSON around them; and its stdin until written. */
uint64_t run_spec_held(const RunSpec *spec) {
        /* Nothing captured: its final reply is an account. */
        if (run_spec_own_stdio(spec))
                return 1024;
        return 2 * (4 * ((spec->output_bytes + 2) / 3) + 256) + spec->stdin_len;
}

void run_spec_done(RunSpec *spec) {
        strv_free(spec->argv);
        strv_free(spec->envp);
        free(spec->cwd);
        free(spec->stdin_data);
        for (size_t i = 0; i < spec->n_stdio && i < 3; i++)
                safe_close(spec->stdio_fd[i]);
        for (size_t i = 0; i < spec->n_extra && i < RUN_EXTRA_FDS_MAX; i++)
                safe_close(spec->extra_fd[i]);
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

json_object *run_spec_rlimits_lowered(const RunSpec *spec) {
        json_object *o;

        if (!spec->rlimit_lowered)
                return NULL;
        o = json_object_new_object();
        for (int r = 0; r < RUN_RLIMITS_MAX; r++) {
                if (!(spec->rlimit_lowered & (UINT32_C(1) << r)) || !rlimit_names[r])
                        continue;
                json_object *pair = json_object_new_array();
                json_object_array_add(pair, json_object_new_uint64(spec->rlimit[r].rlim_cur));
                json_object_array_add(pair, json_object_new_uint64(spec->rlimit[r].rlim_max));
                json_object_object_add(o, rlimit_names[r], pair);
        }
        return o;
}
