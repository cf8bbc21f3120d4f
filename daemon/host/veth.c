/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The veth pair of a sandbox with egress (veth.h). */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "log.h"
#include "macro.h"
#include "netlink-msg.h"
#include "veth.h"

static void nl_init(NlMsg *m, uint16_t type, uint16_t flags) {
        nlm_init_header(m, type, (uint16_t) (NLM_F_ACK | flags), 1);
}

/* Sends m on fd and reads its ack: the kernel's errno, or 0. */
static int nl_call(int fd, NlMsg *m) {
        return nlm_send_ack(fd, m, m->nh.nlmsg_len, m->nh.nlmsg_seq);
}

static int nl_socket(void) {
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        return fd < 0 ? -errno : fd;
}

static int link_add_veth(int fd, const VethSpec *spec) {
        NlMsg m;
        struct nlattr *info, *data, *peer;
        struct ifinfomsg *ifi, *peer_ifi;
        int r;

        nl_init(&m, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
        if (!(ifi = nlm_reserve(&m, sizeof(*ifi))))
                return -ENOBUFS;
        ifi->ifi_family = AF_UNSPEC;
        if ((r = nlm_put_str(&m, IFLA_IFNAME, spec->host_name)) < 0 || !(info = nlm_nest(&m, IFLA_LINKINFO)) ||
            (r = nlm_put_str(&m, IFLA_INFO_KIND, "veth")) < 0 || !(data = nlm_nest(&m, IFLA_INFO_DATA)) ||
            !(peer = nlm_nest(&m, VETH_INFO_PEER)) || !(peer_ifi = nlm_reserve(&m, sizeof(*peer_ifi))))
                return r < 0 ? r : -ENOBUFS;
        peer_ifi->ifi_family = AF_UNSPEC;
        if ((r = nlm_put_str(&m, IFLA_IFNAME, VETH_INSIDE)) < 0 ||
            (r = nlm_put(&m, IFLA_NET_NS_FD, &(uint32_t) { (uint32_t) spec->netns_fd }, sizeof(uint32_t))) < 0)
                return r;
        nlm_nest_end(&m, peer);
        nlm_nest_end(&m, data);
        nlm_nest_end(&m, info);
        return nl_call(fd, &m);
}

static int link_del(int fd, const char *name) {
        struct ifinfomsg *ifi;
        NlMsg m;
        int r;

        nl_init(&m, RTM_DELLINK, 0);
        if (!(ifi = nlm_reserve(&m, sizeof(*ifi))))
                return -ENOBUFS;
        ifi->ifi_family = AF_UNSPEC;
        if ((r = nlm_put_str(&m, IFLA_IFNAME, name)) < 0)
                return r;
        return nl_call(fd, &m);
}

static int link_up(int fd, int ifindex) {
        struct ifinfomsg *ifi;
        NlMsg m;

        nl_init(&m, RTM_NEWLINK, 0);
        if (!(ifi = nlm_reserve(&m, sizeof(*ifi))))
                return -ENOBUFS;
        *ifi = (struct ifinfomsg) { .ifi_family = AF_UNSPEC, .ifi_index = ifindex, .ifi_flags = IFF_UP, .ifi_change = IFF_UP };
        return nl_call(fd, &m);
}

static int addr_add(int fd, int ifindex, uint32_t addr, unsigned prefix_len) {
        struct ifaddrmsg *ifa;
        NlMsg m;
        int r;

        nl_init(&m, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
        if (!(ifa = nlm_reserve(&m, sizeof(*ifa))))
                return -ENOBUFS;
        *ifa = (struct ifaddrmsg) { .ifa_family = AF_INET, .ifa_prefixlen = (unsigned char) prefix_len,
                                    .ifa_scope = RT_SCOPE_UNIVERSE, .ifa_index = (unsigned) ifindex };
        if ((r = nlm_put(&m, IFA_LOCAL, &addr, sizeof(addr))) < 0 || (r = nlm_put(&m, IFA_ADDRESS, &addr, sizeof(addr))) < 0)
                return r;
        return nl_call(fd, &m);
}

static int route_default(int fd, int ifindex, uint32_t gateway) {
        struct rtmsg *rt;
        NlMsg m;
        int r;

        nl_init(&m, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
        if (!(rt = nlm_reserve(&m, sizeof(*rt))))
                return -ENOBUFS;
        *rt = (struct rtmsg) { .rtm_family = AF_INET, .rtm_table = RT_TABLE_MAIN, .rtm_protocol = RTPROT_STATIC,
                               .rtm_scope = RT_SCOPE_UNIVERSE, .rtm_type = RTN_UNICAST };
        if ((r = nlm_put(&m, RTA_GATEWAY, &gateway, sizeof(gateway))) < 0 ||
            (r = nlm_put(&m, RTA_OIF, &(uint32_t) { (uint32_t) ifindex }, sizeof(uint32_t))) < 0)
                return r;
        return nl_call(fd, &m);
}

/* /proc/sys/net/<path> of the namespace the calling thread is in. */
static int write_net_sysctl(const char *path, const char *value) {
        char p[128];
        _cleanup_close_ int fd = -EBADF;
        size_t n = strlen(value);

        if (snprintf(p, sizeof(p), "/proc/sys/net/%s", path) >= (int) sizeof(p))
                return -ENAMETOOLONG;
        fd = open(p, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return write(fd, value, n) == (ssize_t) n ? 0 : -errno;
}

static int iface_sysctl(const char *family, const char *ifname, const char *key, const char *value) {
        char p[96];
        snprintf(p, sizeof(p), "%s/conf/%s/%s", family, ifname, key);
        return write_net_sysctl(p, value);
}

/* The sandbox's end, from inside its namespace (the calling thread is in it). IPv6 off before it
 * is up, so that it never has even a link-local address. */
static int setup_inside(const VethSpec *spec) {
        _cleanup_close_ int fd = nl_socket();
        int ifindex = (int) if_nametoindex(VETH_INSIDE), r;

        if (fd < 0)
                return fd;
        if (ifindex == 0)
                return -errno;
        if ((r = iface_sysctl("ipv6", VETH_INSIDE, "disable_ipv6", "1")) < 0 && r != -ENOENT)
                return r;
        if ((r = addr_add(fd, ifindex, spec->sandbox_addr, spec->prefix_len)) < 0 || (r = link_up(fd, ifindex)) < 0)
                return r;
        return route_default(fd, ifindex, spec->host_addr);
}

static int setup_inside_netns(const VethSpec *spec) {
        int r;

        if (setns(spec->netns_fd, CLONE_NEWNET) < 0)
                return -errno;
        r = setup_inside(spec);
        if (setns(spec->home_fd, CLONE_NEWNET) < 0) {
                log_error("cannot return to the daemon's network namespace: %m");
                abort();
        }
        return r;
}

/* The host's end: forwarding on for this interface only (what comes in on it may be routed on;
 * net.ipv4.ip_forward is left as the administrator set it). */
static int setup_host_end(int fd, const VethSpec *spec) {
        int ifindex = (int) if_nametoindex(spec->host_name), r;

        if (ifindex == 0)
                return -errno;
        if ((r = iface_sysctl("ipv6", spec->host_name, "disable_ipv6", "1")) < 0 && r != -ENOENT)
                return r;
        if ((r = iface_sysctl("ipv4", spec->host_name, "forwarding", "1")) < 0 ||
            (r = iface_sysctl("ipv4", spec->host_name, "route_localnet", "0")) < 0)
                return r;
        if ((r = addr_add(fd, ifindex, spec->host_addr, spec->prefix_len)) < 0)
                return r;
        return link_up(fd, ifindex);
}

int veth_create(const VethSpec *spec) {
        _cleanup_close_ int fd = nl_socket();
        int r;

        if (fd < 0)
                return fd;
        if (strlen(spec->host_name) >= IFNAMSIZ)
                return -ENAMETOOLONG;
        r = link_add_veth(fd, spec);
        if (r < 0)
                return r;
        r = setup_host_end(fd, spec);
        if (r >= 0)
                r = setup_inside_netns(spec);
        if (r < 0)
                (void) link_del(fd, spec->host_name);
        return r;
}

int veth_remove(const char *host_name) {
        _cleanup_close_ int fd = nl_socket();

        if (fd < 0)
                return fd;
        return link_del(fd, host_name);
}

int veth_list(VethFound **ret, size_t *ret_n) {
        struct ifaddrs *ifa = NULL;
        VethFound *v = NULL;
        size_t n = 0;

        if (getifaddrs(&ifa) < 0)
                return -errno;
        /* Every link comes as an AF_PACKET entry, and each IPv4 address as an AF_INET one. */
        for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
                size_t k;
                if (!i->ifa_name || strncmp(i->ifa_name, VETH_PREFIX, strlen(VETH_PREFIX)) != 0 ||
                    strlen(i->ifa_name) >= IFNAMSIZ)
                        continue;
                for (k = 0; k < n && strcmp(v[k].name, i->ifa_name) != 0; k++)
                        ;
                if (k == n) {
                        VethFound *nv = realloc(v, (n + 1) * sizeof(*v));
                        if (!nv) {
                                free(v);
                                freeifaddrs(ifa);
                                return -ENOMEM;
                        }
                        v = nv;
                        v[n++] = (VethFound) {};
                        snprintf(v[k].name, sizeof(v[k].name), "%s", i->ifa_name);
                }
                if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !v[k].host_addr)
                        v[k].host_addr = ntohl(((struct sockaddr_in *) i->ifa_addr)->sin_addr.s_addr);
        }
        freeifaddrs(ifa);
        *ret = v;
        *ret_n = n;
        return 0;
}

int veth_udp_socket_in(int netns_fd, int home_fd, uint32_t addr, uint16_t port, int *ret_fd) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = port, .sin_addr.s_addr = addr };
        int fd, r = 0;

        if (setns(netns_fd, CLONE_NEWNET) < 0)
                return -errno;
        fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                r = -errno;
        if (setns(home_fd, CLONE_NEWNET) < 0) {
                log_error("cannot return to the daemon's network namespace: %m");
                abort();
        }
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        *ret_fd = fd;
        return 0;
}
