/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* oci-tty-client SOCK SANDBOX keep|close: a "tty" run through libsandbox, as sandboxd-oci makes
 * it; the terminal's master is taken from the "started" line (sbx_client_line_fds()) and what the
 * command wrote to it is printed, then the final reply's exit_code, signal and captured
 * (t-oci-run.sh). With close, the master is closed once read: the terminal hangs up only if no
 * one else (the daemon) holds a copy. */
#include <errno.h>
#include <stdbool.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sandbox.h"

typedef struct Seen {
        SbxClient *c;
        int n_fds, fds_field, master_field;
        int master;
        bool close_early;
        char out[4096];
        size_t len;
} Seen;

/* Reads the terminal until it has two lines (tty, stty size) or 10 s pass. */
static void read_terminal(Seen *s, int master) {
        for (int waited = 0; waited < 100 && !(memchr(s->out, '\n', s->len) && strchr(strchr(s->out, '\n') + 1, '\n'));) {
                struct pollfd p = { .fd = master, .events = POLLIN };
                if (poll(&p, 1, 100) <= 0) {
                        waited++;
                        continue;
                }
                ssize_t k = read(master, s->out + s->len, sizeof(s->out) - 1 - s->len);
                if (k <= 0)
                        break;
                s->len += (size_t) k;
                s->out[s->len] = '\0';
        }
}

static int on_event(json_object *ev, void *userdata) {
        Seen *s = userdata;
        json_object *v;
        int fds[8];
        size_t n = 0;

        if (!json_object_object_get_ex(ev, "event", &v) || strcmp(json_object_get_string(v), "started") != 0)
                return 0;
        if (sbx_client_line_fds(s->c, fds, 8, &n) < 0)
                return -EMSGSIZE;
        s->n_fds = (int) n;
        s->fds_field = json_object_object_get_ex(ev, "fds", &v) ? json_object_get_int(v) : -1;
        s->master_field = json_object_object_get_ex(ev, "master", &v) ? json_object_get_int(v) : -1;
        if (n > 0)
                read_terminal(s, fds[0]);
        for (size_t i = 0; i < n; i++)
                if (i > 0 || s->close_early)
                        close(fds[i]);
                else
                        s->master = fds[i];
        return 0;
}

int main(int argc, char **argv) {
        Seen s = { .master = -1 };
        json_object *req, *reply = NULL, *v;
        int r;

        if (argc != 4) {
                fprintf(stderr, "usage: %s SOCK SANDBOX keep|close\n", argv[0]);
                return 2;
        }
        s.close_early = strcmp(argv[3], "close") == 0;
        if ((r = sbx_client_connect(argv[1], &s.c)) < 0) {
                fprintf(stderr, "connect: %s\n", strerror(-r));
                return 1;
        }
        req = json_tokener_parse("{\"op\":\"run\",\"argv\":[\"sh\",\"-c\",\"tty; stty size; sleep 1\"],"
                                 "\"tty\":{\"rows\":30,\"cols\":100}}");
        json_object_object_add(req, "sandbox", json_object_new_string(argv[2]));
        r = sbx_client_call(s.c, req, on_event, &s, &reply);
        if (r < 0) {
                fprintf(stderr, "call: %s\n", strerror(-r));
                return 1;
        }
        for (char *p = s.out; *p; p++)
                if (*p == '\r')
                        *p = ' ';
        printf("fds=%d field=%d master=%d\n%s", s.n_fds, s.fds_field, s.master_field, s.out);
        printf("exit_code=%d captured=%s",
               json_object_object_get_ex(reply, "exit_code", &v) ? json_object_get_int(v) : -1,
               json_object_object_get_ex(reply, "captured", &v) ? json_object_get_string(v) : "absent");
        printf(" signal=%s\n", json_object_object_get_ex(reply, "signal", &v) && v ? json_object_get_string(v) : "null");
        if (s.master >= 0)
                close(s.master);
        json_object_put(reply);
        sbx_client_free(s.c);
        return 0;
}
