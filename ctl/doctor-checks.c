/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl doctor: the checks of the host itself, which need no daemon. Everything is read or
 * probed without changing the host: no cgroup is created, probes run in forked children or with
 * arguments the kernel refuses after it has told whether it knows the call. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "doctor.h"
#include "util.h"

const char *const doctor_controllers[3] = { "memory", "pids", "cpu" };

/* ---- The report -------------------------------------------------------------------------- */

void doctor_done(Doctor *d) {
        for (size_t i = 0; i < d->n_checks; i++) {
                free(d->checks[i].message);
                free(d->checks[i].fix);
        }
        free(d->cg_mount);
        json_object_put(d->hello);
        *d = (Doctor) {};
}

Check *doctor_add(Doctor *d, const char *name, CheckStatus status, CheckImpact impact, const char *fmt, ...) {
        static Check overflow; /* a full report drops the rest rather than fail */
        Check *c = d->n_checks < ELEMENTSOF(d->checks) ? &d->checks[d->n_checks++] : &overflow;
        va_list ap;

        *c = (Check) { .name = name, .status = status, .impact = impact };
        va_start(ap, fmt);
        if (vasprintf(&c->message, fmt, ap) < 0)
                c->message = NULL;
        va_end(ap);
        return c;
}

void check_fix(Check *c, const char *fmt, ...) {
        va_list ap;

        free(c->fix);
        va_start(ap, fmt);
        if (vasprintf(&c->fix, fmt, ap) < 0)
                c->fix = NULL;
        va_end(ap);
}

const char *doctor_mask_names(char *buf, size_t len, unsigned mask) {
        size_t n = 0;

        buf[0] = '\0';
        for (size_t i = 0; i < ELEMENTSOF(doctor_controllers); i++)
                if (mask & (1u << i)) {
                        int k = snprintf(buf + n, len - n, "%s%s", n ? ", " : "", doctor_controllers[i]);
                        if (k < 0 || (size_t) k >= len - n)
                                break;
                        n += (size_t) k;
                }
        return buf;
}

/* "cpuset cpu io memory pids" into a mask of ours. */
unsigned doctor_parse_controllers(const char *list) {
        unsigned mask = 0;
        size_t len;

        for (const char *p = list; *p; p += len) {
                p += strspn(p, " \n");
                len = strcspn(p, " \n");
                for (size_t i = 0; i < ELEMENTSOF(doctor_controllers); i++)
                        if (len == strlen(doctor_controllers[i]) && strncmp(p, doctor_controllers[i], len) == 0)
                                mask |= 1u << i;
        }
        return mask;
}

static int read_long(const char *path, long *ret) {
        char buf[64];
        int r = read_small_file(AT_FDCWD, path, false, buf, sizeof(buf));

        if (r < 0)
                return r;
        *ret = strtol(buf, NULL, 10);
        return 0;
}

/* ---- cgroup v2 --------------------------------------------------------------------------- */

/* The cgroup2 mount point, and whether cgroup v1 hierarchies are mounted beside it. */
static int find_cgroup_mounts(char **ret_v2, bool *ret_v1) {
        int r = mountinfo_find("cgroup2", ret_v2);

        if (r == -ENOENT)
                *ret_v2 = NULL;
        else if (r < 0)
                return r;
        *ret_v1 = mountinfo_find("cgroup", NULL) == 0;
        return 0;
}

void doctor_check_cgroup2(Doctor *d) {
        char path[PATH_MAX], buf[256];
        bool v1 = false;

        if (find_cgroup_mounts(&d->cg_mount, &v1) < 0 || !d->cg_mount) {
                Check *c = doctor_add(d, "cgroup2", CHECK_FAIL, IMPACT_CANNOT_RUN, "cgroup v2 is not mounted");
                check_fix(c, "sandboxd needs the unified cgroup hierarchy: boot with systemd.unified_cgroup_hierarchy=1 "
                             "(the default since Debian 11 and systemd 247), or mount it: mount -t cgroup2 none /sys/fs/cgroup");
                return;
        }
        snprintf(path, sizeof(path), "%s/cgroup.controllers", d->cg_mount);
        if (read_small_file(AT_FDCWD, path, false, buf, sizeof(buf)) >= 0)
                d->v2_controllers = doctor_parse_controllers(buf);
        if (!v1) {
                doctor_add(d, "cgroup2", CHECK_OK, IMPACT_NONE, "cgroup v2 at %s (unified hierarchy)", d->cg_mount);
                return;
        }
        /* Hybrid is fine where the controllers are free for v2: the controllers check says if not. */
        doctor_add(d, "cgroup2", CHECK_OK, IMPACT_NONE, "cgroup v2 at %s (hybrid mode: cgroup v1 hierarchies are mounted too)",
                   d->cg_mount);
}

/* From /proc/cgroups: which of ours the kernel has, has enabled, and binds to a v1 hierarchy. */
static void kernel_controllers(unsigned *ret_known, unsigned *ret_disabled, unsigned *ret_v1) {
        _cleanup_free_ char *line = NULL;
        size_t alloc = 0;
        FILE *f = fopen("/proc/cgroups", "re");

        *ret_known = *ret_disabled = *ret_v1 = 0;
        if (!f)
                return;
        while (getline(&line, &alloc, f) >= 0) {
                char name[64];
                int hierarchy, n, enabled;
                if (line[0] == '#' || sscanf(line, "%63s %d %d %d", name, &hierarchy, &n, &enabled) != 4)
                        continue;
                unsigned bit = doctor_parse_controllers(name);
                *ret_known |= bit;
                if (!enabled)
                        *ret_disabled |= bit;
                else if (hierarchy != 0)
                        *ret_v1 |= bit;
        }
        fclose(f);
}

static void fix_controllers(Check *c, unsigned missing, unsigned known, unsigned disabled, unsigned v1) {
        char a[64], b[64], e[64];

        if (missing & v1)
                check_fix(c, "the %s controller%s bound to cgroup v1 (hybrid mode); enable %s for cgroup v2: boot with "
                             "systemd.unified_cgroup_hierarchy=1 (or cgroup_no_v1=all) on the kernel command line and reboot",
                          doctor_mask_names(a, sizeof(a), missing & v1), __builtin_popcount(missing & v1) > 1 ? "s are" : " is",
                          __builtin_popcount(missing & v1) > 1 ? "them" : "it");
        else if (missing & disabled)
                check_fix(c, "enable the %s controller: remove cgroup_disable=%s from the kernel command line and reboot",
                          doctor_mask_names(b, sizeof(b), missing & disabled), doctor_mask_names(e, sizeof(e), missing & disabled));
        else if (missing & ~known)
                check_fix(c, "this kernel was built without the %s controller (CONFIG_MEMCG, CONFIG_CGROUP_PIDS, "
                             "CONFIG_CGROUP_SCHED): use a distribution kernel",
                          doctor_mask_names(b, sizeof(b), missing & ~known));
        else
                check_fix(c, "enable the %s controller at the cgroup v2 root: echo '+%s' > cgroup.subtree_control of each "
                             "parent cgroup (systemd does it for a service with Delegate=yes)",
                          doctor_mask_names(b, sizeof(b), missing), doctor_controllers[__builtin_ctz(missing)]);
}

void doctor_check_controllers(Doctor *d) {
        unsigned known, disabled, v1, missing = DOC_ALL & ~d->v2_controllers;
        char buf[64];
        Check *c;

        if (!d->cg_mount)
                return;
        if (!missing) {
                doctor_add(d, "controllers", CHECK_OK, IMPACT_NONE, "memory, pids and cpu are available in cgroup v2");
                return;
        }
        kernel_controllers(&known, &disabled, &v1);
        c = doctor_add(d, "controllers", CHECK_WARN, IMPACT_BEST_EFFORT,
                       "%s not available in cgroup v2 at %s: those limits can only be best-effort",
                       doctor_mask_names(buf, sizeof(buf), missing), d->cg_mount);
        fix_controllers(c, missing, known, disabled, v1);
}

/* ---- User namespaces --------------------------------------------------------------------- */

/* 0 or the errno of unshare() in a forked child, so that nothing of ours changes. */
static int probe_unshare(int flags) {
        int status;
        pid_t pid = fork();

        if (pid < 0)
                return errno;
        if (pid == 0)
                _exit(unshare(flags) < 0 ? (errno & 0x7f) : 0);
        if (waitpid(pid, &status, 0) < 0)
                return errno;
        return WIFEXITED(status) ? WEXITSTATUS(status) : EIO;
}

void doctor_check_userns(Doctor *d) {
        /* What sandboxd asks of clone3() for a sandbox's init. */
        const int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET |
                          CLONE_NEWCGROUP;
        long max = -1;
        int e;
        Check *c;

        if (read_long("/proc/sys/user/max_user_namespaces", &max) == 0 && max == 0) {
                c = doctor_add(d, "userns", CHECK_FAIL, IMPACT_CANNOT_RUN, "user namespaces are switched off (user.max_user_namespaces = 0)");
                check_fix(c, "allow them: sysctl -w user.max_user_namespaces=15000, and keep it in /etc/sysctl.d/sandboxd.conf");
                return;
        }
        e = probe_unshare(flags);
        if (e == 0) {
                doctor_add(d, "userns", CHECK_OK, IMPACT_NONE,
                           "user, mount, pid, ipc, uts, net and cgroup namespaces can be created (user.max_user_namespaces = %ld)", max);
                return;
        }
        if (geteuid() != 0) {
                c = doctor_add(d, "userns", CHECK_WARN, IMPACT_NONE,
                               "uid %u cannot create namespaces (%s); sandboxd runs as root, which this does not show",
                               (unsigned) geteuid(), strerror(e));
                check_fix(c, "run 'sudo sandboxctl doctor' to check what root may do");
                return;
        }
        c = doctor_add(d, "userns", CHECK_FAIL, IMPACT_CANNOT_RUN, "root cannot create the namespaces of a sandbox: unshare: %s",
                       strerror(e));
        if (e == ENOSPC)
                check_fix(c, "raise the limit: sysctl -w user.max_user_namespaces=15000");
        else
                check_fix(c, "a container runtime or a seccomp/LSM policy forbids new namespaces here: run sandboxd on the host, "
                             "or in a container allowed to create namespaces (e.g. --privileged)");
}

/* ---- Kernel features --------------------------------------------------------------------- */

/* 0 when the kernel has it, else the errno that says it has not (ENOSYS) or is not allowed (EPERM). */
static int probe_clone3(void) {
        /* A NULL struct: a kernel that knows clone3 says EFAULT or EINVAL, without forking. */
        if (syscall(SYS_clone3, NULL, 0) < 0 && (errno == ENOSYS || errno == EPERM))
                return errno;
        return 0;
}

/* CLONE_INTO_CGROUP (5.7) with an fd that cannot be open: a kernel that knows the flag looks the fd
 * up and says EBADF before any child exists; an older one refuses the flag with EINVAL. */
static int probe_clone_into_cgroup(void) {
        struct clone_args args = {
                .flags = CLONE_INTO_CGROUP,
                .exit_signal = SIGCHLD,
                .cgroup = INT_MAX,
        };
        long pid = syscall(SYS_clone3, &args, sizeof(args));

        if (pid == 0)
                _exit(0);
        if (pid > 0) {
                (void) waitpid((pid_t) pid, NULL, 0);
                return 0;
        }
        return errno == EBADF ? 0 : errno;
}

static int probe_pidfd_open(void) {
        int fd = (int) syscall(SYS_pidfd_open, getpid(), 0);

        if (fd < 0)
                return errno;
        close(fd);
        return 0;
}

static int probe_openat2(void) {
        struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_MAGICLINKS };
        int fd = (int) syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));

        if (fd < 0)
                return errno;
        close(fd);
        return 0;
}

/* cgroup.kill is in every cgroup but the root: look in the first child of the cgroup2 root. The
 * daemon's hello says it for its own cgroup, which is what counts. */
static int probe_cgroup_kill(Doctor *d) {
        json_object *caps, *k, *v;
        struct dirent *de;
        DIR *dir;
        int r = ENOENT;

        if (d->hello && json_object_object_get_ex(d->hello, "capabilities", &caps) &&
            json_object_object_get_ex(caps, "kernel", &k) && json_object_object_get_ex(k, "cgroup_kill", &v))
                return json_object_get_boolean(v) ? 0 : ENOENT;
        if (!d->cg_mount || !(dir = opendir(d->cg_mount)))
                return ENOENT;
        while ((de = readdir(dir)))
                if (de->d_type == DT_DIR && de->d_name[0] != '.') {
                        struct stat st;
                        char path[PATH_MAX];
                        snprintf(path, sizeof(path), "%s/%s/cgroup.kill", d->cg_mount, de->d_name);
                        r = stat(path, &st) == 0 ? 0 : ENOENT;
                        break;
                }
        closedir(dir);
        return r;
}

static void doctor_check_mounts(Doctor *d);
static void doctor_check_images(Doctor *d);
static void doctor_check_egress(Doctor *d);

typedef struct KernelFeature {
        const char *name;
        const char *since;
        const char *use;
} KernelFeature;

static void kernel_feature(Doctor *d, const KernelFeature *f, int e) {
        struct utsname u;
        Check *c;

        if (e == 0) {
                doctor_add(d, f->name, CHECK_OK, IMPACT_NONE, "%s works", f->name);
                return;
        }
        (void) uname(&u);
        c = doctor_add(d, f->name, CHECK_FAIL, IMPACT_CANNOT_RUN, "%s is not available (%s) on Linux %s; sandboxd needs it %s",
                       f->name, strerror(e), u.release, f->use);
        if (e == EPERM)
                check_fix(c, "a seccomp filter forbids it (a container?): run sandboxd on the host, or allow %s in the "
                             "container's seccomp profile", f->name);
        else
                check_fix(c, "upgrade the kernel to Linux %s or newer (Debian 12 ships 6.1)", f->since);
}

void doctor_check_kernel(Doctor *d) {
        static const KernelFeature features[] = {
                { "clone3", "5.3", "to start every sandbox and run" },
                { "CLONE_INTO_CGROUP", "5.7", "so that a run is born in its own cgroup" },
                { "pidfd_open", "5.3", "to wait for and signal processes without pid reuse races" },
                { "openat2", "5.6", "to resolve a run's working directory safely" },
                { "cgroup.kill", "5.14", "to kill every process of a sandbox at once" },
        };
        int results[] = {
                probe_clone3(), probe_clone_into_cgroup(), probe_pidfd_open(), probe_openat2(), probe_cgroup_kill(d),
        };

        for (size_t i = 0; i < ELEMENTSOF(features); i++)
                kernel_feature(d, &features[i], results[i]);
        doctor_check_mounts(d);
        doctor_check_images(d);
        doctor_check_egress(d);
}

/* The fix that matches the daemon's reason (daemon/sandbox/egress.c's words). */
static const char *egress_fix(const char *reason) {
        if (strstr(reason, "another sandboxd"))
                return "one sandboxd per network namespace gives egress: stop the other instance (another state "
                       "directory, e.g. a test's or a quickstart's daemon) and restart this one, or do without egress here";
        if (strstr(reason, "sandboxd-run-helper"))
                return "install sandboxd-run-helper beside sandboxd (make install puts it in libexecdir), then restart "
                       "sandboxd";
        if (strstr(reason, "nftables"))
                return "install nftables' library (Debian: libnftables1) and load nf_tables, nf_nat, nf_conntrack and "
                       "veth (modules-load.d: the service may not load modules), then restart sandboxd";
        return "see the reason above and the journal of sandboxd (egress:), then restart sandboxd";
}

/* create's "network" egress (the daemon's hello says whether it can be given): nftables, the
 * run helper, and an interface that forwards the replies back. Sandboxes run without. */
static void doctor_check_egress(Doctor *d) {
        json_object *caps, *e, *fwd;
        const char *reason;
        Check *c;

        if (!d->hello || !json_object_object_get_ex(d->hello, "capabilities", &caps) ||
            !json_object_object_get_ex(caps, "egress", &e))
                return;
        reason = json_object_get_string(json_object_object_get(e, "reason"));
        fwd = json_object_object_get(e, "forwarding");
        if (json_object_get_boolean(json_object_object_get(e, "available"))) {
                doctor_add(d, "egress", CHECK_OK, IMPACT_NONE,
                           "sandboxes can be given egress (nftables table inet sandboxd; %s forwards; range %s)",
                           json_object_get_string(json_object_array_get_idx(fwd, 0)),
                           json_object_get_string(json_object_object_get(e, "range")));
                return;
        }
        if (reason) {
                c = doctor_add(d, "egress", CHECK_WARN, IMPACT_NONE, "no egress for sandboxes: %s", reason);
                check_fix(c, "%s", egress_fix(reason));
                return;
        }
        c = doctor_add(d, "egress", CHECK_WARN, IMPACT_NONE,
                       "no egress for sandboxes: no interface of this host forwards, so replies could not come back "
                       "(sandboxd turns forwarding on for its own veth interfaces only)");
        check_fix(c, "turn forwarding on for the interface toward the outside: sysctl -w net.ipv4.conf.IFACE.forwarding=1 "
                     "(and in /etc/sysctl.d to keep it)");
}

/* create's "mounts" need idmapped mounts (mount_setattr, Linux 5.12; tmpfs since 6.3), and a
 * non-root client needs mount_roots: the daemon's hello says both. Sandboxes run without. */
static void doctor_check_mounts(Doctor *d) {
        json_object *caps, *k, *v, *roots;
        struct utsname u;
        Check *c;

        if (!d->hello || !json_object_object_get_ex(d->hello, "capabilities", &caps) ||
            !json_object_object_get_ex(caps, "kernel", &k) || !json_object_object_get_ex(k, "mount_idmap", &v))
                return;
        if (!json_object_get_boolean(v)) {
                (void) uname(&u);
                c = doctor_add(d, "mounts", CHECK_WARN, IMPACT_NONE,
                               "Linux %s has no idmapped mounts (mount_setattr): create's \"mounts\" are refused", u.release);
                check_fix(c, "upgrade the kernel to Linux 5.12 or newer (6.3 for directories on tmpfs)");
                return;
        }
        if (!json_object_object_get_ex(caps, "mount_roots", &roots) || json_object_array_length(roots) == 0) {
                c = doctor_add(d, "mounts", CHECK_WARN, IMPACT_NONE,
                               "idmapped mounts work, but mount_roots is empty: only root may mount its directories in a sandbox");
                check_fix(c, "set mount_roots in sandboxd.conf (e.g. mount_roots = /home) to let users mount theirs");
                return;
        }
        doctor_add(d, "mounts", CHECK_OK, IMPACT_NONE, "idmapped mounts work; users may mount directories beneath %s%s",
                   json_object_get_string(json_object_array_get_idx(roots, 0)),
                   json_object_array_length(roots) > 1 ? " and the other mount_roots" : "");
}

/* Sandboxes from an image need the image store's filesystem idmapped (hello's capabilities.images). */
static const char *member_str(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string) ? json_object_get_string(v)
                                                                                                   : "-";
}

static void doctor_check_images(Doctor *d) {
        json_object *caps, *img, *v;
        Check *c;

        if (!d->hello || !json_object_object_get_ex(d->hello, "capabilities", &caps) ||
            !json_object_object_get_ex(caps, "images", &img) || !json_object_object_get_ex(img, "idmap", &v))
                return;
        if (!json_object_get_boolean(v)) {
                c = doctor_add(d, "images", CHECK_WARN, IMPACT_NONE,
                               "the image store %s cannot be idmapped (%s): create --image is refused",
                               member_str(img, "store"), member_str(img, "error"));
                check_fix(c, "keep the state directory on ext4, xfs or btrfs (tmpfs needs Linux 6.3); sandboxes "
                             "without an image are not affected");
                return;
        }
        doctor_add(d, "images", CHECK_OK, IMPACT_NONE, "images work: the image store %s can be idmapped (%s images)",
                   member_str(img, "store"), json_object_get_string(json_object_object_get(img, "images")));
}

/* ---- Disk -------------------------------------------------------------------------------- */

/* The state directory, or its nearest existing parent when it is not made yet. */
static int statvfs_existing(const char *path, struct statvfs *ret, char *where, size_t len) {
        snprintf(where, len, "%s", path);
        for (;;) {
                char *slash;
                if (statvfs(where, ret) == 0)
                        return 0;
                if (errno != ENOENT || !(slash = strrchr(where, '/')))
                        return -errno;
                if (slash == where) {
                        where[1] = '\0';
                        return statvfs(where, ret) == 0 ? 0 : -errno;
                }
                *slash = '\0';
        }
}

void doctor_check_disk(Doctor *d) {
        const uint64_t low = UINT64_C(256) << 20, too_low = UINT64_C(64) << 20;
        char where[PATH_MAX], f[32], t[32];
        struct statvfs sv;
        uint64_t avail, total;
        Check *c;

        if (statvfs_existing(d->state_dir, &sv, where, sizeof(where)) < 0) {
                c = doctor_add(d, "disk", CHECK_WARN, IMPACT_NONE, "cannot check free space for %s: %m", d->state_dir);
                return;
        }
        avail = (uint64_t) sv.f_bavail * sv.f_frsize;
        total = (uint64_t) sv.f_blocks * sv.f_frsize;
        format_size(f, sizeof(f), avail);
        format_size(t, sizeof(t), total);
        if (avail < too_low) {
                c = doctor_add(d, "disk", CHECK_FAIL, IMPACT_CANNOT_RUN, "%s free of %s at %s (state directory %s): workspaces "
                               "cannot be created", f, t, where, d->state_dir);
                check_fix(c, "free space on the file system of %s, or move state_dir (sandboxd.conf(5)) elsewhere", where);
        } else if (avail < low || avail < total / 20) {
                c = doctor_add(d, "disk", CHECK_WARN, IMPACT_NONE, "only %s free of %s at %s (state directory %s)", f, t,
                               where, d->state_dir);
                check_fix(c, "free space on the file system of %s: every sandbox's workspace lives there", where);
        } else
                doctor_add(d, "disk", CHECK_OK, IMPACT_NONE, "%s free of %s at %s (state directory %s)", f, t, where, d->state_dir);
}
