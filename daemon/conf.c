/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "macro.h"
#include "util.h"

typedef enum { KEY_PATH, KEY_NAME, KEY_SIZE, KEY_COUNT, KEY_DURATION, KEY_CPUS } KeyType;

typedef struct ConfigKey {
        const char *name;
        KeyType type;
        size_t offset;
} ConfigKey;

#define KEY(n, t, f) { n, t, offsetof(Config, f) }
static const ConfigKey config_keys[] = {
        KEY("state_dir", KEY_PATH, state_dir),
        KEY("cgroup_root", KEY_PATH, cgroup_root),
        KEY("root_dir", KEY_PATH, root_dir),
        KEY("max_line_bytes", KEY_SIZE, max_line_bytes),
        KEY("max_connections", KEY_COUNT, max_connections),
        KEY("max_connection_output", KEY_SIZE, max_connection_output),
        KEY("request_timeout", KEY_DURATION, request_timeout_usec),
        KEY("max_sandboxes", KEY_COUNT, max_sandboxes),
        KEY("max_runs_per_connection", KEY_COUNT, max_runs_per_connection),
        KEY("admin_group", KEY_NAME, admin_group),
        KEY("max_sandboxes_per_uid", KEY_COUNT, max_sandboxes_per_uid),
        KEY("max_runs_per_uid", KEY_COUNT, max_runs_per_uid),
        KEY("uid_base", KEY_COUNT, uid_base),
        KEY("uid_range", KEY_COUNT, uid_range),
        KEY("default_memory", KEY_SIZE, default_memory),
        KEY("max_memory", KEY_SIZE, max_memory),
        KEY("default_pids", KEY_COUNT, default_pids),
        KEY("max_pids", KEY_COUNT, max_pids),
        KEY("default_cpus", KEY_CPUS, default_millicpus),
        KEY("max_cpus", KEY_CPUS, max_millicpus),
        KEY("default_timeout", KEY_DURATION, default_timeout_usec),
        KEY("max_timeout", KEY_DURATION, max_timeout_usec),
        KEY("default_output_bytes", KEY_SIZE, default_output_bytes),
        KEY("max_output_bytes", KEY_SIZE, max_output_bytes),
        KEY("swap_max", KEY_SIZE, swap_max),
        KEY("max_stdin_bytes", KEY_SIZE, max_stdin_bytes),
        KEY("sweep_interval", KEY_DURATION, sweep_interval_usec),
        KEY("sweep_timeout", KEY_DURATION, sweep_timeout_usec),
        KEY("disk_budget", KEY_SIZE, disk_budget),
        KEY("default_disk", KEY_SIZE, default_disk),
        KEY("max_disk", KEY_SIZE, max_disk),
        KEY("default_ttl", KEY_DURATION, default_ttl_usec),
        KEY("default_idle", KEY_DURATION, default_idle_usec),
        KEY("min_free_disk", KEY_SIZE, min_free_disk),
        KEY("idle_exit_s", KEY_DURATION, idle_exit_usec),
        KEY("session_ring_bytes", KEY_SIZE, session_ring_bytes),
        KEY("session_idle_timeout", KEY_DURATION, session_idle_timeout_usec),
        KEY("max_sessions_per_uid", KEY_COUNT, max_sessions_per_uid),
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
                .max_line_bytes = 4u << 20,
                .max_connections = 4096,
                .max_connection_output = 256u << 20,
                .request_timeout_usec = 30 * USEC_PER_SEC,
                .max_sandboxes = 2048,
                .max_runs_per_connection = 256,
                .max_sandboxes_per_uid = 256,
                .max_runs_per_uid = 512,
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
                .swap_max = 0,
                .max_stdin_bytes = 3u << 20,
                .sweep_interval_usec = 5 * 60 * USEC_PER_SEC,
                .sweep_timeout_usec = 10 * 60 * USEC_PER_SEC,
                .min_free_disk = 128u << 20,
                .session_ring_bytes = 1u << 20,
                .session_idle_timeout_usec = 30 * 60 * USEC_PER_SEC,
                .max_sessions_per_uid = 64,
        };
}

void config_done(Config *c) {
        free(c->state_dir);
        free(c->cgroup_root);
        free(c->root_dir);
        free(c->admin_group);
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

static int set_key(Config *c, const ConfigKey *k, const char *value) {
        void *field = (char *) c + k->offset;
        uint64_t v;
        char *end;

        switch (k->type) {
        case KEY_PATH:
        case KEY_NAME:
                if ((k->type == KEY_PATH && value[0] != '/') || !value[0])
                        return -EINVAL;
                free(*(char **) field);
                *(char **) field = strdup(value);
                return *(char **) field ? 0 : -ENOMEM;
        case KEY_SIZE:
                if (parse_size(value, &v) < 0)
                        return -EINVAL;
                break;
        case KEY_DURATION:
                if (parse_duration(value, &v) < 0)
                        return -EINVAL;
                break;
        case KEY_CPUS:
                if (parse_cpus(value, &v) < 0)
                        return -EINVAL;
                break;
        case KEY_COUNT:
                errno = 0;
                v = strtoull(value, &end, 0);
                if (errno || *end || !isdigit((unsigned char) value[0]))
                        return -EINVAL;
                break;
        default:
                return -EINVAL;
        }
        *(uint64_t *) field = v;
        return 0;
}

static int config_line(Config *c, char *line, unsigned lineno, const char *path, char **ret_error) {
        char *eq, *key, *value;
        line = strip(line);
        if (!*line || *line == '#')
                return 0;
        eq = strchr(line, '=');
        if (!eq)
                return asprintf(ret_error, "%s:%u: expected 'key = value'", path, lineno) < 0 ? -ENOMEM : -EINVAL;
        *eq = '\0';
        key = strip(line);
        value = strip(eq + 1);
        for (size_t i = 0; i < ELEMENTSOF(config_keys); i++) {
                if (strcmp(config_keys[i].name, key) != 0)
                        continue;
                if (set_key(c, &config_keys[i], value) < 0)
                        return asprintf(ret_error, "%s:%u: invalid value '%s' for key '%s'", path, lineno, value, key) < 0
                                       ? -ENOMEM
                                       : -EINVAL;
                return 0;
        }
        return asprintf(ret_error, "%s:%u: unknown key '%s'", path, lineno, key) < 0 ? -ENOMEM : -EINVAL;
}

static int config_check(Config *c, const char *path, char **ret_error) {
        if (c->default_memory > c->max_memory || c->default_pids > c->max_pids ||
            c->default_millicpus > c->max_millicpus || c->default_timeout_usec > c->max_timeout_usec ||
            c->default_output_bytes > c->max_output_bytes || (c->max_disk && c->default_disk > c->max_disk))
                return asprintf(ret_error, "%s: a default_* value exceeds its max_* value", path) < 0 ? -ENOMEM : -EINVAL;
        if (c->uid_range < 65536 || c->uid_base == 0 || c->uid_base + c->uid_range * c->max_sandboxes > UINT32_MAX - 1)
                return asprintf(ret_error, "%s: uid_base/uid_range/max_sandboxes do not fit in the uid space", path) < 0
                               ? -ENOMEM
                               : -EINVAL;
        if (c->sweep_timeout_usec < USEC_PER_SEC)
                return asprintf(ret_error, "%s: sweep_timeout must be at least 1s", path) < 0 ? -ENOMEM : -EINVAL;
        if (c->session_ring_bytes < 4096 || c->session_ring_bytes > (UINT64_C(1) << 30))
                return asprintf(ret_error, "%s: session_ring_bytes must be between 4K and 1G", path) < 0 ? -ENOMEM : -EINVAL;
        if (c->max_line_bytes < 1024)
                return asprintf(ret_error, "%s: max_line_bytes must be at least 1K", path) < 0 ? -ENOMEM : -EINVAL;
        return 0;
}

int config_load(Config *c, const char *path, bool must_exist, char **ret_error) {
        _cleanup_free_ char *line = NULL;
        size_t alloc = 0;
        unsigned lineno = 0;
        FILE *f = fopen(path, "re");
        int r = 0;

        if (!f) {
                if (errno == ENOENT && !must_exist)
                        return config_check(c, "defaults", ret_error);
                r = -errno;
                if (asprintf(ret_error, "%s: %s", path, strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        while (getline(&line, &alloc, f) >= 0) {
                r = config_line(c, line, ++lineno, path, ret_error);
                if (r < 0)
                        break;
        }
        fclose(f);
        return r < 0 ? r : config_check(c, path, ret_error);
}
