/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl call: protocol requests as given, their final replies as JSON lines (for scripts and
 * tests: any op, any field, no translation). */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandboxctl.h"

static int verb_call_run(int argc, char *argv[]);

const Verb verb_call = {
        .name = "call",
        .args = "[--timeout SECONDS] REQUEST...",
        .summary = "Send protocol requests as given (JSON) and print their final replies as JSON lines",
        .help = "Options:\n"
                "     --timeout SECONDS  Give up when the replies have not all come by then\n"
                "                        (default 120; 0: wait as long as it takes)\n"
                "\nEach REQUEST is one JSON object of docs/protocol.md, sent as it is over one\n"
                "connection, one after the other (an \"id\" is added where it has none). Events\n"
                "are not printed. The exit status is 0 when every request got its reply, whatever\n"
                "the reply says (read its \"ok\"); 1 when a request is not JSON, the daemon\n"
                "cannot be reached or it did not reply in time.\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_call_run,
};

static void on_alarm(int sig) {
        static const char msg[] = "sandboxctl: call: no reply within the --timeout\n";

        (void) sig;
        (void) !write(STDERR_FILENO, msg, sizeof(msg) - 1);
        _exit(EXIT_FAILURE);
}

static int verb_call_run(int argc, char *argv[]) {
        enum { ARG_TIMEOUT = ARG_VERB_FIRST };
        const char *timeout = NULL;
        const VerbOption options[] = { { "timeout", ARG_TIMEOUT, .value = &timeout }, {} };
        _cleanup_(sbx_client_freep) SbxClient *c = NULL;
        unsigned long seconds = 120;
        char *end;
        int r = parse_verb_options(&verb_call, argc, argv, "h", options, 1, -1);

        if (r <= 0)
                return r;
        if (timeout) {
                errno = 0;
                seconds = strtoul(timeout, &end, 10);
                if (errno || end == timeout || *end || timeout[0] == '-' || seconds > UINT_MAX)
                        return log_error("call: --timeout wants whole seconds, not '%s'", timeout);
        }
        /* Every request is read before the first is sent: a typo does not leave half the work done. */
        for (int i = optind; i < argc; i++) {
                _cleanup_json_ json_object *req = json_tokener_parse(argv[i]);

                if (!json_object_is_type(req, json_type_object))
                        return log_error("call: request %d is not a JSON object: %s", i - optind + 1, argv[i]);
        }
        if (seconds > 0) {
                signal(SIGALRM, on_alarm);
                alarm((unsigned) seconds);
        }
        r = daemon_connect(&c);
        if (r < 0)
                return r;
        for (int i = optind; i < argc; i++) {
                _cleanup_json_ json_object *req = json_tokener_parse(argv[i]);
                json_object *id = NULL;

                /* The request keeps an "id" it was given (any JSON value); it gets one otherwise. */
                r = sbx_client_send(c, json_object_get(req), NULL);
                if (r < 0)
                        return log_transport_error(r);
                (void) json_object_object_get_ex(req, "id", &id);
                for (;;) {
                        _cleanup_json_ json_object *msg = NULL;
                        json_object *v;

                        r = sbx_client_read(c, &msg);
                        if (r < 0)
                                return log_transport_error(r);
                        if (!json_object_object_get_ex(msg, "id", &v) || json_child(msg, "event"))
                                continue;
                        /* A null id answers a line the daemon could not read as a request: ours. */
                        if (v && !json_object_equal(v, id))
                                continue;
                        print_json(msg);
                        break;
                }
        }
        fflush(stdout);
        return 0;
}
