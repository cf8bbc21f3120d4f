/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The "ports" scenario: a sandbox's server reached through a published port (port.open: the
 * Unix socket, and the loopback TCP port) against the same server reached directly on the
 * host's loopback, in the same sitting: connect latency (connect to the first byte of the
 * server's answer) and throughput both ways. The server is one small Python program, run inside
 * the sandbox and on the host alike, so that what differs is the path, not the server. */
#include "bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define PORTS_INSIDE 9100
#define PORTS_BYTES (UINT64_C(256) << 20)
#define PORTS_REPS 5

/* 'L': one byte back, close. 'S': read to EOF, then "ok". 'D' + 8 bytes (big-endian N): N bytes,
 * close. Prints its port once listening. */
static const char server_py[] =
        "import socket, struct, sys\n"
        "s = socket.socket()\n"
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "s.bind(('127.0.0.1', int(sys.argv[1])))\n"
        "s.listen(512)\n"
        "print(s.getsockname()[1], flush=True)\n"
        "buf = bytearray(1 << 20)\n"
        "out = bytes(1 << 20)\n"
        "while True:\n"
        "    c, _ = s.accept()\n"
        "    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)\n"
        "    m = c.recv(1)\n"
        "    if m == b'L':\n"
        "        c.sendall(b'x')\n"
        "    elif m == b'S':\n"
        "        while c.recv_into(buf):\n"
        "            pass\n"
        "        c.sendall(b'ok')\n"
        "    elif m == b'D':\n"
        "        h = b''\n"
        "        while len(h) < 8:\n"
        "            h += c.recv(8 - len(h))\n"
        "        n = struct.unpack('>Q', h)[0]\n"
        "        while n > 0:\n"
        "            k = c.send(memoryview(out)[:min(n, len(out))])\n"
        "            n -= k\n"
        "    c.close()\n";

typedef struct Target {
        const char *name;
        bool unix_socket;
        char path[108];
        struct sockaddr_in in;
        Samples connect, up, down; /* ms per connect; ms per PORTS_BYTES */
} Target;

static int target_connect(const Target *t) {
        int fd = socket(t->unix_socket ? AF_UNIX : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
        struct sockaddr_un un = { .sun_family = AF_UNIX };
        int r;

        if (fd < 0)
                return -errno;
        if (t->unix_socket) {
                memcpy(un.sun_path, t->path, strlen(t->path));
                r = connect(fd, (struct sockaddr *) &un, sizeof(un));
        } else {
                (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                r = connect(fd, (const struct sockaddr *) &t->in, sizeof(t->in));
        }
        if (r < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

static int send_all(int fd, const void *p, size_t n) {
        for (const char *c = p; n > 0;) {
                ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
                if (k < 0)
                        return -errno;
                c += k;
                n -= (size_t) k;
        }
        return 0;
}

/* Reads until EOF; the count of bytes read, or < 0. */
static int64_t recv_all(int fd, char *buf, size_t size) {
        int64_t total = 0;
        ssize_t k;

        while ((k = recv(fd, buf, size, 0)) > 0)
                total += k;
        return k < 0 ? -errno : total;
}

static int measure_connect(Target *t) {
        struct timespec t0 = now_mono(), t1;
        char c;
        int fd = target_connect(t), r;

        if (fd < 0)
                return fd;
        r = send_all(fd, "L", 1);
        if (r >= 0 && recv(fd, &c, 1, 0) != 1)
                r = -EPROTO;
        t1 = now_mono();
        close(fd);
        return r < 0 ? r : samples_add(&t->connect, ts_ms(&t0, &t1));
}

static int measure_up(Target *t, char *buf, size_t size) {
        struct timespec t0 = now_mono(), t1;
        char ok[2];
        int fd = target_connect(t), r = 0;

        if (fd < 0)
                return fd;
        r = send_all(fd, "S", 1);
        for (uint64_t left = PORTS_BYTES; r >= 0 && left > 0; left -= size)
                r = send_all(fd, buf, size);
        if (r >= 0 && shutdown(fd, SHUT_WR) < 0)
                r = -errno;
        if (r >= 0 && recv_all(fd, ok, sizeof(ok)) != 2)
                r = -EPROTO;
        t1 = now_mono();
        close(fd);
        return r < 0 ? r : samples_add(&t->up, ts_ms(&t0, &t1));
}

static int measure_down(Target *t, char *buf, size_t size) {
        struct timespec t0 = now_mono(), t1;
        unsigned char req[9] = { 'D' };
        int fd = target_connect(t), r;
        int64_t got;

        if (fd < 0)
                return fd;
        for (int i = 0; i < 8; i++)
                req[1 + i] = (unsigned char) (PORTS_BYTES >> (56 - 8 * i));
        r = send_all(fd, req, sizeof(req));
        got = r >= 0 ? recv_all(fd, buf, size) : r;
        t1 = now_mono();
        close(fd);
        if (got != (int64_t) PORTS_BYTES)
                return got < 0 ? (int) got : -EPROTO;
        return samples_add(&t->down, ts_ms(&t0, &t1));
}

/* The server on the host: its pid, and its port read from its first line. */
static pid_t start_host_server(uint16_t *ret_port) {
        int p[2];
        char line[32] = "";
        pid_t pid;
        FILE *f;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid == 0) {
                dup2(p[1], STDOUT_FILENO);
                execlp("python3", "python3", "-c", server_py, "0", (char *) NULL);
                _exit(127);
        }
        close(p[1]);
        f = fdopen(p[0], "r");
        if (pid < 0 || !f || !fgets(line, sizeof(line), f) || atoi(line) <= 0) {
                if (f)
                        fclose(f);
                else
                        close(p[0]);
                if (pid > 0) {
                        kill(pid, SIGKILL);
                        waitpid(pid, NULL, 0);
                }
                return -EIO;
        }
        fclose(f);
        *ret_port = (uint16_t) atoi(line);
        return pid;
}

/* The same server inside the sandbox on port, in the background; the run ends once it listens.
 * One for each published port: a port of a sandbox is published once, as Unix socket or TCP. */
static int start_inside_server(SbxClient *c, const char *id, int port) {
        json_object *req = bench_req("run"), *reply = NULL, *code;
        char *cmd = NULL;
        int r;

        if (asprintf(&cmd, "cat > /tmp/srv.py <<'EOF'\n%sEOF\nsetsid python3 /tmp/srv.py %d </dev/null >/tmp/srv%d.out 2>&1 & "
                     "for i in $(seq 100); do [ -s /tmp/srv%d.out ] && exit 0; sleep 0.1; done; exit 1",
                     server_py, port, port, port) < 0) {
                json_object_put(req);
                return -ENOMEM;
        }
        json_object_object_add(req, "sandbox", json_object_new_string(id));
        json_object_object_add(req, "command", json_object_new_string(cmd));
        free(cmd);
        r = bench_call(c, req, &reply);
        if (r >= 0 && (!json_object_object_get_ex(reply, "exit_code", &code) || json_object_get_int(code) != 0))
                r = -EPROTO;
        json_object_put(reply);
        return r;
}

/* port.open; fills t with the path or the address. */
static int publish(SbxClient *c, const char *id, bool tcp, Target *t) {
        json_object *req = bench_req("port.open"), *reply = NULL, *port, *v;
        const char *s;
        int r;

        json_object_object_add(req, "sandbox", json_object_new_string(id));
        json_object_object_add(req, "port", json_object_new_int(PORTS_INSIDE + tcp));
        if (tcp)
                json_object_object_add(req, "listen", json_object_new_string("tcp"));
        r = bench_call(c, req, &reply);
        if (r < 0)
                return r;
        r = -EPROTO;
        if (json_object_object_get_ex(reply, "port", &port) &&
            json_object_object_get_ex(port, tcp ? "address" : "path", &v) && (s = json_object_get_string(v))) {
                if (!tcp && strlen(s) < sizeof(t->path)) {
                        snprintf(t->path, sizeof(t->path), "%s", s);
                        r = 0;
                } else if (tcp && strncmp(s, "127.0.0.1:", 10) == 0) {
                        t->in = (struct sockaddr_in) { .sin_family = AF_INET, .sin_port = htons((uint16_t) atoi(s + 10)),
                                                       .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
                        r = 0;
                }
        }
        json_object_put(reply);
        return r;
}

/* Interleaved rounds, so that a burst of load on a noisy host hits every path alike. */
static int measure_all(Bench *b, Target *t, size_t n) {
        size_t size = 1 << 20;
        char *buf = calloc(1, size);
        unsigned conns = b->runs < 100 ? 100 : b->runs;
        int r = buf ? 0 : -ENOMEM;

        for (unsigned i = 0; r >= 0 && i < conns; i++)
                for (size_t k = 0; r >= 0 && k < n; k++)
                        r = measure_connect(&t[k]);
        for (unsigned i = 0; r >= 0 && i < PORTS_REPS; i++)
                for (size_t k = 0; r >= 0 && k < n; k++)
                        if ((r = measure_up(&t[k], buf, size)) >= 0)
                                r = measure_down(&t[k], buf, size);
        free(buf);
        return r;
}

static void ports_rows(Bench *b, Target *t, size_t n) {
        double mib = (double) (PORTS_BYTES >> 20);
        char name[128];

        for (size_t k = 0; k < n; k++) {
                snprintf(name, sizeof(name), "port: connect + first byte, %s", t[k].name);
                bench_row(b, name, &t[k].connect, 0, "%zu connections, one at a time", t[k].connect.n);
        }
        for (size_t k = 0; k < n; k++) {
                snprintf(name, sizeof(name), "port: 256 MiB each way, %s", t[k].name);
                bench_row(b, name, &t[k].up, 0, "up %.0f MiB/s, down %.0f MiB/s (medians of %u; the row's ms: up)",
                          mib * 1e3 / samples_quantile(&t[k].up, 0.5), mib * 1e3 / samples_quantile(&t[k].down, 0.5),
                          PORTS_REPS);
        }
}

int scenario_ports(Bench *b) {
        Target t[3] = {
                { .name = "direct 127.0.0.1 on the host (floor)" },
                { .name = "published Unix socket", .unix_socket = true },
                { .name = "published TCP port" },
        };
        SbxClient *c = NULL;
        char *id = NULL;
        uint16_t host_port = 0;
        pid_t host = -1;
        int r = bench_connect(b, &c);

        if (r >= 0)
                r = bench_create(b, c, &id);
        if (r >= 0 && (r = start_inside_server(c, id, PORTS_INSIDE)) >= 0)
                r = start_inside_server(c, id, PORTS_INSIDE + 1);
        if (r >= 0 && (r = publish(c, id, false, &t[1])) >= 0)
                r = publish(c, id, true, &t[2]);
        if (r >= 0 && (host = start_host_server(&host_port)) < 0)
                r = (int) host;
        if (r >= 0) {
                t[0].in = (struct sockaddr_in) { .sin_family = AF_INET, .sin_port = htons(host_port),
                                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
                r = measure_all(b, t, sizeof(t) / sizeof(t[0]));
        }
        if (r >= 0)
                ports_rows(b, t, sizeof(t) / sizeof(t[0]));
        if (host > 0) {
                kill(host, SIGKILL);
                waitpid(host, NULL, 0);
        }
        if (id && bench_destroy(c, id) < 0 && r >= 0)
                r = -EIO;
        for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++) {
                samples_done(&t[k].connect);
                samples_done(&t[k].up);
                samples_done(&t[k].down);
        }
        free(id);
        sbx_client_free(c);
        return r;
}
