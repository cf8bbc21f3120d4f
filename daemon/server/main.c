/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd: argv, configuration, sockets (systemd socket activation, or --listen), run. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "conf.h"
#include "log.h"
#include "macro.h"
#include "fdstore.h"
#include "hold.h"
#include "lifecycle.h"
#include "manager.h"
#include "util.h"

#define DEFAULT_CONFIG SYSCONFDIR "/sandboxd/sandboxd.conf"

typedef struct Args {
        const char *config;
        const char *listen;
        const char *metrics_listen[METRICS_MAX_LISTEN]; /* the option, given up to 4 times */
        unsigned n_metrics_listen;
        const char *cgroup_root;
        const char *state_dir;
        const char *root_dir;
        const char *max_line;
        const char *pool_size;
        bool stop_sandboxes;
        bool config_given;
        bool check_config;
} Args;

static void help(void) {
        printf("Usage: sandboxd [OPTIONS]\n\n"
               "The local sandbox supervisor. Normally started by systemd through sandboxd.socket.\n\n"
               "  --listen PATH        listen on this Unix socket (without socket activation)\n"
               "  --metrics-listen ADDR  serve Prometheus metrics on this Unix socket PATH, or on\n"
               "                       IP:PORT (127.0.0.1:9464, [::1]:9464) over TCP (repeatable)\n"
               "  --config FILE        configuration file (default %s)\n"
               "  --cgroup-root DIR    cgroup v2 directory to own (default: the delegated subtree)\n"
               "  --state-dir DIR      where workspaces and metadata live\n"
               "  --root-dir DIR       where a sandbox's /usr, /etc and root_binds come from (default /)\n"
               "  --max-line-bytes N   longest request line accepted (default 4M)\n"
               "  --check-config       read and check the configuration, then exit\n"
               "  --pool-size N        ready sandboxes kept for throwaway runs (default 2)\n"
               "  --stop-sandboxes     a stop kills every sandbox's processes (stop_sandboxes = 1)\n"
               "  --hold PATH USEC     (internal) hold a stopping daemon's fds on fd 3 for the next one\n"
               "  -d, --debug          log debug messages\n"
               "  -h, --help           this help\n"
               "      --version        print the version\n",
               DEFAULT_CONFIG);
}

static int parse_args(int argc, char **argv, Args *a) {
        enum { ARG_LISTEN = 256, ARG_METRICS_LISTEN, ARG_CONFIG, ARG_CGROUP, ARG_STATE, ARG_ROOT, ARG_MAXLINE, ARG_POOL, ARG_STOP_SANDBOXES, ARG_VERSION, ARG_CHECK_CONFIG };
        static const struct option opts[] = {
                { "listen", required_argument, NULL, ARG_LISTEN },
                { "metrics-listen", required_argument, NULL, ARG_METRICS_LISTEN },
                { "config", required_argument, NULL, ARG_CONFIG },
                { "cgroup-root", required_argument, NULL, ARG_CGROUP },
                { "state-dir", required_argument, NULL, ARG_STATE },
                { "root-dir", required_argument, NULL, ARG_ROOT },
                { "max-line-bytes", required_argument, NULL, ARG_MAXLINE },
                { "check-config", no_argument, NULL, ARG_CHECK_CONFIG },
                { "pool-size", required_argument, NULL, ARG_POOL },
                { "stop-sandboxes", no_argument, NULL, ARG_STOP_SANDBOXES },
                { "debug", no_argument, NULL, 'd' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                {},
        };
        int c;

        *a = (Args) { .config = DEFAULT_CONFIG };
        while ((c = getopt_long(argc, argv, "dh", opts, NULL)) >= 0)
                switch (c) {
                case ARG_LISTEN: a->listen = optarg; break;
                case ARG_METRICS_LISTEN:
                        if (a->n_metrics_listen >= METRICS_MAX_LISTEN) {
                                fprintf(stderr, "sandboxd: --metrics-listen given more than %d times\n", METRICS_MAX_LISTEN);
                                return -EINVAL;
                        }
                        a->metrics_listen[a->n_metrics_listen++] = optarg;
                        break;
                case ARG_CONFIG: a->config = optarg; a->config_given = true; break;
                case ARG_CGROUP: a->cgroup_root = optarg; break;
                case ARG_STATE: a->state_dir = optarg; break;
                case ARG_ROOT: a->root_dir = optarg; break;
                case ARG_MAXLINE: a->max_line = optarg; break;
                case ARG_CHECK_CONFIG: a->check_config = true; break;
                case ARG_POOL: a->pool_size = optarg; break;
                case ARG_STOP_SANDBOXES: a->stop_sandboxes = true; break;
                case 'd': log_max_level = LOG_DEBUG; break;
                case 'h': help(); exit(EXIT_SUCCESS);
                case ARG_VERSION: puts(PACKAGE_VERSION); exit(EXIT_SUCCESS);
                default: return -EINVAL;
                }
        if (optind < argc) {
                fprintf(stderr, "sandboxd: unexpected argument '%s'\n", argv[optind]);
                return -EINVAL;
        }
        return 0;
}

static int replace_str(char **dst, const char *src) {
        char *n = strdup(src);
        if (!n)
                return -ENOMEM;
        free(*dst);
        *dst = n;
        return 0;
}

static int load_config_args(const Args *a, Config *c) {
        if ((a->cgroup_root && replace_str(&c->cgroup_root, a->cgroup_root) < 0) ||
            (a->state_dir && replace_str(&c->state_dir, a->state_dir) < 0) ||
            (a->root_dir && replace_str(&c->root_dir, a->root_dir) < 0))
                return -ENOMEM;
        if (a->pool_size) {
                char *end;
                errno = 0;
                c->pool_size = strtoull(a->pool_size, &end, 10);
                if (errno || *end || a->pool_size[0] < '0' || a->pool_size[0] > '9' || c->pool_size > 256) {
                        log_error("--pool-size: '%s' is not a number from 0 to 256", a->pool_size);
                        return -EINVAL;
                }
        }
        if (a->stop_sandboxes)
                c->stop_sandboxes = 1;
        if (a->max_line && parse_size(a->max_line, &c->max_line_bytes) < 0) {
                log_error("--max-line-bytes: cannot parse '%s'", a->max_line);
                return -EINVAL;
        }
        return 0;
}

/* The file, then the command line over it. On failure nothing is left to free. */
static int load_config(const Args *a, Config *c) {
        _cleanup_free_ char *error = NULL;
        int r;

        config_init_defaults(c);
        r = config_load(c, a->config, a->config_given, &error);
        if (r < 0)
                /* The message names the file, the line and the key: "sandboxd: FILE:12: unknown key ..." */
                log_error("%s", error ? error : strerror(-r));
        else
                r = load_config_args(a, c);
        if (r >= 0) {
                /* What every sandbox's root is made of: refused now rather than at every create. */
                r = config_check_root(c, &error);
                if (r < 0)
                        log_error("%s", error ? error : strerror(-r));
        }
        if (r < 0)
                config_done(c);
        return r;
}

/* What sandboxd.socket gives its socket: SocketMode=0660, SocketGroup=sandboxd. */
#define SOCKET_MODE 0660

/* The group's members use a daemon started by hand as they use the packaged one. Where that
 * cannot be, the log says why, and who may use the socket instead. */
static void socket_give_group(const char *path, const char *group, const char *key) {
        struct group *gr;

        errno = 0;
        gr = group ? getgrnam(group) : NULL;
        if (!gr) {
                log_notice("%s: group '%s' %s, so the socket keeps the daemon's group (gid %u, mode 0%o): only "
                           "root and that group may use it (create the group, e.g. with systemd-sysusers, and "
                           "restart, or set %s)",
                           path, group ?: "", errno ? "cannot be looked up" : "does not exist", (unsigned) getegid(),
                           SOCKET_MODE, key);
                return;
        }
        if (fchownat(AT_FDCWD, path, (uid_t) -1, gr->gr_gid, AT_SYMLINK_NOFOLLOW) < 0)
                log_warning("%s: cannot give the socket to group '%s' (gid %u): %m; only the daemon's user and "
                            "group may use it",
                            path, group, (unsigned) gr->gr_gid);
}

static int listen_on(const char *path, const char *group, const char *key) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        mode_t old_mask;
        int fd, r = 0;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        /* A socket someone answers on is theirs (another sandboxd's, most likely): replacing it
         * would cut every client off that daemon, which runs on unreachable. Only a stale one
         * (nothing listening: ECONNREFUSED) is replaced. */
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0) {
                close(fd);
                return -EADDRINUSE;
        }
        close(fd);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        (void) unlink(path);
        /* bind() makes the inode under the umask: never wider than SOCKET_MODE, not for a moment. */
        old_mask = umask(0777 & ~SOCKET_MODE);
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                r = -errno;
        umask(old_mask);
        if (r == 0 && listen(fd, SOMAXCONN) < 0)
                r = -errno;
        if (r < 0) {
                close(fd);
                return r;
        }
        socket_give_group(path, group, key);
        return fd;
}

/* "127.0.0.1:9464" or "[::1]:9464": a numeric address, never a name to look up. */
static int parse_inet(const char *addr, struct sockaddr_storage *ret, socklen_t *ret_len) {
        _cleanup_free_ char *host = NULL;
        const char *colon = strrchr(addr, ':');
        struct sockaddr_in *in4 = (struct sockaddr_in *) ret;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) ret;
        unsigned long port;
        char *end;

        if (!colon || colon == addr || !colon[1])
                return -EINVAL;
        errno = 0;
        port = strtoul(colon + 1, &end, 10);
        if (errno || *end || port == 0 || port > 65535 || colon[1] < '0' || colon[1] > '9')
                return -EINVAL;
        *ret = (struct sockaddr_storage) {};
        if (addr[0] == '[') {
                if (colon[-1] != ']' || !(host = strndup(addr + 1, (size_t) (colon - addr - 2))))
                        return host ? -EINVAL : -ENOMEM;
                if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
                        return -EINVAL;
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons((uint16_t) port);
                *ret_len = sizeof(*in6);
                return 0;
        }
        if (!(host = strndup(addr, (size_t) (colon - addr))))
                return -ENOMEM;
        if (inet_pton(AF_INET, host, &in4->sin_addr) != 1)
                return -EINVAL;
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t) port);
        *ret_len = sizeof(*in4);
        return 0;
}

static int listen_inet(const char *addr) {
        struct sockaddr_storage sa;
        socklen_t len;
        int fd, one = 1, r = parse_inet(addr, &sa, &len);

        if (r < 0)
                return r;
        fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *) &sa, len) < 0 || listen(fd, SOMAXCONN) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

/* A path is a Unix socket given to metrics_group; anything else an IP:PORT. */
static int metrics_listen_on(const char *addr, const Config *c) {
        int fd = addr[0] == '/' ? listen_on(addr, c->metrics_group, "metrics_group") : listen_inet(addr);
        if (fd == -EINVAL)
                log_error("--metrics-listen: '%s' is neither an absolute path nor IP:PORT (127.0.0.1:9464, [::1]:9464)", addr);
        else if (fd == -EADDRINUSE && addr[0] == '/')
                log_error_errno(fd, "cannot listen on %s for metrics: something already listens there (another "
                                    "sandboxd?); its socket is left as it is", addr);
        else if (fd < 0)
                log_error_errno(fd, "cannot listen on %s for metrics: %m", addr);
        return fd;
}

/* Activation sockets named "metrics" (FileDescriptorName= of sandboxd-metrics.socket) serve the
 * metrics endpoint; every other one is a control socket. Returns how many sockets there were. */
static int add_activated(Daemon *d, int n, char **names) {
        int sockets = 0;

        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                /* What an earlier daemon put in systemd's fd store comes back here too, by its
                 * name: the sandboxes claim it as they are restored (lifecycle.c). */
                if (names && fdstore_name_is_ours(names[i])) {
                        if (fdstore_add(&d->ctx.fdstore, names[i], fd) < 0)
                                return log_error_errno(-ENOMEM, "cannot keep the stored fd %s: %m", names[i]);
                        continue;
                }
                bool metrics = names && names[i] && strcmp(names[i], "metrics") == 0;
                int r = metrics ? metrics_server_add_listener(d->metrics, fd) : manager_add_listener(d->manager, fd);
                if (r < 0)
                        return log_error_errno(r, "cannot use socket fd %d (%s): %m", fd, names && names[i] ? names[i] : "unnamed");
                sockets++;
        }
        return sockets;
}

static int add_listeners(Daemon *d, const Args *a) {
        Manager *m = d->manager;
        char **names = NULL;
        int n = sd_listen_fds_with_names(1, &names), r;

        if (n < 0)
                return log_error_errno(n, "sd_listen_fds: %m");

        r = add_activated(d, n, names);
        /* Sockets, not only stored fds: an idle exit needs someone to start us again. */
        m->socket_activated = r > 0;
        for (int i = 0; names && i < n; i++)
                free(names[i]);
        free(names);
        if (r < 0)
                return r;
        for (unsigned i = 0; i < a->n_metrics_listen; i++) {
                int fd = metrics_listen_on(a->metrics_listen[i], &m->ctx->config);
                if (fd < 0)
                        return fd;
                if ((r = metrics_server_add_listener(d->metrics, fd)) < 0) {
                        close(fd);
                        return log_error_errno(r, "cannot serve metrics on %s: %m", a->metrics_listen[i]);
                }
        }
        if (a->listen) {
                int fd = listen_on(a->listen, m->ctx->config.socket_group, "socket_group");
                if (fd == -EADDRINUSE)
                        return log_error_errno(fd, "cannot listen on %s: something already listens there (another "
                                                   "sandboxd? 'sandboxctl status' asks it); its socket is left as it is",
                                               a->listen);
                if (fd < 0)
                        return log_error_errno(fd, "cannot listen on %s: %m", a->listen);
                if ((r = manager_add_listener(m, fd)) < 0)
                        return r;
        }
        if (m->n_listen == 0 && !a->listen) {
                log_error("no socket: start through sandboxd.socket, or pass --listen PATH");
                return -EINVAL;
        }
        return 0;
}

/* A thousand clients and a thousand sandboxes hold a few thousand fds: take the hard limit. What
 * we spawn gets its sandbox's limits.open_files (soft = hard, 4096 by default, as the runner's),
 * which cannot exceed that hard limit (nofile_hard): a command cannot raise it in its userns. */
static void raise_nofile(Config *c) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return;
        c->nofile_soft = rl.rlim_cur;
        c->nofile_hard = rl.rlim_max;
        if (c->default_open_files > c->nofile_hard) {
                log_warning("default_open_files (%llu) exceeds RLIMIT_NOFILE's hard limit; using %llu",
                            (unsigned long long) c->default_open_files, (unsigned long long) c->nofile_hard);
                c->default_open_files = c->nofile_hard;
        }
        if (rl.rlim_cur == rl.rlim_max)
                return;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                log_warning("cannot raise RLIMIT_NOFILE to %llu: %m", (unsigned long long) rl.rlim_max);
}

/* Whatever we inherited besides stdio and the activation sockets would reach every child. */
static void close_inherited_fds(void) {
        int n = sd_listen_fds(0);
        (void) syscall(SYS_close_range, (unsigned) (SD_LISTEN_FDS_START + (n > 0 ? n : 0)), ~0U, 0U);
}

int main(int argc, char **argv) {
        Daemon *d = NULL;
        Config config;
        Args args;
        int r;

        log_open();
        /* The holder of a stop's fds (hold.h), spawned by a stopping daemon: nothing else. */
        if (argc > 1 && strcmp(argv[1], "--hold") == 0)
                return hold_main(argc, argv);
        if (parse_args(argc, argv, &args) < 0)
                return 2;
        if (args.check_config) {
                r = load_config(&args, &config);
                if (r >= 0) {
                        config_done(&config);
                        log_info("%s: configuration is valid", args.config);
                }
                return r < 0 ? 1 : 0;
        }
        close_inherited_fds();
        if (geteuid() != 0) {
                log_error("must run as root: it creates user namespaces with uid ranges and owns cgroups");
                return 1;
        }
        /* Nothing we spawn may inherit root's supplementary groups. */
        if (setgroups(0, NULL) < 0)
                log_warning("setgroups: %m");
        umask(0022);
        if (load_config(&args, &config) < 0)
                return 1;
        raise_nofile(&config);
        r = lifecycle_new(&d, &config);
        if (r < 0) {
                config_done(&config);
                return log_error_errno(r, "cannot start: %m"), 1;
        }
        r = add_listeners(d, &args);
        if (r >= 0 && (r = lifecycle_setup(d)) < 0 && args.listen)
                (void) unlink(args.listen); /* ours (add_listeners made it), and nobody will answer there */
        if (r >= 0)
                r = lifecycle_run(d);
        lifecycle_free(d);
        if (r < 0) {
                (void) sd_notifyf(0, "STATUS=Failed: %s\nERRNO=%d", strerror(-r), -r);
                return 1;
        }
        return 0;
}
