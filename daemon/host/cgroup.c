/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <sys/types.h>
#include <unistd.h>

#include <systemd/sd-bus.h>
#include <systemd/sd-login.h>

#include "cgroup.h"
#include "log.h"
#include "macro.h"
#include "util.h"

int cg_find_mount(char **ret) {
        return mountinfo_find("cgroup2", ret);
}

int cg_self_path(char **ret) {
        _cleanup_free_ char *line = NULL;
        size_t alloc = 0;
        FILE *f = fopen("/proc/self/cgroup", "re");
        int r = -ENOENT;

        if (!f)
                return -errno;
        while (getline(&line, &alloc, f) >= 0) {
                if (strncmp(line, "0::", 3) != 0)
                        continue;
                line[strcspn(line, "\n")] = '\0';
                *ret = strdup(line + 3);
                r = *ret ? 0 : -ENOMEM;
                break;
        }
        fclose(f);
        return r;
}

int cg_write(int dir_fd, const char *file, const char *value) {
        _cleanup_close_ int fd = openat(dir_fd, file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        size_t n = strlen(value);
        if (fd < 0)
                return -errno;
        ssize_t k = write(fd, value, n);
        if (k < 0)
                return -errno;
        return (size_t) k == n ? 0 : -EIO;
}

int cg_apply_limits_at(int dir_fd, const CgroupRoot *root, const CgLimits *l, unsigned mask) {
        char buf[64];
        int r = 0;

        mask &= root->enforceable;
        if ((mask & CG_MEMORY) && l->memory) {
                snprintf(buf, sizeof(buf), "%" PRIu64, l->memory);
                r = r ?: cg_write(dir_fd, "memory.max", buf);
                snprintf(buf, sizeof(buf), "%" PRIu64, l->swap);
                r = r ?: cg_write(dir_fd, "memory.swap.max", buf);
                r = r ?: cg_write(dir_fd, "memory.oom.group", l->oom_group ? "1" : "0");
        }
        if ((mask & CG_PIDS) && l->pids) {
                snprintf(buf, sizeof(buf), "%" PRIu64, l->pids);
                r = r ?: cg_write(dir_fd, "pids.max", buf);
        }
        if ((mask & CG_CPU) && l->millicpus) {
                /* quota per 100ms period: 1000 millicpus = one full core (as cgroup-limits.c). */
                snprintf(buf, sizeof(buf), "%" PRIu64 " 100000", l->millicpus * 100);
                r = r ?: cg_write(dir_fd, "cpu.max", buf);
        }
        return r;
}

int cg_read(int dir_fd, const char *file, char *buf, size_t size) {
        return read_small_file(dir_fd, file, true, buf, size);
}

int cg_parse_keyed(const char *buf, const char *key, uint64_t *ret) {
        size_t klen = strlen(key);
        for (const char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
                if (strncmp(p, key, klen) == 0 && p[klen] == ' ') {
                        *ret = strtoull(p + klen + 1, NULL, 10);
                        return 0;
                }
        }
        return -ENOENT;
}

int cg_read_keyed(int dir_fd, const char *file, const char *key, uint64_t *ret) {
        char buf[4096];
        int r = cg_read(dir_fd, file, buf, sizeof(buf));
        if (r < 0)
                return r;
        return cg_parse_keyed(buf, key, ret);
}

int cg_read_u64(int dir_fd, const char *file, uint64_t *ret) {
        char buf[64];
        int r = cg_read(dir_fd, file, buf, sizeof(buf));
        if (r < 0)
                return r;
        if (strncmp(buf, "max", 3) == 0) {
                *ret = UINT64_MAX;
                return 0;
        }
        *ret = strtoull(buf, NULL, 10);
        return 0;
}

int cg_create(int parent_fd, const char *name, int *ret_fd) {
        int fd;
        if (mkdirat(parent_fd, name, 0755) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        return 0;
}

int cg_remove_tree(int parent_fd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        DIR *d;
        struct dirent *de;
        int r = 0;

        /* Most have no children (a leaf, or a sandbox whose init leaf went first): no walk. */
        if (unlinkat(parent_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
                return 0;
        fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        d = fdopendir(TAKE_FD(fd));
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                if (de->d_type != DT_DIR || strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                int k = cg_remove_tree(dirfd(d), de->d_name);
                if (k < 0 && r == 0)
                        r = k;
        }
        closedir(d);
        if (unlinkat(parent_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
                r = -errno;
        return r;
}

int cg_enable_controllers(int dir_fd, unsigned mask) {
        char buf[64] = "";
        if (mask & CG_MEMORY)
                strcat(buf, "+memory ");
        if (mask & CG_PIDS)
                strcat(buf, "+pids ");
        if (mask & CG_CPU)
                strcat(buf, "+cpu ");
        if (!buf[0])
                return 0;
        return cg_write(dir_fd, "cgroup.subtree_control", buf);
}

/* Set when the kernel has no cgroup.kill (before Linux 5.14), or a test asks for the fallback. */
static bool kill_by_pidfd;

#define KILL_MAX_DEPTH 8
#define KILL_MAX_PIDS 4096

/* The pids in dir_fd/cgroup.procs and below, at most max of them; how many, or -errno. */
static int list_procs(int dir_fd, unsigned depth, pid_t *pids, int n, int max) {
        _cleanup_close_ int fd = openat(dir_fd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
        FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
        long pid;
        DIR *d;
        struct dirent *de;

        if (!f)
                return -errno;
        fd = -EBADF; /* the FILE has it */
        while (n < max && fscanf(f, "%ld", &pid) == 1)
                if (pid > 0)
                        pids[n++] = (pid_t) pid;
        fclose(f);
        if (depth >= KILL_MAX_DEPTH || (fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
            !(d = fdopendir(fd)))
                return n;
        fd = -EBADF;
        while (n < max && (de = readdir(d))) {
                int sub;
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0)
                        continue;
                int k = list_procs(sub, depth + 1, pids, n, max);
                close(sub);
                if (k > n)
                        n = k;
        }
        closedir(d);
        return n;
}

int cg_list_pids(int dir_fd, pid_t *pids, int max) {
        return list_procs(dir_fd, 0, pids, 0, max);
}

int cg_list_own_pids(int dir_fd, pid_t *pids, int max) {
        return list_procs(dir_fd, KILL_MAX_DEPTH, pids, 0, max);
}

static bool listed(const pid_t *pids, int n, pid_t pid) {
        for (int i = 0; i < n; i++)
                if (pids[i] == pid)
                        return true;
        return false;
}

/* Up to 100 ms for a freeze to take hold (cgroup.events "frozen 1"): from then on nothing in the
 * cgroup forks or exits on its own. */
static void wait_frozen(int dir_fd) {
        for (int i = 0; i < 100; i++) {
                uint64_t frozen = 0;
                if (cg_read_keyed(dir_fd, "cgroup.events", "frozen", &frozen) < 0 || frozen)
                        return;
                usleep(1000);
        }
}

#define KILL_BATCH 64

/* SIGKILL through a pidfd each of pids[0..n) that is still in the cgroup once its pidfd is open:
 * a pid that meanwhile went to a process elsewhere is no longer listed. At most KILL_BATCH
 * pidfds at once, so that a daemon short of fds still kills. */
static int kill_listed(int dir_fd, const pid_t *pids, int n) {
        static pid_t now[KILL_MAX_PIDS];
        int fds[KILL_BATCH], r = 0;

        for (int b = 0; b < n; b += KILL_BATCH) {
                int k = n - b < KILL_BATCH ? n - b : KILL_BATCH, m;
                for (int i = 0; i < k; i++) {
                        fds[i] = (int) syscall(SYS_pidfd_open, pids[b + i], 0);
                        if (fds[i] < 0 && errno != ESRCH)
                                r = -errno;
                }
                m = list_procs(dir_fd, 0, now, 0, KILL_MAX_PIDS);
                if (m < 0)
                        r = m;
                for (int i = 0; i < k; i++) {
                        if (fds[i] < 0)
                                continue;
                        if (m >= 0 && listed(now, m, pids[b + i]) &&
                            syscall(SYS_pidfd_send_signal, fds[i], SIGKILL, NULL, 0) < 0 && errno != ESRCH)
                                r = -errno;
                        close(fds[i]);
                }
        }
        return r;
}

/* What cgroup.kill does, the way it was done before it (THREATS DMN-07): freeze the subtree and
 * wait for the freeze to take hold, so that nothing in it forks or exits on its own; SIGKILL every
 * process listed in it and below (kill_listed; SIGKILL reaches frozen tasks); list again, as a
 * freeze that did not take hold in time may have let a fork through, until nothing is left or
 * four rounds are done; thaw. Callers that must see the cgroup empty (teardown, restart) kill
 * again until it is. */
static int cg_kill_fallback(int dir_fd) {
        static pid_t pids[KILL_MAX_PIDS];
        int n, r = 0;

        (void) cg_write(dir_fd, "cgroup.freeze", "1");
        wait_frozen(dir_fd);
        for (int round = 0; round < 4; round++) {
                n = list_procs(dir_fd, 0, pids, 0, KILL_MAX_PIDS);
                if (n <= 0) {
                        if (n < 0)
                                r = n;
                        break;
                }
                r = kill_listed(dir_fd, pids, n);
        }
        (void) cg_write(dir_fd, "cgroup.freeze", "0");
        return r;
}

int cg_kill(int dir_fd) {
        return kill_by_pidfd ? cg_kill_fallback(dir_fd) : cg_write(dir_fd, "cgroup.kill", "1");
}

bool cg_kill_wait_empty(int dir_fd, bool thaw, unsigned max_ms) {
        if (thaw)
                (void) cg_write(dir_fd, "cgroup.freeze", "0");
        for (unsigned i = 0; i < max_ms && cg_populated(dir_fd) > 0; i++) {
                (void) cg_kill(dir_fd);
                usleep(1000);
        }
        return cg_populated(dir_fd) <= 0;
}

int cg_open_kill(int dir_fd) {
        int fd;

        if (kill_by_pidfd)
                return -ENOENT;
        fd = openat(dir_fd, "cgroup.kill", O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        return fd < 0 ? -errno : fd;
}

int cg_kill_at(int kill_fd, int dir_fd) {
        if (kill_fd < 0)
                return cg_kill(dir_fd);
        return write(kill_fd, "1", 1) == 1 ? 0 : -errno;
}

void cg_read_usage(int dir_fd, unsigned mask, CgUsage *ret) {
        *ret = (CgUsage) { CG_USAGE_UNKNOWN, CG_USAGE_UNKNOWN, CG_USAGE_UNKNOWN };
        if ((mask & CG_MEMORY) && cg_read_u64(dir_fd, "memory.current", &ret->memory_bytes) < 0)
                ret->memory_bytes = CG_USAGE_UNKNOWN;
        if ((mask & CG_PIDS) && cg_read_u64(dir_fd, "pids.current", &ret->pids) < 0)
                ret->pids = CG_USAGE_UNKNOWN;
        if (cg_read_keyed(dir_fd, "cpu.stat", "usage_usec", &ret->cpu_usec) < 0)
                ret->cpu_usec = CG_USAGE_UNKNOWN;
}

int cg_populated(int dir_fd) {
        uint64_t v;
        int r = cg_read_keyed(dir_fd, "cgroup.events", "populated", &v);
        if (r < 0)
                return r;
        return v ? 1 : 0;
}

int cg_frozen(int dir_fd) {
        uint64_t v;
        int r = cg_read_keyed(dir_fd, "cgroup.events", "frozen", &v);
        if (r < 0)
                return r;
        return v ? 1 : 0;
}

int cg_move_pid(int dir_fd, int pid) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%d", pid);
        return cg_write(dir_fd, "cgroup.procs", buf);
}

static unsigned parse_controllers(const char *s) {
        unsigned mask = 0;
        char buf[512], *save = NULL;
        snprintf(buf, sizeof(buf), "%s", s);
        for (char *w = strtok_r(buf, " \n", &save); w; w = strtok_r(NULL, " \n", &save)) {
                if (strcmp(w, "memory") == 0)
                        mask |= CG_MEMORY;
                else if (strcmp(w, "pids") == 0)
                        mask |= CG_PIDS;
                else if (strcmp(w, "cpu") == 0)
                        mask |= CG_CPU;
        }
        return mask;
}

static int cg_controllers(int dir_fd, unsigned *ret) {
        char buf[512];
        int r = cg_read(dir_fd, "cgroup.controllers", buf, sizeof(buf));
        if (r < 0)
                return r;
        *ret = parse_controllers(buf);
        return 0;
}

/* The base: an explicit override, or the cgroup we were started in (systemd's Delegate=yes gives
 * us that subtree). When we run in the root cgroup (no delegation), a "sandboxd" child of the root
 * is used so that we never put processes into the root's own controllers. */
static int cg_pick_base(const char *override, const char *mount, char **ret) {
        _cleanup_free_ char *self = NULL;
        int r;

        if (override) {
                if (strncmp(override, mount, strlen(mount)) != 0 || override[strlen(mount)] != '/')
                        return -EXDEV;
                *ret = strdup(override);
                return *ret ? 0 : -ENOMEM;
        }
        r = cg_self_path(&self);
        if (r < 0)
                return r;
        /* A daemon restarted inside its own leaf ("<base>/daemon") finds the same base again. */
        size_t n = strlen(self);
        if (n >= 7 && strcmp(self + n - 7, "/daemon") == 0)
                self[n - 7] = '\0';
        if (strcmp(self, "/") == 0 || !*self)
                return asprintf(ret, "%s/sandboxd", mount) < 0 ? -ENOMEM : 0;
        return asprintf(ret, "%s%s", mount, self) < 0 ? -ENOMEM : 0;
}

/* Started by systemd (INVOCATION_ID), we may only create cgroups below our unit's if systemd
 * delegated it to us: it marks such a cgroup with trusted.delegate (or user.delegate, for a user
 * manager) since systemd 251. Without Delegate=yes the cgroup stays systemd's, which may move or
 * remove what we put there at its next reload; that is no ground for authoritative limits (THREATS
 * DMN-04). --cgroup-root names a directory of one's own and skips this. */
/* Before systemd 251 there is no mark: ask systemd (its private socket, root only, no D-Bus
 * daemon needed) whether our unit has Delegate=yes. 1 yes, 0 no, < 0 cannot tell. */
static int unit_delegates(void) {
        _cleanup_free_ char *unit = NULL, *path = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus *bus = NULL;
        const char *iface;
        int r, delegate = 0;

        if ((r = sd_pid_get_unit(0, &unit)) < 0)
                return r;
        iface = strlen(unit) > 6 && strcmp(unit + strlen(unit) - 6, ".scope") == 0 ? "org.freedesktop.systemd1.Scope"
                                                                                    : "org.freedesktop.systemd1.Service";
        if ((r = sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit, &path)) < 0 || (r = sd_bus_new(&bus)) < 0)
                return r;
        if ((r = sd_bus_set_address(bus, "unix:path=/run/systemd/private")) >= 0 && (r = sd_bus_start(bus)) >= 0)
                r = sd_bus_get_property_trivial(bus, "org.freedesktop.systemd1", path, iface, "Delegate", &error, 'b',
                                                &delegate);
        sd_bus_error_free(&error);
        sd_bus_flush_close_unref(bus);
        return r < 0 ? r : delegate != 0;
}

static int cg_check_delegated(const char *base) {
        char v[8];
        int r;

        if (!getenv("INVOCATION_ID"))
                return 0;
        /* SANDBOXD_TEST_NO_DELEGATE_MARK: the tests' way to the question to systemd. */
        for (const char *const *x = (const char *const[]) { "trusted.delegate", "user.delegate", NULL };
             *x && !getenv("SANDBOXD_TEST_NO_DELEGATE_MARK"); x++) {
                ssize_t n = getxattr(base, *x, v, sizeof(v) - 1);
                if (n > 0) {
                        v[n] = '\0';
                        if (strcmp(v, "1") == 0)
                                return 0;
                }
        }
        r = unit_delegates();
        if (r > 0)
                return 0;
        if (r < 0)
                log_error_errno(r, "the cgroup %s has no mark of delegation (trusted.delegate, systemd 251 and later), and "
                                "systemd could not be asked whether its unit has Delegate=yes: %m", base);
        log_error("the cgroup %s was not delegated to sandboxd: its unit has no Delegate=yes, so systemd owns it "
                  "and may undo what sandboxd does there. Add Delegate=yes to the unit (the packaged sandboxd.service "
                  "has it), or give sandboxd a cgroup of its own with --cgroup-root (cgroup_root in sandboxd.conf)",
                  base);
        return -EPERM;
}

static int mkdir_p(const char *path) {
        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = '\0';
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

/* The first pid in base/daemon, where a live daemon of this subtree sits; 0: none found. */
static pid_t cg_daemon_pid(int base_fd) {
        char buf[64];
        long pid;
        if (cg_read(base_fd, "daemon/cgroup.procs", buf, sizeof(buf)) < 0 || sscanf(buf, "%ld", &pid) != 1 || pid <= 0)
                return 0;
        return (pid_t) pid;
}

/* One daemon per subtree: a second one would take the first's sandboxes for an earlier
 * daemon's, remove their "stale" cgroups and kill them. The lock is the kernel's (flock on the
 * base directory, an fd of our own with O_CLOEXEC, which no helper or holder keeps past its
 * exec): it goes with its holder, so a dead daemon never blocks the next, and one that is
 * stopping gets a few seconds to go. Taken before anything below base is touched. */
static int cg_lock(CgroupRoot *root) {
        pid_t other;
        int k;

        root->lock_fd = open(root->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root->lock_fd < 0)
                return -errno;
        k = flock_wait(root->lock_fd, 50);
        if (k != -EBUSY)
                return k;
        other = cg_daemon_pid(root->base_fd);
        log_error("another sandboxd%s%.0ld%s owns the cgroup subtree %s: two daemons must never share one (each would take "
                  "the other's sandboxes for stale and kill them). Give this daemon a subtree of its own with --cgroup-root "
                  "%s/NAME (cgroup_root in sandboxd.conf) and a state directory of its own, or stop the other one first",
                  other ? " (pid " : "", (long) other, other ? ")" : "", root->base, root->mount);
        return -EBUSY;
}

static void cg_probe_features(CgroupRoot *root) {
        struct stat st;
        /* SANDBOXD_TEST_NO_CGROUP_KILL: the tests' way to the fallback on a kernel that has it. */
        root->has_kill = fstatat(root->base_fd, "cgroup.kill", &st, 0) == 0 && !getenv("SANDBOXD_TEST_NO_CGROUP_KILL");
        kill_by_pidfd = !root->has_kill;
        root->has_memory_peak = (root->enforceable & CG_MEMORY) &&
                                fstatat(root->sandboxes_fd, "memory.peak", &st, 0) == 0;
        root->has_pids_peak = (root->enforceable & CG_PIDS) && fstatat(root->sandboxes_fd, "pids.peak", &st, 0) == 0;
}

int cg_setup(const char *override, CgroupRoot *ret) {
        CgroupRoot root = { .base_fd = -EBADF, .sandboxes_fd = -EBADF, .lock_fd = -EBADF };
        _cleanup_close_ int daemon_fd = -EBADF;
        unsigned avail = 0;
        int r;

        r = cg_find_mount(&root.mount);
        if (r < 0)
                goto fail;
        r = cg_pick_base(override, root.mount, &root.base);
        if (r < 0)
                goto fail;
        if (!override && (r = cg_check_delegated(root.base)) < 0)
                goto fail;
        r = mkdir_p(root.base);
        if (r < 0)
                goto fail;
        root.base_fd = open(root.base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root.base_fd < 0) {
                r = -errno;
                goto fail;
        }
        r = cg_lock(&root);
        if (r < 0)
                goto fail;
        /* No internal processes: leave base before enabling controllers for its children. */
        r = cg_create(root.base_fd, "daemon", &daemon_fd);
        if (r < 0)
                goto fail;
        r = cg_move_pid(daemon_fd, 0);
        if (r < 0)
                goto fail;
        r = cg_controllers(root.base_fd, &avail);
        if (r < 0)
                goto fail;
        r = cg_enable_controllers(root.base_fd, avail);
        if (r < 0)
                goto fail;
        r = cg_create(root.base_fd, "sandboxes", &root.sandboxes_fd);
        if (r < 0)
                goto fail;
        r = cg_enable_controllers(root.sandboxes_fd, avail);
        if (r < 0)
                goto fail;
        /* What the sandboxes really get is what reached their parent. */
        r = cg_controllers(root.sandboxes_fd, &root.enforceable);
        if (r < 0)
                goto fail;
        cg_probe_features(&root);
        *ret = root;
        return 0;
fail:
        cg_root_done(&root);
        return r;
}

void cg_root_done(CgroupRoot *root) {
        free(root->mount);
        free(root->base);
        safe_close(root->base_fd);
        safe_close(root->sandboxes_fd);
        safe_close(root->lock_fd);
        *root = (CgroupRoot) { .base_fd = -EBADF, .sandboxes_fd = -EBADF, .lock_fd = -EBADF };
}
