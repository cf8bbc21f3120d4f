/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl port: a sandbox's server reached from the host (port.open, port.close). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxctl.h"
#include "util.h"

static int verb_port_run(int argc, char *argv[]);

const Verb verb_port = {
        .name = "port",
        .args = "SANDBOX PORT [--tcp[=HOSTPORT]] | --close SANDBOX PORT",
        .summary = "Reach a sandbox's server on its loopback PORT from the host (or stop that)",
        .help = "Options:\n"
                "     --tcp[=HOSTPORT]   Listen on the host's 127.0.0.1 (a port the kernel chooses, or\n"
                "                        HOSTPORT) instead of a Unix socket: ANYONE ON THE HOST can\n"
                "                        connect to it\n"
                "     --close            Close the published port, its connections and its socket\n"
                "\nPrints the Unix socket's path (the caller's, mode 0600; curl takes it with its\n"
                "unix-socket option), or the TCP address. Each connection to it is forwarded to\n"
                "127.0.0.1:PORT inside the sandbox. The port stays published until --close, the\n"
                "sandbox's destroy, or the daemon's stop.\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_port_run,
};

enum { ARG_TCP = ARG_VERB_FIRST, ARG_CLOSE };

typedef struct PortArgs {
        const char *listen; /* "unix" (NULL), "tcp" or "tcp:PORT" */
        char listen_buf[16];
        bool close;
} PortArgs;

static int port_tcp_arg(PortArgs *a, const char *value) {
        char *end;
        unsigned long v;

        if (!value) {
                a->listen = "tcp";
                return 1;
        }
        v = strtoul(value, &end, 10);
        if (!*value || *end || v < 1 || v > 65535)
                return log_error("port: --tcp=%s: a TCP port is 1-65535", value);
        snprintf(a->listen_buf, sizeof(a->listen_buf), "tcp:%lu", v);
        a->listen = a->listen_buf;
        return 1;
}

static int port_parse(int argc, char *argv[], PortArgs *a) {
        static const struct option options[] = {
                COMMON_OPTIONS,
                { "tcp", optional_argument, NULL, ARG_TCP },
                { "close", no_argument, NULL, ARG_CLOSE },
                {},
        };
        int c, r;

        optind = 0;
        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                if (c == ARG_TCP)
                        r = port_tcp_arg(a, optarg);
                else if (c == ARG_CLOSE) {
                        a->close = true;
                        r = 1;
                } else
                        r = common_option(&verb_port, c);
                if (r <= 0)
                        return r;
        }
        if (a->close && a->listen)
                return log_error("port: --close and --tcp do not go together");
        return check_arg_count(&verb_port, argc, argv, 2, 2);
}

/* A port published already: how to free it, in this verb's words. */
static void port_hint(json_object *reply, const char *sandbox, const char *port) {
        json_object *e = json_child(reply, "error");

        if (strcmp(json_str(e, "code") ?: "", "conflict") == 0 && strcmp(json_str(e, "field") ?: "", "port") == 0)
                fprintf(stderr, "sandboxctl: 'sandboxctl port --close %s %s' frees it\n", esc(sandbox), esc(port));
}

static int verb_port_run(int argc, char *argv[]) {
        _cleanup_(sbx_client_freep) SbxClient *c = NULL;
        _cleanup_json_ json_object *req = NULL, *reply = NULL;
        PortArgs a = {};
        json_object *p;
        int r = port_parse(argc, argv, &a);

        if (r <= 0)
                return r;
        req = request_new(a.close ? "port.close" : "port.open");
        if ((r = add_string(req, "sandbox", argv[optind])) < 0 || (r = add_uint(req, "port", "PORT", argv[optind + 1])) < 0 ||
            (a.listen && (r = add_string(req, "listen", a.listen)) < 0))
                return r;
        if ((r = daemon_connect(&c)) < 0 || (r = daemon_call(c, TAKE_PTR(req), &reply)) < 0)
                return r;
        if (arg.json)
                print_json(reply);
        if ((r = reply_check(reply)) < 0 && !a.close)
                port_hint(reply, argv[optind], argv[optind + 1]);
        if (r < 0 || arg.json || a.close)
                return r;
        p = json_child(reply, "port");
        printf("%s\n", esc(json_str(p, "path") ?: json_str(p, "address") ?: "-"));
        return 0;
}
