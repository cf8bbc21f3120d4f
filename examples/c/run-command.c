/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* run-command: the smallest complete libsandbox program.
 *
 *     SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock ./run-command [--best-effort] [CMD [ARG...]]
 *
 * Creates a sandbox, runs CMD in it (default: echo hello) with its output streamed: the "started"
 * event, then what the command writes, passed on as it arrives (stdout to stdout, stderr to
 * stderr), then the result (exit code, reason), and destroys the sandbox. Exits 0 only
 * when every step succeeded and the command exited 0. best_effort (accept limits the host cannot
 * enforce) is on with --best-effort or SANDBOX_BEST_EFFORT=1: hosts without delegated cgroup v2
 * controllers refuse the default limits otherwise.
 *
 * Build: cc run-command.c $(pkg-config --cflags --libs sandbox) -o run-command */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandbox.h>

static bool best_effort_wanted(int *argc, char ***argv) {
        const char *e = getenv("SANDBOX_BEST_EFFORT");
        bool on = e && (strcmp(e, "1") == 0 || strcmp(e, "yes") == 0 || strcmp(e, "true") == 0);

        if (*argc > 1 && strcmp((*argv)[1], "--best-effort") == 0) {
                on = true;
                (*argc)--;
                (*argv)++;
        }
        return on;
}

/* A failed reply's code and message, or the errno of a failed call, on stderr. */
static int report(const char *what, int r, json_object *reply) {
        if (r < 0)
                fprintf(stderr, "run-command: %s: %s\n", what, strerror(-r));
        else
                fprintf(stderr, "run-command: %s: %s: %s\n", what, sbx_reply_error_code(reply),
                        sbx_reply_error_message(reply));
        return -1;
}

static const char *str_member(json_object *o, const char *key) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

/* Output events carry text, or base64 when the bytes were not UTF-8 (decoded here by hand to
 * keep the example free of other libraries). */
static size_t base64_decode(const char *in, unsigned char *out) {
        static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        unsigned bits = 0, nbits = 0;
        size_t n = 0;

        for (; *in && *in != '='; in++) {
                const char *p = strchr(alphabet, *in);
                if (!p)
                        continue;
                bits = (bits << 6) | (unsigned) (p - alphabet);
                nbits += 6;
                if (nbits >= 8) {
                        nbits -= 8;
                        out[n++] = (unsigned char) (bits >> nbits);
                }
        }
        return n;
}

static void write_output(const char *kind, json_object *event) {
        FILE *to = strcmp(kind, "stdout") == 0 ? stdout : stderr;
        const char *data = str_member(event, "data") ?: "", *enc = str_member(event, "data_encoding");
        unsigned char *buf;
        size_t n;

        if (!enc || strcmp(enc, "base64") != 0) {
                fputs(data, to);
                fflush(to);
                return;
        }
        buf = malloc(strlen(data) + 1);
        if (!buf)
                return;
        n = base64_decode(data, buf);
        fwrite(buf, 1, n, to);
        fflush(to);
        free(buf);
}

static int on_event(json_object *event, void *userdata) {
        const char *kind = str_member(event, "event");

        (void) userdata;
        if (kind && strcmp(kind, "started") == 0)
                printf("started: run %s in %s\n", str_member(event, "run_id") ?: "?",
                       str_member(event, "sandbox") ?: "?");
        else if (kind && (strcmp(kind, "stdout") == 0 || strcmp(kind, "stderr") == 0))
                write_output(kind, event);
        else
                printf("event: %s\n", json_object_to_json_string(event));
        fflush(stdout);
        return 0;
}

/* create {"best_effort":..}; *ret_id is the new sandbox's id (the caller frees it). */
static int create_sandbox(SbxClient *c, bool best_effort, char **ret_id) {
        json_object *req = json_object_new_object(), *reply = NULL, *sbx = NULL;
        const char *id;
        int r;

        json_object_object_add(req, "op", json_object_new_string("create"));
        json_object_object_add(req, "best_effort", json_object_new_boolean(best_effort));
        r = sbx_client_call(c, req, NULL, NULL, &reply);
        if (r < 0 || !sbx_reply_ok(reply)) {
                report("create", r, reply);
                json_object_put(reply);
                return -1;
        }
        json_object_object_get_ex(reply, "sandbox", &sbx);
        id = sbx ? str_member(sbx, "id") : NULL;
        *ret_id = id ? strdup(id) : NULL;
        json_object_put(reply);
        if (!*ret_id)
                return report("create", id ? -ENOMEM : -EBADMSG, NULL);
        printf("created: %s\n", *ret_id);
        return 0;
}

static json_object *argv_array(int argc, char **argv) {
        static const char *const dflt[] = { "echo", "hello" };
        json_object *a = json_object_new_array();

        if (argc < 1)
                for (size_t i = 0; i < 2; i++)
                        json_object_array_add(a, json_object_new_string(dflt[i]));
        for (int i = 0; i < argc; i++)
                json_object_array_add(a, json_object_new_string(argv[i]));
        return a;
}

/* The reply repeats the output (capped by output_bytes): it was streamed already. */
static void print_result(json_object *reply) {
        json_object *v;

        json_object_object_get_ex(reply, "exit_code", &v);
        printf("exit_code: %d\n", json_object_get_int(v));
        printf("reason: %s\n", str_member(reply, "reason") ?: "?");
}

/* run {"sandbox":id,"argv":[...],"stream":true}; returns the command's exit code, or -1. */
static int run_command(SbxClient *c, const char *id, int argc, char **argv) {
        json_object *req = json_object_new_object(), *reply = NULL, *v;
        int r;

        json_object_object_add(req, "op", json_object_new_string("run"));
        json_object_object_add(req, "sandbox", json_object_new_string(id));
        json_object_object_add(req, "argv", argv_array(argc, argv));
        json_object_object_add(req, "stream", json_object_new_boolean(1));
        r = sbx_client_call(c, req, on_event, NULL, &reply);
        if (r < 0 || !sbx_reply_ok(reply)) {
                report("run", r, reply);
                json_object_put(reply);
                return -1;
        }
        print_result(reply);
        json_object_object_get_ex(reply, "exit_code", &v);
        r = json_object_get_int(v);
        json_object_put(reply);
        return r;
}

static int destroy_sandbox(SbxClient *c, const char *id) {
        json_object *req = json_object_new_object(), *reply = NULL;
        int r;

        json_object_object_add(req, "op", json_object_new_string("destroy"));
        json_object_object_add(req, "sandbox", json_object_new_string(id));
        r = sbx_client_call(c, req, NULL, NULL, &reply);
        if (r < 0 || !sbx_reply_ok(reply)) {
                report("destroy", r, reply);
                json_object_put(reply);
                return -1;
        }
        printf("destroyed: %s\n", id);
        json_object_put(reply);
        return 0;
}

int main(int argc, char **argv) {
        bool best_effort = best_effort_wanted(&argc, &argv);
        SbxClient *c = NULL;
        char *id = NULL;
        int r, code;

        r = sbx_client_connect(NULL, &c);
        if (r < 0) {
                fprintf(stderr, "run-command: connect: %s\n", strerror(-r));
                return EXIT_FAILURE;
        }
        if (create_sandbox(c, best_effort, &id) < 0) {
                sbx_client_free(c);
                return EXIT_FAILURE;
        }
        code = run_command(c, id, argc - 1, argv + 1);
        /* Destroy even when the run failed: the sandbox would outlive us otherwise. */
        r = destroy_sandbox(c, id);
        free(id);
        sbx_client_free(c);
        return r < 0 || code != 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
