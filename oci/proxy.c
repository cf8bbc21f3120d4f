/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The proxy: the process whose pid the engine gets (conmon and the shim are subreapers and wait
 * for it). It holds the run's connection to sandboxd, so that the run dies with it, and ends as
 * the sandboxed process ended: the same exit code, or the same signal raised on itself. */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <termios.h>

#include "fdpass.h"
#include "oci.h"
#include "util.h"

#define RUN_REQUEST_ID 1

typedef struct ProxyConn {
        int fd;
        LineBuffer in;
        int fds[SBX_FDS_PER_MESSAGE]; /* what came with the last recvmsg that carried any */
        size_t n_fds;
        long long next_id;
} ProxyConn;

static const int forwarded[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH };

void oci_close_fds_from(int from, const int *keep, size_t n_keep) {
        int lo = from;

        for (;;) {
                int next = -1;
                for (size_t i = 0; i < n_keep; i++)
                        if (keep[i] >= lo && (next < 0 || keep[i] < next))
                                next = keep[i];
                if (next < 0) {
                        syscall(SYS_close_range, (unsigned) lo, ~0u, 0);
                        return;
                }
                if (next > lo)
                        syscall(SYS_close_range, (unsigned) lo, (unsigned) next - 1, 0);
                lo = next + 1;
        }
}

static void tell(OciProxy *p, const char *fmt, ...) _printf_(2, 3);
static void tell(OciProxy *p, const char *fmt, ...) {
        char buf[2048];
        va_list ap;

        if (p->ready < 0)
                return;
        va_start(ap, fmt);
        int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
        va_end(ap);
        if (n < 0)
                n = 0;
        if ((size_t) n > sizeof(buf) - 2)
                n = (int) sizeof(buf) - 2;
        for (int i = 0; i < n; i++)
                if (buf[i] == '\n')
                        buf[i] = ' ';
        buf[n++] = '\n';
        (void) write_all(p->ready, buf, (size_t) n);
        p->ready = safe_close(p->ready);
}

/* Raises sig on ourselves as the sandboxed process got it, without a core dump of the proxy;
 * a signal that does not kill by default ends in 128+sig. */
_noreturn_ static void die_by_signal(int sig) {
        struct rlimit no_core = { 0, 0 };
        struct sigaction sa = { .sa_handler = SIG_DFL };
        sigset_t set;

        setrlimit(RLIMIT_CORE, &no_core);
        sigaction(sig, &sa, NULL);
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        raise(sig);
        _exit(128 + sig);
}

/* ---- waiting for start ------------------------------------------------------------------- */

/* crun's way: the read end was opened non-blocking before create returned, and poll() reports
 * POLLIN once start writes its byte (a writer that came and went without writing is POLLHUP:
 * reopen and wait again). */
static int wait_for_start(OciProxy *p) {
        _cleanup_free_ char *path = oci_state_path(p->id, "fifo");
        char c;

        for (;;) {
                struct pollfd pfd = { .fd = p->fifo, .events = POLLIN };
                if (poll(&pfd, 1, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                ssize_t k = read(p->fifo, &c, 1);
                if (k == 1)
                        break;
                if (k < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                safe_close(p->fifo);
                p->fifo = path ? open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC) : -1;
                if (p->fifo < 0)
                        return -errno;
        }
        p->fifo = safe_close(p->fifo);
        if (path)
                unlink(path);
        /* start waits on the ack fifo (opened read-write: it never sees EOF) for our word. */
        _cleanup_free_ char *ack = oci_state_path(p->id, "ack");
        p->ready = ack ? open(ack, O_WRONLY | O_NONBLOCK | O_CLOEXEC) : -1;
        return 0;
}

/* ---- the connection ---------------------------------------------------------------------- */

static int conn_send(ProxyConn *c, json_object *req, const int *fds, size_t n_fds) {
        _cleanup_json_ json_object *r = req;
        _cleanup_free_ char *line = NULL;
        size_t n;

        json_object_object_add(r, "id", json_object_new_int64(c->next_id++));
        if (n_fds > 0)
                json_object_object_add(r, "fds", json_object_new_int((int) n_fds));
        line = proto_serialize(r, &n);
        if (!line)
                return -ENOMEM;
        return sbx_fds_send(c->fd, line, n, fds, n_fds);
}

/* One recvmsg(); -ECONNRESET at EOF. fds that come stay until a line claims them. */
static int conn_fill(ProxyConn *c) {
        int fds[SBX_FDS_PER_MESSAGE];
        size_t n = 0;
        char *ptr;
        size_t avail;
        int r = line_buffer_reserve(&c->in, 65536, &ptr, &avail);

        if (r < 0)
                return r;
        ssize_t k = sbx_fds_recv(c->fd, ptr, avail, MSG_DONTWAIT, fds, SBX_FDS_PER_MESSAGE, &n);
        if (k == -EAGAIN || k == -EINTR)
                return 0;
        if (k < 0)
                return (int) k;
        if (n > 0) {
                sbx_fds_close(c->fds, c->n_fds);
                memcpy(c->fds, fds, n * sizeof(int));
                c->n_fds = n;
        }
        if (k == 0)
                return -ECONNRESET;
        line_buffer_commit(&c->in, (size_t) k);
        return 0;
}

static int take_fd(ProxyConn *c) {
        int fd;
        if (c->n_fds == 0)
                return -EBADF;
        fd = c->fds[0];
        c->fds[0] = -EBADF;
        sbx_fds_close(c->fds, c->n_fds);
        c->n_fds = 0;
        return fd;
}

/* ---- the run ----------------------------------------------------------------------------- */

static json_object *run_request(OciProxy *p, int *fds, size_t *ret_n) {
        json_object *req = json_object_new_object(), *extra = json_object_new_array();
        size_t n = 0;

        json_object_object_foreach(p->run, k, v) json_object_object_add(req, k, json_object_get(v));
        json_object_object_add(req, "op", json_object_new_string("run"));
        json_object_object_add(req, "sandbox", json_object_new_string(p->sandbox));
        if (p->terminal) {
                struct winsize ws = {};
                json_object *tty = json_object_new_object();
                /* The engine may have resized its end since create. */
                if (p->relay >= 0 && ioctl(p->relay, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
                        p->rows = ws.ws_row;
                        p->cols = ws.ws_col;
                }
                json_object_object_add(tty, "rows", json_object_new_int((int) p->rows));
                json_object_object_add(tty, "cols", json_object_new_int((int) p->cols));
                json_object_object_add(req, "tty", tty);
        } else {
                json_object *stdio = json_object_new_array();
                for (int i = 0; i < 3; i++) {
                        if (fcntl(i, F_GETFD) < 0) {
                                json_object_array_add(stdio, NULL);
                                continue;
                        }
                        json_object_array_add(stdio, json_object_new_int((int) n));
                        fds[n++] = i;
                }
                json_object_object_add(req, "stdio", stdio);
        }
        for (unsigned i = 0; i < p->n_extra; i++) {
                json_object_array_add(extra, json_object_new_int((int) n));
                fds[n++] = 3 + (int) i;
        }
        if (p->n_extra > 0)
                json_object_object_add(req, "extra_fds", extra);
        else
                json_object_put(extra);
        *ret_n = n;
        return req;
}

typedef struct RunState {
        char *run_id;
        int master;         /* the sandbox's terminal, relayed (create with a terminal) */
        int pending_signal; /* came before the run had an id */
        json_object *final;
} RunState;

static void record_run_id(OciProxy *p, const char *run_id) {
        _cleanup_free_ char *path = p->id ? oci_state_path(p->id, "run_id") : NULL;
        _cleanup_free_ char *tmp = NULL;

        if (!path || asprintf(&tmp, "%s.tmp", path) < 0)
                return;
        _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd >= 0 && write_all(fd, run_id, strlen(run_id)) >= 0)
                (void) rename(tmp, path);
}

static void send_signal(ProxyConn *c, RunState *rs, int sig) {
        json_object *req = json_object_new_object();

        json_object_object_add(req, "op", json_object_new_string("kill"));
        json_object_object_add(req, "run_id", json_object_new_string(rs->run_id));
        json_object_object_add(req, "signal", json_object_new_int(sig));
        (void) conn_send(c, req, NULL, 0);
}

/* The rlimits sandboxd lowered to its maximum (the run's "rlimits_lower"): the engine's log says so. */
static void log_lowered(OciProxy *p, json_object *ev) {
        json_object *lowered;

        if (!json_object_object_get_ex(ev, "rlimits_lowered", &lowered) || !json_object_is_type(lowered, json_type_object))
                return;
        json_object_object_foreach(lowered, name, pair)
                oci_info("%s %s: process.rlimits: RLIMIT_%s is above what sandboxd allows, lowered to %s (soft, hard)",
                         p->id ? "container" : "exec in sandbox", p->id ? p->id : p->sandbox, name,
                         json_object_to_json_string_ext(pair, JSON_C_TO_STRING_PLAIN));
}

static int on_started(OciProxy *p, ProxyConn *c, RunState *rs, json_object *ev) {
        json_object *v;

        log_lowered(p, ev);
        if (json_object_object_get_ex(ev, "run_id", &v) && json_object_is_type(v, json_type_string)) {
                free(rs->run_id);
                rs->run_id = strdup(json_object_get_string(v));
                if (rs->run_id)
                        record_run_id(p, rs->run_id);
        }
        if (p->terminal) {
                _cleanup_close_ int master = take_fd(c);
                if (master < 0) {
                        tell(p, "1 sandboxd sent no terminal with the started event");
                        return -EPROTO;
                }
                if (p->relay >= 0)
                        rs->master = TAKE_FD(master);
                else if (p->console_socket) {
                        int r = oci_console_send(p->console_socket, master);
                        if (r < 0) {
                                tell(p, "1 cannot send the terminal to %s: %s", p->console_socket, strerror(-r));
                                return r;
                        }
                }
        }
        tell(p, "0");
        if (rs->pending_signal && rs->run_id)
                send_signal(c, rs, rs->pending_signal);
        return 0;
}

/* Lines from sandboxd: the run's events and final reply; the replies to our kills are dropped. */
static int conn_lines(OciProxy *p, ProxyConn *c, RunState *rs) {
        char *line;
        size_t len;
        int r;

        while ((r = line_buffer_next(&c->in, &line, &len)) != 0) {
                _cleanup_json_ json_object *msg = NULL;
                json_object *id, *ev;
                ProtoError err;
                if (r < 0 || proto_parse_line(line, len, 64, &msg, &err) < 0)
                        return -EBADMSG;
                if (!json_object_object_get_ex(msg, "id", &id) || json_object_get_int64(id) != RUN_REQUEST_ID)
                        continue;
                if (json_object_object_get_ex(msg, "event", &ev)) {
                        if (strcmp(json_object_get_string(ev), "started") == 0 && (r = on_started(p, c, rs, msg)) < 0)
                                return r;
                        continue;
                }
                rs->final = TAKE_PTR(msg);
                return 1;
        }
        return 0;
}

static void copy_some(int from, int to, bool *open_) {
        char buf[16384];
        ssize_t k = read(from, buf, sizeof(buf));

        if (k > 0)
                (void) write_all(to, buf, (size_t) k);
        else if (k == 0 || (errno != EAGAIN && errno != EINTR))
                *open_ = false;
}

/* What the program wrote just before it ended is still in the sandbox's terminal. */
static void drain_master(RunState *rs, int replica) {
        bool open_ = true;
        if (rs->master < 0)
                return;
        fcntl(rs->master, F_SETFL, fcntl(rs->master, F_GETFL) | O_NONBLOCK);
        for (int i = 0; i < 1024 && open_; i++) {
                struct pollfd pfd = { .fd = rs->master, .events = POLLIN };
                if (poll(&pfd, 1, 50) <= 0)
                        break;
                copy_some(rs->master, replica, &open_);
        }
}

static void on_signal(OciProxy *p, ProxyConn *c, RunState *rs, int sfd) {
        struct signalfd_siginfo si;

        if (read(sfd, &si, sizeof(si)) != sizeof(si))
                return;
        if ((int) si.ssi_signo == SIGWINCH) {
                struct winsize ws;
                if (p->relay >= 0 && rs->master >= 0 && ioctl(p->relay, TIOCGWINSZ, &ws) == 0)
                        ioctl(rs->master, TIOCSWINSZ, &ws);
                if (p->relay >= 0)
                        return;
        }
        if (rs->run_id)
                send_signal(c, rs, (int) si.ssi_signo);
        else
                rs->pending_signal = (int) si.ssi_signo;
}

static int signal_fd(void) {
        sigset_t set;

        sigemptyset(&set);
        for (size_t i = 0; i < ELEMENTSOF(forwarded); i++)
                sigaddset(&set, forwarded[i]);
        if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
                return -errno;
        int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
        return fd < 0 ? -errno : fd;
}

/* Until the final reply: sandboxd's lines, forwarded signals, and with a relayed terminal the
 * bytes both ways. */
static int run_loop(OciProxy *p, ProxyConn *c, RunState *rs) {
        _cleanup_close_ int sfd = signal_fd();
        bool relay_in = p->relay >= 0, relay_out = true;
        int r;

        if (sfd < 0)
                return sfd;
        for (;;) {
                struct pollfd pfd[4] = {
                        { .fd = c->fd, .events = POLLIN },
                        { .fd = sfd, .events = POLLIN },
                        { .fd = rs->master >= 0 && relay_in ? p->relay : -1, .events = POLLIN },
                        { .fd = rs->master >= 0 && relay_out ? rs->master : -1, .events = POLLIN },
                };
                if (poll(pfd, 4, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (pfd[1].revents)
                        on_signal(p, c, rs, sfd);
                if (pfd[2].revents)
                        copy_some(p->relay, rs->master, &relay_in);
                if (pfd[3].revents)
                        copy_some(rs->master, p->relay, &relay_out);
                if (pfd[0].revents) {
                        if ((r = conn_fill(c)) < 0)
                                return r;
                        if ((r = conn_lines(p, c, rs)) != 0)
                                return r;
                }
        }
}

/* The run's final reply, mirrored. */
_noreturn_ static void mirror_exit(OciProxy *p, json_object *final) {
        json_object *v, *e;

        if (!sbx_reply_ok(final)) {
                const char *code = sbx_reply_error_code(final), *msg = sbx_reply_error_message(final);
                bool enoent = false;
                if (json_object_object_get_ex(final, "error", &e) && json_object_object_get_ex(e, "errno", &v))
                        enoent = strcmp(json_object_get_string(v), "ENOENT") == 0 || json_object_get_int(v) == ENOENT;
                oci_error("container process: %s: %s", code ? code : "error", msg ? msg : "?");
                tell(p, "1 %s: %s", code ? code : "error", msg ? msg : "?");
                if (code && strcmp(code, "spawn_failed") == 0)
                        _exit(enoent ? 127 : 126);
                _exit(255);
        }
        if (json_object_object_get_ex(final, "signal", &v) && json_object_is_type(v, json_type_string)) {
                int sig = signal_from_string(json_object_get_string(v));
                if (sig > 0)
                        die_by_signal(sig);
        }
        if (json_object_object_get_ex(final, "reason", &v) &&
            (strcmp(json_object_get_string(v), "oom") == 0 || strcmp(json_object_get_string(v), "timeout") == 0))
                die_by_signal(SIGKILL);
        if (json_object_object_get_ex(final, "exit_code", &v) && json_object_is_type(v, json_type_int))
                _exit(json_object_get_int(v) & 0xff);
        _exit(255);
}

void oci_proxy_main(OciProxy *p) {
        ProxyConn c = { .fd = p->conn, .next_id = RUN_REQUEST_ID };
        RunState rs = { .master = -EBADF };
        int fds[SBX_FDS_PER_MESSAGE];
        size_t n_fds;
        int r;

        line_buffer_init(&c.in, 16u * 1024 * 1024);
        /* A session of its own, as runc's and crun's container process has: conmon's timeout
         * (podman run --timeout) kills the container pid's process group, which must not be
         * conmon's own (conmon would die before it writes the exit file). With a terminal, the
         * host replica becomes our controlling terminal: the engine's resizes of its master then
         * reach us as SIGWINCH. */
        if (setsid() >= 0 && p->relay >= 0)
                (void) ioctl(p->relay, TIOCSCTTY, 0);
        if (p->fifo >= 0 && (r = wait_for_start(p)) < 0) {
                oci_error("waiting for start: %s", strerror(-r));
                _exit(255);
        }
        json_object *req = run_request(p, fds, &n_fds);
        if ((r = conn_send(&c, req, fds, n_fds)) < 0) {
                oci_error("sending the run to sandboxd: %s", strerror(-r));
                tell(p, "1 sending the run to sandboxd: %s", strerror(-r));
                _exit(255);
        }
        r = run_loop(p, &c, &rs);
        if (r <= 0) {
                /* sandboxd went away (a restart, a crash) without a final reply: never 0. */
                oci_error("lost the connection to sandboxd before the container process ended (%s)",
                          strerror(r < 0 ? -r : EPROTO));
                tell(p, "1 lost the connection to sandboxd (%s)", strerror(r < 0 ? -r : EPROTO));
                _exit(255);
        }
        if (p->relay >= 0)
                drain_master(&rs, p->relay);
        mirror_exit(p, rs.final);
}
