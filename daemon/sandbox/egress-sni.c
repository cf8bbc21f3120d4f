/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* SNI matching of egress names: the relay (egress-sni.h). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dns-message.h"
#include "egress-sni.h"
#include "log.h"
#include "macro.h"
#include "nft-element.h"
#include "tls-hello.h"
#include "util.h"

#define SNI_TABLE "inet sandboxd"
#define SNI_TABLE_NAME "sandboxd"   /* of family inet */
#define SNI_ACCEPT_BATCH 32

typedef struct SniConn SniConn;

struct EgressSni {
        Context *ctx;
        int listen_fd;
        uint16_t port;
        sd_event_source *listen_src;
        EgressRule deny[64];
        unsigned n_deny;
        SniConn *conns;
        unsigned n_conns;
        SandboxNet **nets;          /* attached: whose connections are taken */
        size_t n_nets, n_nets_alloc;
};

typedef enum SniState {
        SNI_PEEKING,                /* reading the first bytes */
        SNI_CONNECTING,             /* to the original destination */
        SNI_SENDING,                /* the first bytes, on to it */
        SNI_RELAYING,
} SniState;

/* One way of a connection: from one socket through a pipe into the other. */
typedef struct SniWay {
        int *from, *to;
        int pipe[2];
        size_t full;                /* bytes in the pipe */
        bool eof, shut;             /* from said EOF; to was shut down for writing */
} SniWay;

struct SniConn {
        EgressSni *sni;
        SandboxNet *net;
        SniState state;
        int in_fd, out_fd;          /* the sandbox's side, ours toward the destination */
        sd_event_source *in_src, *out_src, *timer;
        struct sockaddr_in dst;
        char name[TLS_HELLO_NAME_MAX + 1]; /* once admitted */
        uint8_t *peek;              /* the first bytes, until they are sent on */
        size_t n_peek, n_sent;
        SniWay up, down;            /* sandbox to destination, and back */
        SniConn *prev, *next;
};

uint16_t egress_sni_port(const EgressSni *s) {
        return s ? s->port : 0;
}

/* ---- the connections ---- */

static void way_init(SniWay *w, int *from, int *to) {
        *w = (SniWay) { .from = from, .to = to, .pipe = { -EBADF, -EBADF } };
}

static void way_close(SniWay *w) {
        w->pipe[0] = safe_close(w->pipe[0]);
        w->pipe[1] = safe_close(w->pipe[1]);
}

static SniConn *conn_free(SniConn *c) {
        EgressSni *s;

        if (!c)
                return NULL;
        s = c->sni;
        if (c->prev)
                c->prev->next = c->next;
        else
                s->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        s->n_conns--;
        sd_event_source_disable_unref(c->in_src);
        sd_event_source_disable_unref(c->out_src);
        sd_event_source_disable_unref(c->timer);
        way_close(&c->up);
        way_close(&c->down);
        safe_close(c->in_fd);
        safe_close(c->out_fd);
        free(c->peek);
        free(c);
        return NULL;
}

/* Refused: reset (SO_LINGER 0), so the program sees ECONNRESET at once, and counted. */
static void conn_refuse(SniConn *c, const char *why, const char *name) {
        char d[INET_ADDRSTRLEN];

        (void) setsockopt(c->in_fd, SOL_SOCKET, SO_LINGER, &(struct linger) { .l_onoff = 1, .l_linger = 0 },
                          sizeof(struct linger));
        if (c->net) {
                c->net->sni_refused++;
                log_debug("egress: %s: connection to %s:%u refused by SNI matching: %s%s%s", c->net->ifname,
                          inet_ntop(AF_INET, &c->dst.sin_addr, d, sizeof(d)), ntohs(c->dst.sin_port), why,
                          name ? ": " : "", name ? name : "");
        }
        conn_free(c);
}

/* Moves what one way has, within a turn's bytes: 0, or < 0 on an error of either socket. */
static int way_shovel(SniWay *w) {
        size_t moved = 0;
        bool progress;

        do {
                ssize_t z;
                progress = false;
                if (!w->eof && w->full < EGRESS_SNI_PIPE_SIZE) {
                        z = splice(*w->from, NULL, w->pipe[1], NULL, EGRESS_SNI_PIPE_SIZE - w->full,
                                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (z > 0) {
                                w->full += (size_t) z;
                                progress = true;
                        } else if (z == 0)
                                w->eof = true;
                        else if (errno != EAGAIN && errno != EINTR)
                                return -errno;
                }
                if (w->full > 0) {
                        z = splice(w->pipe[0], NULL, *w->to, NULL, w->full, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (z > 0) {
                                w->full -= (size_t) z;
                                moved += (size_t) z;
                                progress = true;
                        } else if (z < 0 && errno != EAGAIN && errno != EINTR)
                                return -errno;
                }
        } while (progress && moved < EGRESS_SNI_TURN_BYTES);
        if (w->eof && w->full == 0 && !w->shut) {
                (void) shutdown(*w->to, SHUT_WR);
                w->shut = true;
        }
        return 0;
}

/* What each socket waits for: its way in while its pipe has room, its way out while the other
 * way's pipe holds bytes. Done when both ways have ended. */
static int conn_arm(SniConn *c) {
        uint32_t in = 0, out = 0;
        int r;

        if (!c->up.eof && c->up.full < EGRESS_SNI_PIPE_SIZE)
                in |= EPOLLIN;
        if (c->down.full > 0)
                in |= EPOLLOUT;
        if (!c->down.eof && c->down.full < EGRESS_SNI_PIPE_SIZE)
                out |= EPOLLIN;
        if (c->up.full > 0)
                out |= EPOLLOUT;
        if (c->up.shut && c->down.shut)
                return 1;
        if ((r = sd_event_source_set_io_events(c->in_src, in)) < 0 ||
            (r = sd_event_source_set_enabled(c->in_src, in ? SD_EVENT_ON : SD_EVENT_OFF)) < 0 ||
            (r = sd_event_source_set_io_events(c->out_src, out)) < 0 ||
            (r = sd_event_source_set_enabled(c->out_src, out ? SD_EVENT_ON : SD_EVENT_OFF)) < 0)
                return r;
        return 0;
}

static int conn_relay_turn(SniConn *c) {
        int r;

        if ((r = way_shovel(&c->up)) < 0 || (r = way_shovel(&c->down)) < 0)
                return r;
        return conn_arm(c);
}

static int pipe_make(int p[2]) {
        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        (void) fcntl(p[0], F_SETPIPE_SZ, EGRESS_SNI_PIPE_SIZE); /* a smaller one still works */
        return 0;
}

/* The first bytes sent on; then the relay, the timer gone: the connection is the programs'. */
static int conn_send_peeked(SniConn *c) {
        while (c->n_sent < c->n_peek) {
                ssize_t z = send(c->out_fd, c->peek + c->n_sent, c->n_peek - c->n_sent, MSG_NOSIGNAL);
                if (z < 0 && errno == EAGAIN)
                        return sd_event_source_set_io_events(c->out_src, EPOLLOUT);
                if (z < 0)
                        return errno == EINTR ? 0 : -errno;
                c->n_sent += (size_t) z;
        }
        free(c->peek);
        c->peek = NULL;
        c->timer = sd_event_source_disable_unref(c->timer);
        c->state = SNI_RELAYING;
        c->net->sni_relayed++;
        return conn_relay_turn(c);
}

static void conn_end(SniConn *c, int r) {
        if (r < 0) {
                /* An error of either side: the other is reset too, as a connection would be. */
                (void) setsockopt(c->in_fd, SOL_SOCKET, SO_LINGER, &(struct linger) { .l_onoff = 1 }, sizeof(struct linger));
                (void) setsockopt(c->out_fd, SOL_SOCKET, SO_LINGER, &(struct linger) { .l_onoff = 1 }, sizeof(struct linger));
        }
        conn_free(c);
}

static int on_out(sd_event_source *src, int fd, uint32_t events, void *userdata) {
        SniConn *c = userdata;
        int r = 0, err = 0;

        if (c->state == SNI_CONNECTING) {
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &(socklen_t) { sizeof(err) }) < 0)
                        err = errno;
                if (err) {
                        conn_refuse(c, "the destination cannot be reached", strerror(err));
                        return 0;
                }
                c->state = SNI_SENDING; /* connected: the first bytes go first */
        }
        if (c->peek)
                r = conn_send_peeked(c);
        else
                r = conn_relay_turn(c);
        if (r != 0)
                conn_end(c, r);
        return 0;
}

/* The destination: a socket of ours, connecting; on_out() goes on once it is. */
static int conn_connect(SniConn *c) {
        EgressSni *s = c->sni;
        int one = 1, r;

        c->out_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->out_fd < 0)
                return -errno;
        (void) setsockopt(c->out_fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
        (void) setsockopt(c->in_fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
        /* Segments go on as they come (the programs' own sockets coalesce theirs): ours holding
         * a small write back for an ACK the far end delays would add that delay to a request. */
        (void) setsockopt(c->out_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        (void) setsockopt(c->in_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(c->out_fd, (struct sockaddr *) &c->dst, sizeof(c->dst)) < 0 && errno != EINPROGRESS)
                return -errno;
        if ((r = pipe_make(c->up.pipe)) < 0 || (r = pipe_make(c->down.pipe)) < 0)
                return r;
        r = sd_event_add_io(s->ctx->event, &c->out_src, c->out_fd, EPOLLOUT, on_out, c);
        if (r < 0)
                return r;
        c->state = SNI_CONNECTING;
        /* The sandbox's side waits until the destination is there. */
        r = sd_event_source_set_enabled(c->in_src, SD_EVENT_OFF);
        if (r < 0)
                return r;
        return sd_event_source_set_time_relative(c->timer, EGRESS_SNI_CONNECT_USEC);
}

/* ---- the check ---- */

/* What no sandbox reaches, whatever its sets hold: egress_deny and egress_range, the host's own
 * addresses, loopback, multicast and the rest above it. */
static bool dst_forbidden(const EgressSni *s, uint32_t addr) {
        struct ifaddrs *ifa = NULL;
        bool found = false;

        if ((addr >> 24) == 127 || (addr >> 24) == 0 || addr >= 0xe0000000u)
                return true;
        for (unsigned i = 0; i < s->n_deny; i++)
                if (((addr ^ s->deny[i].addr) & ipv4_mask(s->deny[i].len)) == 0)
                        return true;
        if (getifaddrs(&ifa) < 0)
                return true;
        for (struct ifaddrs *i = ifa; i && !found; i = i->ifa_next)
                found = i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
                        ntohl(((struct sockaddr_in *) i->ifa_addr)->sin_addr.s_addr) == addr;
        freeifaddrs(ifa);
        return found;
}

/* Whether the set of n's entry i holds addr now; an error is a no. */
static bool set_holds(const SandboxNet *n, unsigned i, uint32_t addr) {
        char set[48];
        int r;

        snprintf(set, sizeof(set), "%s_%u", n->chain, i);
        r = nft_set_has_ipv4(SNI_TABLE_NAME, set, addr);
        if (r < 0)
                log_debug_errno(r, "egress: %s: cannot look %s up: %m", n->ifname, set);
        return r > 0;
}

static bool port_of_entry(const EgressRule *r, uint16_t port) {
        return r->port ? port == r->port : port == 80 || port == 443;
}

/* An entry with match sni that names it, on this port, whose set holds the destination. */
static bool sni_admits(const SandboxNet *n, const char *name, uint32_t addr, uint16_t port) {
        for (unsigned i = 0; i < n->n_allow; i++) {
                const EgressRule *r = &n->allow[i];
                if (r->sni && port_of_entry(r, port) && dns_name_matches(n->names[i], name) && set_holds(n, i, addr))
                        return true;
        }
        return false;
}

static const char *parse_error(int r) {
        switch (r) {
        case -EPROTO:
                return "Encrypted Client Hello hides the name";
        case -ENOENT:
                return "no name (no server_name, no Host)";
        case -E2BIG:
                return "no name in the first 16 KiB";
        default:
                return "neither a TLS ClientHello nor an HTTP/1 request";
        }
}

/* The first bytes so far: wait for more, refuse, or admit and connect on. */
static void conn_peeked(SniConn *c) {
        char name[TLS_HELLO_NAME_MAX + 1];
        TlsHelloKind kind;
        uint32_t addr = ntohl(c->dst.sin_addr.s_addr);
        int r;

        r = tls_hello_first_name(c->peek, c->n_peek, &kind, name);
        if (r == -EAGAIN)
                return;
        if (r < 0) {
                conn_refuse(c, parse_error(r), NULL);
                return;
        }
        if (dst_forbidden(c->sni, addr)) {
                conn_refuse(c, "the address is one no sandbox reaches", name);
                return;
        }
        if (!sni_admits(c->net, name, addr, ntohs(c->dst.sin_port))) {
                conn_refuse(c, kind == TLS_HELLO_TLS ? "server_name not allowed for this address and port"
                                                     : "Host not allowed for this address and port", name);
                return;
        }
        memcpy(c->name, name, sizeof(name));
        r = conn_connect(c);
        if (r < 0)
                conn_refuse(c, "cannot connect on", strerror(-r));
}

static int on_in(sd_event_source *src, int fd, uint32_t events, void *userdata) {
        SniConn *c = userdata;
        ssize_t z;

        if (c->state != SNI_PEEKING) {
                int r = conn_relay_turn(c);
                if (r != 0)
                        conn_end(c, r);
                return 0;
        }
        if (!c->peek && !(c->peek = malloc(TLS_HELLO_PEEK_MAX))) {
                conn_refuse(c, "out of memory", NULL);
                return 0;
        }
        z = recv(fd, c->peek + c->n_peek, TLS_HELLO_PEEK_MAX - c->n_peek, 0);
        if (z < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (z <= 0) {
                conn_refuse(c, z == 0 ? "closed before its name" : "read error", NULL);
                return 0;
        }
        c->n_peek += (size_t) z;
        conn_peeked(c);
        return 0;
}

static int on_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        SniConn *c = userdata;

        conn_refuse(c, c->state == SNI_PEEKING ? "no name in time" : "the destination did not answer in time", NULL);
        return 0;
}

/* ---- the listener ---- */

/* The sandbox whose /30 the connection comes from, its egress attached by us. */
static SandboxNet *net_of(const EgressSni *s, uint32_t src) {
        for (size_t i = 0; i < s->n_nets; i++)
                if (s->nets[i]->attached && s->nets[i]->addr == src)
                        return s->nets[i];
        return NULL;
}

int egress_sni_watch(EgressSni *s, SandboxNet *n) {
        if (!s)
                return 0;
        for (size_t i = 0; i < s->n_nets; i++)
                if (s->nets[i] == n)
                        return 0;
        if (s->n_nets == s->n_nets_alloc) {
                size_t want = s->n_nets_alloc ? s->n_nets_alloc * 2 : 64;
                SandboxNet **p = reallocarray(s->nets, want, sizeof(*p));
                if (!p)
                        return -ENOMEM;
                s->nets = p;
                s->n_nets_alloc = want;
        }
        s->nets[s->n_nets++] = n;
        return 0;
}

static unsigned conns_of(const EgressSni *s, const SandboxNet *n) {
        unsigned k = 0;

        for (const SniConn *c = s->conns; c; c = c->next)
                k += c->net == n;
        return k;
}

static SniConn *conn_new(EgressSni *s, int fd) {
        SniConn *c = calloc(1, sizeof(*c));

        if (!c)
                return NULL;
        c->sni = s;
        c->in_fd = fd;
        c->out_fd = -EBADF;
        way_init(&c->up, &c->in_fd, &c->out_fd);
        way_init(&c->down, &c->out_fd, &c->in_fd);
        c->next = s->conns;
        if (c->next)
                c->next->prev = c;
        s->conns = c;
        s->n_conns++;
        return c;
}

/* Where it came from, where it was going, and whose it is; < 0: not a connection to take. */
static int conn_identify(EgressSni *s, SniConn *c) {
        struct sockaddr_in peer, local;
        socklen_t l = sizeof(peer);
        unsigned share;

        if (getpeername(c->in_fd, (struct sockaddr *) &peer, &l) < 0 || peer.sin_family != AF_INET)
                return -EINVAL;
        l = sizeof(local);
        if (getsockname(c->in_fd, (struct sockaddr *) &local, &l) < 0)
                return -EINVAL;
        l = sizeof(c->dst);
        /* Without the redirect the original destination is our own socket: not one to relay. */
        if (getsockopt(c->in_fd, SOL_IP, SO_ORIGINAL_DST, &c->dst, &l) < 0 ||
            (c->dst.sin_addr.s_addr == local.sin_addr.s_addr && c->dst.sin_port == local.sin_port))
                return -EINVAL;
        c->net = net_of(s, ntohl(peer.sin_addr.s_addr));
        if (!c->net || c->net->host_addr != ntohl(local.sin_addr.s_addr))
                return -ESRCH;
        share = EGRESS_SNI_CONNS_MAX / 4;
        if (s->ctx->config.egress_connections < share)
                share = (unsigned) s->ctx->config.egress_connections;
        if (conns_of(s, c->net) > share)
                return -EUSERS;
        return 0;
}

static int conn_start(EgressSni *s, SniConn *c) {
        int r;

        r = sd_event_add_io(s->ctx->event, &c->in_src, c->in_fd, EPOLLIN, on_in, c);
        if (r < 0)
                return r;
        return sd_event_add_time_relative(s->ctx->event, &c->timer, CLOCK_MONOTONIC, EGRESS_SNI_PEEK_USEC, 0,
                                          on_timer, c);
}

static void accept_one(EgressSni *s, int fd) {
        SniConn *c = conn_new(s, fd);
        int r;

        if (!c) {
                safe_close(fd);
                return;
        }
        if (s->n_conns > EGRESS_SNI_CONNS_MAX) {
                conn_refuse(c, "too many connections through the relay", NULL);
                return;
        }
        r = conn_identify(s, c);
        if (r == -EUSERS) {
                conn_refuse(c, "the sandbox has its share of connections through the relay", NULL);
                return;
        }
        if (r < 0) {
                conn_refuse(c, "not a sandbox's redirected connection", NULL);
                return;
        }
        r = conn_start(s, c);
        if (r < 0)
                conn_refuse(c, "cannot watch it", strerror(-r));
}

static int on_listen(sd_event_source *src, int fd, uint32_t events, void *userdata) {
        EgressSni *s = userdata;

        for (unsigned i = 0; i < SNI_ACCEPT_BATCH; i++) {
                int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (c < 0) {
                        if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                                log_debug_errno(-errno, "egress: the SNI relay's accept failed: %m");
                        break;
                }
                accept_one(s, c);
        }
        return 0;
}

/* On every address of ours, on a port the kernel picks: only the sandboxes' redirected
 * connections reach it (the table's input chain takes nothing else from a sandbox, and nothing
 * from elsewhere on this port). */
static int listen_make(EgressSni *s) {
        struct sockaddr_in sa = { .sin_family = AF_INET };
        socklen_t l = sizeof(sa);
        _cleanup_close_ int fd = -EBADF;

        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(fd, 1024) < 0 ||
            getsockname(fd, (struct sockaddr *) &sa, &l) < 0)
                return -errno;
        s->port = ntohs(sa.sin_port);
        s->listen_fd = TAKE_FD(fd);
        return 0;
}

int egress_sni_new(Context *m, const EgressRule *deny, unsigned n_deny, EgressSni **ret) {
        EgressSni *s = calloc(1, sizeof(*s));
        int r;

        if (!s)
                return -ENOMEM;
        s->ctx = m;
        s->listen_fd = -EBADF;
        s->n_deny = n_deny < ELEMENTSOF(s->deny) ? n_deny : ELEMENTSOF(s->deny);
        memcpy(s->deny, deny, s->n_deny * sizeof(*deny));
        r = listen_make(s);
        if (r >= 0 && m->event)
                r = sd_event_add_io(m->event, &s->listen_src, s->listen_fd, EPOLLIN, on_listen, s);
        if (r < 0) {
                egress_sni_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

EgressSni *egress_sni_free(EgressSni *s) {
        if (!s)
                return NULL;
        while (s->conns)
                conn_free(s->conns);
        sd_event_source_disable_unref(s->listen_src);
        safe_close(s->listen_fd);
        free(s->nets);
        free(s);
        return NULL;
}

void egress_sni_forget(EgressSni *s, const SandboxNet *n) {
        if (!s)
                return;
        for (SniConn *c = s->conns, *next; c; c = next) {
                next = c->next;
                if (c->net == n)
                        conn_free(c);
        }
        for (size_t i = 0; i < s->n_nets; i++)
                if (s->nets[i] == n) {
                        s->nets[i] = s->nets[--s->n_nets];
                        break;
                }
}

int egress_sni_recheck(EgressSni *s, const SandboxNet *n) {
        int cut = 0;

        if (!s)
                return 0;
        for (SniConn *c = s->conns, *next; c; c = next) {
                next = c->next;
                if (c->net != n || c->state == SNI_PEEKING ||
                    sni_admits(n, c->name, ntohl(c->dst.sin_addr.s_addr), ntohs(c->dst.sin_port)))
                        continue;
                conn_end(c, -ECONNRESET);
                cut++;
        }
        return cut;
}

/* ---- the entry and the rules ---- */

static int entry_name(json_object *v, const char *field, char *name, ProtoError *err) {
        size_t len = v && json_object_is_type(v, json_type_string) ? (size_t) json_object_get_string_len(v) : 0;
        const char *s = len ? json_object_get_string(v) : NULL;

        if (!s || len > EGRESS_ENTRY_MAX || strlen(s) != len)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field, "'%s' must be a host name of 1-%d characters",
                                       field, EGRESS_ENTRY_MAX);
        for (size_t i = 0; i <= len; i++)
                name[i] = (char) tolower((unsigned char) s[i]);
        if (!dns_pattern_valid(name))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                       "'%s' is not a host name (letters, digits, '-', '_'; two labels at least) or "
                                       "'*.' and one (every name below it, not itself); addresses are given as strings", s);
        return 0;
}

static int entry_field(json_object *v, const char *key, const char *field, EgressRule *r, ProtoError *err) {
        char f[64];

        snprintf(f, sizeof(f), "%s.%s", field, key);
        if (strcmp(key, "port") == 0) {
                int64_t p = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : 0;
                if (p < 1 || p > 65535)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, f, "'%s' must be a number 1-65535", f);
                r->port = (uint16_t) p;
        } else if (strcmp(key, "proto") == 0) {
                const char *p = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
                if (strcmp(p, "tcp") != 0 && strcmp(p, "udp") != 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, f, "'%s' must be \"tcp\" or \"udp\"", f);
                r->proto = p[0] == 't' ? IPPROTO_TCP : IPPROTO_UDP;
        } else if (strcmp(key, "match") == 0) {
                const char *p = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
                if (strcmp(p, "sni") != 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, f,
                                               "'%s' must be \"sni\" (the name a TLS ClientHello or HTTP/1 Host asks "
                                               "for), or left out", f);
                r->sni = true;
        } else if (strcmp(key, "name") != 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, f,
                                       "unknown field '%s' (an entry has 'name', 'port', 'proto', 'match')", f);
        return 0;
}

int egress_sni_parse_entry(json_object *v, const char *field, EgressRule *r, char *name, ProtoError *err) {
        char f[64];
        int k;

        *r = (EgressRule) { .name = true };
        snprintf(f, sizeof(f), "%s.name", field);
        if ((k = entry_name(json_object_object_get(v, "name"), f, name, err)) < 0)
                return k;
        json_object_object_foreach(v, key, val)
                if ((k = entry_field(val, key, field, r, err)) < 0)
                        return k;
        snprintf(f, sizeof(f), "%s.proto", field);
        if (r->sni && r->proto == IPPROTO_UDP)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, f,
                                       "'%s' is \"udp\", but match \"sni\" is for TCP (QUIC's name is encrypted)", f);
        if (r->proto && !r->port)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, f, "'%s' needs a 'port'", f);
        if (r->sni)
                r->proto = IPPROTO_TCP;
        return 0;
}

json_object *egress_sni_entry_json(const EgressRule *r, const char *name) {
        json_object *o = json_object_new_object();

        json_object_object_add(o, "name", json_object_new_string(name));
        if (r->port)
                json_object_object_add(o, "port", json_object_new_int(r->port));
        json_object_object_add(o, "match", json_object_new_string("sni"));
        return o;
}

char *egress_sni_chain_text(const SandboxNet *n, uint32_t saddr, const char *table, const char *chain, uint16_t port) {
        char *buf = NULL, a[INET_ADDRSTRLEN];
        size_t len = 0;
        bool any_sni = false;
        FILE *f = open_memstream(&buf, &len);

        if (!f)
                return NULL;
        /* Without a match-sni entry the chain stays empty: it names none of the sets, which a new
         * allow list may then remove (egress_update()). */
        for (unsigned i = 0; i < n->n_allow && !any_sni; i++)
                any_sni = n->allow[i].sni;
        for (unsigned i = 0; i < n->n_allow && any_sni; i++) {
                const EgressRule *r = &n->allow[i];
                char p[48];
                if (r->sni || r->proto == IPPROTO_UDP)
                        continue;
                if (r->name)
                        snprintf(p, sizeof(p), "@%s_%u", chain, i);
                else
                        ipv4_prefix_format(p, sizeof(p), r->addr, r->len);
                /* Its forward chain admits these: no SNI asked of them. */
                if (r->port)
                        fprintf(f, "add rule %s %s_sni ip daddr %s tcp dport %u return\n", table, chain, p, r->port);
                else
                        fprintf(f, "add rule %s %s_sni ip daddr %s return\n", table, chain, p);
        }
        inet_ntop(AF_INET, &(struct in_addr) { .s_addr = htonl(saddr) }, a, sizeof(a));
        for (unsigned i = 0; i < n->n_allow; i++) {
                const EgressRule *r = &n->allow[i];
                if (!r->sni)
                        continue;
                if (r->port)
                        fprintf(f, "add rule %s %s_sni ip saddr %s ip daddr @%s_%u tcp dport %u redirect to :%u\n", table,
                                chain, a, chain, i, r->port, port);
                else
                        fprintf(f, "add rule %s %s_sni ip saddr %s ip daddr @%s_%u tcp dport { 80, 443 } redirect to :%u\n",
                                table, chain, a, chain, i, port);
        }
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

json_object *egress_sni_state_json(const EgressSni *s, const SandboxNet *n) {
        json_object *o;
        bool any = false;

        for (unsigned i = 0; i < n->n_allow; i++)
                any = any || n->allow[i].sni;
        if (!any)
                return NULL;
        o = json_object_new_object();
        json_object_object_add(o, "open", json_object_new_int((int) (s ? conns_of(s, n) : 0)));
        json_object_object_add(o, "relayed", json_object_new_int64((int64_t) n->sni_relayed));
        json_object_object_add(o, "refused", json_object_new_int64((int64_t) n->sni_refused));
        return o;
}
