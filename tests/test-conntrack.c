/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Connection tracking over ctnetlink (daemon/host/conntrack.h), in a network namespace of the
 * test's own: a rule marks every connection as a sandbox's chain does (ct mark set), then one
 * TCP connection over the loopback is found by its mark with its tuple, is not found by another
 * mark, is counted in its slot, and is deleted (once: the second time it is -ENOENT); a few
 * hundred UDP flows make a dump of several datagrams, each flow found and counted; a flush by
 * mark forgets them all; a TCP connection both ends closed stays in the table, closed, and is
 * counted no more. Root only (a network namespace, nftables); skipped otherwise. */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/netfilter/nf_conntrack_tcp.h>

#include "conntrack.h"
#include "macro.h"
#include "nftables.h"
#include "tap.h"

#define MARK 0x5bd00007u
#define BASE 0x5bd00000u
#define SLOT_MASK 0xffffu
#define N_UDP 300

static const char rules[] = "table inet t {\n"
                            "  chain out { type filter hook output priority filter; policy accept; ct mark set 0x5bd00007; }\n"
                            "}\n";

static void *drop(void *p) {
        free(p);
        return NULL;
}

static int lo_up(void) {
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr = {};

        if (fd < 0)
                return -errno;
        strcpy(ifr.ifr_name, "lo");
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                return -errno;
        ifr.ifr_flags |= IFF_UP;
        return ioctl(fd, SIOCSIFFLAGS, &ifr) < 0 ? -errno : 0;
}

/* A namespace of our own with lo up and the marking rule, or a reason to skip. */
static void setup(void) {
        _cleanup_free_ char *msg = NULL;
        Nftables *nft = NULL;
        int r;

        if (geteuid() != 0)
                skip_all("needs root (a network namespace of its own, nftables)");
        if (unshare(CLONE_NEWNET) < 0)
                skip_all("cannot make a network namespace (unshare)");
        if (lo_up() < 0)
                skip_all("cannot bring lo up in the new namespace");
        r = nftables_new(&nft);
        if (r == -EOPNOTSUPP)
                skip_all("built without libnftables");
        if (r < 0)
                skip_all("cannot use nftables");
        r = nftables_run(nft, rules, &msg);
        nftables_free(nft);
        if (r < 0)
                skip_all("nftables refused the marking rule (nf_tables, nf_conntrack)");
}

static struct sockaddr_in loopback(uint16_t port) {
        return (struct sockaddr_in) { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
}

static uint16_t local_port(int fd) {
        struct sockaddr_in sa;
        socklen_t len = sizeof(sa);

        return getsockname(fd, (struct sockaddr *) &sa, &len) < 0 ? 0 : ntohs(sa.sin_port);
}

/* A listener on 127.0.0.1, a connection to it, accepted: fds[0..2]. */
static int tcp_connection(int fds[3]) {
        struct sockaddr_in sa = loopback(0);
        socklen_t len = sizeof(sa);

        fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[0] < 0 || bind(fds[0], (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(fds[0], 4) < 0 ||
            getsockname(fds[0], (struct sockaddr *) &sa, &len) < 0)
                return -errno;
        fds[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[1] < 0 || connect(fds[1], (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        fds[2] = accept4(fds[0], NULL, NULL, SOCK_CLOEXEC);
        return fds[2] < 0 ? -errno : 0;
}

static void check_tcp(int fds[3]) {
        _cleanup_free_ ConntrackEntry *v = NULL;
        ConntrackEntry e;
        unsigned counts[16];
        size_t n = 99;
        int r;

        r = conntrack_dump(MARK, 0xffffffffu, &v, &n);
        is_int(r, 0, "a dump by the connection's mark succeeds");
        if (!is_int((long long) n, 1, "... and finds exactly the one connection"))
                return;
        e = v[0];
        is_int(e.proto, IPPROTO_TCP, "its protocol is TCP");
        is_int(e.src, INADDR_LOOPBACK, "its source is 127.0.0.1 (host order)");
        is_int(e.dst, INADDR_LOOPBACK, "its destination is 127.0.0.1");
        is_int(e.sport, local_port(fds[1]), "its source port is the connecting socket's");
        is_int(e.dport, local_port(fds[0]), "its destination port is the listener's");
        is_int(e.mark, MARK, "its mark is the rule's");
        is_int(e.tcp_state, TCP_CONNTRACK_ESTABLISHED, "its TCP state is ESTABLISHED");
        ok(!conntrack_entry_closed(&e), "... which is not closed");
        v = drop(v);

        r = conntrack_dump(MARK + 1, 0xffffffffu, &v, &n);
        ok(r == 0 && n == 0 && !v, "a dump by another mark finds nothing (%d, %zu)", r, n);
        v = drop(v);
        r = conntrack_dump(BASE, ~SLOT_MASK, &v, &n);
        ok(r == 0 && n == 1, "a dump by the base under a mask finds it (%d, %zu)", r, n);
        v = drop(v);

        memset(counts, 0xff, sizeof(counts));
        r = conntrack_count_by_mark(BASE, ~SLOT_MASK, SLOT_MASK, counts, ELEMENTSOF(counts));
        is_int(r, 0, "count_by_mark succeeds");
        is_int(counts[7], 1, "... and counts 1 in slot 7");
        unsigned others = 0;
        for (size_t i = 0; i < ELEMENTSOF(counts); i++)
                others += i == 7 ? 0 : counts[i];
        is_int(others, 0, "... and 0 in every other slot");
        is_int(conntrack_count_by_mark(BASE | 1, ~SLOT_MASK, SLOT_MASK, counts, 16), -EINVAL, "a base with a bit of the slot mask: -EINVAL");

        is_int(conntrack_delete(&e), 0, "delete removes it");
        r = conntrack_dump(MARK, 0xffffffffu, &v, &n);
        ok(r == 0 && n == 0, "... a second dump finds none (%d, %zu)", r, n);
        v = drop(v);
        is_int(conntrack_delete(&e), -ENOENT, "delete again: -ENOENT");
        e.proto = IPPROTO_ICMP;
        is_int(conntrack_delete(&e), -EOPNOTSUPP, "delete of a protocol without ports: -EOPNOTSUPP");
}

/* N_UDP flows to one receiver, each from a socket of its own (a port of its own): a dump of
 * them takes several datagrams of the kernel's. */
static int udp_flows(int *rx, int tx[N_UDP], uint16_t *ret_port) {
        struct sockaddr_in sa = loopback(0);

        *rx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (*rx < 0 || bind(*rx, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        sa.sin_port = htons(*ret_port = local_port(*rx));
        for (int i = 0; i < N_UDP; i++) {
                tx[i] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                if (tx[i] < 0 || sendto(tx[i], "x", 1, 0, (struct sockaddr *) &sa, sizeof(sa)) != 1)
                        return -errno;
        }
        return 0;
}

static void check_udp(void) {
        _cleanup_free_ ConntrackEntry *v = NULL;
        int rx = -EBADF, tx[N_UDP], r;
        unsigned counts[8], matching = 0;
        uint16_t port = 0;
        size_t n = 0;

        for (int i = 0; i < N_UDP; i++)
                tx[i] = -EBADF;
        /* What the TCP connection's close sent after its entry was deleted is tracked anew. */
        is_int(conntrack_flush_mark(MARK, 0xffffffffu), 0, "a flush by the mark, before the UDP flows");
        r = udp_flows(&rx, tx, &port);
        is_int(r, 0, "%d UDP flows over the loopback", N_UDP);
        r = conntrack_dump(MARK, 0xffffffffu, &v, &n);
        is_int(r, 0, "a dump of them succeeds");
        for (size_t i = 0; i < n; i++)
                matching += v[i].proto == IPPROTO_UDP && v[i].dport == port && v[i].mark == MARK;
        is_int(matching, N_UDP, "... and has every one of them (a dump of several datagrams)");
        r = conntrack_count_by_mark(BASE, ~SLOT_MASK, SLOT_MASK, counts, ELEMENTSOF(counts));
        ok(r == 0 && counts[7] == N_UDP, "count_by_mark counts them all in slot 7 (%d, %u)", r, counts[7]);
        is_int(conntrack_flush_mark(MARK + 1, 0xffffffffu), 0, "a flush by another mark: none is not an error");
        r = conntrack_count_by_mark(BASE, ~SLOT_MASK, SLOT_MASK, counts, ELEMENTSOF(counts));
        ok(r == 0 && counts[7] == N_UDP, "... and it left them (%d, %u)", r, counts[7]);
        is_int(conntrack_flush_mark(MARK, 0xffffffffu), 0, "a flush by their mark");
        r = conntrack_count_by_mark(BASE, ~SLOT_MASK, SLOT_MASK, counts, ELEMENTSOF(counts));
        ok(r == 0 && counts[7] == 0, "... forgets them all (%d, %u)", r, counts[7]);
        for (int i = 0; i < N_UDP; i++)
                safe_close(tx[i]);
        safe_close(rx);
}

/* The closed entry of a TCP connection both ends closed, once the kernel has it (the FINs and the
 * last ACK go over the loopback as close() sends them). */
static int dump_closed(ConntrackEntry *ret) {
        for (int i = 0; i < 200; i++) {
                _cleanup_free_ ConntrackEntry *v = NULL;
                size_t n = 0;
                int r = conntrack_dump(MARK, 0xffffffffu, &v, &n);
                if (r < 0)
                        return r;
                if (n == 1 && conntrack_entry_closed(&v[0])) {
                        *ret = v[0];
                        return 0;
                }
                usleep(10000);
        }
        return -ETIMEDOUT;
}

static void check_closed(void) {
        int fds[3] = { -EBADF, -EBADF, -EBADF };
        unsigned counts[8];
        ConntrackEntry e;
        int r;

        is_int(tcp_connection(fds), 0, "another TCP connection");
        r = conntrack_count_by_mark(BASE, ~SLOT_MASK, SLOT_MASK, counts, ELEMENTSOF(counts));
        ok(r == 0 && counts[7] == 1, "count_by_mark counts it while it is open (%d, %u)", r, counts[7]);
        for (int i = 2; i >= 0; i--)
                safe_close(fds[i]);
        r = dump_closed(&e);
        is_int(r, 0, "both ends closed: its entry is still in the table, closed");
        ok(r < 0 || e.tcp_state == TCP_CONNTRACK_TIME_WAIT || e.tcp_state == TCP_CONNTRACK_CLOSE,
           "... in TIME_WAIT or CLOSE (%u)", r < 0 ? 0 : e.tcp_state);
        r = conntrack_count_by_mark(BASE, ~SLOT_MASK, SLOT_MASK, counts, ELEMENTSOF(counts));
        ok(r == 0 && counts[7] == 0, "count_by_mark counts it no more (%d, %u)", r, counts[7]);
        (void) conntrack_flush_mark(MARK, 0xffffffffu);
}

int main(void) {
        int fds[3] = { -EBADF, -EBADF, -EBADF }, r;

        setup();
        r = tcp_connection(fds);
        if (!is_int(r, 0, "a TCP connection over 127.0.0.1 in a namespace of the test's own"))
                return done_testing();
        check_tcp(fds);
        for (int i = 0; i < 3; i++)
                safe_close(fds[i]);
        check_udp();
        check_closed();
        return done_testing();
}
