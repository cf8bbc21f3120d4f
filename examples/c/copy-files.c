/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* copy-files: a file in, a command on it, its result out, with libsandbox's file calls.
 *
 *     SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock ./copy-files [--best-effort] INPUT OUTPUT [CMD [ARG...]]
 *
 * Creates a sandbox, copies the local file INPUT to /work/input in it (the file's descriptor goes
 * to the daemon, which copies it in as the sandbox's user: no byte passes through this program),
 * runs CMD (default: sort -o /work/output /work/input), copies /work/output out to the local file
 * OUTPUT (as data events: this works over any connection), prints what each step moved, and
 * destroys the sandbox. Exits 0 only when every step succeeded and CMD exited 0. --best-effort
 * (or SANDBOX_BEST_EFFORT=1) accepts limits the host cannot enforce.
 *
 * Build: cc copy-files.c $(pkg-config --cflags --libs sandbox) -o copy-files */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Puts the reply; -1 with the daemon's code and message (or the call's errno) on stderr when the
 * call failed or its reply is an error, else 0. */
static int checked(const char *what, int r, json_object *reply) {
        int ok = r >= 0 && sbx_reply_ok(reply);

        if (r < 0)
                fprintf(stderr, "copy-files: %s: %s\n", what, strerror(-r));
        else if (!ok)
                fprintf(stderr, "copy-files: %s: %s: %s\n", what, sbx_reply_error_code(reply),
                        sbx_reply_error_message(reply));
        json_object_put(reply);
        return ok ? 0 : -1;
}

static int64_t int_member(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : -1;
}

static json_object *request(const char *op, const char *sandbox) {
        json_object *req = json_object_new_object();

        json_object_object_add(req, "op", json_object_new_string(op));
        if (sandbox)
                json_object_object_add(req, "sandbox", json_object_new_string(sandbox));
        return req;
}

static int create_sandbox(SbxClient *c, bool best_effort, char **ret_id) {
        json_object *req = request("create", NULL), *reply = NULL, *sbx = NULL, *id = NULL;
        int r;

        json_object_object_add(req, "best_effort", json_object_new_boolean(best_effort));
        r = sbx_client_call(c, req, NULL, NULL, &reply);
        if (r >= 0 && sbx_reply_ok(reply) && json_object_object_get_ex(reply, "sandbox", &sbx) &&
            json_object_object_get_ex(sbx, "id", &id))
                *ret_id = strdup(json_object_get_string(id));
        if (checked("create", r, reply) < 0)
                return -1;
        if (!*ret_id)
                return fprintf(stderr, "copy-files: create: no sandbox id in the reply\n"), -1;
        printf("created: %s\n", *ret_id);
        return 0;
}

/* The local file goes in by its descriptor. */
static int copy_in(SbxClient *c, const char *id, const char *local) {
        json_object *reply = NULL;
        struct stat st;
        int fd = open(local, O_RDONLY | O_CLOEXEC), r;

        if (fd < 0 || fstat(fd, &st) < 0) {
                fprintf(stderr, "copy-files: %s: %s\n", local, strerror(errno));
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        r = sbx_file_write_fd(c, id, "/work/input", fd, (uint64_t) st.st_size, SBX_FILE_MODE_DEFAULT, 0, NULL, NULL,
                              &reply);
        close(fd);
        if (r >= 0 && sbx_reply_ok(reply))
                printf("copied in: %s -> /work/input (%lld bytes)\n", local, (long long) int_member(reply, "bytes"));
        return checked("file.write", r, reply);
}

static int run_command(SbxClient *c, const char *id, int argc, char **argv, int *ret_code) {
        static const char *const dflt[] = { "sort", "-o", "/work/output", "/work/input" };
        json_object *req = request("run", id), *args = json_object_new_array(), *reply = NULL;
        int r;

        for (int i = 0; i < argc; i++)
                json_object_array_add(args, json_object_new_string(argv[i]));
        for (size_t i = 0; argc == 0 && i < sizeof(dflt) / sizeof(dflt[0]); i++)
                json_object_array_add(args, json_object_new_string(dflt[i]));
        json_object_object_add(req, "argv", args);
        r = sbx_client_call(c, req, NULL, NULL, &reply);
        if (r >= 0 && sbx_reply_ok(reply)) {
                json_object *reason = NULL;
                json_object_object_get_ex(reply, "reason", &reason);
                *ret_code = (int) int_member(reply, "exit_code");
                printf("ran: exit_code %d, reason %s\n", *ret_code, json_object_get_string(reason));
        }
        return checked("run", r, reply);
}

/* The result comes out as data events, written to the local file at their offsets. */
static int copy_out(SbxClient *c, const char *id, const char *local) {
        json_object *reply = NULL;
        int fd = open(local, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), r;

        if (fd < 0) {
                fprintf(stderr, "copy-files: %s: %s\n", local, strerror(errno));
                return -1;
        }
        r = sbx_file_read(c, id, "/work/output", 0, UINT64_MAX, fd, 0, NULL, NULL, &reply);
        if (close(fd) < 0 && r >= 0)
                r = -errno;
        if (r >= 0 && sbx_reply_ok(reply))
                printf("copied out: /work/output -> %s (%lld bytes)\n", local, (long long) int_member(reply, "bytes"));
        return checked("file.read", r, reply);
}

int main(int argc, char **argv) {
        bool best_effort = best_effort_wanted(&argc, &argv);
        SbxClient *c = NULL;
        char *id = NULL;
        int r, code = -1;

        if (argc < 3) {
                fprintf(stderr, "usage: copy-files [--best-effort] INPUT OUTPUT [CMD [ARG...]]\n");
                return 2;
        }
        r = sbx_client_connect(NULL, &c);
        if (r < 0) {
                fprintf(stderr, "copy-files: connect: %s\n", strerror(-r));
                return 1;
        }
        r = create_sandbox(c, best_effort, &id);
        if (r == 0)
                r = copy_in(c, id, argv[1]);
        if (r == 0)
                r = run_command(c, id, argc - 3, argv + 3, &code);
        if (r == 0 && code == 0)
                r = copy_out(c, id, argv[2]);
        if (id) {
                json_object *reply = NULL;
                int k = sbx_client_call(c, request("destroy", id), NULL, NULL, &reply);
                if (checked("destroy", k, reply) < 0)
                        r = -1;
                else
                        printf("destroyed: %s\n", id);
        }
        free(id);
        sbx_client_free(c);
        return r == 0 && code == 0 ? 0 : 1;
}
