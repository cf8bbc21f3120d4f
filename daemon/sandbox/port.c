/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "port-forward.h"
#include "port.h"
#include "sandbox.h"
#include "util.h"

/* An accept that ran out of fds is tried again after this long (the listener waits meanwhile). */
#define PORT_ACCEPT_PAUSE_USEC (250 * USEC_PER_MSEC)
/* Connections accepted per wakeup of one listener, so that one cannot hold the loop. */
#define PORT_ACCEPT_BURST 16

typedef struct PortConn PortConn;
struct PortConn {
        Port *port;
        PortRelay *relay;
        PortConn *next, *prev;
};

struct Port {
        PortTable *table;
        Sandbox *sandbox;
        SandboxMember member;
        uid_t uid;            /* who published it: its caps, the socket file's owner */
        bool capped;          /* ... counted against the per-uid caps (not root) */
        uint16_t port;        /* inside */
        bool tcp;
        uint16_t tcp_port;    /* the host's, for tcp */
        char *name;           /* the socket's file name in the table's directory, for unix */
        char *path;
        int fd;
        sd_event_source *src, *pause_timer;
        PortConn *conns;
        unsigned n_conns;
        uint64_t accepted, refused;
        Port *next, *prev;
};

static const SandboxMemberOps port_member_ops;

/* ---- Counting ------------------------------------------------------------------------------ */

static unsigned count_ports(PortTable *t, const Sandbox *s, uid_t uid, unsigned *ret_conns) {
        unsigned n = 0, conns = 0;
        for (Port *p = t->ports; p; p = p->next)
                if (s ? p->sandbox == s : p->capped && p->uid == uid) {
                        n++;
                        conns += p->n_conns;
                }
        if (ret_conns)
                *ret_conns = conns;
        return n;
}

static Port *port_find(PortTable *t, const Sandbox *s, uint16_t port) {
        for (Port *p = t->ports; p; p = p->next)
                if (p->sandbox == s && p->port == port)
                        return p;
        return NULL;
}

/* Whether one more connection fits: the caps per sandbox, per uid (not root's) and in all, which
 * bound the daemon's fds (six a connection: two sockets, two pipes). */
static bool port_conn_fits(Port *p) {
        const Config *c = &p->table->ctx->config;
        unsigned in_sandbox, of_uid;

        if (p->table->n_conns >= c->max_port_connections)
                return false;
        (void) count_ports(p->table, p->sandbox, 0, &in_sandbox);
        if (in_sandbox >= c->max_port_connections_per_sandbox)
                return false;
        if (!p->capped)
                return true;
        (void) count_ports(p->table, NULL, p->uid, &of_uid);
        return of_uid < c->max_port_connections_per_uid;
}

/* ---- Connections --------------------------------------------------------------------------- */

static PortConn *port_conn_free(PortConn *pc) {
        Port *p = pc->port;

        if (pc->prev)
                pc->prev->next = pc->next;
        else
                p->conns = pc->next;
        if (pc->next)
                pc->next->prev = pc->prev;
        p->n_conns--;
        p->table->n_conns--;
        port_relay_free(pc->relay);
        free(pc);
        return NULL;
}

static void on_relay_done(PortRelay *r, int error, void *userdata) {
        PortConn *pc = userdata;

        if (error < 0 && error != -ECONNREFUSED)
                log_debug_errno(error, "sandbox %s: a connection to port %u ended: %m", pc->port->sandbox->id,
                                pc->port->port);
        /* Never connected inside: nothing listened, or nothing accepted in time. */
        if (error == -ECONNREFUSED || error == -ETIMEDOUT)
                pc->port->refused++;
        port_conn_free(pc);
}

/* The sandbox's network namespace (borrowed): its pool namespace, or its init's pidfd, which
 * setns() takes as well. < 0 while it has none (being made, restarted, or gone). */
static int sandbox_netns(Sandbox *s) {
        if (s->state != SANDBOX_READY)
                return -EAGAIN;
        if (s->netns_fd >= 0)
                return s->netns_fd;
        return s->init_pidfd >= 0 ? s->init_pidfd : -ESRCH;
}

/* One accepted connection (taken): forwarded, or closed at once when it does not fit or nothing
 * listens inside. */
static void port_take(Port *p, int client) {
        int netns = sandbox_netns(p->sandbox), inside = -EBADF, r;
        PortConn *pc;

        p->accepted++;
        if (netns < 0 || !port_conn_fits(p)) {
                p->refused++;
                safe_close(client);
                return;
        }
        r = port_connect_in(netns, p->table->home_netns_fd, p->port, &inside);
        if (r < 0) {
                p->refused++;
                safe_close(client);
                return;
        }
        pc = calloc(1, sizeof(*pc));
        if (!pc) {
                safe_close(client);
                safe_close(inside);
                return;
        }
        pc->port = p;
        if (port_relay_new(p->table->ctx->event, client, inside, on_relay_done, pc, &pc->relay) < 0) {
                free(pc);
                return;
        }
        pc->next = p->conns;
        if (p->conns)
                p->conns->prev = pc;
        p->conns = pc;
        p->n_conns++;
        p->table->n_conns++;
}

static int on_pause_end(sd_event_source *s, uint64_t usec, void *userdata) {
        Port *p = userdata;
        (void) sd_event_source_set_enabled(p->src, SD_EVENT_ON);
        return 0;
}

/* Out of fds: the listener rests a moment rather than spin on a connection it cannot take. */
static void port_pause(Port *p) {
        (void) sd_event_source_set_enabled(p->src, SD_EVENT_OFF);
        if (p->pause_timer) {
                (void) sd_event_source_set_time_relative(p->pause_timer, PORT_ACCEPT_PAUSE_USEC);
                (void) sd_event_source_set_enabled(p->pause_timer, SD_EVENT_ONESHOT);
        } else if (sd_event_add_time_relative(p->table->ctx->event, &p->pause_timer, CLOCK_MONOTONIC,
                                              PORT_ACCEPT_PAUSE_USEC, 0, on_pause_end, p) < 0)
                (void) sd_event_source_set_enabled(p->src, SD_EVENT_ON);
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Port *p = userdata;

        for (int i = 0; i < PORT_ACCEPT_BURST; i++) {
                int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (c < 0) {
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                                port_pause(p);
                        break;
                }
                port_take(p, c);
        }
        return 0;
}

/* ---- Ports ----------------------------------------------------------------------------------- */

static void port_close_conns(Port *p) {
        while (p->conns)
                port_conn_free(p->conns);
}

static Port *port_free(Port *p) {
        if (!p)
                return NULL;
        port_close_conns(p);
        if (p->sandbox)
                sandbox_member_remove(p->sandbox, &p->member);
        if (p->prev)
                p->prev->next = p->next;
        else if (p->table->ports == p)
                p->table->ports = p->next;
        if (p->next)
                p->next->prev = p->prev;
        sd_event_source_disable_unref(p->src);
        sd_event_source_disable_unref(p->pause_timer);
        safe_close(p->fd);
        if (p->name && p->table->dir_fd >= 0)
                (void) unlinkat(p->table->dir_fd, p->name, 0);
        free(p->name);
        free(p->path);
        free(p);
        return NULL;
}

/* "unix", "tcp" (a port the kernel chooses) or "tcp:PORT". */
static int parse_listen(const char *listen, bool privileged, bool *ret_tcp, uint16_t *ret_port, ProtoError *err) {
        char *end;
        unsigned long v;

        *ret_tcp = false;
        *ret_port = 0;
        if (strcmp(listen, "unix") == 0)
                return 0;
        *ret_tcp = true;
        if (strcmp(listen, "tcp") == 0)
                return 0;
        if (strncmp(listen, "tcp:", 4) != 0 || listen[4] < '1' || listen[4] > '9')
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "listen",
                                       "'listen' must be \"unix\", \"tcp\" or \"tcp:PORT\" (1-65535)");
        errno = 0;
        v = strtoul(listen + 4, &end, 10);
        if (errno || *end || v > 65535)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "listen", "'listen' names no TCP port (1-65535)");
        /* Below 1024 a port is the host's own services' (any root daemon could be squatted). */
        if (v < 1024 && !privileged)
                return proto_error_set(err, SBX_E_PERMISSION_DENIED, "listen", "TCP ports below 1024 are root's");
        *ret_port = (uint16_t) v;
        return 0;
}

static int port_check_caps(PortTable *t, Sandbox *s, uid_t uid, bool capped, ProtoError *err) {
        const Config *c = &t->ctx->config;

        if (count_ports(t, s, 0, NULL) >= c->max_ports_per_sandbox)
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "port",
                                       "sandbox %s has %" PRIu64 " published ports already (max_ports_per_sandbox)", s->id,
                                       c->max_ports_per_sandbox);
        if (capped && count_ports(t, NULL, uid, NULL) >= c->max_ports_per_uid)
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "port",
                                       "uid %u has %" PRIu64 " published ports already (max_ports_per_uid)", (unsigned) uid,
                                       c->max_ports_per_uid);
        return 0;
}

static int port_listen(Port *p, uint16_t tcp_port, ProtoError *err) {
        PortTable *t = p->table;
        int r;

        if (p->tcp) {
                r = port_listen_tcp(tcp_port, &p->fd, &p->tcp_port);
                if (r == -EADDRINUSE)
                        return proto_error_set(err, SBX_E_CONFLICT, "listen", "TCP port %u of the host is in use", tcp_port);
        } else {
                if (t->dir_fd < 0)
                        return proto_error_set(err, SBX_E_INTERNAL, "listen",
                                               "this daemon has no runtime directory for Unix sockets; ask for \"tcp\"");
                if (asprintf(&p->name, "%s-%u.sock", p->sandbox->id, p->port) < 0)
                        p->name = NULL;
                if (!p->name || asprintf(&p->path, "%s/%s", t->dir, p->name) < 0) {
                        p->path = NULL;
                        return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
                }
                r = port_listen_unix(t->dir_fd, p->path, p->name, p->uid, &p->fd);
                if (r < 0) {
                        free(p->name);
                        p->name = NULL; /* not ours to unlink */
                }
        }
        if (r < 0)
                return proto_error_set(err, SBX_E_INTERNAL, "listen", "cannot listen: %s", strerror(-r));
        r = sd_event_add_io(t->ctx->event, &p->src, p->fd, EPOLLIN, on_accept, p);
        if (r < 0)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "cannot watch the listener: %s", strerror(-r));
        return 0;
}

static json_object *port_to_json(const Port *p) {
        json_object *o = json_object_new_object();
        char addr[32];

        if (!o)
                return NULL;
        json_object_object_add(o, "port", json_object_new_int(p->port));
        json_object_object_add(o, "listen", json_object_new_string(p->tcp ? "tcp" : "unix"));
        if (p->tcp) {
                snprintf(addr, sizeof(addr), "127.0.0.1:%u", p->tcp_port);
                json_object_object_add(o, "address", json_object_new_string(addr));
        } else
                json_object_object_add(o, "path", json_object_new_string(p->path));
        json_object_object_add(o, "connections", json_object_new_int((int) p->n_conns));
        json_object_object_add(o, "accepted", json_object_new_int64((int64_t) p->accepted));
        json_object_object_add(o, "refused", json_object_new_int64((int64_t) p->refused));
        return o;
}

int port_open(Sandbox *s, uid_t uid, bool privileged, uint16_t port, const char *listen, Reply *reply,
              ProtoError *err) {
        PortTable *t = s->ctx->ports;
        uint16_t tcp_port;
        bool tcp;
        json_object *o;
        Port *p;
        int r;

        if (!t)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "this daemon publishes no ports");
        if ((r = parse_listen(listen, privileged, &tcp, &tcp_port, err)) < 0)
                return r;
        if (s->state == SANDBOX_DESTROYING || s->state == SANDBOX_FAILED)
                return proto_error_set(err, SBX_E_CONFLICT, "sandbox", "sandbox %s is %s", s->id,
                                       s->state == SANDBOX_FAILED ? "failed" : "being destroyed");
        if (port_find(t, s, port))
                return proto_error_set(err, SBX_E_CONFLICT, "port", "port %u of sandbox %s is published already", port, s->id);
        if ((r = port_check_caps(t, s, uid, uid != 0, err)) < 0)
                return r;
        p = calloc(1, sizeof(*p));
        if (!p)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        *p = (Port) { .table = t, .sandbox = s, .uid = uid, .capped = uid != 0, .port = port, .tcp = tcp, .fd = -EBADF };
        p->next = t->ports;
        if (t->ports)
                t->ports->prev = p;
        t->ports = p;
        if ((r = port_listen(p, tcp_port, err)) < 0) {
                port_free(p);
                return r;
        }
        sandbox_member_add(s, &p->member, &port_member_ops);
        log_debug("sandbox %s: port %u published (%s)", s->id, port, p->tcp ? "tcp" : p->path);
        o = json_object_new_object();
        if (o)
                json_object_object_add(o, "port", port_to_json(p));
        reply_ok(reply, o);
        return 0;
}

int port_close(Sandbox *s, uint16_t port, ProtoError *err) {
        Port *p = s->ctx->ports ? port_find(s->ctx->ports, s, port) : NULL;

        if (!p)
                return proto_error_set(err, SBX_E_NOT_FOUND, "port", "port %u of sandbox %s is not published", port, s->id);
        port_free(p);
        return 0;
}

void ports_sandbox_json(Sandbox *s, json_object *o) {
        json_object *a = json_object_new_array();
        size_t n = 0, i = 0;

        if (!a)
                return;
        for (Port *p = s->ctx->ports ? s->ctx->ports->ports : NULL; p; p = p->next)
                n += p->sandbox == s;
        /* Oldest first, as they were opened: the table's list is newest first. */
        for (Port *p = s->ctx->ports ? s->ctx->ports->ports : NULL; p; p = p->next)
                if (p->sandbox == s)
                        json_object_array_put_idx(a, n - 1 - i++, port_to_json(p));
        json_object_object_add(o, "ports", a);
}

/* ---- As a member of its sandbox ------------------------------------------------------------ */

/* A destroy closes the port; a restart (snapshot.restore) only its connections, whose inside
 * ends went with the old processes: the listener stays, for the new ones. */
static void port_member_kill(SandboxMember *m, int sig) {
        Port *p = SANDBOX_MEMBER_OF(m, Port, member);

        if (p->sandbox->state == SANDBOX_DESTROYING)
                port_free(p);
        else
                port_close_conns(p);
}

static void port_member_free(SandboxMember *m) {
        port_free(SANDBOX_MEMBER_OF(m, Port, member));
}

static const SandboxMemberOps port_member_ops = {
        .kill = port_member_kill,
        .free = port_member_free,
};

/* ---- The table --------------------------------------------------------------------------------- */

/* Sockets of an earlier daemon: nobody listens on them any more. */
static void ports_remove_stale(int dir_fd) {
        int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct dirent *de;
        DIR *d;

        if (fd < 0 || !(d = fdopendir(fd))) {
                safe_close(fd);
                return;
        }
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
                    unlinkat(dir_fd, de->d_name, 0) == 0)
                        log_info("removed %s, a published port of an earlier daemon", de->d_name);
        closedir(d);
}

/* RUNTIME/ports: ours, and writable by nobody else, or not used (a file in it is a published
 * port's socket, whose path the caller trusts). */
static int ports_open_dir(const char *runtime_dir, char **ret_dir) {
        _cleanup_free_ char *dir = NULL;
        struct stat st;
        int fd;

        if (asprintf(&dir, "%s/ports", runtime_dir) < 0)
                return -ENOMEM;
        if (mkdir(dir, 0711) < 0 && errno != EEXIST)
                return -errno;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
                safe_close(fd);
                return -EPERM;
        }
        (void) fchmod(fd, 0711);
        *ret_dir = TAKE_PTR(dir);
        return fd;
}

int ports_init(PortTable *t, Context *ctx, const char *runtime_dir) {
        *t = (PortTable) { .ctx = ctx, .dir_fd = -EBADF };
        t->home_netns_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (t->home_netns_fd < 0)
                return -errno;
        if (!runtime_dir)
                return 0;
        t->dir_fd = ports_open_dir(runtime_dir, &t->dir);
        if (t->dir_fd < 0) {
                log_warning_errno(t->dir_fd, "cannot use %s/ports for published ports (%m): only TCP ones can be published",
                                  runtime_dir);
                return 0;
        }
        ports_remove_stale(t->dir_fd);
        return 0;
}

void ports_done(PortTable *t) {
        while (t->ports)
                port_free(t->ports);
        t->dir_fd = safe_close(t->dir_fd);
        t->home_netns_fd = safe_close(t->home_netns_fd);
        free(t->dir);
        t->dir = NULL;
}
