/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "conf.h"
#include "macro.h"
#include "spawn.h"
#include "util.h"

static void strv_free(char **v) {
        for (char **p = v; p && *p; p++)
                free(*p);
        free(v);
}

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MIN3(a, b, c) MIN(MIN(a, b), c)
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define MAX3(a, b, c) MAX(MAX(a, b), c)

typedef enum { KEY_PATH, KEY_PATHS, KEY_DIRS, KEY_NAME, KEY_SIZE, KEY_COUNT, KEY_DURATION, KEY_CPUS, KEY_PREFIX, KEY_PREFIXES, KEY_ADDR, KEY_STORAGE, KEY_POOL_IMAGES } KeyType;

typedef struct ConfigKey {
        const char *name;
        KeyType type;
        size_t offset;
        uint64_t min; /* for numbers: smaller values are refused */
} ConfigKey;

#define KEY(n, t, f, ...) { n, t, offsetof(Config, f), __VA_ARGS__ }
static const ConfigKey config_keys[] = {
        KEY("state_dir", KEY_PATH, state_dir),
        KEY("storage", KEY_STORAGE, storage_image_size),
        KEY("cgroup_root", KEY_PATH, cgroup_root),
        KEY("root_dir", KEY_PATH, root_dir),
        KEY("root_binds", KEY_PATHS, root_binds),
        KEY("mount_roots", KEY_DIRS, mount_roots),
        KEY("max_line_bytes", KEY_SIZE, max_line_bytes, 1024),
        KEY("max_connections", KEY_COUNT, max_connections, 1),
        KEY("max_connections_per_uid", KEY_COUNT, max_connections_per_uid, 1),
        KEY("max_buffered_per_uid", KEY_SIZE, max_buffered_per_uid, 1048576),
        KEY("max_connection_output", KEY_SIZE, max_connection_output, 65536),
        KEY("request_timeout", KEY_DURATION, request_timeout_usec, 1000),
        KEY("max_sandboxes", KEY_COUNT, max_sandboxes, 1),
        KEY("max_runs_per_connection", KEY_COUNT, max_runs_per_connection, 1),
        KEY("admin_group", KEY_NAME, admin_group),
        KEY("socket_group", KEY_NAME, socket_group),
        KEY("max_sandboxes_per_uid", KEY_COUNT, max_sandboxes_per_uid, 1),
        KEY("max_runs_per_uid", KEY_COUNT, max_runs_per_uid, 1),
        KEY("max_file_transfers_per_uid", KEY_COUNT, max_file_transfers_per_uid, 1),
        KEY("uid_base", KEY_COUNT, uid_base, 1),
        KEY("uid_range", KEY_COUNT, uid_range, 65536),
        KEY("default_memory", KEY_SIZE, default_memory, 1048576),
        KEY("max_memory", KEY_SIZE, max_memory, 1048576),
        KEY("default_pids", KEY_COUNT, default_pids, 1),
        KEY("max_pids", KEY_COUNT, max_pids, 1),
        KEY("default_cpus", KEY_CPUS, default_millicpus, 1),
        KEY("max_cpus", KEY_CPUS, max_millicpus, 1),
        KEY("default_timeout", KEY_DURATION, default_timeout_usec, 1000),
        KEY("max_timeout", KEY_DURATION, max_timeout_usec, 1000),
        KEY("default_output_bytes", KEY_SIZE, default_output_bytes),
        KEY("max_output_bytes", KEY_SIZE, max_output_bytes),
        KEY("default_file_size", KEY_SIZE, default_file_size),
        KEY("max_file_size", KEY_SIZE, max_file_size),
        KEY("default_open_files", KEY_COUNT, default_open_files, 16),
        KEY("max_open_files", KEY_COUNT, max_open_files, 16),
        KEY("swap_max", KEY_SIZE, swap_max),
        KEY("max_stdin_bytes", KEY_SIZE, max_stdin_bytes),
        KEY("sweep_interval", KEY_DURATION, sweep_interval_usec),
        KEY("sweep_timeout", KEY_DURATION, sweep_timeout_usec, 1000000),
        KEY("disk_budget", KEY_SIZE, disk_budget),
        KEY("default_disk", KEY_SIZE, default_disk),
        KEY("max_disk", KEY_SIZE, max_disk),
        KEY("default_ttl", KEY_DURATION, default_ttl_usec),
        KEY("default_idle", KEY_DURATION, default_idle_usec),
        KEY("min_free_disk", KEY_SIZE, min_free_disk),
        KEY("files_budget", KEY_COUNT, files_budget),
        KEY("default_files", KEY_COUNT, default_files),
        KEY("max_files", KEY_COUNT, max_files),
        KEY("min_free_files", KEY_COUNT, min_free_files),
        KEY("idle_exit_s", KEY_DURATION, idle_exit_usec),
        KEY("run_result_keep", KEY_DURATION, run_result_keep_usec),
        KEY("session_ring_bytes", KEY_SIZE, session_ring_bytes, 4096),
        KEY("session_idle_timeout", KEY_DURATION, session_idle_timeout_usec),
        KEY("max_sessions_per_uid", KEY_COUNT, max_sessions_per_uid),
        KEY("pool_size", KEY_COUNT, pool_size),
        KEY("pool_create", KEY_COUNT, pool_create),
        KEY("pool_images", KEY_POOL_IMAGES, n_pool_images),
        KEY("stop_sandboxes", KEY_COUNT, stop_sandboxes),
        KEY("hold_timeout", KEY_DURATION, hold_timeout_usec),
        KEY("teardown_timeout", KEY_DURATION, teardown_timeout_usec, 1000000),
        KEY("max_ports_per_sandbox", KEY_COUNT, max_ports_per_sandbox),
        KEY("max_ports_per_uid", KEY_COUNT, max_ports_per_uid),
        KEY("max_port_connections_per_sandbox", KEY_COUNT, max_port_connections_per_sandbox),
        KEY("max_port_connections_per_uid", KEY_COUNT, max_port_connections_per_uid),
        KEY("max_port_connections", KEY_COUNT, max_port_connections),
        KEY("egress_range", KEY_PREFIX, egress_range),
        KEY("egress_deny", KEY_PREFIXES, egress_deny),
        KEY("egress_dns", KEY_ADDR, egress_dns),
        KEY("egress_connections", KEY_COUNT, egress_connections, 1),
        KEY("egress_connection_rate", KEY_COUNT, egress_connection_rate, 1),
        KEY("egress_dns_queries", KEY_COUNT, egress_dns_queries, 4),
        KEY("metrics_group", KEY_NAME, metrics_group),
        KEY("metrics_max_sandboxes", KEY_COUNT, metrics_max_sandboxes),
        KEY("image_max_size", KEY_SIZE, image_max_size, 1048576),
        KEY("image_max_files", KEY_COUNT, image_max_files, 16),
        KEY("image_devices", KEY_COUNT, image_devices),
};

/* systemd's StateDirectory= tells us where our state lives ($STATE_DIRECTORY, ':'-separated). */
static char *default_state_dir(void) {
        const char *e = getenv("STATE_DIRECTORY");
        if (e && e[0] == '/')
                return strndup(e, strcspn(e, ":"));
        return strdup(LOCALSTATEDIR "/lib/sandboxd");
}

void config_init_defaults(Config *c) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

        *c = (Config) {
                .state_dir = default_state_dir(),
                .root_dir = strdup("/"),
                .socket_group = strdup("sandboxd"),
                .max_line_bytes = 4u << 20,
                .max_connections = 4096,
                .max_connections_per_uid = 1024,
                .max_buffered_per_uid = UINT64_C(2) << 30,
                .run_result_keep_usec = 600 * USEC_PER_SEC,
                .hold_timeout_usec = 3600 * USEC_PER_SEC,
                .max_connection_output = 256u << 20,
                .request_timeout_usec = 30 * USEC_PER_SEC,
                .max_sandboxes = 2048,
                .max_runs_per_connection = 256,
                .max_sandboxes_per_uid = 256,
                .max_runs_per_uid = 512,
                .max_file_transfers_per_uid = 32,
                .uid_base = 0x70000000u,
                .uid_range = 65536,
                .default_memory = 512u << 20,
                .max_memory = UINT64_C(16) << 30,
                .default_pids = 512,
                .max_pids = 32768,
                .default_millicpus = 1000,
                .max_millicpus = (uint64_t) (ncpu > 0 ? ncpu : 1) * 1000,
                .default_timeout_usec = 60 * USEC_PER_SEC,
                .max_timeout_usec = 24 * 3600 * USEC_PER_SEC,
                .default_output_bytes = 1u << 20,
                .max_output_bytes = 64u << 20,
                .default_open_files = 4096,
                .max_open_files = 65536,
                .swap_max = 0,
                .max_stdin_bytes = 3u << 20,
                .sweep_interval_usec = 5 * 60 * USEC_PER_SEC,
                .sweep_timeout_usec = 10 * 60 * USEC_PER_SEC,
                .min_free_disk = 128u << 20,
                .min_free_files = 32768,
                .session_ring_bytes = 1u << 20,
                .session_idle_timeout_usec = 30 * 60 * USEC_PER_SEC,
                .max_sessions_per_uid = 64,
                .pool_size = 2,
                .teardown_timeout_usec = 10 * USEC_PER_SEC,
                .max_ports_per_sandbox = 16,
                .max_ports_per_uid = 64,
                .max_port_connections_per_sandbox = 256,
                .max_port_connections_per_uid = 512,
                .max_port_connections = 2048,
                .egress_connections = 2048,
                .egress_connection_rate = 256,
                .egress_dns_queries = 1024,
                .metrics_group = strdup("sandboxd-metrics"),
                .egress_range = strdup("10.200.0.0/16"),
                .egress_deny = strdup("0.0.0.0/8 10.0.0.0/8 100.64.0.0/10 127.0.0.0/8 169.254.0.0/16 172.16.0.0/12 "
                                      "192.0.0.0/24 192.168.0.0/16 198.18.0.0/15 224.0.0.0/3"),
                .metrics_max_sandboxes = 100,
                .image_max_size = UINT64_C(16) << 30,
                .image_max_files = 1000000,
        };
}

void config_done(Config *c) {
        free(c->state_dir);
        free(c->cgroup_root);
        free(c->root_dir);
        strv_free(c->root_binds);
        strv_free(c->mount_roots);
        free(c->admin_group);
        free(c->socket_group);
        free(c->metrics_group);
        free(c->egress_range);
        free(c->egress_deny);
        free(c->egress_dns);
        for (unsigned i = 0; i < c->n_pool_images; i++)
                free(c->pool_image_name[i]);
        *c = (Config) {};
}

static char *strip(char *s) {
        char *e;
        while (isspace((unsigned char) *s))
                s++;
        e = s + strlen(s);
        while (e > s && isspace((unsigned char) e[-1]))
                *--e = '\0';
        return s;
}

/* Where each key was set, so that errors found after the whole file is read still name a line. */
typedef struct ConfigParse {
        const char *path;
        unsigned line[ELEMENTSOF(config_keys)]; /* 0: not in the file, the default holds */
        char **ret_error;
} ConfigParse;

_printf_(2, 3) static int config_error(ConfigParse *p, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(p->ret_error, fmt, ap);
        va_end(ap);
        if (r < 0)
                *p->ret_error = NULL;
        return r < 0 ? -ENOMEM : -EINVAL;
}

static int parse_value(const ConfigKey *k, const char *value, uint64_t *ret) {
        char *end;

        switch (k->type) {
        case KEY_SIZE:
                return parse_size(value, ret);
        case KEY_DURATION:
                return parse_duration(value, ret);
        case KEY_CPUS:
                return parse_cpus(value, ret);
        case KEY_STORAGE:
                /* "state": the state directory's own filesystem; "image:SIZE": an image file. */
                if (strcmp(value, "state") == 0) {
                        *ret = 0;
                        return 0;
                }
                /* "image:SIZE:btrfs" and "image:SIZE:xfs": set_key() has taken the suffix off. */
                if (strncmp(value, "image:", 6) != 0 || parse_size(value + 6, ret) < 0 || *ret < (UINT64_C(300) << 20))
                        return -EINVAL;
                return 0;
        case KEY_COUNT:
                errno = 0;
                *ret = strtoull(value, &end, 0);
                if (!errno && *ret > (uint64_t) INT64_MAX)
                        errno = ERANGE; /* it goes out as a JSON int64 */
                return errno || *end || !isdigit((unsigned char) value[0]) ? -EINVAL : 0;
        default:
                return -EINVAL;
        }
}

static const char *const type_hints[] = {
        [KEY_PATH] = "an absolute path",
        [KEY_PATHS] = "absolute paths of directories, separated by spaces",
        [KEY_DIRS] = "absolute paths of directories, separated by spaces",
        [KEY_NAME] = "a name",
        [KEY_SIZE] = "a size such as 4096, 64K, 256M, 1.5G",
        [KEY_COUNT] = "a whole number",
        [KEY_DURATION] = "a duration such as 30s, 500ms, 2m, 1h",
        [KEY_CPUS] = "a number of CPUs such as 0.5, 1, 2",
        [KEY_PREFIX] = "a private IPv4 prefix of /8 to /24 such as 10.200.0.0/16",
        [KEY_PREFIXES] = "IPv4 prefixes such as 10.0.0.0/8 169.254.0.0/16, separated by spaces, or none",
        [KEY_ADDR] = "an IPv4 address such as 192.0.2.53",
        [KEY_STORAGE] = "\"state\" or \"image:SIZE[:xfs|:btrfs]\" with SIZE at least 300M, such as image:200G",
        [KEY_POOL_IMAGES] = "image names, each with :N (at most 256) or not (2), separated by spaces, such as python:8 node",
};

/* Where the sandbox's own filesystems are, or what it has already: no root_bind there. */
static const char *const binds_refused_below[] = { "/proc", "/dev", "/tmp", "/run", "/work", "/sys", "/var/tmp", "/var/run", NULL };
static const char *const binds_refused[] = { "/", "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/var", NULL };

static int bind_valid(const char *p) {
        if (!path_is_normal(p, 1024))
                return -EINVAL;
        for (const char *const *r = binds_refused; *r; r++)
                if (strcmp(p, *r) == 0)
                        return -EEXIST;
        for (const char *const *r = binds_refused_below; *r; r++)
                if (path_is_below(p, *r))
                        return -EEXIST;
        return 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* "a b c": each checked, sorted so that a directory comes before what is bound below it, no
 * duplicates. Errors: -EINVAL (not a normal absolute path), -EEXIST (the sandbox's own or bound
 * already), -E2BIG (too many), -ENOMEM. */
static int parse_paths(const char *value, bool binds, char ***ret) {
        char **v = calloc(ROOT_BINDS_MAX + 1, sizeof(char *));
        size_t n = 0;
        int r = 0;

        if (!v)
                return -ENOMEM;
        for (const char *s = value + strspn(value, " \t"); *s && r == 0; s += strspn(s, " \t")) {
                size_t len = strcspn(s, " \t");
                if (n == ROOT_BINDS_MAX)
                        r = -E2BIG;
                else if (!(v[n] = strndup(s, len)))
                        r = -ENOMEM;
                else
                        r = binds ? bind_valid(v[n++]) : path_is_normal(v[n++], 1024) ? 0 : -EINVAL;
                s += len;
        }
        if (r == 0 && n > 0) {
                qsort(v, n, sizeof(char *), cmp_str);
                for (size_t i = 1; i < n; i++)
                        if (strcmp(v[i - 1], v[i]) == 0)
                                r = -EEXIST;
        }
        if (r < 0 || n == 0) {
                strv_free(v);
                v = NULL;
        }
        *ret = v;
        return r;
}

/* Within 10/8, 172.16/12, 192.168/16 or the shared 100.64/10: never an address of the world. */
static bool ipv4_private(uint32_t addr, unsigned len) {
        static const struct {
                uint32_t addr;
                unsigned len;
        } ranges[] = { { 0x0a000000, 8 }, { 0xac100000, 12 }, { 0xc0a80000, 16 }, { 0x64400000, 10 } };

        for (size_t i = 0; i < ELEMENTSOF(ranges); i++)
                if (len >= ranges[i].len && ((addr ^ ranges[i].addr) & ipv4_mask(ranges[i].len)) == 0)
                        return true;
        return false;
}

/* egress_range: one prefix of /8 to /24 (a /30 per sandbox); egress_deny: prefixes or "none";
 * egress_dns: one address. */
static int prefixes_valid(KeyType type, const char *value) {
        unsigned n = 0;

        if (type == KEY_PREFIXES && strcmp(value, "none") == 0)
                return 0;
        for (const char *s = value + strspn(value, " \t"); *s; s += strspn(s, " \t")) {
                size_t len = strcspn(s, " \t");
                uint32_t addr;
                unsigned plen;
                if (ipv4_prefix_parse(s, len, &addr, &plen) < 0 || (type == KEY_ADDR && (plen != 32 || memchr(s, '/', len))) ||
                    (type == KEY_PREFIX && (plen < 8 || plen > 24 || !ipv4_private(addr, plen))) || ++n > 64)
                        return -EINVAL;
                s += len;
        }
        return n == 0 || (type != KEY_PREFIXES && n != 1) ? -EINVAL : 0;
}

/* An image's name as the store takes it (image_name_valid(), image.h). */
static bool pool_image_name_valid(const char *n, size_t len) {
        if (len == 0 || len > 64 || n[0] == '.' || n[0] == '-')
                return false;
        for (size_t i = 0; i < len; i++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", n[i]))
                        return false;
        return true;
}

/* "python:8 node": NAME[:N], N from 1 to CONFIG_POOL_MAX (2 if left out), no name twice. */
static int parse_pool_images(Config *c, const char *value) {
        char *name[CONFIG_POOL_IMAGES_MAX] = {};
        uint64_t count[CONFIG_POOL_IMAGES_MAX];
        unsigned n = 0;
        int r = 0;

        for (const char *s = value + strspn(value, " \t"); *s && r == 0; s += strspn(s, " \t")) {
                size_t len = strcspn(s, " \t"), nlen = strcspn(s, ":");
                char *end;

                nlen = nlen < len ? nlen : len;
                count[n] = 2;
                if (n == CONFIG_POOL_IMAGES_MAX || !pool_image_name_valid(s, nlen))
                        r = -EINVAL;
                else if (nlen < len) {
                        errno = 0;
                        count[n] = strtoull(s + nlen + 1, &end, 10);
                        if (errno || end != s + len || !isdigit((unsigned char) s[nlen + 1]) || count[n] < 1 ||
                            count[n] > CONFIG_POOL_MAX)
                                r = -EINVAL;
                }
                if (r == 0 && !(name[n] = strndup(s, nlen)))
                        r = -ENOMEM;
                for (unsigned i = 0; r == 0 && i < n; i++)
                        if (strcmp(name[i], name[n]) == 0)
                                r = -EINVAL;
                n += r == 0;
                s += len;
        }
        if (r < 0) {
                for (unsigned i = 0; i <= n && i < CONFIG_POOL_IMAGES_MAX; i++)
                        free(name[i]);
                return r;
        }
        for (unsigned i = 0; i < c->n_pool_images; i++)
                free(c->pool_image_name[i]);
        memcpy(c->pool_image_name, name, sizeof(name));
        memcpy(c->pool_image_count, count, sizeof(count));
        c->n_pool_images = n;
        return 0;
}

static int set_key(Config *c, const ConfigKey *k, const char *value) {
        void *field = (char *) c + k->offset;
        char **paths;
        uint64_t v;
        int r;

        if (k->type == KEY_PATHS || k->type == KEY_DIRS) {
                r = parse_paths(value, k->type == KEY_PATHS, &paths);
                if (r < 0)
                        return r;
                strv_free(*(char ***) field);
                *(char ***) field = paths;
                return 0;
        }

        if (k->type == KEY_POOL_IMAGES)
                return parse_pool_images(c, value);
        if (k->type == KEY_PREFIX || k->type == KEY_PREFIXES || k->type == KEY_ADDR) {
                r = prefixes_valid(k->type, value);
                if (r < 0)
                        return r;
                free(*(char **) field);
                *(char **) field = strdup(value);
                return *(char **) field ? 0 : -ENOMEM;
        }
        if (k->type == KEY_PATH || k->type == KEY_NAME) {
                if ((k->type == KEY_PATH && value[0] != '/') || !value[0])
                        return -EINVAL;
                free(*(char **) field);
                *(char **) field = strdup(value);
                return *(char **) field ? 0 : -ENOMEM;
        }
        if (k->type == KEY_STORAGE) {
                /* An image's filesystem: xfs (project quotas, reflinks) unless ":btrfs" (qgroups,
                 * subvolume snapshots). */
                const char *colon = strncmp(value, "image:", 6) == 0 ? strchr(value + 6, ':') : NULL;
                char size[64];
                c->storage_btrfs = false;
                if (colon) {
                        if (strcmp(colon + 1, "btrfs") != 0 && strcmp(colon + 1, "xfs") != 0)
                                return -EINVAL;
                        if ((size_t) (colon - value) >= sizeof(size))
                                return -EINVAL;
                        c->storage_btrfs = strcmp(colon + 1, "btrfs") == 0;
                        snprintf(size, sizeof(size), "%.*s", (int) (colon - value), value);
                        if (parse_value(k, size, &v) < 0)
                                return -EINVAL;
                        *(uint64_t *) field = v;
                        return 0;
                }
        }
        if (parse_value(k, value, &v) < 0)
                return -EINVAL;
        if (v < k->min)
                return -ERANGE;
        *(uint64_t *) field = v;
        return 0;
}

/* Levenshtein distance, capped: for "did you mean" on a mistyped key. */
static size_t edit_distance(const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b), row[64], prev, tmp;

        if (la >= ELEMENTSOF(row) || lb >= ELEMENTSOF(row))
                return SIZE_MAX;
        for (size_t j = 0; j <= lb; j++)
                row[j] = j;
        for (size_t i = 1; i <= la; i++) {
                prev = row[0];
                row[0] = i;
                for (size_t j = 1; j <= lb; j++) {
                        tmp = row[j];
                        row[j] = MIN3(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] != b[j - 1]));
                        prev = tmp;
                }
        }
        return row[lb];
}

/* The known key closest to a mistyped one ("memroy_max" -> "max_memory"), or NULL. */
static const char *closest_key(const char *key) {
        const char *best = NULL;
        size_t best_d = SIZE_MAX;

        for (size_t i = 0; i < ELEMENTSOF(config_keys); i++) {
                size_t d = edit_distance(key, config_keys[i].name);
                /* Words in the other order ("memory_max" for "max_memory") are a common slip. */
                const char *us = strchr(config_keys[i].name, '_');
                if (us) {
                        char swapped[64];
                        snprintf(swapped, sizeof(swapped), "%s_%.*s", us + 1, (int) (us - config_keys[i].name),
                                 config_keys[i].name);
                        d = MIN(d, edit_distance(key, swapped));
                }
                if (d < best_d) {
                        best_d = d;
                        best = config_keys[i].name;
                }
        }
        return best_d <= 3 ? best : NULL;
}

static int config_unknown_key(ConfigParse *p, unsigned lineno, const char *key) {
        const char *hint = closest_key(key);

        if (hint)
                return config_error(p, "%s:%u: unknown key '%s' (did you mean '%s'?)", p->path, lineno, key, hint);
        return config_error(p, "%s:%u: unknown key '%s' (see sandboxd.conf(5))", p->path, lineno, key);
}

static int config_bad_value(ConfigParse *p, unsigned lineno, const ConfigKey *k, const char *value, int r) {
        char min[64];

        if (k->type == KEY_PATHS && r == -EEXIST)
                return config_error(p, "%s:%u: %s = %s: an entry is given twice, bound already (/usr, /etc, /bin, /sbin, "
                                    "/lib*), /var (bind what is needed below it), /, or one of the sandbox's own "
                                    "(/proc, /dev, /tmp, /run, /work, /sys, /var/tmp, /var/run or below)",
                                    p->path, lineno, k->name, value);
        if (k->type == KEY_DIRS && r == -EEXIST)
                return config_error(p, "%s:%u: %s = %s: an entry is given twice", p->path, lineno, k->name, value);
        if ((k->type == KEY_PATHS || k->type == KEY_DIRS) && r == -E2BIG)
                return config_error(p, "%s:%u: %s: at most %d directories", p->path, lineno, k->name, ROOT_BINDS_MAX);

        if (r == -ERANGE) {
                if (k->type == KEY_SIZE)
                        format_size(min, sizeof(min), k->min);
                else if (k->type == KEY_DURATION)
                        format_duration(min, sizeof(min), k->min);
                else if (k->type == KEY_CPUS)
                        snprintf(min, sizeof(min), "%g", (double) k->min / 1000.0);
                else
                        snprintf(min, sizeof(min), "%" PRIu64, k->min);
                return config_error(p, "%s:%u: %s = %s is too small (at least %s)", p->path, lineno, k->name, value, min);
        }
        return config_error(p, "%s:%u: bad value '%s' for key '%s' (expected %s)", p->path, lineno, value, k->name,
                            type_hints[k->type]);
}

static int config_line(Config *c, ConfigParse *p, char *line, unsigned lineno) {
        char *eq, *key, *value;
        int r;

        line = strip(line);
        if (!*line || *line == '#')
                return 0;
        eq = strchr(line, '=');
        if (!eq)
                return config_error(p, "%s:%u: expected 'key = value', got '%.64s'", p->path, lineno, line);
        *eq = '\0';
        key = strip(line);
        value = strip(eq + 1);
        if (!*key)
                return config_error(p, "%s:%u: a value without a key", p->path, lineno);
        for (size_t i = 0; i < ELEMENTSOF(config_keys); i++) {
                if (strcmp(config_keys[i].name, key) != 0)
                        continue;
                if (p->line[i])
                        return config_error(p, "%s:%u: key '%s' is set again (first at line %u)", p->path, lineno, key,
                                            p->line[i]);
                r = set_key(c, &config_keys[i], value);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return config_bad_value(p, lineno, &config_keys[i], value, r);
                p->line[i] = lineno;
                return 0;
        }
        return config_unknown_key(p, lineno, key);
}

static size_t key_index(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(config_keys); i++)
                if (strcmp(config_keys[i].name, name) == 0)
                        return i;
        abort(); /* a name below that is not in the table */
}

static const char *format_key_value(char *buf, size_t len, const ConfigKey *k, uint64_t v) {
        switch (k->type) {
        case KEY_SIZE: return format_size(buf, len, v);
        case KEY_DURATION: return format_duration(buf, len, v);
        case KEY_CPUS: snprintf(buf, len, "%g", (double) v / 1000.0); return buf;
        default: snprintf(buf, len, "%" PRIu64, v); return buf;
        }
}

/* A default_X the file does not set follows a smaller max_X down; one it sets must fit. */
static int config_check_pair(Config *c, ConfigParse *p, const char *dflt, const char *max) {
        size_t di = key_index(dflt), mi = key_index(max);
        uint64_t *d = (uint64_t *) ((char *) c + config_keys[di].offset);
        uint64_t m = *(uint64_t *) ((char *) c + config_keys[mi].offset);
        char dv[64], mv[64];

        if (*d <= m)
                return 0;
        if (!p->line[di]) {
                *d = m;
                return 0;
        }
        format_key_value(dv, sizeof(dv), &config_keys[di], *d);
        format_key_value(mv, sizeof(mv), &config_keys[mi], m);
        if (p->line[mi])
                return config_error(p, "%s:%u: %s (%s) exceeds %s (%s, line %u)", p->path, p->line[di], dflt, dv, max, mv,
                                    p->line[mi]);
        return config_error(p, "%s:%u: %s (%s) exceeds %s (%s, the default)", p->path, p->line[di], dflt, dv, max, mv);
}

static int config_check(Config *c, ConfigParse *p) {
        static const char *const pairs[][2] = {
                { "default_memory", "max_memory" },   { "default_pids", "max_pids" },
                { "default_cpus", "max_cpus" },       { "default_timeout", "max_timeout" },
                { "default_output_bytes", "max_output_bytes" },
                { "default_open_files", "max_open_files" },
        };
        unsigned line;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(pairs); i++)
                if ((r = config_check_pair(c, p, pairs[i][0], pairs[i][1])) < 0)
                        return r;
        /* max_disk 0 is no maximum. */
        if (c->max_disk && (r = config_check_pair(c, p, "default_disk", "max_disk")) < 0)
                return r;
        if (c->max_files && (r = config_check_pair(c, p, "default_files", "max_files")) < 0)
                return r;
        if (c->max_file_size && (r = config_check_pair(c, p, "default_file_size", "max_file_size")) < 0)
                return r;
        if (c->session_ring_bytes > (UINT64_C(1) << 30))
                return config_error(p, "%s:%u: session_ring_bytes must be at most 1G", p->path,
                                    p->line[key_index("session_ring_bytes")]);
        if (c->uid_base + c->uid_range * (c->max_sandboxes + config_pool_total(c)) > UINT32_MAX - 1) {
                line = MAX(MAX3(p->line[key_index("uid_base")], p->line[key_index("uid_range")],
                                p->line[key_index("max_sandboxes")]),
                           MAX3(p->line[key_index("pool_size")], p->line[key_index("pool_create")],
                                p->line[key_index("pool_images")]));
                return config_error(p, "%s:%u: uid_base + uid_range * (max_sandboxes + the pools' sizes) goes past the last "
                                    "uid (4294967294)", p->path, line);
        }
        if (c->stop_sandboxes > 1)
                return config_error(p, "%s:%u: stop_sandboxes must be 0 (a stop leaves the sandboxes' processes running) or 1",
                                    p->path, p->line[key_index("stop_sandboxes")]);
        if (c->pool_size > 256)
                return config_error(p, "%s:%u: pool_size must be at most 256", p->path, p->line[key_index("pool_size")]);
        if (c->pool_create > CONFIG_POOL_MAX)
                return config_error(p, "%s:%u: pool_create must be at most 256", p->path, p->line[key_index("pool_create")]);
        return 0;
}

int config_load(Config *c, const char *path, bool must_exist, char **ret_error) {
        _cleanup_free_ char *line = NULL;
        ConfigParse p = { .path = path, .ret_error = ret_error };
        size_t alloc = 0;
        unsigned lineno = 0;
        FILE *f = fopen(path, "re");
        int r = 0;

        *ret_error = NULL;
        if (!f) {
                if (errno == ENOENT && !must_exist)
                        return config_check(c, &p);
                r = -errno;
                return config_error(&p, "%s: %s", path, strerror(-r)) == -ENOMEM ? -ENOMEM : r;
        }
        while (getline(&line, &alloc, f) >= 0) {
                r = config_line(c, &p, line, ++lineno);
                if (r < 0)
                        break;
        }
        fclose(f);
        return r < 0 ? r : config_check(c, &p);
}

/* Paths relative to root_dir, symlinks refused anywhere in them: what is checked here is what
 * root_trees_open() opens for every sandbox. */
static int config_check_bind(int root_fd, const char *root_dir, const char *bind, char **ret_error) {
        struct open_how how = {
                .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        _cleanup_close_ int fd = (int) syscall(SYS_openat2, root_fd, bind + 1, &how, sizeof(how));
        const char *why;
        struct statfs sfs;

        if (fd >= 0 && fstatfs(fd, &sfs) == 0 && !root_fs_refused((long) sfs.f_type))
                return 0;
        why = fd >= 0 ? "a kernel interface (procfs, sysfs, cgroupfs, ...) is never shown to a sandbox"
              : errno == ELOOP ? "a symbolic link in its path (give the path it leads to)"
              : errno == ENOTDIR ? "not a directory"
              : strerror(errno);
        return asprintf(ret_error, "root_binds: %s (in root_dir %s): %s", bind, root_dir, why) < 0 ? -ENOMEM : -EINVAL;
}

int config_check_root(const Config *c, char **ret_error) {
        _cleanup_close_ int root_fd = open(c->root_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        int r;

        *ret_error = NULL;
        if (root_fd < 0) {
                r = -errno;
                return asprintf(ret_error, "root_dir = %s: %s", c->root_dir, strerror(-r)) < 0 ? -ENOMEM : r;
        }
        for (char **b = c->root_binds; b && *b; b++) {
                r = config_check_bind(root_fd, c->root_dir, *b, ret_error);
                if (r < 0)
                        return r;
        }
        return 0;
}
