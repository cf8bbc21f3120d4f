/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* exec: one proxy per exec, as runsc's execChildAndWait. With --detach the proxy's pid goes to
 * --pid-file once sandboxd said the program runs, and exec returns; without, exec is the proxy. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "fdpass.h"
#include "oci.h"
#include "util.h"

typedef struct ExecArgs {
        const char *process, *pid_file, *console_socket, *id;
        bool detach, tty;
        unsigned preserve_fds;
        char **args; /* after the id, when no --process */
        int n_args;
} ExecArgs;

static int parse_exec_args(int argc, char *argv[], ExecArgs *a) {
        static const struct option opts[] = {
                { "process", required_argument, NULL, 'p' },       { "pid-file", required_argument, NULL, 'P' },
                { "console-socket", required_argument, NULL, 'c' }, { "detach", no_argument, NULL, 'd' },
                { "tty", no_argument, NULL, 't' },                 { "preserve-fds", required_argument, NULL, 'f' },
                {},
        };
        int c;

        *a = (ExecArgs) {};
        while ((c = getopt_long(argc, argv, "+p:dt", opts, NULL)) >= 0)
                switch (c) {
                case 'p':
                        a->process = optarg;
                        break;
                case 'P':
                        a->pid_file = optarg;
                        break;
                case 'c':
                        a->console_socket = optarg;
                        break;
                case 'd':
                        a->detach = true;
                        break;
                case 't':
                        a->tty = true;
                        break;
                case 'f': {
                        char *end;
                        unsigned long v = strtoul(optarg, &end, 10);
                        if (end == optarg || *end || v > SBX_FDS_PER_MESSAGE - 3)
                                return oci_error("--preserve-fds: %s: at most %d", optarg, SBX_FDS_PER_MESSAGE - 3);
                        for (unsigned long i = 0; i < v; i++)
                                if (fcntl(3 + (int) i, F_GETFD) < 0)
                                        return oci_error("--preserve-fds %lu: fd %lu is not open", v, 3 + i);
                        a->preserve_fds = (unsigned) v;
                        break;
                }
                default:
                        return oci_error("exec: unknown option");
                }
        if (optind >= argc)
                return oci_error("exec: expects a container id");
        a->id = argv[optind];
        a->args = argv + optind + 1;
        a->n_args = argc - optind - 1;
        if (!a->process && a->n_args == 0)
                return oci_error("exec: give --process FILE or a command after the container id");
        return 0;
}

/* --process FILE, or the container's own process with the command line given. */
static json_object *exec_process(const ExecArgs *a, const OciState *s) {
        _cleanup_free_ char *p = NULL;
        json_object *config, *proc, *args;

        if (a->process)
                return json_object_from_file(a->process);
        if (asprintf(&p, "%s/config.json", s->bundle) < 0 || !(config = json_object_from_file(p)))
                return NULL;
        proc = json_object_object_get(config, "process");
        proc = proc ? json_object_get(proc) : NULL;
        json_object_put(config);
        if (!proc)
                return NULL;
        args = json_object_new_array();
        for (int i = 0; i < a->n_args; i++)
                json_object_array_add(args, json_object_new_string(a->args[i]));
        json_object_object_add(proc, "args", args);
        json_object_object_add(proc, "terminal", json_object_new_boolean(a->tty));
        return proc;
}

static int wait_ready(int fd, pid_t child, const char *pid_file) {
        char buf[2048];
        ssize_t k = read_full(fd, buf, sizeof(buf) - 1);

        buf[k > 0 ? k : 0] = 0;
        buf[strcspn(buf, "\n")] = 0;
        if (buf[0] != '0')
                return oci_error("exec failed: %s", buf[0] && buf[1] ? buf + 2 : "the exec's proxy ended first");
        if (pid_file) {
                int r = oci_write_pid_file(pid_file, child);
                if (r < 0)
                        return oci_error("--pid-file %s: %s", pid_file, strerror(-r));
        }
        return 0;
}

static int exec_main(int argc, char *argv[]) {
        _cleanup_(sbx_client_freep) SbxClient *c = NULL;
        _cleanup_json_ json_object *proc = NULL;
        _cleanup_free_ char *err = NULL;
        OciProcess op = {};
        OciState s = {};
        OciProxy p = {};
        ExecArgs a;
        int r, pipe_fds[2];
        pid_t pid;

        if (parse_exec_args(argc, argv, &a) != 0)
                return 1;
        if (oci_state_load(a.id, &s) < 0)
                return oci_error("container %s does not exist", a.id);
        if (strcmp(oci_state_status(&s), "running") != 0) {
                r = oci_error("cannot exec in a container that is %s", oci_state_status(&s));
                goto out;
        }
        proc = exec_process(&a, &s);
        if (!proc) {
                r = oci_error("exec: %s: cannot be read or is not JSON", a.process ? a.process : "config.json");
                goto out;
        }
        if (oci_process_from_json(proc, "process", NULL, &op, &err) < 0) {
                r = oci_error("%s", err ? err : "the exec's process refused");
                goto out;
        }
        if (op.terminal && !a.console_socket) {
                r = oci_error("process.terminal is true but no --console-socket was given");
                goto out;
        }
        if ((r = oci_connect(&c)) < 0) {
                r = oci_error("cannot reach sandboxd: %s", strerror(-r));
                goto out;
        }
        p = (OciProxy) {
                .sandbox = s.sandbox, .run = op.run, .terminal = op.terminal, .rows = op.rows, .cols = op.cols,
                .n_extra = a.preserve_fds, .conn = sbx_client_fd(c), .fifo = -1, .relay = -1,
                .console_socket = a.console_socket, .ready = -1,
        };
        if (!a.detach) {
                if (a.pid_file && (r = oci_write_pid_file(a.pid_file, getpid())) < 0) {
                        r = oci_error("--pid-file %s: %s", a.pid_file, strerror(-r));
                        goto out;
                }
                int keep[] = { p.conn, oci_log_fd() };
                oci_close_fds_from(3 + (int) p.n_extra, keep, ELEMENTSOF(keep));
                oci_proxy_main(&p);
        }
        if (pipe2(pipe_fds, O_CLOEXEC) < 0) {
                r = oci_error("pipe: %m");
                goto out;
        }
        pid = fork();
        if (pid < 0) {
                r = oci_error("cannot fork the exec's proxy: %m");
                goto out;
        }
        if (pid == 0) {
                p.ready = pipe_fds[1];
                int keep[] = { p.conn, p.ready, oci_log_fd() };
                oci_close_fds_from(3 + (int) p.n_extra, keep, ELEMENTSOF(keep));
                oci_proxy_main(&p);
        }
        close(pipe_fds[1]);
        r = wait_ready(pipe_fds[0], pid, a.pid_file);
        close(pipe_fds[0]);
out:
        oci_process_done(&op);
        oci_state_done(&s);
        return r;
}

const OciVerb oci_verb_exec = { "exec",
                                "--process FILE [--detach] [--pid-file FILE] [--tty --console-socket SOCK] "
                                "[--preserve-fds N] ID [COMMAND...]",
                                exec_main };
