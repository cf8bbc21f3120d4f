/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl: logging, option helpers and the conversation with sandboxd that every verb shares. */
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto.h"
#include "sandboxctl.h"
#include "util.h"

GlobalArgs arg = {};

/* ---- Logging ----------------------------------------------------------------------------- */

/* Messages carry names, paths and words of the daemon's: escaped whole (format.c). */
static void log_message(const char *fmt, va_list ap) {
        _cleanup_free_ char *text = NULL;

        fputs("sandboxctl: ", stderr);
        if (vasprintf(&text, fmt, ap) < 0)
                text = NULL;
        fputs(text ? esc(text) : "(out of memory)", stderr);
        fputc('\n', stderr);
}

int log_error_errno(int error, const char *fmt, ...) {
        va_list ap;

        if (error == 0)
                error = -EINVAL;
        if (error > 0)
                error = -error;
        fflush(stdout);
        errno = -error; /* for %m */
        va_start(ap, fmt);
        log_message(fmt, ap);
        va_end(ap);
        return error;
}

void log_info(const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        log_message(fmt, ap);
        va_end(ap);
}

/* ---- Options ----------------------------------------------------------------------------- */

void verb_help(const Verb *v) {
        printf("sandboxctl %s %s\n\n%s.\n\n%s", v->name, v->args, v->summary, v->help);
        printf("\nCommon options:\n"
               "  -h --help              Show this help\n"
               "     --json              Print the daemon's reply as JSON\n"
               "     --socket PATH       sandboxd's socket (default: $SANDBOXD_SOCKET, else\n"
               "                         " SBX_DEFAULT_SOCKET ")\n");
}

int common_option(const Verb *v, int c) {
        switch (c) {
        case 'h':
                verb_help(v);
                return 0;
        case ARG_JSON:
                arg.json = true;
                return 1;
        case ARG_SOCKET:
                arg.socket = optarg;
                return 1;
        case '?': /* getopt said what was wrong */
                return log_error("see 'sandboxctl %s --help'", v->name);
        default:
                return log_error("unhandled option %d", c);
        }
}

int check_arg_count(const Verb *v, int argc, char *argv[], int min_args, int max_args) {
        int n = argc - optind;

        if (n < min_args)
                return log_error("%s: missing argument (usage: sandboxctl %s %s)", v->name, v->name, v->args);
        if (max_args >= 0 && n > max_args)
                return log_error("%s: unexpected argument '%s'", v->name, argv[optind + max_args]);
        return 1;
}

int parse_verb_options(const Verb *v, int argc, char *argv[], const char *shortopts, const VerbOption *extra,
                       int min_args, int max_args) {
        static const struct option common[] = { COMMON_OPTIONS };
        struct option options[ELEMENTSOF(common) + VERB_OPTIONS_MAX + 1] = {};
        size_t n = 0;
        int c, r;

        memcpy(options, common, sizeof(common));
        for (const VerbOption *e = extra; e && e->name && n < VERB_OPTIONS_MAX; e++, n++)
                options[ELEMENTSOF(common) + n] = (struct option) { e->name, e->value ? required_argument : no_argument,
                                                                     NULL, e->val };
        optind = 0;
        while ((c = getopt_long(argc, argv, shortopts, options, NULL)) >= 0) {
                const VerbOption *e = extra;
                while (e && e->name && e->val != c)
                        e++;
                if (e && e->name) {
                        if (e->value)
                                *e->value = optarg;
                        else
                                *e->flag = true;
                        continue;
                }
                r = common_option(v, c);
                if (r <= 0)
                        return r;
        }
        return check_arg_count(v, argc, argv, min_args, max_args);
}

int parse_common_only(const Verb *v, int argc, char *argv[], int min_args, int max_args) {
        return parse_verb_options(v, argc, argv, "h", NULL, min_args, max_args);
}

int add_size(json_object *obj, const char *key, const char *opt, const char *value) {
        uint64_t v;

        /* Sent as the string given: sandboxd parses it too, and knows its own maximums. */
        if (parse_size(value, &v) < 0)
                return log_error("invalid size for %s: '%s' (use e.g. 4096, 64K, 256M, 1.5G)", opt, value);
        return add_string(obj, key, value);
}

int add_duration(json_object *obj, const char *key, const char *opt, const char *value) {
        uint64_t v;

        if (parse_duration(value, &v) < 0)
                return log_error("invalid duration for %s: '%s' (use e.g. 30, 30s, 500ms, 2m, 1h)", opt, value);
        return add_string(obj, key, value);
}

int add_cpus(json_object *obj, const char *key, const char *opt, const char *value) {
        uint64_t millis;
        int r = parse_cpus(value, &millis);

        if (r < 0)
                return log_error("invalid number of CPUs for %s: '%s' (use e.g. 0.5, 1, 2.25)", opt, value);
        json_object_object_add(obj, key, json_object_new_double(strtod(value, NULL)));
        return 0;
}

static int add_integer(json_object *obj, const char *key, const char *opt, const char *value, unsigned long long min) {
        char *end;
        unsigned long long v;

        errno = 0;
        v = strtoull(value, &end, 10);
        if (errno || end == value || *end || value[0] == '-' || v < min || v > INT64_MAX)
                return log_error("invalid number for %s: '%s' (%s)", opt, value,
                                 min ? "a positive integer" : "an integer, 0 or more");
        json_object_object_add(obj, key, json_object_new_int64((int64_t) v));
        return 0;
}

int add_uint(json_object *obj, const char *key, const char *opt, const char *value) {
        return add_integer(obj, key, opt, value, 1);
}

int add_offset(json_object *obj, const char *key, const char *opt, const char *value) {
        return add_integer(obj, key, opt, value, 0);
}

int add_string(json_object *obj, const char *key, const char *value) {
        if (!utf8_is_valid(value, strlen(value)))
                return log_error("%s: not valid UTF-8", key);
        json_object_object_add(obj, key, json_object_new_string(value));
        return 0;
}

static int add_string_to_array(json_object *a, const char *what, const char *value) {
        if (!utf8_is_valid(value, strlen(value)))
                return log_error("%s: not valid UTF-8", what);
        json_object_array_add(a, json_object_new_string(value));
        return 0;
}

int add_allow(json_object **allow, const char *entry) {
        if (!*allow)
                *allow = json_object_new_array();
        if (!*allow)
                return log_error("out of memory");
        return add_string_to_array(*allow, "--allow", entry);
}

int add_allow_sni(json_object **allow, const char *entry) {
        const char *colon = strchr(entry, ':');
        size_t len = colon ? (size_t) (colon - entry) : strlen(entry);
        json_object *o;

        if (!*allow && !(*allow = json_object_new_array()))
                return log_error("out of memory");
        if (!utf8_is_valid(entry, strlen(entry)))
                return log_error("--allow-sni: not valid UTF-8");
        o = json_object_new_object();
        json_object_object_add(o, "name", json_object_new_string_len(entry, (int) len));
        if (colon) {
                char *end;
                unsigned long port;
                errno = 0;
                port = strtoul(colon + 1, &end, 10);
                if (errno || !isdigit((unsigned char) colon[1]) || *end || port < 1 || port > 65535) {
                        json_object_put(o);
                        return log_error("--allow-sni '%s': the port must be 1-65535 (NAME[:PORT])", entry);
                }
                json_object_object_add(o, "port", json_object_new_int((int) port));
        }
        json_object_object_add(o, "match", json_object_new_string("sni"));
        json_object_array_add(*allow, o);
        return 0;
}

int add_network(json_object *req, const char *network, const char *egress, json_object *allow) {
        json_object *n, *eg;

        if ((network != NULL) + (egress != NULL) + (allow != NULL) > 1)
                return log_error("--network, --egress and --allow do not go together (--allow alone gives egress to "
                                 "what it lists)");
        if (network)
                return add_string(req, "network", network);
        if (egress && strcmp(egress, "all") != 0)
                return log_error("--egress: only \"all\" (for some addresses only, --allow ADDR|NAME[:PORT] for each)");
        if (!egress && !allow)
                return 0;
        n = json_object_new_object();
        if (egress)
                eg = json_object_new_string("all");
        else {
                eg = json_object_new_object();
                json_object_object_add(eg, "allow", json_object_get(allow));
        }
        json_object_object_add(n, "egress", eg);
        json_object_object_add(req, "network", n);
        return 0;
}

int add_env(json_object **env, const char *assignment) {
        const char *eq = strchr(assignment, '=');
        _cleanup_free_ char *name = NULL;

        if (!eq || eq == assignment)
                return log_error("invalid --env '%s' (use NAME=VALUE)", assignment);
        name = strndup(assignment, (size_t) (eq - assignment));
        if (!name)
                return log_error_errno(-ENOMEM, "%m");
        if (!*env)
                *env = json_object_new_object();
        return add_string(*env, name, eq + 1);
}

/* In place: "/a/./b//c/." is "/a/b/c" (an absolute path; "/" stays "/"). */
static void path_drop_dots(char *p) {
        char *w = p;
        const char *r = p;

        while (*r) {
                while (*r == '/')
                        r++;
                size_t n = strcspn(r, "/");
                if (n == 0 || (n == 1 && r[0] == '.')) {
                        r += n;
                        continue;
                }
                *w++ = '/';
                memmove(w, r, n);
                w += n;
                r += n;
        }
        if (w == p)
                *w++ = '/';
        *w = '\0';
}

/* cwd (absolute, as getcwd() gives it: no symlink in it) and the first n bytes of rel, a relative
 * path: "." and empty components go, a leading ".." climbs from cwd; -EINVAL for a ".." after a
 * name, whose meaning depends on whether that name is a symlink. */
static int join_cwd(const char *cwd, const char *rel, size_t n, char **ret) {
        _cleanup_free_ char *buf = malloc(strlen(cwd) + n + 2);
        bool named = false;
        size_t len;

        if (!buf)
                return -ENOMEM;
        strcpy(buf, cwd);
        len = strlen(buf);
        for (size_t i = 0; i < n;) {
                size_t c = 0;
                while (i + c < n && rel[i + c] != '/')
                        c++;
                if (c == 2 && rel[i] == '.' && rel[i + 1] == '.') {
                        if (named)
                                return -EINVAL;
                        while (len > 1 && buf[len - 1] != '/')
                                len--;
                        if (len > 1)
                                len--;
                } else if (c > 0 && !(c == 1 && rel[i] == '.')) {
                        named = true;
                        if (len > 1)
                                buf[len++] = '/';
                        memcpy(buf + len, rel + i, c);
                        len += c;
                }
                buf[len] = '\0';
                i += c + 1;
        }
        *ret = TAKE_PTR(buf);
        return 0;
}

/* The first n bytes of path as an absolute path for the daemon, which resolves it on its host:
 * a relative one joined to the current directory (join_cwd()), "." and empty components dropped
 * (lexically: a ".." of an absolute path stays, for the daemon to judge). -EINVAL for a ".."
 * after a name. */
int path_for_daemon(const char *path, size_t n, char **ret) {
        _cleanup_free_ char *cwd = NULL, *out = NULL;
        int r;

        if (path[0] == '/')
                out = strndup(path, n);
        else if (!(cwd = getcwd(NULL, 0)))
                return -errno;
        else if ((r = join_cwd(cwd, path, n, &out)) < 0)
                return r;
        if (!out)
                return -ENOMEM;
        path_drop_dots(out);
        *ret = TAKE_PTR(out);
        return 0;
}

/* --mount SRC:DST[:ro|:rw], SRC relative to the current directory (not resolved: the daemon
 * refuses a symlink anywhere beneath its mount root). */
int add_mount(json_object **mounts, const char *spec) {
        const char *colon = strchr(spec, ':'), *dst, *mode;
        _cleanup_free_ char *src = NULL, *target = NULL;
        json_object *m;
        bool ro = false;
        int r;

        if (!colon || colon == spec || !colon[1])
                return log_error("invalid --mount '%s' (use SOURCE:TARGET[:ro])", spec);
        dst = colon + 1;
        mode = strchr(dst, ':');
        if (mode) {
                if (strcmp(mode, ":ro") != 0 && strcmp(mode, ":rw") != 0)
                        return log_error("invalid --mount '%s' (the third part is ro or rw)", spec);
                ro = strcmp(mode, ":ro") == 0;
        }
        target = strndup(dst, mode ? (size_t) (mode - dst) : strlen(dst));
        /* "./dir", "dir/", "a//b" and "." as people and shells write them: the "." and empty
         * components go (lexically: ".." stays, for the daemon to refuse, as a symlink would be). */
        r = path_for_daemon(spec, (size_t) (colon - spec), &src);
        if (r == -EINVAL)
                return log_error("invalid --mount '%s': '..' after a name is not resolved here (the name may be a "
                                 "symlink): give the path without it", spec);
        if (r < 0 || !target)
                return log_error_errno(r < 0 ? r : -ENOMEM, "--mount: %m");
        if (!*mounts)
                *mounts = json_object_new_array();
        m = json_object_new_object();
        json_object_object_add(m, "source", json_object_new_string(src));
        json_object_object_add(m, "target", json_object_new_string(target));
        json_object_object_add(m, "read_only", json_object_new_boolean(ro));
        json_object_array_add(*mounts, m);
        return 0;
}

int check_sandbox_name(const char *name) {
        size_t n = strlen(name);

        if (n == 0 || n > 64 || strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != n)
                return log_error("invalid name '%s' (1-64 of A-Z a-z 0-9 . _ -)", name);
        if (strncmp(name, "sbx-", 4) == 0)
                return log_error("invalid name '%s' (names may not start with 'sbx-', ids do)", name);
        return 0;
}

void add_object_unless_empty(json_object *obj, const char *key, json_object *child) {
        if (child && json_object_object_length(child) > 0)
                json_object_object_add(obj, key, child);
        else
                json_object_put(child);
}

/* ---- Talking to sandboxd ----------------------------------------------------------------- */

json_object *request_new(const char *op) {
        json_object *req = json_object_new_object();

        json_object_object_add(req, "op", json_object_new_string(op));
        return req;
}

const char *daemon_socket_path(void) {
        const char *e = getenv(SBX_SOCKET_ENV);

        if (arg.socket)
                return arg.socket;
        return e && *e ? e : SBX_DEFAULT_SOCKET;
}

static bool user_listed_in(const struct group *gr) {
        struct passwd *pw = getpwuid(geteuid());

        for (char **m = gr->gr_mem; pw && *m; m++)
                if (strcmp(*m, pw->pw_name) == 0)
                        return true;
        return false;
}

/* Which group the socket lets in, if any, decides the advice: a member of the group whose login
 * session predates joining it needs a new session, not to join again. */
static int log_access_denied(int r, const char *path) {
        struct stat st;
        struct group *gr;

        if (stat(path, &st) < 0)
                return log_error_errno(r, "permission denied on the way to %s: a directory above it is closed to "
                                       "you", path);
        if (!(st.st_mode & S_IWGRP) || st.st_gid == 0 || !(gr = getgrgid(st.st_gid)))
                return log_error_errno(r, "permission denied on %s (mode %04o, uid %u, gid %u): no group of users "
                                       "may use it, only root (a sandboxd started by hand without a 'sandboxd' "
                                       "group: its log says so; under systemd, sandboxd.socket gives it the group)",
                                       path, (unsigned) (st.st_mode & 07777), (unsigned) st.st_uid,
                                       (unsigned) st.st_gid);
        if (user_listed_in(gr))
                return log_error_errno(r, "permission denied on %s: you are in group '%s', but this login session "
                                       "is not yet: log in again (or run 'newgrp %s')", path, gr->gr_name, gr->gr_name);
        return log_error_errno(r, "permission denied on %s: only root and members of group '%s' may use sandboxd; "
                               "add yourself (sudo usermod -aG %s $USER) and log in again", path, gr->gr_name,
                               gr->gr_name);
}

int daemon_connect(SbxClient **ret) {
        const char *path = daemon_socket_path();
        int r = sbx_client_connect(path, ret);

        /* The three ways a connect fails for a person rather than for a program: say what to do. */
        if (r == -EACCES || r == -EPERM)
                return log_access_denied(r, path);
        if (r == -ENOENT)
                return log_error_errno(r, "no sandboxd socket at %s: start it with 'systemctl enable --now "
                                       "sandboxd.socket' under systemd, else 'sandboxd --listen %s' (as "
                                       "scripts/quickstart.sh starts it); or point --socket/$%s at the right path",
                                       path, path, SBX_SOCKET_ENV);
        if (r == -ECONNREFUSED)
                return log_error_errno(r, "nothing is listening on %s (a stale socket: sandboxd stopped?): start it again: "
                                       "'systemctl restart sandboxd.socket' under systemd, else 'sandboxd --listen %s' "
                                       "(as scripts/quickstart.sh starts it)", path, path);
        if (r < 0)
                return log_error_errno(r, "cannot connect to sandboxd at %s: %m", path);
        return 0;
}

int log_transport_error(int r) {
        switch (r) {
        case -ECONNRESET:
        case -EPIPE:
                return log_error_errno(r, "sandboxd closed the connection before replying");
        case -EMSGSIZE:
                return log_error_errno(r, "the reply from sandboxd is too large");
        case -EBADMSG:
                return log_error_errno(r, "sandboxd sent a malformed reply");
        default:
                return log_error_errno(r, "talking to sandboxd: %m");
        }
}

/* A reply with a null id answers a line the daemon could not attribute to a request (invalid_json,
 * too_large). sandboxctl has one request in flight at a time, so it is ours. */
static bool message_answers(json_object *msg, long long id) {
        json_object *v;

        if (!json_object_object_get_ex(msg, "id", &v))
                return false;
        if (!v)
                return json_child(msg, "error") != NULL;
        return json_object_is_type(v, json_type_int) && json_object_get_int64(v) == id;
}

/* The daemon takes another owner's sandbox as "UID/NAME" (it asks no user database in its event
 * loop): "USER/NAME" in req[key] becomes that. skip is 1 for from_snapshot, whose last part is
 * the snapshot ("USER/NAME/SNAPSHOT"). Ids, names and uids go as they are. */
static int owner_to_uid(json_object *req, const char *key, int skip) {
        const char *v = json_str(req, key), *slash = v ? strchr(v, '/') : NULL, *p = slash;
        _cleanup_free_ char *user = NULL, *out = NULL;
        int slashes = 0;
        struct passwd *pw;

        for (; p; p = strchr(p + 1, '/'))
                slashes++;
        if (!slash || slashes != 1 + skip || strspn(v, "0123456789") == (size_t) (slash - v) ||
            strncmp(v, "sbx-", 4) == 0)
                return 0;
        user = strndup(v, (size_t) (slash - v));
        if (!user)
                return log_error_errno(-ENOMEM, "%m");
        errno = 0;
        pw = getpwnam(user);
        if (!pw)
                return log_error_errno(errno ? -errno : -ENOENT, "%s: no user '%s'", v, user);
        if (asprintf(&out, "%u%s", (unsigned) pw->pw_uid, slash) < 0)
                return log_error_errno(-ENOMEM, "%m");
        json_object_object_add(req, key, json_object_new_string(out));
        return 0;
}

/* An empty SANDBOX (as "$id" is after a create that failed) would reach the daemon as a missing
 * field: said here in the words of the command line. */
static int check_sandbox_arg(const char *ref) {
        if (ref && !*ref)
                return log_error("the sandbox argument is empty: give a sandbox's id, name or USER/NAME");
        return 0;
}

int sandbox_ref_for_daemon(const char *ref, char **ret) {
        _cleanup_json_ json_object *o = json_object_new_object();
        char *out;
        int r;

        if ((r = check_sandbox_arg(ref)) < 0)
                return r;
        if (!o)
                return log_error_errno(-ENOMEM, "%m");
        json_object_object_add(o, "sandbox", json_object_new_string(ref));
        if ((r = owner_to_uid(o, "sandbox", 0)) < 0)
                return r;
        out = strdup(json_str(o, "sandbox"));
        if (!out)
                return log_error_errno(-ENOMEM, "%m");
        *ret = out;
        return 0;
}

int daemon_call_events(SbxClient *c, json_object *request, event_fn on_event, void *userdata,
                       json_object **ret_reply) {
        long long id;
        int r;

        if ((r = check_sandbox_arg(json_str(request, "sandbox"))) < 0 || (r = owner_to_uid(request, "sandbox", 0)) < 0 ||
            (r = owner_to_uid(request, "from_snapshot", 1)) < 0) {
                json_object_put(request);
                return r;
        }
        r = sbx_client_send(c, request, &id);
        if (r < 0)
                return log_transport_error(r);
        for (;;) {
                _cleanup_json_ json_object *msg = NULL;

                r = sbx_client_read(c, &msg);
                if (r < 0)
                        return log_transport_error(r);
                if (!message_answers(msg, id))
                        continue;
                if (json_child(msg, "event")) {
                        if (on_event && (r = on_event(msg, userdata)) < 0)
                                return r;
                        continue;
                }
                *ret_reply = TAKE_PTR(msg);
                return 0;
        }
}

int daemon_call(SbxClient *c, json_object *request, json_object **ret_reply) {
        return daemon_call_events(c, request, NULL, NULL, ret_reply);
}

/* The daemon's hint names the protocol field; sandboxctl's user needs its option. NULL when
 * message has no such hint (or memory ran out: the daemon's words then stand). */
static char *message_for_cli(const char *code, const char *message) {
        static const struct {
                const char *code, *field_hint, *option_hint;
        } hints[] = {
                { "limit_unenforceable", "pass best_effort", "pass --best-effort" },
                { "conflict", "\"recursive\": true removes a tree", "rm -r removes a tree" },
        };
        char *out = NULL;

        for (size_t i = 0; i < ELEMENTSOF(hints); i++) {
                const char *at = strstr(message, hints[i].field_hint);
                if (strcmp(code, hints[i].code) != 0 || !at)
                        continue;
                if (asprintf(&out, "%.*s%s%s", (int) (at - message), message, hints[i].option_hint,
                             at + strlen(hints[i].field_hint)) < 0)
                        return NULL;
                return out;
        }
        return NULL;
}

/* The option of the running verb that sets a request field, or NULL. */
static const char *option_for_field(const char *field) {
        if (!field || !arg.verb || !arg.verb->field_options)
                return NULL;
        for (const char *const *p = arg.verb->field_options; p[0] && p[1]; p += 2)
                if (strcmp(p[0], field) == 0)
                        return p[1];
        return NULL;
}

int reply_check(json_object *reply) {
        json_object *e = json_child(reply, "error");
        const char *code, *message, *field, *step, *err, *option;
        _cleanup_free_ char *cli_message = NULL, *quoted = NULL, *with_option = NULL;

        if (sbx_reply_ok(reply))
                return 0;
        code = json_str(e, "code") ?: "error";
        message = json_str(e, "message") ?: "(no message)";
        if ((cli_message = message_for_cli(code, message)))
                message = cli_message;
        field = json_str(e, "field");
        step = json_str(e, "step");
        err = json_str(e, "errno");
        /* "'limits.memory' must be at least 1M (field: limits.memory)" is "--memory must be at
         * least 1M (option: --memory)" for the user of create --memory (--json keeps the reply). */
        option = option_for_field(field);
        if (option && asprintf(&quoted, "'%s'", field) >= 0 && strncmp(message, quoted, strlen(quoted)) == 0 &&
            asprintf(&with_option, "%s%s", option, message + strlen(quoted)) >= 0)
                message = with_option;
        fflush(stdout);
        /* The message may hold a name or a path a client gave. */
        fprintf(stderr, "sandboxctl: %s: %s", esc(code), esc(message));
        if (option)
                fprintf(stderr, " (option: %s)", option);
        else if (field)
                fprintf(stderr, " (field: %s)", esc(field));
        if (step || err)
                fprintf(stderr, " (step: %s, errno: %s)", esc(step ?: "-"), esc(err ?: "-"));
        fputc('\n', stderr);
        return -EREMOTEIO;
}

int daemon_request(json_object *request, json_object **ret_reply) {
        return daemon_request_events(request, NULL, NULL, ret_reply);
}

int daemon_request_events(json_object *request, event_fn on_event, void *userdata, json_object **ret_reply) {
        _cleanup_(sbx_client_freep) SbxClient *c = NULL;
        _cleanup_json_ json_object *req = request, *reply = NULL;
        int r;

        r = daemon_connect(&c);
        if (r < 0)
                return r;
        r = daemon_call_events(c, TAKE_PTR(req), on_event, userdata, &reply);
        if (r < 0)
                return r;
        if (arg.json)
                print_json(reply);
        r = reply_check(reply);
        if (r < 0)
                return r;
        *ret_reply = TAKE_PTR(reply);
        return 0;
}

/* ---- I/O --------------------------------------------------------------------------------- */

void print_json(json_object *o) {
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        fflush(stdout);
}


int read_all(int fd, char **ret, size_t *ret_len) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, alloc = 0;

        for (;;) {
                if (alloc - len < 65536) {
                        size_t n = alloc ? alloc * 2 : 65536;
                        char *p = realloc(buf, n + 1);
                        if (!p)
                                return -ENOMEM;
                        buf = p;
                        alloc = n;
                }
                size_t want = alloc - len;
                ssize_t k = read_full(fd, buf + len, want);
                if (k < 0)
                        return (int) k;
                len += (size_t) k;
                if ((size_t) k < want)
                        break; /* the end of the input */
        }
        buf[len] = '\0';
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}
