/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl shell, exec, attach: interactive sessions. The local terminal goes raw (restored on
 * every way out), keys travel as bytes (Ctrl-C, Ctrl-Z included), the window size follows, and
 * the remote program's exit status becomes ours. Ctrl-] (or --detach-key) detaches. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "sandboxctl.h"
#include "util.h"

/* The byte that detaches (Ctrl-] by default; --detach-key), or -1 for none. */
static int detach_key = 0x1d;

static int verb_shell_run(int argc, char *argv[]);
static int verb_exec_run(int argc, char *argv[]);
static int verb_attach_run(int argc, char *argv[]);

#define DETACH_KEY_OPTION                                                                         \
        "     --detach-key KEY    The key that detaches: ctrl-X (X one of @, A-Z, [, \\, ], ^,\n"  \
        "                         _; default ctrl-]), or none: every byte goes to the program\n"

#define SESSION_NOTES                                                                             \
        "\nThe local terminal is put in raw mode while attached: every key, Ctrl-C and Ctrl-Z\n"  \
        "included, goes to the program, and the window size follows the local one. Ctrl-]\n"     \
        "(or --detach-key) detaches (the session goes on; come back with 'sandboxctl attach SESSION'). The\n"      \
        "session id is printed on stderr when it starts. A session that shell or exec opened is\n" \
        "closed when its program ends while they are attached; one they detached from stays\n" \
        "until 'sandboxctl session close ID' ('sandboxctl sessions SANDBOX' lists those left).\n" \
        "\nExit status: the program's own (128+N for a signal N); 0 after a detach; 125 when\n" \
        "sandboxctl or sandboxd failed (e.g. spawn_failed: the program could not start).\n"

const Verb verb_shell = {
        .name = "shell",
        .args = "[OPTIONS] [SANDBOX]",
        .summary = "Open an interactive login shell in a sandbox",
        .help = "Options:\n"
                "  -e --env NAME=VALUE    Environment (repeatable); replaces the sandbox's default\n"
                "  -w --cwd DIR           Working directory, /work or beneath it (default /work)\n"
                "     --best-effort       Without SANDBOX: accept limits this host cannot enforce\n"
                DETACH_KEY_OPTION
                "\nWithout SANDBOX a throwaway sandbox is created for the shell and destroyed when\n"
                "the shell ends (kept, and named, when you detach). The shell is $SHELL of the\n"
                "session's environment when given as -e SHELL=/path, else /bin/sh, started as a\n"
                "login shell (-l).\n" SESSION_NOTES,
        .failure_status = EXIT_RUNNER_FAILED,
        .run = verb_shell_run,
};

const Verb verb_exec = {
        .name = "exec",
        .args = "[-i] [-t] [OPTIONS] SANDBOX [--] ARGV...",
        .summary = "Run a command in a sandbox interactively (-it: on a terminal)",
        .help = "Options:\n"
                "  -t --tty               Give the command a terminal (pty.open with \"pty\": true)\n"
                "  -i --interactive       Send sandboxctl's standard input to the command\n"
                "  -e --env NAME=VALUE    Environment (repeatable); replaces the sandbox's default\n"
                "  -w --cwd DIR           Working directory, /work or beneath it (default /work)\n"
                DETACH_KEY_OPTION
                "\nWithout -t the command gets pipes: its stdout and stderr come out apart on\n"
                "sandboxctl's, and its stdin is sandboxctl's with -i (until end of file), else empty.\n"
                "With -t its output is the terminal's; -t without -i still forwards the keys of a\n"
                "local terminal.\n" SESSION_NOTES,
        .failure_status = EXIT_RUNNER_FAILED,
        .run = verb_exec_run,
};

const Verb verb_attach = {
        .name = "attach",
        .args = "[OPTIONS] SESSION",
        .summary = "Attach to a session again (its missed output first)",
        .help = "Options:\n"
                "     --from-seq N        Replay the output from byte N on (default: all that the\n"
                "                         session's ring still holds); what is gone is reported\n"
                DETACH_KEY_OPTION SESSION_NOTES,
        .failure_status = EXIT_RUNNER_FAILED,
        .run = verb_attach_run,
};

enum { ARG_BEST_EFFORT = ARG_VERB_FIRST, ARG_FROM_SEQ, ARG_DETACH_KEY };

/* "ctrl-]" and the like (case-insensitive), or "none". */
static int parse_detach_key(const char *s) {
        if (strcasecmp(s, "none") == 0) {
                detach_key = -1;
                return 0;
        }
        if (strncasecmp(s, "ctrl-", 5) == 0 && s[5] && !s[6]) {
                int c = toupper((unsigned char) s[5]);
                if (c >= '@' && c <= '_') {
                        detach_key = c - '@';
                        return 0;
                }
        }
        return log_error("--detach-key: '%s' is not ctrl-X (X one of @, A-Z, [, \\, ], ^, _) or none", s);
}

/* ---- The local terminal ------------------------------------------------------------------ */

static struct termios saved_termios;
static bool termios_saved;
static int signal_pipe[2] = { -1, -1 };

static void terminal_restore(void) {
        if (termios_saved)
                (void) tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_termios);
        termios_saved = false;
}

static void on_signal(int sig) {
        int saved = errno;
        unsigned char b = (unsigned char) sig;
        (void) !write(signal_pipe[1], &b, 1);
        errno = saved;
}

/* Signals become bytes on a pipe that the loop polls: SIGWINCH for a resize, the others to
 * leave (detached) with the terminal restored. */
static int signals_setup(void) {
        struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };
        static const int sigs[] = { SIGWINCH, SIGTERM, SIGHUP, SIGINT, SIGQUIT };

        if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
                return log_error_errno(-errno, "pipe: %m");
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < ELEMENTSOF(sigs); i++)
                (void) sigaction(sigs[i], &sa, NULL);
        (void) signal(SIGPIPE, SIG_IGN);
        return 0;
}

static void terminal_raw(void) {
        struct termios t;

        if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_termios) < 0)
                return;
        termios_saved = true;
        atexit(terminal_restore);
        t = saved_termios;
        cfmakeraw(&t);
        (void) tcsetattr(STDIN_FILENO, TCSADRAIN, &t);
}

static bool window_size(unsigned *rows, unsigned *cols) {
        struct winsize ws = {};
        int fd = isatty(STDIN_FILENO) ? STDIN_FILENO : STDOUT_FILENO;
        if (ioctl(fd, TIOCGWINSZ, &ws) < 0 || ws.ws_row == 0 || ws.ws_col == 0)
                return false;
        *rows = ws.ws_row;
        *cols = ws.ws_col;
        return true;
}

/* ---- One session, interactively ---------------------------------------------------------- */

typedef struct Interact {
        SbxClient *c;
        const char *session;
        json_object *sub_id;  /* the pty.open or pty.attach whose events we get */
        bool tty;             /* a terminal session: resize on SIGWINCH */
        bool forward_stdin;
        bool pipe_eof;        /* pipe mode: send eof at the end of our stdin */
        bool stdin_done;
        bool detached;
        int status;           /* -1 until the exit event */
} Interact;

static int send_request(Interact *it, json_object *req) {
        json_object_object_add(req, "session", json_object_new_string(it->session));
        return sbx_client_send(it->c, req, NULL);
}

static int send_input(Interact *it, const char *buf, size_t n, bool eof) {
        json_object *req = request_new("pty.write");
        _cleanup_free_ char *b64 = n ? base64_encode(buf, n) : NULL;

        if (n) {
                if (!b64) {
                        json_object_put(req);
                        return -ENOMEM;
                }
                json_object_object_add(req, "data", json_object_new_string(b64));
                json_object_object_add(req, "encoding", json_object_new_string("base64"));
        }
        if (eof)
                json_object_object_add(req, "eof", json_object_new_boolean(1));
        return send_request(it, req);
}

static int send_resize(Interact *it) {
        unsigned rows, cols;
        json_object *req;

        if (!it->tty || !window_size(&rows, &cols))
                return 0;
        req = request_new("pty.resize");
        json_object_object_add(req, "rows", json_object_new_int((int) rows));
        json_object_object_add(req, "cols", json_object_new_int((int) cols));
        return send_request(it, req);
}

static void say(Interact *it, const char *fmt, const char *what) {
        /* In raw mode a newline does not return the carriage. */
        fprintf(stderr, termios_saved ? "\r\nsandboxctl: " : "sandboxctl: ");
        fprintf(stderr, fmt, esc(what));
        fputs(termios_saved ? "\r\n" : "\n", stderr);
}

static int on_stdin(Interact *it) {
        char buf[4096];
        ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
        char *esc;

        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                return 0;
        if (n <= 0) {
                it->stdin_done = true;
                return it->pipe_eof ? send_input(it, NULL, 0, true) : 0;
        }
        esc = termios_saved && detach_key >= 0 ? memchr(buf, detach_key, (size_t) n) : NULL;
        if (esc) {
                it->detached = true;
                n = esc - buf;
        }
        return n > 0 ? send_input(it, buf, (size_t) n, false) : 0;
}

static int write_out(int fd, json_object *ev) {
        const char *data = json_str(ev, "data");
        const char *enc = json_str(ev, "data_encoding");
        _cleanup_free_ void *raw = NULL;
        size_t n;

        if (!data)
                return 0;
        if (enc && strcmp(enc, "base64") == 0) {
                if (base64_decode(data, strlen(data), &raw, &n) < 0)
                        return -EBADMSG;
                return write_all(fd, raw, n);
        }
        return write_all(fd, data, strlen(data));
}

static int on_message(Interact *it, json_object *m) {
        json_object *id = json_child(m, "id");
        const char *ev = json_str(m, "event");
        int64_t v = 0;

        if (!ev) {
                /* A reply to one of our writes or resizes: only failures matter. */
                if (!sbx_reply_ok(m) && !json_object_equal(id, it->sub_id) &&
                    strcmp(sbx_reply_error_code(m) ?: "", "conflict") != 0)
                        say(it, "%s", sbx_reply_error_message(m) ?: "error");
                return 0;
        }
        if (!json_object_equal(id, it->sub_id))
                return 0;
        if (strcmp(ev, "stdout") == 0 || strcmp(ev, "stderr") == 0)
                return write_out(strcmp(ev, "stdout") == 0 ? STDOUT_FILENO : STDERR_FILENO, m);
        if (strcmp(ev, "dropped") == 0 && json_int(m, "bytes", &v)) {
                char buf[32];
                snprintf(buf, sizeof(buf), "%" PRId64, v);
                say(it, "%s bytes of output were dropped (the session's ring is full)", buf);
        } else if (strcmp(ev, "exit") == 0) {
                it->status = json_int(m, "exit_code", &v) ? (int) v : EXIT_RUNNER_FAILED;
        }
        return 0;
}

static int on_signal_byte(Interact *it) {
        unsigned char b;
        while (read(signal_pipe[0], &b, 1) == 1) {
                if (b == SIGWINCH) {
                        int r = send_resize(it);
                        if (r < 0)
                                return r;
                } else
                        it->detached = true;
        }
        return 0;
}

static int drain_messages(Interact *it) {
        for (;;) {
                _cleanup_json_ json_object *m = NULL;
                int r = sbx_client_read_nowait(it->c, &m);
                if (r == -EAGAIN)
                        return 0;
                if (r < 0)
                        return log_error_errno(r, "connection to sandboxd: %s", strerror(-r));
                if ((r = on_message(it, m)) < 0)
                        return r;
                if (it->status >= 0)
                        return 0;
        }
}

/* Until the exit event or a detach; returns the exit status to use. */
static int interact(Interact *it) {
        int r = send_resize(it);

        while (r >= 0 && it->status < 0 && !it->detached) {
                struct pollfd p[3] = {
                        { .fd = sbx_client_fd(it->c), .events = POLLIN },
                        { .fd = signal_pipe[0], .events = POLLIN },
                        { .fd = it->forward_stdin && !it->stdin_done ? STDIN_FILENO : -1, .events = POLLIN },
                };
                if ((r = drain_messages(it)) < 0 || it->status >= 0)
                        break;
                if (poll(p, 3, -1) < 0) {
                        r = errno == EINTR ? 0 : -errno;
                        continue;
                }
                if (p[1].revents)
                        r = on_signal_byte(it);
                if (r >= 0 && p[2].revents)
                        r = on_stdin(it);
        }
        terminal_restore();
        if (r < 0)
                return r;
        if (it->detached && it->status < 0) {
                say(it, "detached from session %s; 'sandboxctl attach' it to come back", it->session);
                return 0;
        }
        return it->status;
}

/* A session opened for one command ends with it: closed once its exit was seen, so that it does
 * not stay (exited) until session_idle_timeout. Not found is fine: someone closed it already. */
static void session_close_quietly(SbxClient *c, const char *session) {
        _cleanup_json_ json_object *reply = NULL;
        json_object *req = request_new("pty.close");

        json_object_object_add(req, "session", json_object_new_string(session));
        if (daemon_call(c, req, &reply) >= 0 && !sbx_reply_ok(reply) &&
            strcmp(sbx_reply_error_code(reply) ?: "", "not_found") != 0)
                fprintf(stderr, "sandboxctl: could not close session %s: %s\n", esc(session),
                        esc(sbx_reply_error_message(reply) ?: "error"));
}

/* Opens or attaches (request is taken), then runs the session interactively; close_at_exit:
 * closes it once the program exited (not after a detach). */
static int session_run(json_object *request, bool tty, bool forward_stdin, bool pipe_eof, bool close_at_exit,
                       char **ret_session, int *ret_status) {
        _cleanup_(sbx_client_freep) SbxClient *c = NULL;
        /* 0: never one of the ids libsandbox numbers the later requests with (from 1). */
        _cleanup_json_ json_object *reply = NULL, *id = json_object_new_int(0);
        Interact it = { .tty = tty, .forward_stdin = forward_stdin, .pipe_eof = pipe_eof, .status = -1 };
        int r;

        json_object_object_add(request, "id", json_object_get(id));
        if ((r = daemon_connect(&c)) < 0 || (r = daemon_call(c, request, &reply)) < 0)
                return r;
        if (arg.json)
                print_json(reply);
        if ((r = reply_check(reply)) < 0)
                return r;
        it.c = c;
        it.sub_id = id;
        it.session = json_str(reply, "session");
        if (!it.session)
                return log_error("sandboxd answered without a session id");
        *ret_session = strdup(it.session);
        /* A terminal's session (shell, exec -t, attach) is named on stderr wherever it goes, so that
         * a script piping into shell may come back to it; a session on pipes only on a terminal,
         * its stderr being the command's. The detach key only where keys come from a terminal. */
        if (!arg.json && (tty || isatty(STDERR_FILENO))) {
                if (!forward_stdin || !isatty(STDIN_FILENO))
                        fprintf(stderr, "sandboxctl: session %s\n", esc(it.session));
                else if (detach_key >= 0)
                        fprintf(stderr, "sandboxctl: session %s (Ctrl-%c detaches)\n", esc(it.session), detach_key + '@');
                else
                        fprintf(stderr, "sandboxctl: session %s (no detach key)\n", esc(it.session));
        }
        if ((r = signals_setup()) < 0)
                return r;
        if (tty && forward_stdin)
                terminal_raw();
        if (pipe_eof && !forward_stdin && (r = send_input(&it, NULL, 0, true)) < 0)
                return r;
        /* exec -t without -i, no terminal of ours: nobody types on its terminal. Its end of input
         * is the terminal's EOF key (a terminal has no "eof" of the protocol), so that a program
         * that reads it ends as on an empty stdin, as sandboxctl(1) says. */
        if (tty && !forward_stdin && close_at_exit && (r = send_input(&it, "\x04", 1, false)) < 0)
                return r;
        /* attach without a terminal to type on stays until the session ends: said once. */
        if (!close_at_exit && !forward_stdin && !arg.json)
                fprintf(stderr, "sandboxctl: stdin is not a terminal: attached until session %s ends (an interrupt detaches and "
                        "leaves it running)\n", esc(it.session));
        r = interact(&it);
        if (r < 0)
                return r;
        if (close_at_exit && it.status >= 0)
                session_close_quietly(c, it.session);
        *ret_status = it.detached && it.status < 0 ? -1 : r;
        return 0;
}

/* ---- Verbs ------------------------------------------------------------------------------- */

typedef struct PtyArgs {
        json_object *env;
        const char *cwd;
        bool tty, interactive, best_effort;
        const char *from_seq;
} PtyArgs;

static int pty_parse(const Verb *v, PtyArgs *a, int argc, char *argv[], const char *shortopts, int min_args,
                     int max_args) {
        static const struct option options[] = {
                COMMON_OPTIONS,
                { "env", required_argument, NULL, 'e' },
                { "cwd", required_argument, NULL, 'w' },
                { "tty", no_argument, NULL, 't' },
                { "interactive", no_argument, NULL, 'i' },
                { "best-effort", no_argument, NULL, ARG_BEST_EFFORT },
                { "from-seq", required_argument, NULL, ARG_FROM_SEQ },
                { "detach-key", required_argument, NULL, ARG_DETACH_KEY },
                {},
        };
        int c, r;

        optind = 0;
        /* '+': stop at the command's own arguments. */
        while ((c = getopt_long(argc, argv, shortopts, options, NULL)) >= 0) {
                switch (c) {
                case 'e': r = add_env(&a->env, optarg); break;
                case 'w': a->cwd = optarg, r = 0; break;
                case 't': a->tty = true, r = 0; break;
                case 'i': a->interactive = true, r = 0; break;
                case ARG_BEST_EFFORT: a->best_effort = true, r = 0; break;
                case ARG_FROM_SEQ: a->from_seq = optarg, r = 0; break;
                case ARG_DETACH_KEY: r = parse_detach_key(optarg); break;
                default:
                        if (!is_common_option(c))
                                return log_error("see 'sandboxctl %s --help'", v->name);
                        r = common_option(v, c);
                        if (r <= 0)
                                return r;
                }
                if (r < 0)
                        return r;
        }
        return check_arg_count(v, argc, argv, min_args, max_args);
}

static json_object *open_request(const char *sandbox, PtyArgs *a, bool tty) {
        json_object *req = request_new("pty.open");
        unsigned rows, cols;
        const char *term = getenv("TERM");

        json_object_object_add(req, "sandbox", json_object_new_string(sandbox));
        json_object_object_add(req, "pty", json_object_new_boolean(tty));
        if (a->env)
                json_object_object_add(req, "env", json_object_get(a->env));
        if (a->cwd)
                json_object_object_add(req, "cwd", json_object_new_string(a->cwd));
        if (tty && window_size(&rows, &cols)) {
                json_object_object_add(req, "rows", json_object_new_int((int) rows));
                json_object_object_add(req, "cols", json_object_new_int((int) cols));
        }
        if (tty && term && *term && strlen(term) <= 64 && strcspn(term, " \t/\\") == strlen(term))
                json_object_object_add(req, "term", json_object_new_string(term));
        return req;
}

static int create_throwaway(bool best_effort, char **ret_id) {
        _cleanup_json_ json_object *reply = NULL;
        json_object *req = request_new("create");
        const char *id;
        int r;

        if (best_effort)
                json_object_object_add(req, "best_effort", json_object_new_boolean(1));
        r = daemon_request(req, &reply);
        if (r < 0)
                return r;
        id = json_str(json_child(reply, "sandbox"), "id");
        if (!id || !(*ret_id = strdup(id)))
                return log_error("sandboxd answered create without an id");
        return 0;
}

static void destroy_sandbox(const char *id) {
        _cleanup_json_ json_object *reply = NULL;
        json_object *req = request_new("destroy");
        bool json = arg.json;

        json_object_object_add(req, "sandbox", json_object_new_string(id));
        arg.json = false;
        (void) daemon_request(req, &reply);
        arg.json = json;
}

static int verb_shell_run(int argc, char *argv[]) {
        _cleanup_free_ char *throwaway = NULL, *session = NULL;
        PtyArgs a = {};
        int status = -1, r = pty_parse(&verb_shell, &a, argc, argv, "+he:w:", 0, 1);
        const char *sandbox = optind < argc ? argv[optind] : NULL;

        if (r <= 0)
                goto out;
        if (!sandbox && (r = create_throwaway(a.best_effort, &throwaway)) < 0)
                goto out;
        r = session_run(open_request(sandbox ?: throwaway, &a, true), true, true, false, true, &session, &status);
        if (throwaway && (r < 0 || status >= 0))
                destroy_sandbox(throwaway);
        else if (throwaway)
                fprintf(stderr, "sandboxctl: sandbox %s is kept for the session; destroy it with 'sandboxctl destroy %s'\n",
                        esc(throwaway), esc(throwaway));
        if (r >= 0)
                r = status < 0 ? 0 : status;
out:
        json_object_put(a.env);
        return r;
}

static void add_argv(json_object *req, int argc, char *argv[]) {
        json_object *v = json_object_new_array();
        for (int i = 0; i < argc; i++)
                json_object_array_add(v, json_object_new_string(argv[i]));
        json_object_object_add(req, "argv", v);
}

static int verb_exec_run(int argc, char *argv[]) {
        _cleanup_free_ char *session = NULL;
        PtyArgs a = {};
        json_object *req;
        int status = -1, r = pty_parse(&verb_exec, &a, argc, argv, "+hite:w:", 2, INT32_MAX);

        if (r <= 0)
                goto out;
        req = open_request(argv[optind], &a, a.tty);
        /* Options stop at SANDBOX, so a "--" after it is still there. */
        if (optind + 2 < argc && strcmp(argv[optind + 1], "--") == 0)
                optind++;
        add_argv(req, argc - optind - 1, argv + optind + 1);
        /* -t alone still forwards the keys of a local terminal (as ssh -t does). */
        r = session_run(req, a.tty, a.interactive || (a.tty && isatty(STDIN_FILENO)), !a.tty, true, &session, &status);
        if (r >= 0)
                r = status < 0 ? 0 : status;
out:
        json_object_put(a.env);
        return r;
}

static int verb_attach_run(int argc, char *argv[]) {
        _cleanup_free_ char *session = NULL;
        PtyArgs a = {};
        json_object *req;
        int status = -1, r = pty_parse(&verb_attach, &a, argc, argv, "+h", 1, 1);

        if (r <= 0)
                goto out;
        req = request_new("pty.attach");
        json_object_object_add(req, "session", json_object_new_string(argv[optind]));
        if (a.from_seq && (r = add_offset(req, "from_seq", "--from-seq", a.from_seq)) < 0) {
                json_object_put(req);
                goto out;
        }
        r = session_run(req, true, isatty(STDIN_FILENO), false, false, &session, &status);
        if (r >= 0)
                r = status < 0 ? 0 : status;
out:
        json_object_put(a.env);
        return r;
}
