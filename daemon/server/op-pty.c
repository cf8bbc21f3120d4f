/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pty.open, pty.write, pty.resize, pty.signal, pty.close, pty.attach, pty.detach: interactive
 * sessions (pty.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "ops.h"
#include "session.h"
#include "run-record.h"
#include "sandbox.h"
#include "util.h"

#define PTY_DEFAULT_ROWS 24
#define PTY_DEFAULT_COLS 80
/* Beyond any real screen: a size past these is a mistake, not a terminal. */
#define PTY_MAX_ROWS 1000
#define PTY_MAX_COLS 4096
#define PTY_DEFAULT_TERM "xterm-256color"
#define PTY_DEFAULT_SHELL "/bin/sh"

static const char *env_lookup(json_object *env, const char *key) {
        json_object *v;
        return env && json_object_object_get_ex(env, key, &v) ? json_object_get_string(v) : NULL;
}

/* No argv and no command: a login shell, $SHELL of the session's (or else the sandbox's)
 * environment when it is an absolute path, else /bin/sh. */
static int default_argv(json_object *req, Sandbox *s, ProtoError *err) {
        json_object *env = NULL, *argv;
        const char *shell;

        if (json_object_object_get_ex(req, "argv", NULL) || json_object_object_get_ex(req, "command", NULL))
                return 0;
        (void) json_object_object_get_ex(req, "env", &env);
        shell = env_lookup(env, "SHELL");
        if (!shell && !env)
                shell = env_lookup(s->env, "SHELL");
        if (!shell || shell[0] != '/')
                shell = PTY_DEFAULT_SHELL;
        argv = json_object_new_array();
        if (!argv)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        json_object_array_add(argv, json_object_new_string(shell));
        json_object_array_add(argv, json_object_new_string("-l"));
        json_object_object_add(req, "argv", argv);
        return 0;
}

/* Adds KEY=value to envp unless KEY is there already (force: replaces it). */
static int env_set(char ***envp, const char *key, const char *value, bool force) {
        size_t n = 0, klen = strlen(key);
        char *kv, **e;

        if (asprintf(&kv, "%s=%s", key, value) < 0)
                return -ENOMEM;
        for (; (*envp)[n]; n++)
                if (strncmp((*envp)[n], key, klen) == 0 && (*envp)[n][klen] == '=') {
                        if (force) {
                                free((*envp)[n]);
                                (*envp)[n] = kv;
                        } else
                                free(kv);
                        return 0;
                }
        e = realloc(*envp, (n + 2) * sizeof(char *));
        if (!e) {
                free(kv);
                return -ENOMEM;
        }
        e[n] = kv;
        e[n + 1] = NULL;
        *envp = e;
        return 0;
}

static bool term_valid(const char *t) {
        if (!*t || strlen(t) > 64)
                return false;
        for (; *t; t++)
                if (!(('a' <= *t && *t <= 'z') || ('A' <= *t && *t <= 'Z') || ('0' <= *t && *t <= '9') || strchr("._+-", *t)))
                        return false;
        return true;
}

static int parse_winsize(json_object *req, bool required, uint64_t *rows, uint64_t *cols, ProtoError *err) {
        int r;
        if ((r = proto_get_uint(req, "rows", 1, PTY_MAX_ROWS, rows, err)) < 0 ||
            (r = proto_get_uint(req, "cols", 1, PTY_MAX_COLS, cols, err)) < 0)
                return r;
        if (required && (!json_object_object_get_ex(req, "rows", NULL) || !json_object_object_get_ex(req, "cols", NULL)))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "rows", "'rows' and 'cols' are both required");
        return 0;
}

/* pty, rows, cols, term, and the environment a terminal session gets on top of a run's. */
static int parse_terminal(json_object *req, RunSpec *spec, bool *ret_pty, uint64_t *rows, uint64_t *cols,
                          ProtoError *err) {
        const char *term = PTY_DEFAULT_TERM;
        const char *only[] = { "rows", "cols", "term" };
        int r;

        *ret_pty = true;
        if ((r = proto_get_bool(req, "pty", ret_pty, err)) < 0 || (r = parse_winsize(req, false, rows, cols, err)) < 0 ||
            (r = proto_get_string(req, "term", 64, &term, err)) < 0)
                return r;
        if (!*ret_pty) {
                for (size_t i = 0; i < ELEMENTSOF(only); i++)
                        if (json_object_object_get_ex(req, only[i], NULL))
                                return proto_error_set(err, SBX_E_INVALID_REQUEST, only[i],
                                                       "'%s' is for terminal sessions (\"pty\": true)", only[i]);
                return 0;
        }
        if (!term_valid(term))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "term",
                                       "'term' must be 1-64 of [A-Za-z0-9._+-] (a terminfo name)");
        if (env_set(&spec->envp, "TERM", term, json_object_object_get_ex(req, "term", NULL)) < 0 ||
            env_set(&spec->envp, "HOME", "/work", false) < 0)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        return 0;
}

static int check_caps(Request *c, ProtoError *err) {
        Context *m = c->ctx;
        if (c->peer.uid == 0)
                return 0;
        session_make_room(m, c->peer.uid, m->config.max_sessions_per_uid);
        if (session_count_owned(m, c->peer.uid) >= m->config.max_sessions_per_uid)
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, NULL,
                                       "uid %u has its maximum of %llu running sessions (max_sessions_per_uid)",
                                       (unsigned) c->peer.uid, (unsigned long long) m->config.max_sessions_per_uid);
        return 0;
}

int op_pty_open(Request *c, json_object *id, json_object *req, ProtoError *err) {
        _cleanup_(run_spec_done) RunSpec spec = {};
        uint64_t rows = PTY_DEFAULT_ROWS, cols = PTY_DEFAULT_COLS;
        Sandbox *s;
        Session *p;
        bool pty;
        int k;

        if ((k = check_caps(c, err)) < 0 || (k = ops_lookup_sandbox(c, req, &s, err)) < 0)
                return k;
        if (s->state != SANDBOX_READY)
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox", "sandbox %s is %s", s->id,
                                       s->state == SANDBOX_CREATING ? "still being created"
                                       : s->state == SANDBOX_FAILED ? "broken (its init died)"
                                                                    : "being destroyed");
        if (s->user_frozen)
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox", "sandbox %s is frozen (sandbox.thaw resumes it)", s->id);
        if ((k = default_argv(req, s, err)) < 0 || (k = run_spec_parse(req, 0, &spec, err)) < 0 ||
            (k = run_spec_resolve(&spec, s, err)) < 0 || (k = parse_terminal(req, &spec, &pty, &rows, &cols, err)) < 0)
                return k;
        k = session_new(s, c->reply, &spec, pty, (unsigned) rows, (unsigned) cols, &p);
        if (k < 0)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "cannot make a session: %s", strerror(-k));
        session_start(p);
        return 0;
}

/* A session of one of the caller's sandboxes that the daemon's death ended (run-record.h):
 * session_lost, saying when; any other unknown id is not_found. */
static int session_gone(Request *c, const char *key, ProtoError *err) {
        Sandbox *s;
        json_object *e = run_records_lost(c->ctx, reply_peer(c->reply), key, true, &s), *why;
        const char *at;

        if (!e)
                return proto_error_set(err, SBX_E_NOT_FOUND, "session", "no session '%.64s'", key);
        at = json_object_object_get_ex(e, "started_at", &why) ? json_object_get_string(why) : "?";
        /* One the next daemon could not take back says why (session.c, session_lost()). */
        if (json_object_object_get_ex(e, "reason", &why) && strcmp(json_object_get_string(why), "daemon restarted") != 0)
                return proto_error_set(err, SBX_E_SESSION_LOST, "session",
                                       "session %s of sandbox %s was lost when the daemon restarted (it had started at %s): %s",
                                       key, s->id, at, json_object_get_string(why));
        return proto_error_set(err, SBX_E_SESSION_LOST, "session",
                               "session %s of sandbox %s ended when the daemon restarted (it had started at %s); its "
                               "processes and output are gone",
                               key, s->id, at);
}

/* The caller's session; not_found for others' (no oracle), as for sandboxes. */
static int lookup_session(Request *c, json_object *req, Session **ret, ProtoError *err) {
        const char *key = NULL;
        Session *p;
        int r = proto_get_string(req, "session", 64, &key, err);

        if (r < 0)
                return r;
        p = key ? session_find(c->ctx, key) : NULL;
        if (!p || !sandbox_visible_to(p->sandbox, reply_peer(c->reply)) || p->free_when_done)
                return key ? session_gone(c, key, err)
                           : proto_error_set(err, SBX_E_NOT_FOUND, "session", "no session ''");
        *ret = p;
        return 0;
}

static int decode_data(json_object *req, char **ret, size_t *ret_len, ProtoError *err) {
        const char *data = NULL, *enc = "utf-8";
        json_object *v;
        void *buf;
        int r;

        if ((r = proto_get_string(req, "data", SIZE_MAX, &data, err)) < 0 ||
            (r = proto_get_string(req, "encoding", 16, &enc, err)) < 0)
                return r;
        *ret = NULL;
        *ret_len = 0;
        if (!data)
                return 0;
        (void) json_object_object_get_ex(req, "data", &v);
        if (strcmp(enc, "base64") == 0) {
                if (base64_decode(data, (size_t) json_object_get_string_len(v), &buf, ret_len) < 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "data", "'data' is not valid base64");
                *ret = buf;
                return 0;
        }
        if (strcmp(enc, "utf-8") != 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "encoding", "'encoding' must be \"utf-8\" or \"base64\"");
        *ret_len = (size_t) json_object_get_string_len(v);
        *ret = malloc(*ret_len + 1);
        if (!*ret)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        memcpy(*ret, data, *ret_len);
        return 0;
}

int op_pty_write(Request *c, json_object *id, json_object *req, ProtoError *err) {
        _cleanup_free_ char *data = NULL;
        size_t n = 0;
        bool eof = false;
        Session *p;
        int k;

        if ((k = lookup_session(c, req, &p, err)) < 0 || (k = decode_data(req, &data, &n, err)) < 0 ||
            (k = proto_get_bool(req, "eof", &eof, err)) < 0)
                return k;
        if (!data && !eof)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "data", "missing field 'data' (or \"eof\": true)");
        return session_write(p, c->reply, data, n, eof, err);
}

int op_pty_resize(Request *c, json_object *id, json_object *req, ProtoError *err) {
        uint64_t rows = 0, cols = 0;
        Session *p;
        int k;

        if ((k = lookup_session(c, req, &p, err)) < 0 || (k = parse_winsize(req, true, &rows, &cols, err)) < 0 ||
            (k = session_resize(p, (unsigned) rows, (unsigned) cols, err)) < 0)
                return k;
        reply_ok(c->reply, NULL);
        return 0;
}

int op_pty_signal(Request *c, json_object *id, json_object *req, ProtoError *err) {
        json_object *v, *reply;
        unsigned count = 0;
        Session *p;
        int sig, k;

        if ((k = lookup_session(c, req, &p, err)) < 0)
                return k;
        (void) json_object_object_get_ex(req, "signal", &v);
        sig = signal_from_string(json_object_get_string(v));
        if (sig < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "signal", "unknown signal '%.32s'", json_object_get_string(v));
        if ((k = session_signal(p, sig, &count, err)) < 0)
                return k;
        reply = json_object_new_object();
        json_object_object_add(reply, "processes", json_object_new_int((int) count));
        reply_ok(c->reply, reply);
        return 0;
}

int op_pty_close(Request *c, json_object *id, json_object *req, ProtoError *err) {
        Session *p;
        int k = lookup_session(c, req, &p, err);
        if (k < 0)
                return k;
        session_close(p, c->reply);
        return 0;
}

int op_pty_attach(Request *c, json_object *id, json_object *req, ProtoError *err) {
        uint64_t from = 0;
        Session *p;
        int k, given;

        if ((k = lookup_session(c, req, &p, err)) < 0)
                return k;
        given = proto_get_uint(req, "from_seq", 0, INT64_MAX, &from, err);
        if (given < 0)
                return given;
        return session_attach(p, c->reply, from, given > 0, err);
}

int op_pty_detach(Request *c, json_object *id, json_object *req, ProtoError *err) {
        Session *p;
        int k;

        if ((k = lookup_session(c, req, &p, err)) < 0 || (k = session_detach(p, c->reply, err)) < 0)
                return k;
        reply_ok(c->reply, NULL);
        return 0;
}
