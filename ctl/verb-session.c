/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl sessions, session close: the interactive sessions of a sandbox (inspect's
 * "sessions"), and ending one (pty.close), e.g. a shell left detached. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxctl.h"
#include "util.h"

static int verb_sessions_run(int argc, char *argv[]);
static int verb_session_run(int argc, char *argv[]);

const Verb verb_sessions = {
        .name = "sessions",
        .args = "SANDBOX",
        .summary = "List a sandbox's interactive sessions",
        .help = "Options:\n"
                "  -q --quiet             Print the ids only, one a line\n"
                "\nA table: ID, STATE (starting, running or exited), ATTACHED (clients), CREATED and\n"
                "COMMAND. An exited session stays, for its output and outcome, until it is closed\n"
                "or nobody attached to it for session_idle_timeout; it does not count against\n"
                "max_sessions_per_uid. 'sandboxctl exec' and 'shell' close the sessions they open\n"
                "when the command ends (not after a detach).\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_sessions_run,
};

const Verb verb_session = {
        .name = "session",
        .args = "close SESSION...",
        .summary = "Close interactive sessions (their processes are hung up, then killed)",
        .help = "Sub-verbs:\n"
                "  close SESSION...     Hang up each session's processes (SIGHUP; what is left\n"
                "                       2 s later is killed) and forget it; prints its outcome.\n"
                "                       Exits 1 when any could not be closed.\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_session_run,
};

/* The argv as one line, cut to fit. */
static const char *argv_line(char *buf, size_t size, json_object *argv) {
        size_t len = 0;

        buf[0] = '\0';
        for (size_t i = 0; json_object_is_type(argv, json_type_array) && i < json_object_array_length(argv); i++) {
                int w = snprintf(buf + len, size - len, "%s%s", i ? " " : "",
                                 json_object_get_string(json_object_array_get_idx(argv, i)));
                if (w < 0 || (size_t) w >= size - len)
                        break;
                len += (size_t) w;
        }
        return buf;
}

static int sessions_print(json_object *list, bool quiet) {
        static const char *const headers[] = { "ID", "STATE", "ATTACHED", "CREATED", "COMMAND" };
        _cleanup_table_ Table *t = table_new(ELEMENTSOF(headers), headers);
        size_t n = json_object_is_type(list, json_type_array) ? json_object_array_length(list) : 0;

        if (!t)
                return log_error_errno(-ENOMEM, "%m");
        for (size_t i = 0; i < n; i++) {
                json_object *p = json_object_array_get_idx(list, i);
                char a[FIELD_BUF], cmd[256];
                const char *row[] = { json_str(p, "id"), json_str(p, "state"), fmt_value(a, p, "attached"),
                                      json_str(p, "created"), argv_line(cmd, sizeof(cmd), json_child(p, "argv")) };
                if (quiet)
                        printf("%s\n", esc(json_str(p, "id") ?: ""));
                else if (table_add_row(t, row) < 0)
                        return log_error_errno(-ENOMEM, "%m");
        }
        if (quiet)
                return 0;
        if (n == 0) {
                printf("No sessions.\n");
                return 0;
        }
        table_print(t);
        return 0;
}

static int verb_sessions_run(int argc, char *argv[]) {
        _cleanup_json_ json_object *req = request_new("inspect"), *reply = NULL;
        bool quiet = false;
        const VerbOption options[] = { { "quiet", 'q', .flag = &quiet }, {} };
        int r = parse_verb_options(&verb_sessions, argc, argv, "hq", options, 1, 1);

        if (r <= 0)
                return r;
        if ((r = add_string(req, "sandbox", argv[optind])) < 0)
                return r;
        /* --json prints inspect's whole reply: the sessions are its sandbox.sessions. */
        r = daemon_request(TAKE_PTR(req), &reply);
        if (r < 0 || arg.json)
                return r;
        return sessions_print(json_child(json_child(reply, "sandbox"), "sessions"), quiet);
}

static int close_one(SbxClient *c, const char *session) {
        _cleanup_json_ json_object *req = request_new("pty.close"), *reply = NULL;
        const char *sig;
        int64_t code = 0;
        int r;

        if ((r = add_string(req, "session", session)) < 0 || (r = daemon_call(c, TAKE_PTR(req), &reply)) < 0)
                return r;
        if (arg.json)
                print_json(reply);
        if ((r = reply_check(reply)) < 0 || arg.json)
                return r;
        (void) json_int(reply, "exit_code", &code);
        sig = json_str(reply, "signal");
        printf("closed %s (%s, exit code %lld%s%s)\n", esc(session), esc(json_str(reply, "reason") ?: "-"),
               (long long) code, sig ? ", signal " : "", sig ? esc(sig) : "");
        return 0;
}

static int verb_session_run(int argc, char *argv[]) {
        _cleanup_(sbx_client_freep) SbxClient *c = NULL;
        int r = parse_common_only(&verb_session, argc, argv, 2, INT32_MAX), ret = 0;

        if (r <= 0)
                return r;
        if (strcmp(argv[optind], "close") != 0)
                return log_error("session: usage: sandboxctl session %s", verb_session.args);
        if ((r = daemon_connect(&c)) < 0)
                return r;
        for (int i = optind + 1; i < argc; i++) {
                r = close_one(c, argv[i]);
                if (r == -EREMOTEIO || r == -EINVAL)
                        ret = r; /* go on with the others */
                else if (r < 0)
                        return r;
        }
        return ret;
}
