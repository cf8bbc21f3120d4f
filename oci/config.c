/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "macro.h"
#include "proto.h"
#include "util.h"

#define OCI_MAX_MOUNTS 16
#define OCI_PATH_MAX 4096
#define OCI_MAX_GROUPS 32 /* sandboxd's RUN_GROUPS_MAX */
#define OCI_MAX_PATHS 64  /* sandboxd's INIT_PATHS_MAX */

_printf_(2, 3) static int fail(char **ret_error, const char *fmt, ...) {
        va_list ap;
        char *s = NULL;

        va_start(ap, fmt);
        if (vasprintf(&s, fmt, ap) < 0)
                s = NULL;
        va_end(ap);
        free(*ret_error);
        *ret_error = s;
        return -EINVAL;
}

_printf_(2, 3) static void note(json_object *notes, const char *fmt, ...) {
        va_list ap;
        char *s = NULL;

        if (!notes)
                return;
        va_start(ap, fmt);
        if (vasprintf(&s, fmt, ap) >= 0)
                json_object_array_add(notes, json_object_new_string(s));
        va_end(ap);
        free(s);
}

/* A member that is there and not null. */
static json_object *get(json_object *o, const char *key) {
        json_object *v;
        if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v) ||
            json_object_is_type(v, json_type_null))
                return NULL;
        return v;
}

static bool is_type(json_object *v, json_type t) {
        return json_object_is_type(v, t);
}

/* Whether an optional member holds anything: a non-empty array/object/string, true, a non-zero
 * number. */
static bool has_content(json_object *v) {
        if (!v)
                return false;
        switch (json_object_get_type(v)) {
        case json_type_array:
                return json_object_array_length(v) > 0;
        case json_type_object:
                return json_object_object_length(v) > 0;
        case json_type_string:
                return json_object_get_string_len(v) > 0;
        case json_type_boolean:
                return json_object_get_boolean(v);
        case json_type_int:
                return json_object_get_int64(v) != 0;
        case json_type_double:
                return json_object_get_double(v) != 0;
        default:
                return false;
        }
}

static int get_int64(json_object *v, int64_t *ret) {
        if (!is_type(v, json_type_int))
                return -EINVAL;
        *ret = json_object_get_int64(v);
        /* json-c keeps values past INT64_MAX as uint64 (RLIM_INFINITY). */
        if (*ret == INT64_MAX && json_object_get_uint64(v) > INT64_MAX)
                return -ERANGE;
        return 0;
}

void oci_process_done(OciProcess *p) {
        json_object_put(p->run);
        p->run = NULL;
}

void oci_spec_done(OciSpec *s) {
        json_object_put(s->create);
        s->create = NULL;
        free(s->netns_path);
        s->netns_path = NULL;
        free(s->root_relative);
        s->root_relative = NULL;
        oci_process_done(&s->process);
        json_object_put(s->notes);
        s->notes = NULL;
}

/* ---- process ---------------------------------------------------------------------------- */

static int process_args(json_object *process, const char *prefix, json_object *run, char **ret_error) {
        json_object *args = get(process, "args"), *argv;
        size_t n;

        if (!is_type(args, json_type_array) || (n = json_object_array_length(args)) == 0)
                return fail(ret_error, "%s.args: missing or empty (the program to run)", prefix);
        argv = json_object_new_array();
        json_object_object_add(run, "argv", argv);
        for (size_t i = 0; i < n; i++) {
                json_object *a = json_object_array_get_idx(args, i);
                if (!is_type(a, json_type_string))
                        return fail(ret_error, "%s.args[%zu]: not a string", prefix, i);
                json_object_array_add(argv, json_object_get(a));
        }
        return 0;
}

/* ["K=V", ...] → {"K": "V"}: the environment exactly as given, sandboxd adds nothing
 * (env_defaults false). A later duplicate wins, as execve's getenv() sees the first... so keep
 * the first, as a C program would. */
static int process_env(json_object *process, const char *prefix, json_object *run, char **ret_error) {
        json_object *env = get(process, "env"), *out = json_object_new_object();
        size_t n = is_type(env, json_type_array) ? json_object_array_length(env) : 0;

        json_object_object_add(run, "env", out);
        json_object_object_add(run, "env_defaults", json_object_new_boolean(false));
        if (env && !is_type(env, json_type_array))
                return fail(ret_error, "%s.env: not an array of \"NAME=value\" strings", prefix);
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(env, i);
                const char *s = is_type(e, json_type_string) ? json_object_get_string(e) : NULL;
                const char *eq = s ? strchr(s, '=') : NULL;
                if (!eq || eq == s)
                        return fail(ret_error, "%s.env[%zu]: not a \"NAME=value\" string", prefix, i);
                _cleanup_free_ char *name = strndup(s, (size_t) (eq - s));
                if (!name)
                        return -ENOMEM;
                if (!json_object_object_get_ex(out, name, NULL))
                        json_object_object_add(out, name, json_object_new_string(eq + 1));
        }
        return 0;
}

static int process_cwd(json_object *process, const char *prefix, json_object *run, char **ret_error) {
        json_object *cwd = get(process, "cwd");
        const char *s = cwd ? json_object_get_string(cwd) : "/";

        if (cwd && !is_type(cwd, json_type_string))
                return fail(ret_error, "%s.cwd: not a string", prefix);
        if (strcmp(s, "/") != 0 && !path_is_normal(s, OCI_PATH_MAX))
                return fail(ret_error, "%s.cwd: \"%s\" is not an absolute, normal path", prefix, s);
        json_object_object_add(run, "cwd", json_object_new_string(s));
        return 0;
}

static int user_id(json_object *user, const char *key, const char *prefix, int64_t *ret, char **ret_error) {
        json_object *v = get(user, key);
        if (!v) {
                *ret = 0;
                return 0;
        }
        if (get_int64(v, ret) < 0 || *ret < 0 || *ret > 65535)
                return fail(ret_error, "%s.user.%s: must be 0..65535 (an id of the sandbox's user namespace)", prefix,
                            key);
        return 0;
}

/* Engines list the user's groups from the image's /etc/group (Alpine's root is in bin, daemon,
 * sys, adm, ...): gids of the sandbox's user namespace, set by sandboxd with setgroups there. */
static int user_groups(json_object *gids, const char *prefix, json_object *u, char **ret_error) {
        size_t n = is_type(gids, json_type_array) ? json_object_array_length(gids) : 0;
        json_object *out;

        if (!gids)
                return 0;
        if (!is_type(gids, json_type_array))
                return fail(ret_error, "%s.user.additionalGids: not an array", prefix);
        if (n > OCI_MAX_GROUPS)
                return fail(ret_error, "%s.user.additionalGids: more than %d groups; refused", prefix, OCI_MAX_GROUPS);
        out = json_object_new_array();
        json_object_object_add(u, "groups", out);
        for (size_t i = 0; i < n; i++) {
                int64_t g;
                if (get_int64(json_object_array_get_idx(gids, i), &g) < 0 || g < 0 || g > 65535)
                        return fail(ret_error,
                                    "%s.user.additionalGids[%zu]: must be 0..65535 (a gid of the sandbox's user "
                                    "namespace)",
                                    prefix, i);
                json_object_array_add(out, json_object_new_int64(g));
        }
        return 0;
}

static int process_user(json_object *process, const char *prefix, json_object *run, char **ret_error) {
        json_object *user = get(process, "user"), *v;
        int64_t uid, gid, umask;
        int r;

        if ((r = user_id(user, "uid", prefix, &uid, ret_error)) < 0 ||
            (r = user_id(user, "gid", prefix, &gid, ret_error)) < 0)
                return r;
        if (get(user, "username"))
                return fail(ret_error, "%s.user.username: a Windows field, refused", prefix);
        json_object *u = json_object_new_object();
        json_object_object_add(u, "uid", json_object_new_int64(uid));
        json_object_object_add(u, "gid", json_object_new_int64(gid));
        json_object_object_add(run, "user", u);
        if ((r = user_groups(get(user, "additionalGids"), prefix, u, ret_error)) < 0)
                return r;
        if ((v = get(user, "umask"))) {
                if (get_int64(v, &umask) < 0 || umask < 0 || umask > 0777)
                        return fail(ret_error, "%s.user.umask: must be 0..0777", prefix);
                json_object_object_add(run, "umask", json_object_new_int64(umask));
        }
        return 0;
}

static int process_rlimits(json_object *process, const char *prefix, json_object *run, char **ret_error) {
        json_object *rl = get(process, "rlimits"), *out;
        size_t n;

        if (!rl)
                return 0;
        if (!is_type(rl, json_type_array))
                return fail(ret_error, "%s.rlimits: not an array", prefix);
        out = json_object_new_object();
        json_object_object_add(run, "rlimits", out);
        /* Engines ask more than a sandbox gives (podman: NOFILE 1048576): lowered to sandboxd's
         * maximum, which only takes from the process, and said in the log (the proxy). */
        json_object_object_add(run, "rlimits_lower", json_object_new_boolean(true));
        n = json_object_array_length(rl);
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(rl, i), *t = get(e, "type"), *pair;
                json_object *soft = get(e, "soft"), *hard = get(e, "hard");
                const char *name = is_type(t, json_type_string) ? json_object_get_string(t) : "";
                if (strncmp(name, "RLIMIT_", 7) != 0 || !name[7])
                        return fail(ret_error, "%s.rlimits[%zu].type: not an RLIMIT_ name", prefix, i);
                if (!is_type(soft, json_type_int) || !is_type(hard, json_type_int))
                        return fail(ret_error, "%s.rlimits[%zu]: soft and hard must be integers", prefix, i);
                pair = json_object_new_array();
                json_object_array_add(pair, json_object_new_uint64(json_object_get_uint64(soft)));
                json_object_array_add(pair, json_object_new_uint64(json_object_get_uint64(hard)));
                json_object_object_add(out, name + 7, pair);
        }
        return 0;
}

/* What a container may hold in its capability sets: the default sets of podman and containerd,
 * all of them meaningful only inside the sandbox's own user namespace. Anything else (CAP_SYS_ADMIN,
 * CAP_NET_ADMIN, CAP_SYS_PTRACE, CAP_SYS_MODULE, ...) is a privileged container: refused. */
static const char *const allowed_caps[] = {
        "CAP_CHOWN",  "CAP_DAC_OVERRIDE", "CAP_FOWNER",      "CAP_FSETID",      "CAP_KILL",
        "CAP_SETGID", "CAP_SETUID",       "CAP_SETPCAP",     "CAP_SETFCAP",     "CAP_NET_BIND_SERVICE",
        "CAP_NET_RAW", "CAP_SYS_CHROOT",  "CAP_MKNOD",       "CAP_AUDIT_WRITE",
};

static bool cap_allowed(const char *c) {
        for (size_t i = 0; i < ELEMENTSOF(allowed_caps); i++)
                if (strcmp(c, allowed_caps[i]) == 0)
                        return true;
        return false;
}

/* The five sets exactly as given (an absent one, or no capabilities at all, is empty: what runc
 * does), for sandboxd to set within the sandbox's user namespace: --cap-drop=ALL is no capability
 * at all, even for uid 0. */
static bool list_has(json_object *list, const char *name) {
        for (size_t i = 0; i < json_object_array_length(list); i++)
                if (strcmp(json_object_get_string(json_object_array_get_idx(list, i)), name) == 0)
                        return true;
        return false;
}

/* An ambient capability must be permitted and inheritable (the kernel's rule, capabilities(7));
 * runc and crun drop one that is not, and buildah's RUN steps send ambient = bounding with no
 * inheritable at all. Dropping it gives the command less, never more: a note says which. */
static void ambient_within(json_object *out, const char *prefix, json_object *notes) {
        json_object *amb = json_object_object_get(out, "ambient"), *kept = json_object_new_array();
        json_object *perm = json_object_object_get(out, "permitted"), *inh = json_object_object_get(out, "inheritable");
        size_t dropped = 0;

        for (size_t i = 0; i < json_object_array_length(amb); i++) {
                const char *name = json_object_get_string(json_object_array_get_idx(amb, i));
                if (list_has(perm, name) && list_has(inh, name))
                        json_object_array_add(kept, json_object_new_string(name));
                else
                        dropped++;
        }
        if (dropped)
                note(notes, "%s.capabilities.ambient: %zu capabilities not both permitted and inheritable dropped, as "
                            "runc and crun drop them (the kernel cannot raise them)",
                     prefix, dropped);
        json_object_object_add(out, "ambient", kept);
}

static int process_caps(json_object *process, const char *prefix, json_object *run, json_object *notes,
                        char **ret_error) {
        static const char *const sets[] = { "bounding", "effective", "inheritable", "permitted", "ambient" };
        json_object *caps = get(process, "capabilities"), *out = json_object_new_object();

        json_object_object_add(run, "capabilities", out);
        if (caps && !is_type(caps, json_type_object))
                return fail(ret_error, "%s.capabilities: not an object", prefix);
        for (size_t s = 0; s < ELEMENTSOF(sets); s++) {
                json_object *set = get(caps, sets[s]), *list = json_object_new_array();
                size_t n = is_type(set, json_type_array) ? json_object_array_length(set) : 0;
                json_object_object_add(out, sets[s], list);
                if (set && !is_type(set, json_type_array))
                        return fail(ret_error, "%s.capabilities.%s: not an array", prefix, sets[s]);
                for (size_t i = 0; i < n; i++) {
                        json_object *c = json_object_array_get_idx(set, i);
                        const char *name = is_type(c, json_type_string) ? json_object_get_string(c) : "?";
                        if (!cap_allowed(name))
                                return fail(ret_error,
                                            "%s.capabilities.%s: %s is a privileged capability: sandboxd-oci runs no "
                                            "privileged containers; refused",
                                            prefix, sets[s], name);
                        json_object_array_add(list, json_object_new_string(name));
                }
        }
        ambient_within(out, prefix, notes);
        return 0;
}

static int process_terminal(json_object *process, const char *prefix, OciProcess *p, char **ret_error) {
        json_object *t = get(process, "terminal"), *size = get(process, "consoleSize");
        int64_t h = 24, w = 80;

        p->terminal = t && json_object_get_boolean(t);
        if (size) {
                json_object *hv = get(size, "height"), *wv = get(size, "width");
                if ((hv && get_int64(hv, &h) < 0) || (wv && get_int64(wv, &w) < 0) || h < 0 || h > 65535 || w < 0 ||
                    w > 65535)
                        return fail(ret_error, "%s.consoleSize: height and width must be 0..65535", prefix);
        }
        /* A size of 0 (what an engine sends when it has no terminal itself) is no size. */
        p->rows = h > 0 ? (unsigned) h : 24;
        p->cols = w > 0 ? (unsigned) w : 80;
        return 0;
}

int oci_process_from_json(json_object *process, const char *prefix, json_object *notes, OciProcess *ret,
                          char **ret_error) {
        OciProcess p = { .run = json_object_new_object() };
        int r;

        if (!is_type(process, json_type_object)) {
                oci_process_done(&p);
                return fail(ret_error, "%s: missing or not an object", prefix);
        }
        if ((r = process_args(process, prefix, p.run, ret_error)) < 0 ||
            (r = process_env(process, prefix, p.run, ret_error)) < 0 ||
            (r = process_cwd(process, prefix, p.run, ret_error)) < 0 ||
            (r = process_user(process, prefix, p.run, ret_error)) < 0 ||
            (r = process_rlimits(process, prefix, p.run, ret_error)) < 0 ||
            (r = process_caps(process, prefix, p.run, notes, ret_error)) < 0 ||
            (r = process_terminal(process, prefix, &p, ret_error)) < 0) {
                oci_process_done(&p);
                return r;
        }
        if (has_content(get(process, "apparmorProfile")) || has_content(get(process, "selinuxLabel")))
                note(notes, "%s: apparmorProfile/selinuxLabel ignored: sandboxd's own confinement applies", prefix);
        if (get(process, "oomScoreAdj"))
                note(notes, "%s.oomScoreAdj ignored: a sandbox's processes keep 0 (sandboxd sets it)", prefix);
        if (get(process, "scheduler") || get(process, "ioPriority") || get(process, "execCPUAffinity"))
                return oci_process_done(&p),
                       fail(ret_error, "%s: scheduler, ioPriority and execCPUAffinity are not supported; refused",
                            prefix);
        json_object_object_add(p.run, "no_timeout", json_object_new_boolean(true));
        *ret = p;
        return 0;
}

/* ---- linux.resources ----------------------------------------------------------------------- */

static int resources_memory(json_object *mem, const char *prefix, json_object *limits, json_object *notes,
                            char **ret_error) {
        int64_t limit = -1, swap = 0;
        json_object *v;

        if (!mem)
                return 0;
        if ((v = get(mem, "limit")) && get_int64(v, &limit) < 0)
                return fail(ret_error, "%s.memory.limit: not an integer", prefix);
        if (limit == 0 || limit < -1)
                return fail(ret_error, "%s.memory.limit: %" PRId64 " is not a limit", prefix, limit);
        /* OCI's swap is memory + swap, an upper bound. sandboxd's swap is its own configuration's
         * (swap_max, 0 by default: no swap around the memory limit), never more than a bound at
         * or above the limit allows; a bound below the limit is no OCI value. */
        if ((v = get(mem, "swap")) &&
            (get_int64(v, &swap) < 0 || (swap != -1 && (swap < 0 || (limit > 0 && swap < limit)))))
                return fail(ret_error, "%s.memory.swap: %" PRId64 " is below memory.limit (OCI's swap counts the memory "
                            "too); refused", prefix, swap);
        if (v && swap != limit)
                note(notes, "%s.memory.swap: the sandbox gets sandboxd's swap_max (0 unless configured), not the "
                     "bundle's %" PRId64, prefix, swap);
        if (has_content(get(mem, "reservation")) || get(mem, "kernel") || get(mem, "kernelTCP") ||
            has_content(get(mem, "disableOOMKiller")))
                return fail(ret_error,
                            "%s.memory: reservation, kernel, kernelTCP and disableOOMKiller cannot be enforced; refused",
                            prefix);
        if (get(mem, "swappiness"))
                note(notes, "%s.memory.swappiness ignored", prefix);
        if (limit > 0)
                json_object_object_add(limits, "memory", json_object_new_int64(limit));
        return 0;
}

static int resources_cpu(json_object *cpu, const char *prefix, json_object *limits, json_object *notes,
                         char **ret_error) {
        int64_t quota = 0, period = 100000;
        json_object *v;

        if (!cpu)
                return 0;
        if (get(cpu, "shares") || get(cpu, "weight"))
                note(notes, "%s.cpu.shares/weight ignored: sandboxd limits CPU by quota only", prefix);
        if (has_content(get(cpu, "cpus")) || has_content(get(cpu, "mems")))
                return fail(ret_error, "%s.cpu.cpus/mems: cpusets cannot be enforced by sandboxd; refused", prefix);
        if (has_content(get(cpu, "realtimeRuntime")) || has_content(get(cpu, "realtimePeriod")) ||
            has_content(get(cpu, "idle")) || has_content(get(cpu, "burst")))
                return fail(ret_error, "%s.cpu: realtime, idle and burst cannot be enforced by sandboxd; refused",
                            prefix);
        if ((v = get(cpu, "quota")) && get_int64(v, &quota) < 0)
                return fail(ret_error, "%s.cpu.quota: not an integer", prefix);
        if ((v = get(cpu, "period")) && (get_int64(v, &period) < 0 || period <= 0))
                return fail(ret_error, "%s.cpu.period: not a positive integer", prefix);
        if (quota > 0)
                json_object_object_add(limits, "cpus", json_object_new_double((double) quota / (double) period));
        else if (quota < -1)
                return fail(ret_error, "%s.cpu.quota: %" PRId64 " is not a quota", prefix, quota);
        return 0;
}

/* The device rules engines send by default: deny everything, then the devices a sandbox has
 * anyway (and two it never has, which a rule cannot conjure up: a console and /dev/net/tun). */
static bool device_rule_default(json_object *rule) {
        static const int64_t ok[][2] = { { 1, 3 }, { 1, 5 }, { 1, 7 }, { 1, 8 }, { 1, 9 },   { 5, 0 },
                                         { 5, 1 }, { 5, 2 }, { 136, -1 }, { 10, 200 } };
        json_object *allow = get(rule, "allow"), *type = get(rule, "type");
        int64_t major = -1, minor = -1;

        if (!allow || !json_object_get_boolean(allow))
                return true;
        if (!type || strcmp(json_object_get_string(type), "c") != 0)
                return false;
        if (get(rule, "major") && get_int64(get(rule, "major"), &major) < 0)
                return false;
        if (get(rule, "minor") && get_int64(get(rule, "minor"), &minor) < 0)
                return false;
        for (size_t i = 0; i < ELEMENTSOF(ok); i++)
                if (ok[i][0] == major && ok[i][1] == minor)
                        return true;
        return false;
}

static int resources_devices(json_object *devs, const char *prefix, char **ret_error) {
        size_t n = is_type(devs, json_type_array) ? json_object_array_length(devs) : 0;

        if (devs && !is_type(devs, json_type_array))
                return fail(ret_error, "%s.devices: not an array", prefix);
        for (size_t i = 0; i < n; i++)
                if (!device_rule_default(json_object_array_get_idx(devs, i)))
                        return fail(ret_error,
                                    "%s.devices[%zu]: allows a device beyond sandboxd's fixed /dev; refused", prefix,
                                    i);
        return 0;
}

int oci_limits_from_resources(json_object *res, const char *prefix, json_object *notes, json_object **ret_limits,
                              char **ret_error) {
        static const char *const refused[] = { "blockIO", "hugepageLimits", "rdma", "unified", "network" };
        _cleanup_json_ json_object *limits = json_object_new_object();
        json_object *pids;
        int64_t n;
        int r;

        if (res && !is_type(res, json_type_object))
                return fail(ret_error, "%s: not an object", prefix);
        for (size_t i = 0; i < ELEMENTSOF(refused); i++)
                if (has_content(get(res, refused[i])))
                        return fail(ret_error, "%s.%s: cannot be enforced by sandboxd; refused", prefix, refused[i]);
        if ((r = resources_memory(get(res, "memory"), prefix, limits, notes, ret_error)) < 0 ||
            (r = resources_cpu(get(res, "cpu"), prefix, limits, notes, ret_error)) < 0 ||
            (r = resources_devices(get(res, "devices"), prefix, ret_error)) < 0)
                return r;
        if ((pids = get(get(res, "pids"), "limit"))) {
                if (get_int64(pids, &n) < 0)
                        return fail(ret_error, "%s.pids.limit: not an integer", prefix);
                if (n > 0)
                        json_object_object_add(limits, "pids", json_object_new_int64(n));
        }
        *ret_limits = TAKE_PTR(limits);
        return 0;
}

/* ---- linux.namespaces ---------------------------------------------------------------------- */

int oci_proc_ns_path(const char *path, pid_t *ret_pid) {
        const char *p = path;
        long pid = 0;

        while (*p == '/')
                p++;
        if (strncmp(p, "proc/", 5) != 0)
                return 0;
        p += 5;
        if (strncmp(p, "self/", 5) == 0)
                p += 5;
        else if (strncmp(p, "thread-self/", 12) == 0)
                p += 12;
        else {
                char *end;
                errno = 0;
                pid = strtol(p, &end, 10);
                if (end == p || *end != '/' || errno || pid <= 0)
                        return 0;
                p = end + 1;
        }
        /* /proc/PID/task/TID/ns/... is the same thing. */
        if (strncmp(p, "task/", 5) == 0) {
                p = strchr(p + 5, '/');
                if (!p)
                        return 0;
                p++;
        }
        if (strncmp(p, "ns/", 3) != 0)
                return 0;
        *ret_pid = (pid_t) pid;
        return 1;
}

static int ns_path_refusal(const char *field, const char *type, const char *path, oci_proxy_lookup_fn lookup,
                           void *userdata, char **ret_error) {
        _cleanup_free_ char *id = NULL;
        pid_t pid;

        if (oci_proc_ns_path(path, &pid) && pid > 0 && lookup && lookup(pid, &id, userdata) > 0)
                return fail(ret_error,
                            "%s: %s is the namespace of container %s's proxy, a host process: joining it would put "
                            "this container into the host's %s namespace; refused",
                            field, path, id, type);
        if (strcmp(type, "network") != 0)
                return fail(ret_error,
                            "%s: joining an existing %s namespace (%s) is not supported: only a network namespace "
                            "file can be joined; refused",
                            field, type, path);
        if (oci_proc_ns_path(path, &pid))
                return fail(ret_error,
                            "%s: %s is a process's namespace (/proc/PID/ns): only a bind-mounted network namespace "
                            "file (/run/netns/...) can be joined; refused",
                            field, path);
        return 0;
}

static int linux_namespaces(json_object *linux_, oci_proxy_lookup_fn lookup, void *userdata, OciSpec *spec,
                            char **ret_error) {
        static const char *const required[] = { "pid", "network", "ipc", "uts", "mount" };
        static const char *const known[] = { "pid", "network", "ipc", "uts", "mount", "user", "cgroup" };
        json_object *ns = get(linux_, "namespaces");
        size_t n = is_type(ns, json_type_array) ? json_object_array_length(ns) : 0;
        bool seen[ELEMENTSOF(known)] = {};
        int r;

        if (ns && !is_type(ns, json_type_array))
                return fail(ret_error, "linux.namespaces: not an array");
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(ns, i), *t = get(e, "type"), *path = get(e, "path");
                const char *type = is_type(t, json_type_string) ? json_object_get_string(t) : "";
                char field[64];
                size_t k;

                snprintf(field, sizeof(field), "linux.namespaces[%zu]", i);
                for (k = 0; k < ELEMENTSOF(known) && strcmp(type, known[k]) != 0; k++)
                        ;
                if (k == ELEMENTSOF(known))
                        return fail(ret_error, "%s.type: \"%s\" namespaces are not supported; refused", field, type);
                seen[k] = true;
                if (!path)
                        continue;
                if (!is_type(path, json_type_string) || !path_is_normal(json_object_get_string(path), OCI_PATH_MAX))
                        return fail(ret_error, "%s.path: not an absolute, normal path", field);
                if ((r = ns_path_refusal(field, type, json_object_get_string(path), lookup, userdata, ret_error)) < 0)
                        return r;
                free(spec->netns_path);
                spec->netns_path = strdup(json_object_get_string(path));
                if (!spec->netns_path)
                        return -ENOMEM;
        }
        for (size_t k = 0; k < ELEMENTSOF(required); k++)
                if (!seen[k])
                        return fail(ret_error,
                                    "linux.namespaces: no \"%s\" namespace, i.e. the host's: sandboxd-oci always "
                                    "isolates it and will not pretend otherwise; refused",
                                    required[k]);
        if (has_content(get(linux_, "uidMappings")) || has_content(get(linux_, "gidMappings")))
                return fail(ret_error,
                            "linux.uidMappings/gidMappings: sandboxd assigns each sandbox its own id range; refused");
        return 0;
}

/* ---- mounts -------------------------------------------------------------------------------- */

/* Mounts that every sandbox has of its own: the config's are dropped (options ignored). */
static bool mount_is_sandboxes_own(const char *dest, const char *type) {
        static const struct {
                const char *dest, *type;
        } own[] = {
                { "/proc", "proc" },          { "/dev", "tmpfs" },          { "/dev/pts", "devpts" },
                { "/dev/shm", "tmpfs" },      { "/dev/shm", "bind" },       { "/dev/mqueue", "mqueue" },
                { "/sys", "sysfs" },          { "/sys/fs/cgroup", "cgroup" }, { "/sys/fs/cgroup", "cgroup2" },
        };
        for (size_t i = 0; i < ELEMENTSOF(own); i++)
                if (strcmp(dest, own[i].dest) == 0 && strcmp(type, own[i].type) == 0)
                        return true;
        return false;
}

static bool path_under_kernel_dirs(const char *p) {
        return path_is_below(p, "/proc") || path_is_below(p, "/sys") ||
               (path_is_below(p, "/dev") && !path_is_below(p, "/dev/shm"));
}

/* bind, rbind and the propagation flags; sets *ret_bind and *ret_ro. */
static int mount_options(json_object *opts, const char *field, bool *ret_bind, bool *ret_ro, bool *ret_noexec,
                         char **ret_error) {
        static const char *const propagation[] = { "shared", "rshared", "slave", "rslave" };
        size_t n = is_type(opts, json_type_array) ? json_object_array_length(opts) : 0;

        *ret_bind = *ret_ro = *ret_noexec = false;
        for (size_t i = 0; i < n; i++) {
                json_object *o = json_object_array_get_idx(opts, i);
                const char *s = is_type(o, json_type_string) ? json_object_get_string(o) : "";
                if (strcmp(s, "bind") == 0 || strcmp(s, "rbind") == 0)
                        *ret_bind = true;
                else if (strcmp(s, "ro") == 0)
                        *ret_ro = true;
                else if (strcmp(s, "rw") == 0)
                        *ret_ro = false;
                else if (strcmp(s, "noexec") == 0)
                        *ret_noexec = true;
                for (size_t k = 0; k < ELEMENTSOF(propagation); k++)
                        if (strcmp(s, propagation[k]) == 0)
                                return fail(ret_error,
                                            "%s.options: \"%s\" propagation would tie the sandbox's mounts to the "
                                            "host's; refused",
                                            field, s);
        }
        return 0;
}

/* A bind's source: absolute as the engine gave it, or relative to the bundle (never out of
 * it); never a kernel interface. */
static int bind_source(json_object *m, const char *field, const char *bundle, char **ret, char **ret_error) {
        json_object *src = get(m, "source");
        const char *s = is_type(src, json_type_string) ? json_object_get_string(src) : NULL;
        _cleanup_free_ char *p = NULL;

        if (!s || !*s)
                return fail(ret_error, "%s.source: missing", field);
        if (s[0] != '/' && asprintf(&p, "%s/%s", bundle, s) < 0)
                return -ENOMEM;
        if (s[0] == '/' && !(p = strdup(s)))
                return -ENOMEM;
        if (!path_is_normal(p, OCI_PATH_MAX))
                return fail(ret_error, "%s.source: \"%s\" is not a normal path (no \"..\", \".\", \"//\")", field, s);
        if (path_under_kernel_dirs(p))
                return fail(ret_error, "%s.source: %s is a kernel interface; refused", field, p);
        *ret = TAKE_PTR(p);
        return 0;
}

static int one_mount(json_object *m, size_t i, const char *bundle, json_object *out, json_object *notes,
                     char **ret_error) {
        json_object *d = get(m, "destination"), *t = get(m, "type");
        const char *dest = is_type(d, json_type_string) ? json_object_get_string(d) : NULL;
        const char *type = is_type(t, json_type_string) ? json_object_get_string(t) : "";
        _cleanup_free_ char *source = NULL;
        char field[32];
        bool bind, ro, noexec;
        int r;

        snprintf(field, sizeof(field), "mounts[%zu]", i);
        if (!dest || !path_is_normal(dest, OCI_PATH_MAX))
                return fail(ret_error, "%s.destination: not an absolute, normal path", field);
        if ((r = mount_options(get(m, "options"), field, &bind, &ro, &noexec, ret_error)) < 0)
                return r;
        if (bind && (!*type || strcmp(type, "none") == 0))
                type = "bind";
        /* No mqueue is mounted: mq_open() and the rest are system calls of the sandbox's own IPC
         * namespace and need none; only listing the queues as files does. */
        if (strcmp(dest, "/dev/mqueue") == 0 && strcmp(type, "mqueue") == 0) {
                note(notes, "%s: mqueue %s is not mounted: the sandbox's IPC namespace is its own, and its message "
                     "queues work without it", field, dest);
                return 0;
        }
        if (mount_is_sandboxes_own(dest, type)) {
                note(notes, "%s: %s %s is the sandbox's own", field, type, dest);
                return 0;
        }
        /* containerd's default spec has a tmpfs /run: the rootfs's own directory serves. */
        if (strcmp(type, "tmpfs") == 0 && (strcmp(dest, "/run") == 0 || strcmp(dest, "/tmp") == 0)) {
                note(notes, "%s: tmpfs %s: the rootfs's own directory is used (sandboxd mounts no tmpfs)", field,
                     dest);
                return 0;
        }
        if (strcmp(type, "bind") != 0)
                return fail(ret_error, "%s: a %s mount at %s is not one sandboxd can make; only binds are; refused",
                            field, *type ? type : "(typeless)", dest);
        if (path_under_kernel_dirs(dest) || strcmp(dest, "/dev") == 0 || strcmp(dest, "/") == 0)
                return fail(ret_error, "%s.destination: %s is the sandbox's own (/proc, /sys, /dev); refused", field,
                            dest);
        /* Every bind of sandboxd's is nosuid and nodev; none is noexec: one asked to be noexec
         * would run what it holds, less isolated than asked. */
        if (noexec)
                return fail(ret_error,
                            "%s.options: \"noexec\" is not one sandboxd can give a bind (its binds are nosuid and "
                            "nodev, never noexec); refused",
                            field);
        if ((r = bind_source(m, field, bundle, &source, ret_error)) < 0)
                return r;
        if (json_object_array_length(out) >= OCI_MAX_MOUNTS)
                return fail(ret_error, "mounts: more than %d binds; refused", OCI_MAX_MOUNTS);
        json_object *e = json_object_new_object();
        json_object_object_add(e, "source", json_object_new_string(source));
        json_object_object_add(e, "target", json_object_new_string(dest));
        json_object_object_add(e, "read_only", json_object_new_boolean(ro));
        json_object_object_add(e, "idmap", json_object_new_string("same"));
        json_object_array_add(out, e);
        return 0;
}

static int config_mounts(json_object *config, const char *bundle, json_object *create, json_object *notes,
                         char **ret_error) {
        json_object *mounts = get(config, "mounts"), *out = json_object_new_array();
        size_t n = is_type(mounts, json_type_array) ? json_object_array_length(mounts) : 0;
        int r;

        json_object_object_add(create, "mounts", out);
        if (mounts && !is_type(mounts, json_type_array))
                return fail(ret_error, "mounts: not an array");
        for (size_t i = 0; i < n; i++)
                if ((r = one_mount(json_object_array_get_idx(mounts, i), i, bundle, out, notes, ret_error)) < 0)
                        return r;
        return 0;
}

/* ---- the rest of linux, root, hooks -------------------------------------------------------- */

/* linux.sysctl → create's "sysctls" (sandboxd checks names and values again, as hostile input). */
static int linux_sysctl(json_object *sysctl, json_object *create, char **ret_error) {
        if (!sysctl)
                return 0;
        if (!is_type(sysctl, json_type_object))
                return fail(ret_error, "linux.sysctl: not an object");
        json_object_object_foreach(sysctl, k, v) {
                /* runc's rule: the sysctls of namespaces the container has of its own, which a
                 * sandbox always has (linux_namespaces() refuses the host's network and ipc). */
                if (!sysctl_name_namespaced(k))
                        return fail(ret_error,
                                    "linux.sysctl: %.128s is not a sysctl of the container's own network or ipc "
                                    "namespace (net.*, kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*): it is the "
                                    "host's; refused",
                                    k);
                if (!is_type(v, json_type_string))
                        return fail(ret_error, "linux.sysctl.%.128s: not a string", k);
        }
        if (json_object_object_length(sysctl) > 0)
                json_object_object_add(create, "sysctls", json_object_get(sysctl));
        return 0;
}

/* linux.maskedPaths / readonlyPaths → create's masked_paths / readonly_paths, which sandboxd's
 * init masks (an empty read-only tmpfs, /dev/null) or binds read-only, as runc does. */
static int linux_paths(json_object *paths, const char *field, const char *key, json_object *create,
                       char **ret_error) {
        size_t n = is_type(paths, json_type_array) ? json_object_array_length(paths) : 0;

        if (!paths)
                return 0;
        if (!is_type(paths, json_type_array))
                return fail(ret_error, "%s: not an array", field);
        if (n > OCI_MAX_PATHS)
                return fail(ret_error, "%s: more than %d paths; refused", field, OCI_MAX_PATHS);
        for (size_t i = 0; i < n; i++) {
                json_object *p = json_object_array_get_idx(paths, i);
                const char *s = is_type(p, json_type_string) ? json_object_get_string(p) : NULL;
                if (!s || strlen(s) > 1024 || !path_is_normal(s, 1024) || strcmp(s, "/") == 0)
                        return fail(ret_error, "%s[%zu]: not an absolute, normal path (no \"..\", \".\", \"//\"; not /); refused",
                                    field, i);
        }
        if (n > 0)
                json_object_object_add(create, key, json_object_get(paths));
        return 0;
}

static int config_linux(json_object *config, oci_proxy_lookup_fn lookup, void *userdata, OciSpec *spec,
                        char **ret_error) {
        static const char *const refused[] = { "devices", "intelRdt", "personality", "timeOffsets", "seccompNotify" };
        json_object *linux_ = get(config, "linux"), *prop, *limits = NULL;
        int r;

        if (!is_type(linux_, json_type_object))
                return fail(ret_error, "linux: missing (sandboxd-oci runs Linux containers only)");
        for (size_t i = 0; i < ELEMENTSOF(refused); i++)
                if (has_content(get(linux_, refused[i])))
                        return fail(ret_error, "linux.%s: not supported by sandboxd; refused", refused[i]);
        if ((prop = get(linux_, "rootfsPropagation"))) {
                const char *s = json_object_get_string(prop);
                if (strcmp(s, "private") != 0 && strcmp(s, "rprivate") != 0 && *s)
                        return fail(ret_error, "linux.rootfsPropagation: \"%s\" refused (only private)", s);
        }
        if ((r = linux_namespaces(linux_, lookup, userdata, spec, ret_error)) < 0 ||
            (r = linux_sysctl(get(linux_, "sysctl"), spec->create, ret_error)) < 0 ||
            (r = linux_paths(get(linux_, "maskedPaths"), "linux.maskedPaths", "masked_paths", spec->create, ret_error)) < 0 ||
            (r = linux_paths(get(linux_, "readonlyPaths"), "linux.readonlyPaths", "readonly_paths", spec->create,
                             ret_error)) < 0)
                return r;
        if ((r = oci_limits_from_resources(get(linux_, "resources"), "linux.resources", spec->notes, &limits,
                                           ret_error)) < 0)
                return r;
        if (json_object_object_length(limits) > 0)
                json_object_object_add(spec->create, "limits", limits);
        else
                json_object_put(limits);
        if (has_content(get(linux_, "cgroupsPath")))
                note(spec->notes, "linux.cgroupsPath %s recorded, not used: the container's cgroup is its sandbox's, in "
                     "sandboxd's subtree", json_object_get_string(get(linux_, "cgroupsPath")));
        if (has_content(get(linux_, "seccomp")))
                json_object_array_add(spec->notes, json_object_new_string(
                                                           "linux.seccomp replaced by sandboxd's own filter"));
        return 0;
}

/* "ociVersion" is REQUIRED, in SemVer 2.0.0: MAJOR.MINOR.PATCH, then any -pre-release or
 * +build. A 1.x one: the spec's versions this runtime knows (the features verb). */
static int config_version(json_object *config, char **ret_error) {
        json_object *v = get(config, "ociVersion");
        const char *s = is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
        unsigned major, minor, patch;
        int n = 0;

        if (!s || sscanf(s, "%u.%u.%u%n", &major, &minor, &patch, &n) != 3 || !strchr("-+", s[n]) || !isdigit(s[0]))
                return fail(ret_error, "ociVersion: %s%s%s is not a SemVer version (1.0.2, ...); refused", s ? "\"" : "",
                            s ?: "missing", s ? "\"" : "");
        if (major != 1)
                return fail(ret_error, "ociVersion: \"%s\" is not a version 1 runtime spec; refused", s);
        return 0;
}

static int config_hooks(json_object *config, char **ret_error) {
        json_object *hooks = get(config, "hooks");

        if (!hooks)
                return 0;
        if (!is_type(hooks, json_type_object))
                return fail(ret_error, "hooks: not an object");
        json_object_object_foreach(hooks, name, list) {
                if (has_content(list))
                        return fail(ret_error,
                                    "hooks.%s: hooks would run host code against the container; sandboxd-oci runs "
                                    "none; refused",
                                    name);
        }
        return 0;
}

static int config_root(json_object *config, const char *bundle, json_object *create, char **ret_relative,
                       char **ret_error) {
        json_object *root = get(config, "root"), *p = get(root, "path"), *ro = get(root, "readonly");
        const char *s = is_type(p, json_type_string) ? json_object_get_string(p) : NULL;
        _cleanup_free_ char *path = NULL;

        if (!s || !*s)
                return fail(ret_error, "root.path: missing");
        if (strlen(s) >= OCI_PATH_MAX)
                return fail(ret_error, "root.path: too long");
        /* Relative ("rootfs", ".", as runtime-tools writes): resolved beneath the bundle at
         * create (oci_root_open()); the joined path only says where. */
        if (s[0] == '/' ? !(path = strdup(s)) : asprintf(&path, "%s/%s", bundle, s) < 0)
                return -ENOMEM;
        if (s[0] == '/' && !path_is_normal(path, OCI_PATH_MAX))
                return fail(ret_error, "root.path: \"%s\" is not a normal path", s);
        if (s[0] != '/' && !(*ret_relative = strdup(s)))
                return -ENOMEM;
        json_object *r = json_object_new_object();
        json_object_object_add(r, "path", json_object_new_string(path));
        json_object_object_add(r, "read_only", json_object_new_boolean(ro && json_object_get_boolean(ro)));
        json_object_object_add(create, "root", r);
        return 0;
}

static int config_hostname(json_object *config, json_object *create, char **ret_error) {
        json_object *h = get(config, "hostname");

        if (has_content(get(config, "domainname")))
                return fail(ret_error, "domainname: not supported by sandboxd; refused");
        if (h && !is_type(h, json_type_string))
                return fail(ret_error, "hostname: not a string");
        if (has_content(h))
                json_object_object_add(create, "hostname", json_object_get(h));
        return 0;
}

int oci_spec_from_config(json_object *config, const char *bundle, oci_proxy_lookup_fn lookup, void *userdata,
                         OciSpec *ret, char **ret_error) {
        OciSpec s = { .create = json_object_new_object(), .notes = json_object_new_array() };
        json_object *uid;
        int r;

        if (!is_type(config, json_type_object))
                r = fail(ret_error, "config.json: not a JSON object");
        else if ((r = config_version(config, ret_error)) >= 0 && (r = config_hooks(config, ret_error)) >= 0 && (r = config_root(config, bundle, s.create, &s.root_relative, ret_error)) >= 0 &&
                 (r = config_hostname(config, s.create, ret_error)) >= 0 &&
                 (r = config_mounts(config, bundle, s.create, s.notes, ret_error)) >= 0 &&
                 (r = config_linux(config, lookup, userdata, &s, ret_error)) >= 0)
                r = oci_process_from_json(get(config, "process"), "process", s.notes, &s.process, ret_error);
        if (r < 0) {
                oci_spec_done(&s);
                return r;
        }
        /* The container's process is the pid 1 of its pid namespace, as with runc: a signal it has
         * no handler for (podman stop's SIGTERM to sleep) is ignored, and its end ends the rest. */
        json_object_object_add(s.process.run, "pid_namespace", json_object_new_string("own"));
        json_object_object_add(s.create, "op", json_object_new_string("create"));
        json_object_object_add(s.create, "ephemeral", json_object_new_boolean(true));
        json_object_object_add(s.create, "network",
                               s.netns_path ? json_object_new_object() : json_object_new_string("none"));
        /* Mount locking follows the sandbox's user: root's sandbox has the child user namespace
         * that locks its mounts, which a root process needs. */
        uid = get(get(s.process.run, "user"), "uid");
        json_object_object_add(s.create, "user",
                               json_object_new_string(uid && json_object_get_int64(uid) == 0 ? "root" : "sandbox"));
        *ret = s;
        return 0;
}

/* ---- joining a network namespace ----------------------------------------------------------- */

int oci_netns_open(const char *path, char **ret_error) {
        struct open_how how = { .flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_NO_MAGICLINKS };
        _cleanup_close_ int fd = -EBADF;
        struct statfs sfs;
        struct stat st, self;

        fd = (int) syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
        if (fd < 0 && errno == ELOOP)
                return fail(ret_error,
                            "linux.namespaces: %s leads into /proc (a process's namespace): only a bind-mounted "
                            "network namespace file can be joined; refused",
                            path),
                       -ELOOP;
        if (fd < 0) {
                int e = errno;
                fail(ret_error, "linux.namespaces: %s: %s", path, strerror(e));
                return -e;
        }
        if (fstatfs(fd, &sfs) < 0 || sfs.f_type != NSFS_MAGIC || ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWNET)
                return fail(ret_error, "linux.namespaces: %s is not a network namespace; refused", path);
        if (fstat(fd, &st) < 0 || stat("/proc/self/ns/net", &self) < 0)
                return fail(ret_error, "linux.namespaces: %s: %m", path);
        if (st.st_ino == self.st_ino && st.st_dev == self.st_dev)
                return fail(ret_error, "linux.namespaces: %s is the host's network namespace; refused", path);
        return TAKE_FD(fd);
}

/* ---- a relative root.path ------------------------------------------------------------------- */

int oci_root_open(const char *bundle, const char *relative, char **ret_path, char **ret_error) {
        /* Symlinks in the bundle may lead anywhere beneath it, never out of it (nor through
         * /proc's magic links): the kernel resolves it so, not a string check. */
        struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS };
        _cleanup_close_ int dir = -EBADF, fd = -EBADF;
        char link[64], buf[OCI_PATH_MAX];
        ssize_t n;

        dir = open(bundle, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0) {
                int e = errno;
                fail(ret_error, "root.path: the bundle %s: %s", bundle, strerror(e));
                return -e;
        }
        fd = (int) syscall(SYS_openat2, dir, relative, &how, sizeof(how));
        if (fd < 0) {
                int e = errno;
                if (e == EXDEV)
                        fail(ret_error, "root.path: \"%s\" leads out of the bundle %s; refused", relative, bundle);
                else
                        fail(ret_error, "root.path: %s/%s: %s", bundle, relative, strerror(e));
                return -e;
        }
        /* The directory's own path, every symlink resolved: what sandboxd opens again (it takes
         * no path with a symlink in it). */
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        n = readlink(link, buf, sizeof(buf) - 1);
        if (n <= 0 || (size_t) n >= sizeof(buf) - 1)
                return fail(ret_error, "root.path: %s/%s: cannot read its path", bundle, relative);
        buf[n] = 0;
        *ret_path = strdup(buf);
        return *ret_path ? 0 : -ENOMEM;
}

/* ---- the program, looked up as runc does at create --------------------------------------- */

/* Whether path (absolute, inside) lies at or beneath a bind's target: the bind may bring it. */
static bool under_a_bind(json_object *mounts, const char *path) {
        size_t n = is_type(mounts, json_type_array) ? json_object_array_length(mounts) : 0;

        for (size_t i = 0; i < n; i++) {
                json_object *t = get(json_object_array_get_idx(mounts, i), "target");
                if (t && path_is_below(path, json_object_get_string(t)))
                        return true;
        }
        return false;
}

/* 1: an executable regular file at path inside the root (or a bind may bring one: it cannot be
 * told now), 0: none, -EISDIR: a directory, -EACCES: a file without an x bit. */
static int exec_candidate(int root_fd, json_object *mounts, const char *path) {
        struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (under_a_bind(mounts, path))
                return 1;
        fd = (int) syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
        if (fd < 0)
                return errno == ENOENT || errno == ENOTDIR ? 0 : 1;
        if (fstat(fd, &st) < 0)
                return 1;
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        return S_ISREG(st.st_mode) && (st.st_mode & 0111) ? 1 : -EACCES;
}

int oci_exec_check(const char *rootfs, json_object *run, json_object *mounts, char **ret_error) {
        json_object *argv = get(run, "argv"), *env = get(run, "env"), *cwd = get(run, "cwd");
        const char *arg0 = json_object_get_string(json_object_array_get_idx(argv, 0));
        const char *path = is_type(get(env, "PATH"), json_type_string) ? json_object_get_string(get(env, "PATH")) : NULL;
        _cleanup_close_ int root_fd = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
        char buf[OCI_PATH_MAX];

        if (root_fd < 0 || !arg0 || !*arg0)
                return 0; /* reported elsewhere */
        if (strchr(arg0, '/')) {
                if (arg0[0] == '/')
                        snprintf(buf, sizeof(buf), "%s", arg0);
                else
                        snprintf(buf, sizeof(buf), "%s/%s", cwd ? json_object_get_string(cwd) : "/", arg0);
                int k = exec_candidate(root_fd, mounts, buf);
                if (k > 0)
                        return 0;
                /* runc's words, which engines read: "permission denied" is podman's 126,
                 * "no such file or directory" its 127. */
                if (k == -EISDIR || k == -EACCES)
                        fail(ret_error, "process.args[0]: exec: \"%s\": %s: permission denied", arg0,
                             k == -EISDIR ? "is a directory" : "not executable");
                else
                        fail(ret_error, "process.args[0]: exec: \"%s\": stat %s: no such file or directory", arg0, arg0);
                return k < 0 ? k : -ENOENT;
        }
        /* runc's default when the process has no PATH. */
        if (!path)
                path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
        for (const char *d = path;; d++) {
                size_t len = strcspn(d, ":");
                if (len > 0 && d[0] == '/' && (size_t) snprintf(buf, sizeof(buf), "%.*s/%s", (int) len, d, arg0) < sizeof(buf) &&
                    exec_candidate(root_fd, mounts, buf) > 0)
                        return 0;
                d += len;
                if (!*d)
                        break;
        }
        fail(ret_error, "process.args[0]: exec: \"%s\": executable file not found in $PATH: no such file or directory",
             arg0);
        return -ENOENT;
}
