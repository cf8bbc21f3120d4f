/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Network namespaces made by the daemon and used again (netns-pool.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/tcp_metrics.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "log.h"
#include "macro.h"
#include "netns-pool.h"
#include "util.h"

static uint16_t genl_family(const char *family);
static int netns_pristine(NetnsPool *p, NetnsState **ret);

int netns_pool_init(NetnsPool *p, size_t max_idle) {
        *p = (NetnsPool) { .host_fd = -EBADF, .max_idle = max_idle };
        if (max_idle == 0)
                return 0;
        p->idle = calloc(max_idle, sizeof(NetnsSlot));
        if (!p->idle)
                return -ENOMEM;
        /* Without it no namespace is known clean: each is used once. */
        p->tcp_metrics_family = genl_family(TCP_METRICS_GENL_NAME);
        if (p->tcp_metrics_family == 0)
                log_warning("no generic netlink family %s: network namespaces are not used again", TCP_METRICS_GENL_NAME);
        p->host_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        return p->host_fd < 0 ? -errno : 0;
}

/* Back in our own namespace. The daemon's sockets do not care which one it is in, but every
 * socket it makes afterwards would: there is no going on from a failure here. */
static void netns_go_home(NetnsPool *p) {
        if (setns(p->host_fd, CLONE_NEWNET) < 0) {
                log_error("cannot return to the daemon's network namespace: %m");
                abort();
        }
}

static int write_sysctl(const char *name, const char *value) {
        char path[128];
        _cleanup_close_ int fd = -EBADF;
        size_t n = strlen(value);

        snprintf(path, sizeof(path), "/proc/sys/net/%s", name);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, value, n) != (ssize_t) n)
                return -errno;
        return 0;
}

/* In the new namespace: what a sandbox's own namespace gave it, now that no sandbox can set it
 * itself. The loopback up; ports below 1024 for anyone (root of a sandbox used to bind them,
 * with CAP_NET_BIND_SERVICE over its own namespace); ping without raw sockets (ICMP datagram
 * sockets, as systemd allows on the host); no TCP metrics kept for a later connection (a
 * sandbox's connections would tune the next one's). */
static int netns_setup(void) {
        struct ifreq ifr = {};
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        int r;

        if (fd < 0)
                return -errno;
        strcpy(ifr.ifr_name, "lo");
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                return -errno;
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                return -errno;
        if ((r = write_sysctl("ipv4/ip_unprivileged_port_start", "0")) < 0 ||
            (r = write_sysctl("ipv4/ping_group_range", "0 2147483647")) < 0 ||
            (r = write_sysctl("ipv4/tcp_no_metrics_save", "1")) < 0)
                return r;
        return 0;
}

/* What a namespace shows, as one string: netns_state_take() below. */
typedef struct Buf {
        char *data;
        size_t size, alloc;
        size_t max;        /* 0: NETNS_STATE_MAX */
        const char *cmp;   /* the state to compare with as we go, or NULL */
        size_t cmp_size, checked;
} Buf;

static void buf_done(Buf *b) {
        free(b->data);
}

/* How long the record of a new namespace stands for the next ones made (netns_make()). */
#define NETNS_RECORD_USEC (1000 * 1000)

/* More than this is not a namespace anyone would want to compare (nor keep the record of). */
#define NETNS_STATE_MAX (1U << 20)

static int buf_reserve(Buf *b, size_t n) {
        size_t want;
        char *d;

        if (n > (b->max ? b->max : NETNS_STATE_MAX) - b->size)
                return -EFBIG;
        if (b->alloc - b->size >= n)
                return 0;
        want = b->alloc ? b->alloc : 4096;
        while (want - b->size < n)
                want *= 2;
        d = realloc(b->data, want);
        if (!d)
                return -ENOMEM;
        b->data = d;
        b->alloc = want;
        return 0;
}

static int buf_add(Buf *b, const char *s, size_t n) {
        int r = buf_reserve(b, n);

        if (r < 0)
                return r;
        memcpy(b->data + b->size, s, n);
        b->size += n;
        return 0;
}

/* What b has beyond what was checked is what cmp has there: else -ESTALE, and the walk stops
 * (a namespace that differs costs no more than what it takes to see it). */
static int buf_check(Buf *b) {
        if (!b->cmp)
                return 0;
        if (b->size > b->cmp_size || memcmp(b->data + b->checked, b->cmp + b->checked, b->size - b->checked) != 0)
                return -ESTALE;
        b->checked = b->size;
        return 0;
}

static int buf_addf(Buf *b, const char *fmt, ...) _printf_(2, 3);
static int buf_addf(Buf *b, const char *fmt, ...) {
        char s[512];
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(s, sizeof(s), fmt, ap);
        va_end(ap);
        if (n < 0 || (size_t) n >= sizeof(s))
                return -ENAMETOOLONG;
        return buf_add(b, s, (size_t) n);
}

/* The whole of a file (a seq_file gives a page per read() at most) into b, replacing it. */
static int buf_read_file(Buf *b, int dir_fd, const char *name) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        ssize_t n;
        int r;

        if (fd < 0)
                return -errno;
        b->size = 0;
        for (;;) {
                if ((r = buf_reserve(b, 4096)) < 0)
                        return r;
                n = read(fd, b->data + b->size, b->alloc - b->size);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return 0;
                b->size += (size_t) n;
        }
}

/* How a file of /proc/net is compared. Everything not named here is compared whole, so a file
 * the kernel adds one day is compared whole too. */
typedef enum ProcNetKind {
        PROC_NET_WHOLE,
        PROC_NET_COUNTERS, /* counts of what the namespace did, not what is in it: only its name */
        PROC_NET_ELSEWHERE, /* the machine's, or counted elsewhere for less: only its name */
        PROC_NET_PRIVILEGED, /* changed only with a capability no sandbox has: only its name */
        PROC_NET_COLUMNS,  /* each line's columns in .keep (a bit per column; the last for all above) */
        PROC_NET_SOCKSTAT, /* all but sockstat_not_compared() */
} ProcNetKind;

#define COL(n) (UINT64_C(1) << (n))

static const struct {
        const char *name; /* a name ending in '/': everything in that directory */
        ProcNetKind kind;
        uint64_t keep;
} proc_net_rules[] = {
        /* Counters of packets, errors, events, per namespace or the machine's (docs/security.md:
         * "What is shared across time"). */
        { "dev_snmp6/", PROC_NET_COUNTERS, 0 },
        { "netstat", PROC_NET_COUNTERS, 0 },
        { "rt_acct", PROC_NET_COUNTERS, 0 },
        { "snmp", PROC_NET_COUNTERS, 0 },
        { "snmp6", PROC_NET_COUNTERS, 0 },
        { "softnet_stat", PROC_NET_COUNTERS, 0 },
        { "stat/", PROC_NET_COUNTERS, 0 },
        { "xfrm_stat", PROC_NET_COUNTERS, 0 },
        /* Each of these walks a table of the whole machine (every namespace's TCP sockets: 1.5
         * ms each here): the namespace's sockets of each protocol are counted in "protocols",
         * "sockstat" and "sockstat6" instead, TIME_WAIT too, and its connections tracked in the
         * sysctl nf_conntrack_count (netns_state_take()). */
        { "nf_conntrack", PROC_NET_ELSEWHERE, 0 },
        { "tcp", PROC_NET_ELSEWHERE, 0 },
        { "tcp6", PROC_NET_ELSEWHERE, 0 },
        { "udp", PROC_NET_ELSEWHERE, 0 },
        { "udp6", PROC_NET_ELSEWHERE, 0 },
        { "udplite", PROC_NET_ELSEWHERE, 0 },
        { "udplite6", PROC_NET_ELSEWHERE, 0 },
        /* The matches and targets the kernel has: the machine's, not the namespace's. */
        { "arp_tables_matches", PROC_NET_ELSEWHERE, 0 },
        { "arp_tables_targets", PROC_NET_ELSEWHERE, 0 },
        { "ip6_tables_matches", PROC_NET_ELSEWHERE, 0 },
        { "ip6_tables_targets", PROC_NET_ELSEWHERE, 0 },
        { "ip_tables_matches", PROC_NET_ELSEWHERE, 0 },
        { "ip_tables_targets", PROC_NET_ELSEWHERE, 0 },
        /* What only CAP_NET_ADMIN or CAP_NET_RAW over the namespace can change (interfaces,
         * addresses, routes, anycast addresses, multicast routing, raw and packet sockets,
         * iptables, nfnetlink logging and queues), which its owner, the host's user namespace,
         * gives to nothing of a sandbox (tests/t-netns.sh tries each), or constant. Compared, they
         * were a third of the check's cost. A file not named here is compared whole. */
        { "anycast6", PROC_NET_PRIVILEGED, 0 },
        { "arp", PROC_NET_PRIVILEGED, 0 },
        { "arp_tables_names", PROC_NET_PRIVILEGED, 0 },
        { "dev", PROC_NET_PRIVILEGED, 0 },
        { "fib_trie", PROC_NET_PRIVILEGED, 0 },
        { "fib_triestat", PROC_NET_PRIVILEGED, 0 },
        { "if_inet6", PROC_NET_PRIVILEGED, 0 },
        { "ip6_mr_cache", PROC_NET_PRIVILEGED, 0 },
        { "ip6_mr_vif", PROC_NET_PRIVILEGED, 0 },
        { "ip6_tables_names", PROC_NET_PRIVILEGED, 0 },
        { "ip6t_hashlimit/", PROC_NET_PRIVILEGED, 0 },
        { "ip_mr_cache", PROC_NET_PRIVILEGED, 0 },
        { "ip_mr_vif", PROC_NET_PRIVILEGED, 0 },
        { "ip_tables_names", PROC_NET_PRIVILEGED, 0 },
        { "ipt_hashlimit/", PROC_NET_PRIVILEGED, 0 },
        { "netfilter/", PROC_NET_PRIVILEGED, 0 },
        { "packet", PROC_NET_PRIVILEGED, 0 },
        { "psched", PROC_NET_PRIVILEGED, 0 },
        { "ptype", PROC_NET_PRIVILEGED, 0 },
        { "raw", PROC_NET_PRIVILEGED, 0 },
        { "raw6", PROC_NET_PRIVILEGED, 0 },
        { "route", PROC_NET_PRIVILEGED, 0 },
        { "rt_cache", PROC_NET_PRIVILEGED, 0 },
        { "xt_recent/", PROC_NET_PRIVILEGED, 0 },
        /* Not a route's reference count: one more for each CPU that sent by it (its cached copy). */
        { "ipv6_route", PROC_NET_COLUMNS, ~COL(6) },
        /* Not a socket's address and inode: they differ from namespace to namespace, and the
         * kernel's own sockets are all there is in a clean one. */
        { "netlink", PROC_NET_COLUMNS, ~(COL(0) | COL(9)) },
        /* Not memory and pressure: the machine's, not the namespace's. Sockets in use are kept. */
        { "protocols", PROC_NET_COLUMNS, ~(COL(3) | COL(4)) },
        /* Not routes allocated nor dst entries: the cached copies of sends again. Routes, route
         * exceptions (cached PMTU, redirects) and discarded routes are kept. */
        { "rt6_stats", PROC_NET_COLUMNS, ~(COL(2) | COL(5)) },
        { "sockstat", PROC_NET_SOCKSTAT, 0 },
};

static int proc_net_rule(const char *path) {
        for (size_t i = 0; i < ELEMENTSOF(proc_net_rules); i++) {
                const char *n = proc_net_rules[i].name;
                size_t l = strlen(n);
                if (n[l - 1] == '/' ? strncmp(path, n, l) == 0 : strcmp(path, n) == 0)
                        return (int) i;
        }
        return -1;
}

/* Counts of sockstat not compared (each with its value): TCP's orphan, alloc and mem and UDP's
 * mem are the machine's. "sockets: used" is the namespace's, every family's, but a netlink socket
 * is counted until an RCU grace period after its close (15-20 ms here), so any getaddrinfo() of a
 * run (AI_ADDRCONFIG asks netlink) would keep a namespace from the next sandbox; the sockets of
 * each protocol, netlink's included, are in "protocols", counted at once. */
static bool sockstat_not_compared(const char *word, size_t len) {
        static const char *const names[] = { "orphan", "alloc", "mem", "used" };
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (strlen(names[i]) == len && memcmp(word, names[i], len) == 0)
                        return true;
        return false;
}

/* raw's words, line by line, those that rule keeps, one space apart. */
static int add_words(Buf *b, const Buf *raw, ProcNetKind kind, uint64_t keep) {
        const char *s = raw->data, *end = raw->data + raw->size;
        unsigned col = 0;
        bool skip_next = false;
        int r;

        while (s < end) {
                const char *w = s;
                if (*s == '\n') {
                        if ((r = buf_add(b, "\n", 1)) < 0)
                                return r;
                        col = 0;
                        skip_next = false;
                        s++;
                        continue;
                }
                if (*s == ' ' || *s == '\t') {
                        s++;
                        continue;
                }
                while (s < end && *s != ' ' && *s != '\t' && *s != '\n')
                        s++;
                if (kind == PROC_NET_SOCKSTAT) {
                        bool drop = skip_next || sockstat_not_compared(w, (size_t) (s - w));
                        skip_next = !skip_next && drop;
                        if (drop)
                                continue;
                } else if (!(keep & COL(col < 63 ? col : 63))) {
                        col++;
                        continue;
                }
                col++;
                if ((r = buf_add(b, w, (size_t) (s - w))) < 0 || (r = buf_add(b, " ", 1)) < 0)
                        return r;
        }
        return 0;
}

static int add_file(Buf *b, Buf *raw, int dir_fd, const char *name, const char *path) {
        _cleanup_(buf_done) Buf words = {};
        int i = proc_net_rule(path), r;

        if (i >= 0 && proc_net_rules[i].kind != PROC_NET_COLUMNS && proc_net_rules[i].kind != PROC_NET_SOCKSTAT)
                return buf_addf(b, "c %s\n", path);
        r = buf_read_file(raw, dir_fd, name);
        if (r < 0)
                return r == -EFBIG || r == -ENOMEM ? r : buf_addf(b, "e %s %d\n", path, -r);
        if (i >= 0) {
                if ((r = add_words(&words, raw, proc_net_rules[i].kind, proc_net_rules[i].keep)) < 0)
                        return r;
                raw = &words;
        }
        /* With its length: no content can pass for the entries after it. */
        if ((r = buf_addf(b, "f %s %zu\n", path, raw->size)) < 0 || (r = buf_add(b, raw->data, raw->size)) < 0)
                return r;
        return buf_check(b);
}

static int cmp_names(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static int add_dir(Buf *b, Buf *raw, int dir_fd, const char *prefix, unsigned depth);

/* The directory name in dir_fd, at path (ending in '/'): its name, then what is in it. */
static int add_subdir(Buf *b, Buf *raw, int dir_fd, const char *name, const char *path, unsigned depth) {
        _cleanup_close_ int fd = -EBADF;
        int i = proc_net_rule(path), r;

        if (i >= 0 && (proc_net_rules[i].kind == PROC_NET_COUNTERS || proc_net_rules[i].kind == PROC_NET_PRIVILEGED))
                return buf_addf(b, "c %s\n", path); /* not opened: what is in it is named so too */
        fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        if ((r = buf_addf(b, "d %s\n", path)) < 0)
                return r;
        return add_dir(b, raw, fd, path, depth + 1);
}

/* Every entry of dir_fd (a directory of /proc/net at prefix), in the order of their names: a
 * directory's name, then what is in it; a file's name and its content, as proc_net_rules says. */
static int add_dir(Buf *b, Buf *raw, int dir_fd, const char *prefix, unsigned depth) {
        _cleanup_free_ char **names = NULL;
        size_t n = 0, alloc = 0;
        struct dirent *de;
        DIR *d;
        int fd, r = 0;

        if (depth > 4)
                return -ELOOP;
        fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -errno;
        }
        while ((errno = 0, de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (n == alloc) {
                        char **nn = reallocarray(names, alloc ? alloc * 2 : 64, sizeof(char *));
                        if (!nn) {
                                r = -ENOMEM;
                                break;
                        }
                        names = nn;
                        alloc = alloc ? alloc * 2 : 64;
                }
                /* The type first: 'd' a directory, 'f' a file, 'o' anything else. */
                names[n] = malloc(strlen(de->d_name) + 2);
                if (!names[n]) {
                        r = -ENOMEM;
                        break;
                }
                names[n][0] = de->d_type == DT_DIR ? 'd' : de->d_type == DT_REG ? 'f' : 'o';
                strcpy(names[n] + 1, de->d_name);
                n++;
        }
        if (r == 0 && errno != 0)
                r = -errno;
        if (r == 0)
                qsort(names, n, sizeof(char *), cmp_names);
        for (size_t i = 0; i < n && r >= 0; i++) {
                char path[PATH_MAX];
                const char *name = names[i] + 1;
                if (snprintf(path, sizeof(path), "%s%s", prefix, name) >= (int) sizeof(path))
                        r = -ENAMETOOLONG;
                else if (names[i][0] == 'f')
                        r = add_file(b, raw, dirfd(d), name, path);
                else if (names[i][0] != 'd')
                        r = buf_addf(b, "o %s\n", path); /* a link or the like: its name */
                else if (strlen(path) + 2 > sizeof(path))
                        r = -ENAMETOOLONG;
                else
                        r = add_subdir(b, raw, dirfd(d), name, strcat(path, "/"), depth);
        }
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        closedir(d);
        return r;
}

/* The next whole message of a netlink reply of n bytes at *off, or NULL. */
static const struct nlmsghdr *nl_next(const char *buf, size_t n, size_t *off) {
        const struct nlmsghdr *nh;

        if (*off > n || n - *off < sizeof(struct nlmsghdr))
                return NULL;
        nh = (const struct nlmsghdr *) (buf + *off);
        if (nh->nlmsg_len < sizeof(struct nlmsghdr) || nh->nlmsg_len > n - *off)
                return NULL;
        *off += NLMSG_ALIGN(nh->nlmsg_len);
        return nh;
}

/* The generic netlink family "tcp_metrics" (the same in every namespace), asked once. */
static uint16_t genl_family(const char *family) {
        struct {
                struct nlmsghdr nh;
                struct genlmsghdr gh;
                char attrs[64];
        } req = {
                .nh = { .nlmsg_type = GENL_ID_CTRL, .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 1 },
                .gh = { .cmd = CTRL_CMD_GETFAMILY, .version = 1 },
        };
        struct nlattr *a = (struct nlattr *) req.attrs;
        _cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
        char reply[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
        const struct nlmsghdr *nh;
        size_t off = 0;
        ssize_t n;

        if (fd < 0)
                return 0;
        a->nla_type = CTRL_ATTR_FAMILY_NAME;
        a->nla_len = (uint16_t) (NLA_HDRLEN + strlen(family) + 1);
        strcpy((char *) a + NLA_HDRLEN, family);
        req.nh.nlmsg_len = (uint32_t) (NLMSG_LENGTH(GENL_HDRLEN) + NLA_ALIGN(a->nla_len));
        if (send(fd, &req, req.nh.nlmsg_len, 0) < 0)
                return 0;
        n = recv(fd, reply, sizeof(reply), 0);
        if (n < (ssize_t) NLMSG_LENGTH(GENL_HDRLEN))
                return 0;
        while ((nh = nl_next(reply, (size_t) n, &off))) {
                size_t len;
                if (nh->nlmsg_type != GENL_ID_CTRL || nh->nlmsg_len < NLMSG_LENGTH(GENL_HDRLEN))
                        return 0;
                const size_t hdr = NLA_HDRLEN;
                const struct nlattr *at = (const struct nlattr *) ((const char *) NLMSG_DATA(nh) + GENL_HDRLEN);
                len = nh->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);
                while (len >= hdr && at->nla_len >= hdr && at->nla_len <= len) {
                        if (at->nla_type == CTRL_ATTR_FAMILY_ID && at->nla_len >= hdr + sizeof(uint16_t)) {
                                uint16_t id;
                                memcpy(&id, (const char *) at + hdr, sizeof(id));
                                return id;
                        }
                        size_t step = NLA_ALIGN((size_t) at->nla_len);
                        if (step >= len)
                                break;
                        len -= step;
                        at = (const struct nlattr *) ((const char *) at + step);
                }
        }
        return 0;
}

/* The TCP metrics of the namespace we are in (what TCP keeps of a peer: RTT, cwnd, and Fast
 * Open's MSS and cookie, kept even with tcp_no_metrics_save): no file of /proc shows them, and a
 * sandbox can make one for any address of 127.0.0.0/8 it chooses. Netlink answers anyone. */
static int count_tcp_metrics(uint16_t family, unsigned long *ret) {
        struct {
                struct nlmsghdr nh;
                struct genlmsghdr gh;
        } req = {
                .nh = { .nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN), .nlmsg_type = family,
                        .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1 },
                .gh = { .cmd = TCP_METRICS_CMD_GET, .version = TCP_METRICS_GENL_VERSION },
        };
        _cleanup_close_ int fd = -EBADF;
        unsigned long count = 0;
        /* A dump's messages come in buffers of at most 32 KiB (or the size we read with). */
        char reply[32768] __attribute__((aligned(NLMSG_ALIGNTO)));

        if (family == 0)
                return -ENOPROTOOPT;
        fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
        if (fd < 0)
                return -errno;
        if (send(fd, &req, req.nh.nlmsg_len, 0) < 0)
                return -errno;
        for (;;) {
                ssize_t n = recv(fd, reply, sizeof(reply), 0);
                const struct nlmsghdr *nh;
                size_t off = 0;

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EBADMSG;
                while ((nh = nl_next(reply, (size_t) n, &off))) {
                        if (nh->nlmsg_type == NLMSG_DONE) {
                                *ret = count;
                                return 0;
                        }
                        if (nh->nlmsg_type == NLMSG_ERROR)
                                return -EBADMSG;
                        count++;
                }
        }
}

struct NetnsState {
        unsigned n_ref;
        size_t size;
        char data[];
};

static NetnsState *netns_state_ref(NetnsState *s) {
        if (s)
                s->n_ref++;
        return s;
}

static NetnsState *netns_state_unref(NetnsState *s) {
        if (s && --s->n_ref == 0)
                free(s);
        return NULL;
}

/* What the namespace we are in shows, as one string (compared byte for byte): every file of
 * /proc/net (proc_net_rules); two sysctls, the TCP Fast Open key (made the first time a socket
 * asks for Fast Open, then the namespace's, so a later sandbox's server would take the cookies an
 * earlier one's gave out) and the number of connections tracked; the number of TCP metrics. No
 * other sysctl is read: none can be written from a sandbox (they are the host's, tests/t-netns.sh
 * tries each), and the 600 files would cost some 2 ms. */
static int netns_state_take(Buf *b, uint16_t tcp_metrics_family) {
        static const char *const sysctls[] = { "ipv4/tcp_fastopen_key", "netfilter/nf_conntrack_count" };
        _cleanup_(buf_done) Buf raw = {};
        _cleanup_close_ int dir_fd = open("/proc/thread-self/net", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int sys_fd = -EBADF;
        unsigned long metrics;
        int r;

        if (dir_fd < 0)
                return -errno;
        /* A file as read may be longer than the words kept of it, not by this much. */
        if (b->cmp && b->cmp_size < NETNS_STATE_MAX / 4)
                raw.max = 4 * b->cmp_size + 65536;
        if ((r = add_dir(b, &raw, dir_fd, "", 0)) < 0)
                return r;
        sys_fd = open("/proc/sys/net", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sys_fd < 0)
                return -errno;
        if ((r = buf_add(b, "sysctl\n", 7)) < 0)
                return r;
        for (size_t i = 0; i < ELEMENTSOF(sysctls); i++)
                if ((r = add_file(b, &raw, sys_fd, sysctls[i], sysctls[i])) < 0)
                        return r;
        if ((r = count_tcp_metrics(tcp_metrics_family, &metrics)) < 0)
                return r;
        if ((r = buf_addf(b, "tcp_metrics %lu\n", metrics)) < 0)
                return r;
        return buf_check(b);
}

/* What the namespace we are in shows, shared with the last namespace made when it is the same. */
static int netns_pristine(NetnsPool *p, NetnsState **ret) {
        _cleanup_(buf_done) Buf b = {};
        NetnsState *s;
        int r = netns_state_take(&b, p->tcp_metrics_family);

        if (r < 0)
                return r;
        p->last_usec = now_usec(CLOCK_MONOTONIC);
        if (p->last && p->last->size == b.size && memcmp(p->last->data, b.data, b.size) == 0) {
                *ret = netns_state_ref(p->last);
                return 0;
        }
        s = malloc(sizeof(NetnsState) + b.size);
        if (!s)
                return -ENOMEM;
        *s = (NetnsState) { .n_ref = 1, .size = b.size };
        memcpy(s->data, b.data, b.size);
        netns_state_unref(p->last);
        p->last = netns_state_ref(s);
        *ret = s;
        return 0;
}

/* Nothing of the last sandbox left: the namespace shows what a new one showed. */
static bool netns_clean(NetnsPool *p, int fd, const NetnsState *pristine) {
        _cleanup_(buf_done) Buf b = { .cmp = pristine->data, .cmp_size = pristine->size };
        uint64_t t0 = now_usec(CLOCK_MONOTONIC);
        bool same;
        int r;

        if (setns(fd, CLONE_NEWNET) < 0)
                return false;
        r = netns_state_take(&b, p->tcp_metrics_family);
        netns_go_home(p);
        same = r >= 0 && b.size == pristine->size && memcmp(b.data, pristine->data, b.size) == 0;
        p->checks++;
        p->check_usec += now_usec(CLOCK_MONOTONIC) - t0;
        if (r < 0 && r != -ESTALE)
                log_debug_errno(r, "cannot look into a sandbox's network namespace: %m");
        else if (!same)
                log_debug("a sandbox's network namespace is not as it was made: not used again");
        return same;
}

/* A new namespace, set up, and what it shows in *ret (NULL when that cannot be known: the
 * namespace is then used once). */
static int netns_make(NetnsPool *p, NetnsState **ret) {
        int fd, r;

        if (unshare(CLONE_NEWNET) < 0)
                return -errno;
        fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        r = fd < 0 ? -errno : netns_setup();
        /* Every new namespace shows the same (the kernel makes them alike): the last one's record
         * stands for this one, if it is recent. Recorded again at most each NETNS_RECORD_USEC, so
         * that a change of the host (a module that adds a file to /proc/net) is caught; until
         * then, a namespace that does not show what the record says is not used again. */
        if (r >= 0 && p->last && now_usec(CLOCK_MONOTONIC) - p->last_usec < NETNS_RECORD_USEC)
                *ret = netns_state_ref(p->last);
        else if (r >= 0 && netns_pristine(p, ret) < 0)
                *ret = NULL;
        netns_go_home(p);
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        if (!*ret)
                log_debug("cannot record what a new network namespace shows: it is used once");
        p->made++;
        return fd;
}

/* fd goes to a sandbox: remember what it showed new, for netns_pool_put(). */
static void netns_lend(NetnsPool *p, int fd, NetnsState *pristine) {
        struct stat st;

        if (fstat(fd, &st) < 0) {
                netns_state_unref(pristine); /* not found again: discarded */
                return;
        }
        /* A sandbox freed without netns_pool_put() drops its entry (netns_pool_drop()); should one
         * be left anyway, its inode number is free again, and a namespace that gets it replaces it. */
        for (size_t i = 0; i < p->n_lent; i++)
                if (p->lent[i].ino == (uint64_t) st.st_ino) {
                        netns_state_unref(p->lent[i].pristine);
                        p->lent[i] = (NetnsSlot) { .fd = -EBADF, .ino = (uint64_t) st.st_ino, .pristine = pristine };
                        return;
                }
        if (p->n_lent == p->n_lent_alloc) {
                size_t n = p->n_lent_alloc ? p->n_lent_alloc * 2 : 64;
                NetnsSlot *l = reallocarray(p->lent, n, sizeof(NetnsSlot));
                if (!l) {
                        netns_state_unref(pristine);
                        return;
                }
                p->lent = l;
                p->n_lent_alloc = n;
        }
        p->lent[p->n_lent++] = (NetnsSlot) { .fd = -EBADF, .ino = (uint64_t) st.st_ino, .pristine = pristine };
}

int netns_pool_get(NetnsPool *p) {
        NetnsState *pristine = NULL;
        int fd;

        if (p->host_fd < 0)
                return -EOPNOTSUPP;
        if (p->n_idle > 0) {
                NetnsSlot s = p->idle[--p->n_idle];
                p->reused++;
                netns_lend(p, s.fd, s.pristine);
                return s.fd;
        }
        fd = netns_make(p, &pristine);
        if (fd < 0 && fd != -EMFILE && fd != -ENFILE && fd != -ENOMEM) {
                /* Each sandbox makes its own namespace from now on, as without the pool. (Out of
                 * fds or memory, just this one does.) */
                log_warning_errno(fd, "cannot make a network namespace for sandboxes (%m): each makes its own");
                p->host_fd = safe_close(p->host_fd);
        }
        if (fd >= 0)
                netns_lend(p, fd, pristine);
        return fd;
}

int netns_pool_fresh(NetnsPool *p) {
        NetnsState *pristine = NULL;
        int fd;

        if (p->host_fd < 0)
                return -EOPNOTSUPP;
        /* Not lent: netns_pool_put() does not find it, and closes it. */
        fd = netns_make(p, &pristine);
        netns_state_unref(pristine);
        return fd;
}

static bool netns_slot_find(NetnsPool *p, int fd, NetnsSlot *ret) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                return false;
        for (size_t i = 0; i < p->n_lent; i++)
                if (p->lent[i].ino == (uint64_t) st.st_ino) {
                        *ret = p->lent[i];
                        p->lent[i] = p->lent[--p->n_lent];
                        return true;
                }
        return false;
}

void netns_pool_put(NetnsPool *p, int fd) {
        NetnsSlot slot = { .fd = -EBADF };

        if (fd < 0)
                return;
        if (!netns_slot_find(p, fd, &slot) || !slot.pristine || p->host_fd < 0 || p->n_idle >= p->max_idle ||
            !netns_clean(p, fd, slot.pristine)) {
                p->discarded++;
                netns_state_unref(slot.pristine);
                safe_close(fd);
                return;
        }
        slot.fd = fd;
        p->idle[p->n_idle++] = slot;
}

void netns_pool_drop(NetnsPool *p, int fd) {
        NetnsSlot slot = { .fd = -EBADF };

        if (fd < 0)
                return;
        if (netns_slot_find(p, fd, &slot))
                netns_state_unref(slot.pristine);
        safe_close(fd);
}

void netns_pool_done(NetnsPool *p) {
        for (size_t i = 0; i < p->n_idle; i++) {
                safe_close(p->idle[i].fd);
                netns_state_unref(p->idle[i].pristine);
        }
        for (size_t i = 0; i < p->n_lent; i++)
                netns_state_unref(p->lent[i].pristine);
        free(p->idle);
        free(p->lent);
        netns_state_unref(p->last);
        safe_close(p->host_fd);
        *p = (NetnsPool) { .host_fd = -EBADF };
}
