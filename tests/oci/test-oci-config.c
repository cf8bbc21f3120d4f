/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd-oci's config.json translation (oci/config.c) against config.json files as podman 4.3
 * (captured from a real `podman run`) and containerd 1.6's ctr write them, and every refusal of
 * issue #24 on a fixture changed in one place. */

#include <errno.h>
#include <json-c/json.h>
#include <json-c/json_pointer.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../oci/config.h"
#include "../tap.h"

static pid_t fake_proxy_pid;

static int lookup(pid_t pid, char **ret_id, void *userdata) {
        (void) userdata;
        if (pid != fake_proxy_pid)
                return 0;
        *ret_id = strdup("pod-infra");
        return 1;
}

static json_object *fixture(const char *name) {
        const char *srcdir = getenv("srcdir");
        char path[4096];
        json_object *o;

        snprintf(path, sizeof(path), "%s/tests/oci/%s", srcdir ? srcdir : ".", name);
        o = json_object_from_file(path);
        if (!o) {
                printf("Bail out! cannot read %s\n", path);
                exit(1);
        }
        return o;
}

static json_object *at(json_object *o, const char *pointer) {
        json_object *v = NULL;
        if (json_pointer_get(o, pointer, &v) < 0)
                return NULL;
        return v;
}

static void set(json_object *o, const char *pointer, const char *json) {
        json_object *v = json_tokener_parse(json);
        if (json_pointer_set(&o, pointer, v) < 0) {
                printf("Bail out! cannot set %s\n", pointer);
                exit(1);
        }
}

/* The podman fixture with one change, which must be refused with an error holding needle. */
static void refused(const char *pointer, const char *json, const char *needle, const char *desc) {
        json_object *cfg = fixture("podman-run.json");
        char *err = NULL;
        OciSpec spec = {};

        if (pointer)
                set(cfg, pointer, json);
        int r = oci_spec_from_config(cfg, "/bundle", lookup, NULL, &spec, &err);
        if (!ok(r == -EINVAL && err && strstr(err, needle), "refused: %s", desc))
                diag("r=%d error: %s (wanted \"%s\")", r, err ? err : "(none)", needle);
        if (r >= 0)
                oci_spec_done(&spec);
        free(err);
        json_object_put(cfg);
}

static void remove_namespace(json_object *cfg, const char *type) {
        json_object *ns = at(cfg, "/linux/namespaces");
        for (size_t i = 0; i < json_object_array_length(ns); i++)
                if (strcmp(json_object_get_string(at(json_object_array_get_idx(ns, i), "/type")), type) == 0) {
                        json_object_array_del_idx(ns, i, 1);
                        return;
                }
}

static void refused_without_namespace(const char *type, const char *desc) {
        json_object *cfg = fixture("podman-run.json");
        char *err = NULL;
        OciSpec spec = {};

        remove_namespace(cfg, type);
        int r = oci_spec_from_config(cfg, "/bundle", lookup, NULL, &spec, &err);
        if (!ok(r == -EINVAL && err && strstr(err, "linux.namespaces") && strstr(err, type), "refused: %s", desc))
                diag("r=%d error: %s", r, err ? err : "(none)");
        free(err);
        json_object_put(cfg);
}

static const char *str(json_object *o, const char *pointer) {
        json_object *v = at(o, pointer);
        return v ? json_object_get_string(v) : NULL;
}

static void like_root(json_object *create);

static void test_podman(void) {
        json_object *cfg = fixture("podman-run.json");
        char *err = NULL;
        OciSpec s = {};

        int r = oci_spec_from_config(cfg, "/bundle", lookup, NULL, &s, &err);
        if (!ok(r == 0, "podman 4.3's config.json of `run --rm IMG sh -c 'exit 7'` is accepted"))
                diag("error: %s", err);
        if (r < 0)
                return;
        is_str(str(s.create, "/op"), "create", "a create request");
        like_root(s.create);
        is_str(str(s.create, "/network"), "none", "its own network namespace: network none");
        ok(json_object_get_boolean(at(s.create, "/ephemeral")), "ephemeral");
        is_str(str(s.create, "/user"), "root", "uid 0: the sandbox's user is root");
        is_str(str(s.create, "/hostname"), "f0159dbab8fd", "the hostname");
        json_object *m = at(s.create, "/mounts");
        is_int((long long) json_object_array_length(m), 3, "three binds: /etc/hosts, /run/.containerenv, /etc/hostname");
        is_str(str(s.create, "/mounts/0/target"), "/etc/hosts", "the first is /etc/hosts");
        ok(strstr(str(s.create, "/mounts/0/source"), "/userdata/hosts") != NULL, "from podman's userdata");
        is_str(str(s.create, "/mounts/0/idmap"), "same", "idmapped as the same ids (root's file is root's)");
        ok(!json_object_get_boolean(at(s.create, "/mounts/0/read_only")), "writable, as given");
        ok(at(s.create, "/limits") == NULL, "no limits (podman --cgroups=disabled gives none)");
        is_str(str(s.process.run, "/argv/2"), "exit 7", "argv");
        is_str(str(s.process.run, "/pid_namespace"), "own", "the container's process is pid 1 of its own pid namespace");
        bool mq = false;
        for (size_t i = 0; i < json_object_array_length(s.notes); i++)
                mq |= strstr(json_object_get_string(json_object_array_get_idx(s.notes, i)), "mqueue /dev/mqueue is not mounted") != NULL;
        ok(mq, "the log says /dev/mqueue is not mounted (not that it is the sandbox's own)");
        is_str(str(s.process.run, "/env/container"), "podman", "env as an object");
        ok(at(s.process.run, "/env/HOME") == NULL, "no HOME added");
        ok(!json_object_get_boolean(at(s.process.run, "/env_defaults")), "env_defaults false");
        is_int(json_object_get_int(at(s.process.run, "/user/uid")), 0, "uid 0");
        ok(json_object_get_boolean(at(s.process.run, "/rlimits_lower")), "rlimits_lower: true");
        ok(json_object_array_length(at(s.process.run, "/capabilities/bounding")) ==
                   json_object_array_length(at(cfg, "/process/capabilities/bounding")) &&
                   json_object_array_length(at(s.process.run, "/capabilities/bounding")) > 0,
           "the capability sets go to the run as given (bounding)");
        is_str(str(s.process.run, "/capabilities/effective/0"), str(cfg, "/process/capabilities/effective/0"),
               "... effective");
        ok(json_object_array_length(at(s.create, "/masked_paths")) == json_object_array_length(at(cfg, "/linux/maskedPaths")),
           "linux.maskedPaths become create's masked_paths");
        ok(json_object_array_length(at(s.create, "/readonly_paths")) ==
                   json_object_array_length(at(cfg, "/linux/readonlyPaths")),
           "linux.readonlyPaths become create's readonly_paths");
        is_int(json_object_get_int(at(s.process.run, "/umask")), 022, "umask 022");
        is_int(json_object_get_int(at(s.process.run, "/rlimits/NOFILE/1")), 1024, "RLIMIT_NOFILE");
        ok(json_object_get_boolean(at(s.process.run, "/no_timeout")), "no_timeout");
        is_str(str(s.process.run, "/cwd"), "/", "cwd /");
        ok(!s.process.terminal, "no terminal");
        ok(s.netns_path == NULL, "no namespace to join");
        oci_spec_done(&s);
        json_object_put(cfg);
}

static void like_root(json_object *create) {
        const char *p = str(create, "/root/path");
        ok(p && strstr(p, "/merged"), "root.path is podman's overlay merged directory");
}

static void test_podman_tty(void) {
        json_object *cfg = fixture("podman-run-tty.json");
        char *err = NULL;
        OciSpec s = {};

        int r = oci_spec_from_config(cfg, "/bundle", lookup, NULL, &s, &err);
        ok(r == 0, "podman's `run -it` config.json is accepted");
        if (r == 0) {
                ok(s.process.terminal, "with a terminal");
                ok(s.process.rows == 24 && s.process.cols == 80, "sized 24x80 without consoleSize");
                oci_spec_done(&s);
        }
        json_object_put(cfg);
}

static void test_ctr(void) {
        json_object *cfg = fixture("ctr-run.json");
        char *err = NULL;
        OciSpec s = {};
        bool noted = false;

        int r = oci_spec_from_config(cfg, "/run/containerd/io.containerd.runtime.v2.task/default/c1", lookup, NULL, &s,
                                     &err);
        if (!ok(r == 0, "ctr 1.6's default config.json is accepted"))
                diag("error: %s", err);
        if (r < 0)
                return;
        is_str(str(s.create, "/root/path"), "/run/containerd/io.containerd.runtime.v2.task/default/c1/rootfs",
               "a relative root.path is the bundle's");
        is_int((long long) json_object_array_length(at(s.create, "/mounts")), 0, "no binds (its /run tmpfs dropped)");
        ok(at(s.create, "/limits") == NULL, "cpu.shares alone is no limit");
        for (size_t i = 0; i < json_object_array_length(s.notes); i++)
                noted |= strstr(json_object_get_string(json_object_array_get_idx(s.notes, i)), "shares") != NULL;
        ok(noted, "cpu.shares ignored with a log line");
        oci_spec_done(&s);
        json_object_put(cfg);
}

static void test_resources(void) {
        json_object *cfg = fixture("podman-run.json");
        char *err = NULL;
        OciSpec s = {};

        set(cfg, "/linux/resources/memory", "{\"limit\":67108864,\"swap\":67108864}");
        set(cfg, "/linux/resources/pids", "{\"limit\":2048}");
        set(cfg, "/linux/resources/cpu", "{\"quota\":50000,\"period\":100000,\"shares\":1024}");
        int r = oci_spec_from_config(cfg, "/bundle", lookup, NULL, &s, &err);
        if (!ok(r == 0, "memory with swap == limit, podman's pids 2048 and a cpu quota are accepted"))
                diag("error: %s", err);
        if (r == 0) {
                is_int(json_object_get_int64(at(s.create, "/limits/memory")), 67108864, "limits.memory");
                is_int(json_object_get_int64(at(s.create, "/limits/pids")), 2048, "limits.pids");
                ok(json_object_get_double(at(s.create, "/limits/cpus")) == 0.5, "limits.cpus = quota/period");
                oci_spec_done(&s);
        }
        json_object_put(cfg);

        /* podman's --memory 64m alone: a swap bound of twice that; the sandbox gets swap_max. */
        cfg = fixture("podman-run.json");
        set(cfg, "/linux/resources/memory", "{\"limit\":67108864,\"swap\":134217728}");
        r = oci_spec_from_config(cfg, "/bundle", lookup, NULL, &s, &err);
        if (!ok(r == 0, "memory with a swap bound of twice the limit is accepted"))
                diag("error: %s", err);
        if (r == 0) {
                bool noted = false;
                is_int(json_object_get_int64(at(s.create, "/limits/memory")), 67108864, "... limits.memory is the limit");
                for (size_t i = 0; s.notes && i < json_object_array_length(s.notes); i++)
                        noted |= strstr(json_object_get_string(json_object_array_get_idx(s.notes, i)), "swap_max") != NULL;
                ok(noted, "... with a log line that the swap is sandboxd's swap_max");
                oci_spec_done(&s);
        }
        json_object_put(cfg);

        json_object *limits = NULL, *res = json_tokener_parse("{\"memory\":{\"limit\":134217728}}");
        r = oci_limits_from_resources(res, "resources", NULL, &limits, &err);
        ok(r == 0 && json_object_get_int64(at(limits, "/memory")) == 134217728,
           "update's resources file: memory 128M");
        json_object_put(limits);
        json_object_put(res);
}

/* --cap-drop=ALL: every set empty, and no capabilities member at all: no capability either way. */
static void test_caps_empty(void) {
        static const char *const sets[] = { "bounding", "effective", "inheritable", "permitted", "ambient" };
        static const char *const given[] = { "{\"bounding\":[],\"effective\":[],\"permitted\":[]}", NULL };

        for (size_t k = 0; k < 2; k++) {
                json_object *cfg = fixture("podman-run.json");
                char *err = NULL;
                OciSpec s = {};
                size_t total = 0;

                if (given[k])
                        set(cfg, "/process/capabilities", given[k]);
                else
                        json_object_object_del(at(cfg, "/process"), "capabilities");
                int r = oci_spec_from_config(cfg, "/bundle", lookup, NULL, &s, &err);
                for (size_t i = 0; r == 0 && i < 5; i++) {
                        char ptr[64];
                        snprintf(ptr, sizeof(ptr), "/capabilities/%s", sets[i]);
                        json_object *a = at(s.process.run, ptr);
                        total += a ? json_object_array_length(a) : 100;
                }
                ok(r == 0 && total == 0, "%s: the run's five capability sets are all empty",
                   given[k] ? "every set empty (--cap-drop=ALL)" : "no process.capabilities");
                if (r == 0)
                        oci_spec_done(&s);
                json_object_put(cfg);
                free(err);
        }
}

/* buildah's RUN steps: ambient = bounding, no inheritable. Ambient keeps only what is both
 * permitted and inheritable (runc and crun drop the rest), and a note says so. */
static void test_caps_ambient(void) {
        json_object *cfg = fixture("podman-run.json");
        char *err = NULL;
        OciSpec s = {};
        bool noted = false;

        set(cfg, "/process/capabilities",
            "{\"bounding\":[\"CAP_CHOWN\",\"CAP_KILL\"],\"effective\":[\"CAP_CHOWN\",\"CAP_KILL\"],"
            "\"permitted\":[\"CAP_CHOWN\",\"CAP_KILL\"],\"inheritable\":[\"CAP_KILL\"],"
            "\"ambient\":[\"CAP_CHOWN\",\"CAP_KILL\"]}");
        int r = oci_spec_from_config(cfg, "/bundle", lookup, NULL, &s, &err);
        json_object *amb = r == 0 ? at(s.process.run, "/capabilities/ambient") : NULL;
        ok(r == 0 && amb && json_object_array_length(amb) == 1 &&
                   strcmp(json_object_get_string(json_object_array_get_idx(amb, 0)), "CAP_KILL") == 0,
           "ambient not within inheritable: not refused, lowered to what is both permitted and inheritable (CAP_KILL)");
        for (size_t i = 0; r == 0 && s.notes && i < json_object_array_length(s.notes); i++)
                noted |= strstr(json_object_get_string(json_object_array_get_idx(s.notes, i)),
                                "capabilities.ambient: 1 capabilities not both permitted and inheritable dropped") != NULL;
        ok(noted, "... and a note says one was dropped");
        ok(r == 0 && json_object_array_length(at(s.process.run, "/capabilities/permitted")) == 2,
           "... the other sets as given");
        if (r == 0)
                oci_spec_done(&s);
        json_object_put(cfg);
        free(err);
}

/* What podman sends for an Alpine image, whose /etc/group lists root in bin, daemon, sys, ... */
static void test_groups(void) {
        json_object *cfg = fixture("podman-run.json");
        char *err = NULL;
        OciSpec s = {};

        set(cfg, "/process/user/additionalGids", "[0,1,2,3,4,6,10]");
        int r = oci_spec_from_config(cfg, "/bundle", lookup, NULL, &s, &err);
        if (!ok(r == 0, "process.user.additionalGids (an Alpine image's root) is accepted"))
                diag("error: %s", err);
        if (r == 0) {
                json_object *g = at(s.process.run, "/user/groups");
                ok(g && json_object_array_length(g) == 7 && json_object_get_int(json_object_array_get_idx(g, 6)) == 10,
                   "... as the run's user.groups, in order");
                oci_spec_done(&s);
        }
        json_object_put(cfg);
        free(err);
}

/* Debian's containers.conf default and podman's --sysctl for the ipc namespace. */
static void test_sysctl(void) {
        json_object *cfg = fixture("podman-run.json");
        char *err = NULL;
        OciSpec s = {};

        set(cfg, "/linux/sysctl",
            "{\"net.ipv4.ping_group_range\":\"0 0\",\"kernel.msgmax\":\"16384\",\"fs.mqueue.msg_max\":\"20\"}");
        int r = oci_spec_from_config(cfg, "/bundle", lookup, NULL, &s, &err);
        if (!ok(r == 0, "linux.sysctl of the network and ipc namespaces is accepted"))
                diag("error: %s", err);
        if (r == 0) {
                is_str(str(s.create, "/sysctls/net.ipv4.ping_group_range"), "0 0", "create's sysctls has net.ipv4.ping_group_range");
                is_str(str(s.create, "/sysctls/kernel.msgmax"), "16384", "... kernel.msgmax");
                is_str(str(s.create, "/sysctls/fs.mqueue.msg_max"), "20", "... fs.mqueue.msg_max");
                oci_spec_done(&s);
        }
        json_object_put(cfg);
        free(err);
}

static void test_netns(void) {
        json_object *cfg = fixture("podman-run.json");
        char *err = NULL, path[64];
        OciSpec s = {};
        pid_t pid = -1;

        set(cfg, "/linux/namespaces/1", "{\"type\":\"network\",\"path\":\"/run/netns/cni-1234\"}");
        int r = oci_spec_from_config(cfg, "/bundle", lookup, NULL, &s, &err);
        ok(r == 0 && s.netns_path && strcmp(s.netns_path, "/run/netns/cni-1234") == 0,
           "a CNI network namespace file is joined");
        if (r == 0) {
                ok(json_object_is_type(at(s.create, "/network"), json_type_object), "network becomes an object");
                oci_spec_done(&s);
        }
        json_object_put(cfg);

        ok(oci_proc_ns_path("/proc/self/ns/net", &pid) == 1 && pid == 0, "/proc/self/ns/net is a process's");
        ok(oci_proc_ns_path("/proc/12/task/13/ns/ipc", &pid) == 1 && pid == 12, "/proc/12/task/13/ns/ipc is 12's");
        ok(oci_proc_ns_path("/run/netns/cni-1", &pid) == 0, "/run/netns/cni-1 is not");
        ok(oci_proc_ns_path("/proc/12/root/ns/net", &pid) == 0, "/proc/12/root/ns/net is not a ns link");

        /* The kernel's side: a magic link is refused even when reached through procfs. */
        int fd = oci_netns_open("/proc/self/ns/net", &err);
        ok(fd == -ELOOP && err && strstr(err, "/proc"), "opening /proc/self/ns/net is refused (a magic link)");
        free(err);
        err = NULL;
        fd = oci_netns_open("/etc/hostname", &err);
        ok(fd < 0, "a file that is no network namespace is refused");
        free(err);
        err = NULL;

        fake_proxy_pid = getpid();
        snprintf(path, sizeof(path), "{\"type\":\"network\",\"path\":\"/proc/%d/ns/net\"}", (int) getpid());
        refused("/linux/namespaces/1", path, "proxy", "a network namespace path to one of our proxies (host network)");
        snprintf(path, sizeof(path), "{\"type\":\"ipc\",\"path\":\"/proc/%d/ns/ipc\"}", (int) getpid());
        refused("/linux/namespaces/2", path, "proxy", "an ipc namespace path to one of our proxies");
        refused("/linux/namespaces/1", "{\"type\":\"network\",\"path\":\"/proc/1/ns/net\"}",
                "process's namespace", "a network namespace path of another process");
        refused("/linux/namespaces/2", "{\"type\":\"ipc\",\"path\":\"/run/ipcns/x\"}", "linux.namespaces[2]",
                "an ipc namespace path");
        refused("/linux/namespaces/0", "{\"type\":\"pid\",\"path\":\"/proc/1/ns/pid\"}", "linux.namespaces[0]",
                "a pid namespace path");
        refused("/linux/namespaces/5", "{\"type\":\"user\",\"path\":\"/proc/1/ns/user\"}", "linux.namespaces[5]",
                "a user namespace path");
        refused("/linux/namespaces/5", "{\"type\":\"time\"}", "time", "a time namespace");
}

/* A relative root.path: "." and "rootfs" are the bundle's, a symlink may lead within the bundle
 * but not out of it (oci_root_open()). */
static void test_root_relative(void) {
        char dir[] = "/tmp/test-oci-root-XXXXXX", p[256], want[256];
        char *err = NULL, *path = NULL;
        json_object *cfg = fixture("podman-run.json");
        OciSpec s = {};

        set(cfg, "/root/path", "\".\"");
        int r = oci_spec_from_config(cfg, "/bundle", lookup, NULL, &s, &err);
        ok(r == 0 && s.root_relative && strcmp(s.root_relative, ".") == 0, "root.path \".\" is accepted, relative");
        if (r == 0)
                oci_spec_done(&s);
        json_object_put(cfg);
        free(err);
        err = NULL;

        if (!mkdtemp(dir)) {
                ok(false, "a bundle directory");
                return;
        }
        snprintf(p, sizeof(p), "%s/rootfs", dir);
        mkdir(p, 0755);
        snprintf(p, sizeof(p), "%s/inside", dir);
        (void) !symlink("rootfs", p);
        snprintf(p, sizeof(p), "%s/out", dir);
        (void) !symlink("/etc", p);
        snprintf(p, sizeof(p), "%s/up", dir);
        (void) !symlink("../..", p);

        snprintf(want, sizeof(want), "%s/rootfs", dir);
        r = oci_root_open(dir, "./rootfs", &path, &err);
        ok(r == 0 && path && strcmp(path, want) == 0, "\"./rootfs\" is the bundle's rootfs");
        free(path), path = NULL;
        r = oci_root_open(dir, "inside", &path, &err);
        ok(r == 0 && path && strcmp(path, want) == 0, "a symlink to rootfs within the bundle: its target's path");
        free(path), path = NULL;
        r = oci_root_open(dir, ".", &path, &err);
        ok(r == 0 && path && strcmp(path, dir) == 0, "\".\" is the bundle itself");
        free(path), path = NULL;
        r = oci_root_open(dir, "out", &path, &err);
        ok(r == -EXDEV && err && strstr(err, "leads out of the bundle"), "a symlink to /etc is refused");
        free(err), err = NULL;
        r = oci_root_open(dir, "up", &path, &err);
        ok(r == -EXDEV && err && strstr(err, "root.path"), "a symlink to ../.. is refused");
        free(err), err = NULL;
        r = oci_root_open(dir, "../", &path, &err);
        ok(r == -EXDEV, "\"../\" is refused");
        free(err), err = NULL;
        static const char *const made[] = { "inside", "out", "up", "rootfs" };
        for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++) {
                snprintf(p, sizeof(p), "%s/%s", dir, made[i]);
                if (unlink(p) < 0)
                        rmdir(p);
        }
        rmdir(dir);
}

int main(void) {
        test_podman();
        test_root_relative();
        test_podman_tty();
        test_ctr();
        test_resources();
        test_sysctl();
        test_groups();
        test_caps_empty();
        test_caps_ambient();
        test_netns();

        refused_without_namespace("network", "no network namespace (host network)");
        refused_without_namespace("pid", "no pid namespace (host pid)");
        refused_without_namespace("ipc", "no ipc namespace (host ipc)");
        refused("/linux/uidMappings", "[{\"containerID\":0,\"hostID\":100000,\"size\":65536}]", "uidMappings",
                "user namespace mappings");
        refused("/hooks", "{\"prestart\":[{\"path\":\"/usr/bin/nvidia-hook\"}]}", "hooks.prestart", "a prestart hook");
        refused("/hooks", "{\"createContainer\":[{\"path\":\"/bin/true\"}]}", "hooks.createContainer",
                "a createContainer hook");
        refused("/linux/devices", "[{\"path\":\"/dev/fuse\",\"type\":\"c\",\"major\":10,\"minor\":229}]",
                "linux.devices", "an extra device");
        refused("/linux/resources/devices/0", "{\"allow\":true,\"type\":\"b\",\"major\":8,\"minor\":0,\"access\":\"rwm\"}",
                "linux.resources.devices[0]", "a device rule for a block device");
        refused("/process/capabilities/bounding/0", "\"CAP_SYS_ADMIN\"", "process.capabilities.bounding",
                "CAP_SYS_ADMIN in the bounding set (privileged)");
        refused("/process/capabilities/effective/0", "\"CAP_NET_ADMIN\"", "CAP_NET_ADMIN", "CAP_NET_ADMIN in effective");
        refused("/process/capabilities/permitted/0", "\"CAP_SYS_MODULE\"", "CAP_SYS_MODULE", "CAP_SYS_MODULE");
        refused("/process/user/additionalGids", "[0,70000]", "process.user.additionalGids[1]", "a group past 65535");
        refused("/process/user/additionalGids", "\"10\"", "process.user.additionalGids", "additionalGids not an array");
        refused("/process/user/uid", "70000", "process.user.uid", "a uid beyond the sandbox's 65536");
        refused("/process/args", "[]", "process.args", "no program");
        refused("/linux/sysctl", "{\"kernel.panic\":\"1\"}", "linux.sysctl: kernel.panic",
                "a sysctl of no namespace of the container's (kernel.panic), naming it");
        refused("/linux/sysctl", "{\"kernel.shmmax\":\"1\",\"vm.overcommit_memory\":\"1\"}",
                "vm.overcommit_memory", "vm.overcommit_memory beside a namespaced one");
        refused("/linux/sysctl", "{\"net..x\":\"1\"}", "net..x", "a name with an empty component");
        refused("/linux/sysctl", "{\"net.ipv4/../../x\":\"1\"}", "linux.sysctl", "a name with a slash");
        refused("/linux/sysctl", "{\"net.ipv4.ip_forward\":1}", "linux.sysctl.net.ipv4.ip_forward", "a value that is no string");
        refused("/linux/rootfsPropagation", "\"shared\"", "linux.rootfsPropagation", "shared rootfs propagation");
        refused("/ociVersion", "\"invalid\"", "ociVersion: \"invalid\" is not a SemVer version", "an ociVersion that is no version");
        refused("/ociVersion", "\"1.0\"", "ociVersion", "an ociVersion without its patch number");
        refused("/ociVersion", "\"2.0.0\"", "not a version 1 runtime spec", "an ociVersion 2");
        refused("/ociVersion", "1", "ociVersion: missing", "an ociVersion that is no string");
        refused("/mounts/5/options", "[\"bind\",\"rshared\"]", "mounts[5].options", "an rshared bind");
        refused("/mounts/5/options", "[\"rbind\",\"rslave\"]", "mounts[5].options", "an rslave bind");
        refused("/mounts/5/options", "[\"rbind\",\"noexec\"]", "noexec", "a noexec bind (sandboxd's binds cannot be noexec)");
        refused("/mounts/5/source", "\"/proc/kcore\"", "kernel interface", "a bind of /proc/kcore");
        refused("/mounts/5/source", "\"../../etc/shadow\"", "mounts[5].source", "a relative source out of the bundle");
        refused("/mounts/5/destination", "\"/proc/sysrq-trigger\"", "mounts[5].destination", "a bind onto /proc");
        refused("/mounts/5", "{\"destination\":\"/data\",\"type\":\"tmpfs\",\"source\":\"tmpfs\"}", "mounts[5]",
                "a tmpfs volume");
        refused("/mounts/5", "{\"destination\":\"/x\",\"type\":\"nfs\",\"source\":\"srv:/x\"}", "nfs",
                "an nfs mount");
        refused("/linux/resources/memory", "{\"limit\":67108864,\"swap\":33554432}", "linux.resources.memory.swap",
                "swap below the memory limit (no OCI value)");
        refused("/linux/resources/memory", "{\"limit\":67108864,\"reservation\":1000}", "linux.resources.memory",
                "a memory reservation");
        refused("/linux/resources/cpu", "{\"cpus\":\"0-1\"}", "linux.resources.cpu.cpus", "a cpuset");
        refused("/linux/resources/cpu", "{\"realtimeRuntime\":1000}", "realtime", "realtime cpu");
        refused("/linux/resources/blockIO", "{\"weight\":10}", "linux.resources.blockIO", "blkio");
        refused("/linux/resources/hugepageLimits", "[{\"pageSize\":\"2MB\",\"limit\":0}]",
                "linux.resources.hugepageLimits", "hugetlb");
        refused("/linux/resources/rdma", "{\"mlx\":{\"hcaHandles\":1}}", "linux.resources.rdma", "rdma");
        refused("/linux/resources/unified", "{\"memory.high\":\"1\"}", "linux.resources.unified", "unified");
        refused("/linux/intelRdt", "{\"closID\":\"x\"}", "linux.intelRdt", "intelRdt");
        refused("/linux/personality", "{\"domain\":\"LINUX32\"}", "linux.personality", "personality");
        refused("/root", "{}", "root.path", "no root.path");
        refused("/linux/maskedPaths/0", "\"/proc/../etc\"", "linux.maskedPaths[0]", "a masked path with \"..\"");
        refused("/linux/readonlyPaths/0", "\"proc/sys\"", "linux.readonlyPaths[0]", "a relative read-only path");
        refused("/linux/maskedPaths", "\"/proc/kcore\"", "linux.maskedPaths", "maskedPaths not an array");
        refused("/process/capabilities/ambient", "[\"CAP_SYS_ADMIN\"]", "process.capabilities.ambient",
                "CAP_SYS_ADMIN in ambient");
        return done_testing();
}
