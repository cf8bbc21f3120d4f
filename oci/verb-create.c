/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* create and start: the sandbox is made at create, its process is run at start. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <linux/mount.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "fdpass.h"
#include "oci.h"
#include "util.h"

/* 0..2 and --preserve-fds travel in one message with the request line. */
#define OCI_MAX_PRESERVE_FDS (SBX_FDS_PER_MESSAGE - 3)
#define START_TIMEOUT_MS (120 * 1000)

typedef struct CreateArgs {
        const char *bundle, *pid_file, *console_socket, *id;
        unsigned preserve_fds;
} CreateArgs;

static int parse_preserve_fds(const char *s, unsigned *ret) {
        char *end;
        unsigned long v;

        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno || end == s || *end || v > OCI_MAX_PRESERVE_FDS)
                return oci_error("--preserve-fds: %s: at most %d fds can be passed on", s, OCI_MAX_PRESERVE_FDS);
        for (unsigned i = 0; i < v; i++)
                if (fcntl(3 + (int) i, F_GETFD) < 0)
                        return oci_error("--preserve-fds %lu: fd %u is not open", v, 3 + i);
        *ret = (unsigned) v;
        return 0;
}

static int parse_create_args(int argc, char *argv[], CreateArgs *a) {
        static const struct option opts[] = {
                { "bundle", required_argument, NULL, 'b' },       { "pid-file", required_argument, NULL, 'p' },
                { "console-socket", required_argument, NULL, 'c' }, { "preserve-fds", required_argument, NULL, 'f' },
                { "no-pivot", no_argument, NULL, 'n' },           { "no-new-keyring", no_argument, NULL, 'k' },
                {},
        };
        int c;

        *a = (CreateArgs) { .bundle = "." };
        while ((c = getopt_long(argc, argv, "b:", opts, NULL)) >= 0)
                switch (c) {
                case 'b':
                        a->bundle = optarg;
                        break;
                case 'p':
                        a->pid_file = optarg;
                        break;
                case 'c':
                        a->console_socket = optarg;
                        break;
                case 'f':
                        if (parse_preserve_fds(optarg, &a->preserve_fds) != 0)
                                return 1;
                        break;
                case 'n':
                case 'k':
                        break;
                default:
                        return oci_error("create: unknown option");
                }
        if (optind != argc - 1)
                return oci_error("create: expects exactly one container id");
        a->id = argv[optind];
        if (!oci_id_valid(a->id))
                return oci_error("invalid container id \"%s\"", a->id);
        return 0;
}

static json_object *read_config(const char *bundle) {
        _cleanup_free_ char *p = NULL;
        if (asprintf(&p, "%s/config.json", bundle) < 0)
                return NULL;
        return json_object_from_file(p);
}

/* The engine's --root and its parents (the shim's <runc-root>/<namespace>). */
static int mkdir_parents(const char *path) {
        _cleanup_free_ char *p = strdup(path);

        if (!p)
                return -ENOMEM;
        for (char *s = strchr(p + 1, '/');; s = strchr(s + 1, '/')) {
                if (s)
                        *s = 0;
                if (mkdir(p, 0700) < 0 && errno != EEXIST)
                        return -errno;
                if (!s)
                        return 0;
                *s = '/';
        }
}

/* The state dir, made exclusively: a second create of the same id fails here. */
static int make_state_dir(const char *id) {
        _cleanup_free_ char *dir = oci_state_path(id, NULL), *fifo = oci_state_path(id, "fifo");

        if (!dir || !fifo)
                return oci_error("out of memory");
        int r = mkdir_parents(oci_arg.root);
        if (r < 0)
                return oci_error("cannot make the state directory %s: %s", oci_arg.root, strerror(-r));
        if (mkdir(dir, 0700) < 0)
                return errno == EEXIST ? oci_error("container with id %s exists already", id)
                                       : oci_error("cannot make %s: %m", dir);
        if (mkfifo(fifo, 0600) < 0) {
                int e = errno;
                rmdir(dir);
                return oci_error("cannot make %s: %s", fifo, strerror(e));
        }
        return 0;
}

/* root.path as sandboxd takes it: absolute, with no symlink in it. */
static int resolve_root(const OciSpec *spec, const char *bundle, json_object *root, char **ret_path) {
        _cleanup_free_ char *err = NULL;
        json_object *path = root ? json_object_object_get(root, "path") : NULL;

        if (spec->root_relative)
                return oci_root_open(bundle, spec->root_relative, ret_path, &err) < 0
                               ? oci_error("%s", err ? err : "root.path cannot be opened")
                               : 0;
        *ret_path = path ? realpath(json_object_get_string(path), NULL) : NULL;
        if (!*ret_path)
                return oci_error("root.path: %s: %m", path ? json_object_get_string(path) : "(none)");
        return 0;
}

/* What an engine's user does about a refusal that names sandboxd's own terms. */
/* What the engine's user can do about a refusal, by the reply's code and field. */
static const char *refusal_hint(json_object *reply) {
        const char *code = reply ? sbx_reply_error_code(reply) : NULL;
        json_object *e, *f;
        const char *field = reply && json_object_object_get_ex(reply, "error", &e) && json_object_object_get_ex(e, "field", &f)
                                    ? json_object_get_string(f)
                                    : NULL;

        if (code && strcmp(code, "limit_unenforceable") == 0)
                return " (podman: run --cgroups=disabled, which sandboxd-oci takes as accepting best-effort limits; "
                       "ctr: a --runc-binary wrapper that runs sandboxd-oci --best-effort; sandboxd-oci(1))";
        if (field && strcmp(field, "root.path") == 0)
                return " (podman: the vfs storage driver; ctr: --snapshotter native; docs/fleet.md)";
        return "";
}

/* The rootfs itself, not its name: a detached copy of its mount, made here, in the engine's
 * mount namespace, where the path shows what it should (buildah mounts a container's rootfs in a
 * mount namespace of its own, where the daemon, opening the path in its namespace, would find an
 * empty directory). Without the mounts below it, as sandboxd opens a path. -1 where it cannot
 * (a runtime that is not root, which root.path refuses anyway): sandboxd opens the path. */
static int open_rootfs_tree(const char *rootfs) {
        int fd = (int) syscall(SYS_open_tree, AT_FDCWD, rootfs, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);

        if (fd < 0)
                oci_info("root.path %s: no detached copy of its mount (%m): sandboxd opens it by its path", rootfs);
        return fd;
}

static int send_create(SbxClient *c, OciSpec *spec, const char *bundle, const char *id, char **ret_sandbox) {
        _cleanup_json_ json_object *reply = NULL;
        _cleanup_free_ char *err = NULL, *rootfs = NULL;
        _cleanup_close_ int netns = -EBADF, tree = -EBADF;
        json_object *root = NULL, *sb, *sid;
        int r, fds[2];
        size_t n_fds = 0;

        json_object_object_get_ex(spec->create, "root", &root);
        if (resolve_root(spec, bundle, root, &rootfs) != 0)
                return 1;
        json_object_object_add(root, "path", json_object_new_string(rootfs));
        if (oci_exec_check(rootfs, spec->process.run, json_object_object_get(spec->create, "mounts"), &err) < 0)
                return oci_error("%s", err);
        tree = open_rootfs_tree(rootfs);
        if (tree >= 0) {
                json_object_object_add(root, "tree_fd", json_object_new_int((int) n_fds));
                fds[n_fds++] = tree;
        }
        if (spec->netns_path) {
                netns = oci_netns_open(spec->netns_path, &err);
                if (netns < 0)
                        return oci_error("%s", err ? err : "cannot open the network namespace");
                json_object_object_add(json_object_object_get(spec->create, "network"), "netns_fd",
                                       json_object_new_int((int) n_fds));
                fds[n_fds++] = netns;
        }
        if (oci_arg.best_effort)
                json_object_object_add(spec->create, "best_effort", json_object_new_boolean(true));
        /* This connection goes to the proxy: whatever ends the proxy (its process's end, an
         * engine's SIGKILL, a failed start) ends the sandbox with it. */
        json_object_object_add(spec->create, "with_connection", json_object_new_boolean(true));
        r = oci_call(c, json_object_get(spec->create), n_fds > 0 ? fds : NULL, n_fds, &reply, &err);
        if (r == -EPROTO) {
                /* A refusal (of the config) or a failure (of the host, the rootfs) said as such. */
                json_object *e = json_object_object_get(reply, "error");
                const char *code = json_object_get_string(json_object_object_get(e, "code"));
                bool failed = code && (strcmp(code, "spawn_failed") == 0 || strcmp(code, "internal") == 0);
                return oci_error("container %s: sandboxd %s the sandbox: %s%s", id, failed ? "could not make" : "refused",
                                 err ? err : "?", refusal_hint(reply));
        }
        if (r < 0)
                return oci_error("container %s: sandboxd: %s", id, strerror(-r));
        if (!json_object_object_get_ex(reply, "sandbox", &sb) || !json_object_object_get_ex(sb, "id", &sid))
                return oci_error("container %s: sandboxd's reply has no sandbox id", id);
        *ret_sandbox = strdup(json_object_get_string(sid));
        return *ret_sandbox ? 0 : oci_error("out of memory");
}

static void destroy_sandbox(const char *sandbox) {
        json_object *req = json_object_new_object();
        json_object_object_add(req, "op", json_object_new_string("destroy"));
        json_object_object_add(req, "sandbox", json_object_new_string(sandbox));
        (void) oci_call_simple(req, "destroy", NULL);
}

/* The engine's end of the terminal exists before the program does (conmon and the shim take it
 * as create returns); the proxy relays it to the sandbox's own terminal once start runs it. */
static int console_for_create(const CreateArgs *a, const OciSpec *spec, int *ret_replica) {
        _cleanup_close_ int master = -EBADF, replica = -EBADF;
        int r;

        if (!spec->process.terminal) {
                *ret_replica = -EBADF;
                return 0;
        }
        if (!a->console_socket)
                return oci_error("process.terminal is true but no --console-socket was given");
        if ((r = oci_pty_pair(spec->process.rows, spec->process.cols, &master, &replica)) < 0)
                return oci_error("cannot open a terminal: %s", strerror(-r));
        if ((r = oci_console_send(a->console_socket, master)) < 0)
                return oci_error("--console-socket %s: %s", a->console_socket, strerror(-r));
        *ret_replica = TAKE_FD(replica);
        return 0;
}

static int open_fifo(const char *id) {
        _cleanup_free_ char *p = oci_state_path(id, "fifo");
        return p ? open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC) : -ENOMEM;
}

static pid_t fork_proxy(OciProxy *p) {
        pid_t pid = fork();

        if (pid != 0)
                return pid;
        int keep[] = { p->conn, p->fifo, p->relay, p->ready, oci_log_fd() };
        oci_close_fds_from(3 + (int) p->n_extra, keep, ELEMENTSOF(keep));
        oci_proxy_main(p);
}

static int record_state(const CreateArgs *a, const char *sandbox, pid_t pid, json_object *config) {
        char created[UTC_TIME_MAX];
        json_object *linux_, *cg = NULL, *ann = NULL;
        OciState s = {
                .id = (char *) a->id,
                .sandbox = (char *) sandbox,
                .bundle = (char *) a->bundle,
                .pid = pid,
                .created = (char *) format_utc(created, now_usec(CLOCK_REALTIME)),
        };

        if (json_object_object_get_ex(config, "linux", &linux_))
                json_object_object_get_ex(linux_, "cgroupsPath", &cg);
        s.cgroups_path = cg ? (char *) json_object_get_string(cg) : NULL;
        json_object_object_get_ex(config, "annotations", &ann);
        s.annotations = ann;
        if (oci_proc_start_time(pid, &s.start_time) < 0)
                return oci_error("the proxy of container %s died at once", a->id);
        int r = oci_state_save(&s);
        return r < 0 ? oci_error("cannot record container %s: %s", a->id, strerror(-r)) : 0;
}

static int create_main(int argc, char *argv[]) {
        _cleanup_(sbx_client_freep) SbxClient *c = NULL;
        _cleanup_json_ json_object *config = NULL;
        _cleanup_free_ char *err = NULL, *sandbox = NULL, *bundle = NULL;
        _cleanup_close_ int relay = -EBADF, fifo = -EBADF;
        OciSpec spec = {};
        OciProxy p = {};
        CreateArgs a;
        pid_t pid = -1;
        int r;

        if (parse_create_args(argc, argv, &a) != 0)
                return 1;
        bundle = realpath(a.bundle, NULL);
        if (!bundle)
                return oci_error("--bundle %s: %m", a.bundle);
        a.bundle = bundle;
        config = read_config(bundle);
        if (!config)
                return oci_error("%s/config.json: cannot be read or is not JSON", bundle);
        if (oci_spec_from_config(config, bundle, oci_lookup_proxy, NULL, &spec, &err) < 0)
                return oci_error("%s", err ? err : "config.json refused");
        oci_log_notes(spec.notes);
        if (oci_arg.best_effort)
                oci_info("limits the host cannot enforce are accepted (best effort)");
        if ((r = oci_connect(&c)) < 0) {
                oci_spec_done(&spec);
                return oci_error("cannot reach sandboxd: %s", strerror(-r));
        }
        oci_state_sweep();
        if (make_state_dir(a.id) != 0) {
                oci_spec_done(&spec);
                return 1;
        }
        if (send_create(c, &spec, bundle, a.id, &sandbox) != 0)
                goto fail_state;
        if (console_for_create(&a, &spec, &relay) != 0 || (fifo = open_fifo(a.id)) < 0)
                goto fail_sandbox;
        p = (OciProxy) {
                .id = a.id, .sandbox = sandbox, .run = spec.process.run, .terminal = spec.process.terminal,
                .rows = spec.process.rows, .cols = spec.process.cols, .n_extra = a.preserve_fds,
                .conn = sbx_client_fd(c), .fifo = fifo, .relay = relay, .ready = -1,
        };
        pid = fork_proxy(&p);
        if (pid < 0) {
                oci_error("cannot fork the proxy: %m");
                goto fail_sandbox;
        }
        if (record_state(&a, sandbox, pid, config) != 0)
                goto fail_proxy;
        /* Last: an engine takes the pid file as "create is done". */
        if (a.pid_file && (r = oci_write_pid_file(a.pid_file, pid)) < 0) {
                oci_error("--pid-file %s: %s", a.pid_file, strerror(-r));
                goto fail_proxy;
        }
        oci_spec_done(&spec);
        return 0;

fail_proxy:
        if (pid > 0)
                kill(pid, SIGKILL);
fail_sandbox:
        destroy_sandbox(sandbox);
fail_state:
        oci_state_remove(a.id);
        oci_spec_done(&spec);
        return 1;
}

const OciVerb oci_verb_create = { "create", "--bundle DIR --pid-file FILE [--console-socket SOCK] [--preserve-fds N] ID",
                                  create_main };

/* ---- start ----------------------------------------------------------------------------------- */

/* The proxy's word on the ack fifo: "0" once the program was exec'd, "1 why" when not. */
static int wait_ack(int ack, const OciState *s, char *buf, size_t size) {
        size_t len = 0;

        for (int waited = 0; waited < START_TIMEOUT_MS; waited += 100) {
                struct pollfd pfd = { .fd = ack, .events = POLLIN };
                int n = poll(&pfd, 1, 100);
                if (n > 0) {
                        ssize_t k = read(ack, buf + len, size - 1 - len);
                        if (k > 0)
                                len += (size_t) k;
                        buf[len] = 0;
                        if (memchr(buf, '\n', len) || len == size - 1)
                                return 0;
                        continue;
                }
                if (!oci_proxy_alive(s->pid, s->start_time)) {
                        /* It may have written and gone in the same instant. */
                        ssize_t k = read(ack, buf + len, size - 1 - len);
                        len += k > 0 ? (size_t) k : 0;
                        buf[len] = 0;
                        return len > 0 ? 0 : -ESRCH;
                }
        }
        return -ETIMEDOUT;
}

static int start_main(int argc, char *argv[]) {
        _cleanup_free_ char *fifo_path = NULL, *ack_path = NULL;
        _cleanup_close_ int ack = -EBADF, fifo = -EBADF;
        OciState s = {};
        char buf[2048];
        int r;

        if (argc != 2)
                return oci_error("start: expects exactly one container id");
        if ((r = oci_state_load(argv[1], &s)) < 0)
                return oci_error("container %s does not exist", argv[1]);
        const char *status = oci_state_status(&s);
        if (strcmp(status, "created") != 0) {
                oci_state_done(&s);
                return oci_error("cannot start a container that is %s", status);
        }
        fifo_path = oci_state_path(s.id, "fifo");
        ack_path = oci_state_path(s.id, "ack");
        if (!fifo_path || !ack_path || (mkfifo(ack_path, 0600) < 0 && errno != EEXIST) ||
            (ack = open(ack_path, O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0) {
                oci_state_done(&s);
                return oci_error("cannot make the start fifo: %m");
        }
        fifo = open(fifo_path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fifo < 0 || write(fifo, "1", 1) != 1) {
                unlink(ack_path);
                oci_state_done(&s);
                return oci_error("container's proxy is not waiting for start: %m");
        }
        fifo = safe_close(fifo);
        r = wait_ack(ack, &s, buf, sizeof(buf));
        unlink(ack_path);
        oci_state_done(&s);
        if (r == -ETIMEDOUT)
                return oci_error("the container process did not start within %d s", START_TIMEOUT_MS / 1000);
        if (r < 0)
                return oci_error("the container's proxy ended before the process started");
        buf[strcspn(buf, "\n")] = 0;
        if (buf[0] != '0')
                return oci_error("cannot start the container process: %s", buf[0] && buf[1] ? buf + 2 : "?");
        return 0;
}

const OciVerb oci_verb_start = { "start", "ID", start_main };
