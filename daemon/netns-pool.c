/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Network namespaces made by the daemon and used again (netns-pool.h). */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/ioctl.h>
#include <sys/socket.h>

#include "log.h"
#include "macro.h"
#include "netns-pool.h"
#include "util.h"

int netns_pool_init(NetnsPool *p, size_t max_idle) {
        *p = (NetnsPool) { .host_fd = -EBADF, .max_idle = max_idle };
        if (max_idle == 0)
                return 0;
        p->idle = calloc(max_idle, sizeof(int));
        if (!p->idle)
                return -ENOMEM;
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

static int netns_make(NetnsPool *p) {
        int fd, r;

        if (unshare(CLONE_NEWNET) < 0)
                return -errno;
        fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        r = fd < 0 ? -errno : netns_setup();
        netns_go_home(p);
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        p->made++;
        return fd;
}

int netns_pool_get(NetnsPool *p) {
        int fd;

        if (p->host_fd < 0)
                return -EOPNOTSUPP;
        if (p->n_idle > 0) {
                p->reused++;
                return p->idle[--p->n_idle];
        }
        fd = netns_make(p);
        if (fd < 0 && fd != -EMFILE && fd != -ENFILE && fd != -ENOMEM) {
                /* Each sandbox makes its own namespace from now on, as without the pool. (Out of
                 * fds or memory, just this one does.) */
                log_warning("cannot make a network namespace for sandboxes (%s): each makes its own", strerror(-fd));
                p->host_fd = safe_close(p->host_fd);
        }
        return fd;
}

/* A file of /proc/thread-self/net (the namespace we are in), whole: a seq_file gives a page per
 * read() at most. One that does not fit is an error (the namespace is then not kept). */
static int read_proc_net(const char *name, char *buf, size_t size) {
        char path[64];
        _cleanup_close_ int fd = -EBADF;
        ssize_t n;

        snprintf(path, sizeof(path), "/proc/thread-self/net/%s", name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = read_full(fd, buf, size - 1);
        if (n < 0)
                return (int) n;
        if ((size_t) n == size - 1)
                return -EFBIG;
        buf[n] = '\0';
        return 0;
}

/* The sockets in use in the namespace we are in, of every protocol: the third column of
 * /proc/net/protocols, counted for the namespace that reads it. */
static int count_sockets(unsigned long *ret) {
        char buf[16384], *line, *save = NULL;
        unsigned long total = 0;
        int r = read_proc_net("protocols", buf, sizeof(buf));

        if (r < 0)
                return r;
        line = strtok_r(buf, "\n", &save); /* the header */
        while ((line = strtok_r(NULL, "\n", &save))) {
                long n;
                if (sscanf(line, "%*s %*u %ld", &n) != 1 || n < 0)
                        return -EBADMSG;
                total += (unsigned long) n;
        }
        *ret = total;
        return 0;
}

/* TCP sockets in TIME_WAIT in the namespace we are in ("TCP: inuse N orphan N tw N ..."). */
static int count_time_wait(unsigned long *ret) {
        char buf[1024];
        const char *tcp;
        int r = read_proc_net("sockstat", buf, sizeof(buf));

        if (r < 0)
                return r;
        tcp = strstr(buf, "\nTCP: ");
        if (!tcp || sscanf(tcp, "\nTCP: inuse %*d orphan %*d tw %lu", ret) != 1)
                return -EBADMSG;
        return 0;
}

/* Nothing of the last sandbox left: no socket in use (bound, connected, listening, closing, or
 * in flight in a message nobody will read), none in TIME_WAIT. */
static bool netns_clean(NetnsPool *p, int fd) {
        unsigned long sockets = 1, tw = 1;
        int r;

        if (setns(fd, CLONE_NEWNET) < 0)
                return false;
        r = count_sockets(&sockets);
        if (r >= 0)
                r = count_time_wait(&tw);
        netns_go_home(p);
        if (r < 0)
                log_debug("cannot look into a sandbox's network namespace: %s", strerror(-r));
        return r >= 0 && sockets == 0 && tw == 0;
}

void netns_pool_put(NetnsPool *p, int fd) {
        if (fd < 0)
                return;
        if (p->host_fd < 0 || p->n_idle >= p->max_idle || !netns_clean(p, fd)) {
                p->discarded++;
                safe_close(fd);
                return;
        }
        p->idle[p->n_idle++] = fd;
}

void netns_pool_done(NetnsPool *p) {
        for (size_t i = 0; i < p->n_idle; i++)
                safe_close(p->idle[i]);
        free(p->idle);
        safe_close(p->host_fd);
        *p = (NetnsPool) { .host_fd = -EBADF };
}
