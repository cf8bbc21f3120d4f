/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a sandbox is built of: its cgroup, its workspace, its init's uid/gid maps, the paths its
 * init masks, and the start of the init itself. Helpers of sandbox.c: they return values and
 * call nothing of its state machine (which watches what they start). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "btrfs.h"
#include "cgroup.h"
#include "log.h"
#include "macro.h"
#include "mount-compat.h"
#include "context.h"
#include "fdstore.h"
#include "idmap.h"
#include "image.h"
#include "disk-quota.h"
#include "mount-open.h"
#include "run-exec.h"
#include "sandbox-internal.h"
#include "spawn.h"
#include "util.h"

/* What the kernel holds the sandbox's cgroup to. */
CgLimits sandbox_cg_limits(const Sandbox *s) {
        return (CgLimits) {
                .memory = s->limits.memory,
                .swap = s->ctx->config.swap_max,
                .pids = s->limits.pids,
                .millicpus = s->limits.millicpus,
                .oom_group = false, /* an OOM kills one run's group, never the whole sandbox */
        };
}

int sandbox_cg_parent_fd(const Sandbox *s) {
        return s->scope_fd >= 0 ? s->scope_fd : s->ctx->cg.sandboxes_fd;
}

const char *sandbox_cg_name(const Sandbox *s) {
        return s->scope_fd >= 0 ? "sandbox" : s->id;
}

/* The cgroup below its parent (sandboxes/, or the scope's), with the limits: never in the
 * scope's own files, which systemd owns and rewrites at a daemon-reload. */
static int sandbox_make_cgroup_in(Sandbox *s, const char *parent_path) {
        Context *m = s->ctx;
        CgLimits l = sandbox_cg_limits(s);
        int r = cg_create(sandbox_cg_parent_fd(s), sandbox_cg_name(s), &s->cg_fd);
        if (r < 0)
                return r;
        free(s->cg_path);
        if (asprintf(&s->cg_path, "%s/%s", parent_path, sandbox_cg_name(s)) < 0) {
                s->cg_path = NULL;
                return -ENOMEM;
        }
        return cg_apply_limits(&m->cg, s->cg_path, &l, s->enforced);
}

static char *sandboxes_path(Context *m) {
        char *p = NULL;
        return asprintf(&p, "%s/sandboxes", m->cg.base) < 0 ? NULL : p;
}

/* Where the sandboxes' controllers are enabled: the scope's subtree_control, allowed once the
 * scope's own cgroup holds no process (its placeholder is in hold/: no internal processes). */
static int sandbox_scope_cgroup(Sandbox *s, const char *scope_path) {
        _cleanup_free_ char *path = strdup(scope_path);
        int r;

        if (!path)
                return -ENOMEM;
        r = cg_enable_controllers(s->scope_fd, s->enforced);
        return r < 0 ? r : sandbox_make_cgroup_in(s, path);
}

int sandbox_hold_start(Sandbox *s) {
        _cleanup_close_ int hold = -EBADF;
        Context *m = s->ctx;
        int r;

        if (s->scope_fd < 0 || s->hold_pidfd >= 0)
                return 0;
        r = cg_create(s->scope_fd, "hold", &hold);
        if (r < 0)
                return r;
        s->hold_pid = run_exec_placeholder(m->run_helper_fd, run_exec_into_cgroup() ? hold : -1, &s->hold_pidfd);
        if (s->hold_pid < 0) {
                r = s->hold_pid;
                s->hold_pid = 0;
                s->hold_pidfd = -EBADF;
                return r;
        }
        return run_exec_into_cgroup() ? 0 : cg_move_pid(hold, s->hold_pid);
}

static void hold_kill(Sandbox *s) {
        if (s->hold_pidfd < 0)
                return;
        /* Our child, waiting in pause(): gone as soon as SIGKILL is delivered. */
        (void) syscall(SYS_pidfd_send_signal, s->hold_pidfd, SIGKILL, NULL, 0);
        (void) waitid(P_PIDFD, (id_t) s->hold_pidfd, &(siginfo_t) {}, WEXITED);
        s->hold_pidfd = safe_close(s->hold_pidfd);
        s->hold_pid = 0;
}

void sandbox_hold_end(Sandbox *s) {
        _cleanup_close_ int hold = -EBADF;

        hold_kill(s);
        if (s->scope_fd < 0)
                return;
        /* An earlier daemon's placeholder too (one that died in a restart of the sandbox). */
        hold = openat(s->scope_fd, "hold", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (hold < 0)
                return;
        (void) cg_kill_wait_empty(hold, false, 100);
        (void) unlinkat(s->scope_fd, "hold", AT_REMOVEDIR);
}

void sandbox_release_scope(Sandbox *s) {
        char unit[SCOPE_UNIT_MAX];

        s->scope_job = scope_job_cancel(s->scope_job);
        hold_kill(s);
        if (s->scope_fd < 0 || !s->ctx->scopes)
                return;
        sandbox_hold_end(s);
        /* Empty, systemd stops it by itself; a stop asked for says so at once. */
        (void) scope_stop(s->ctx->scopes, scope_unit_name(unit, s->id));
        s->scope_fd = safe_close(s->scope_fd);
}

/* The scope's placeholder, born in our own cgroup: systemd moves it into the new scope (PIDs=). */
static int sandbox_scope_begin(Sandbox *s, ScopeDone done) {
        Context *m = s->ctx;
        char unit[SCOPE_UNIT_MAX], desc[160];
        int r;

        s->hold_pid = run_exec_placeholder(m->run_helper_fd, -1, &s->hold_pidfd);
        if (s->hold_pid < 0) {
                r = s->hold_pid;
                s->hold_pid = 0;
                s->hold_pidfd = -EBADF;
                return r;
        }
        snprintf(desc, sizeof(desc), "sandbox %s of uid %u%s%s%s", s->id, (unsigned) s->owner_uid, s->name ? " (" : "",
                 s->name ? s->name : "", s->name ? ")" : "");
        r = scope_start(m->scopes, scope_unit_name(unit, s->id), desc, s->hold_pid, done, s, &s->scope_job);
        if (r < 0)
                hold_kill(s);
        return r < 0 ? r : 1;
}

int sandbox_settle_scope(Sandbox *s) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int hold = -EBADF;
        char unit[SCOPE_UNIT_MAX];
        int r;

        s->scope_fd = scope_open_cgroup(s->ctx->scopes, scope_unit_name(unit, s->id), &path);
        if (s->scope_fd < 0)
                return s->scope_fd;
        r = cg_create(s->scope_fd, "hold", &hold);
        if (r >= 0)
                r = cg_move_pid(hold, s->hold_pid);
        return r < 0 ? r : sandbox_scope_cgroup(s, path);
}

/* The cgroup where the sandbox is now: in its scope (s->scope_fd, reopened for its path), or in
 * the subtree. */
static int sandbox_make_cgroup_here(Sandbox *s) {
        _cleanup_free_ char *path = NULL;
        char unit[SCOPE_UNIT_MAX];
        int fd;

        if (s->scope_fd < 0) {
                path = sandboxes_path(s->ctx);
                return path ? sandbox_make_cgroup_in(s, path) : -ENOMEM;
        }
        fd = scope_open_cgroup(s->ctx->scopes, scope_unit_name(unit, s->id), &path);
        if (fd < 0)
                return fd;
        safe_close(s->scope_fd);
        s->scope_fd = fd;
        return sandbox_scope_cgroup(s, path);
}

int sandbox_make_cgroup(Sandbox *s, ScopeDone done) {
        Context *m = s->ctx;
        char unit[SCOPE_UNIT_MAX];
        int r;

        if (m->scopes && s->scope_fd < 0) {
                s->scope_fd = scope_open_cgroup(m->scopes, scope_unit_name(unit, s->id), NULL);
                if (s->scope_fd < 0)
                        return sandbox_scope_begin(s, done);
        }
        /* Its scope outlived its processes (a restore that gives it a new init): kept by a
         * placeholder while the sandbox's cgroup is made again. */
        r = sandbox_hold_start(s);
        return r < 0 ? r : sandbox_make_cgroup_here(s);
}

/* A directory of the sandbox's own files: on btrfs storage a subvolume in its qgroup (O(1)
 * snapshots, disk-quota.h), else a directory. 0755, root's. There already: left as it is. */
static int make_work_dir(Sandbox *s, int dir_fd, const char *name) {
        struct stat st;
        int r;

        if (!s->ctx->features.btrfs)
                return mkdirat(dir_fd, name, 0755) < 0 && errno != EEXIST ? -errno : 0;
        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
        r = btrfs_subvol_create(dir_fd, name, 0);
        if (r < 0)
                return r;
        /* Made 0777 less the umask, as mkdir would be. */
        return fchmodat(dir_fd, name, 0755, 0) < 0 ? -errno : 0;
}

/* <state>/<id>/work (and root-upper for an overlay root), owned by the sandbox's unprivileged user (uid 1000 inside, host_uid + 1000
 * outside), so that runs write there without being root. The sandbox reaches it through an fd,
 * so the path's own permissions may stay closed to everyone else. */
int sandbox_make_workspace(Sandbox *s, bool existing) {
        _cleanup_close_ int dfd = -EBADF;
        int state_fd = s->ctx->state_fd, r;

        if (mkdirat(state_fd, s->id, 0700) < 0 && (!existing || errno != EEXIST))
                return -errno;
        dfd = openat(state_fd, s->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        /* Before anything is made in it: what is made below inherits the project. */
        /* A restored sandbox's quota waits for its record's limits (sandbox_quota_restore()). */
        if (!existing && (r = sandbox_quota_apply(s, dfd, false)) < 0)
                return r;
        if ((r = make_work_dir(s, dfd, "work")) < 0)
                return r;
        if (fchownat(dfd, "work", s->host_uid + SANDBOX_USER_UID, s->host_uid + SANDBOX_USER_GID, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        /* An overlay root's upper layer and overlayfs's work directories, made by whoever mounts
         * them (root-overlay.h); root's alone. */
        /* On btrfs root-upper is a subvolume: overlayfs's work directory must be in the same
         * one as its upper layer (a copy-up renames from one into the other). */
        if (s->root_overlay && s->ctx->features.btrfs) {
                if ((r = make_work_dir(s, dfd, SANDBOX_ROOT_UPPER)) < 0)
                        return r;
                if (fchmodat(dfd, SANDBOX_ROOT_UPPER, 0700, 0) < 0)
                        return -errno;
        }
        if (s->root_overlay && mkdirat(dfd, SANDBOX_ROOT_UPPER, 0700) < 0 && errno != EEXIST)
                return -errno;
        /* On btrfs the limit is on the subvolumes themselves, made just now (disk-quota.h). */
        if (s->ctx->features.btrfs && !existing && (r = sandbox_quota_apply(s, dfd, false)) < 0)
                return r;
        s->workdir_fd = openat(dfd, "work", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return s->workdir_fd < 0 ? -errno : 0;
}

static int write_proc_file(pid_t pid, const char *file, const char *text) {
        char path[64];
        _cleanup_close_ int fd = -EBADF;
        snprintf(path, sizeof(path), "/proc/%d/%s", (int) pid, file);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return write(fd, text, strlen(text)) < 0 ? -errno : 0;
}

/* uid/gid 0..range-1 inside map to host_uid.. outside. setgroups is allowed, for a run's
 * "user.groups" (an OCI process's additionalGids): CVE-2014-8989 is a process dropping a group
 * it brought from outside to pass a negative group ACL, and nothing enters a sandbox holding one
 * (the daemon and the helper drop theirs, the command checks it holds none before it sets the
 * run's); setgroups takes only gids of the sandbox's own range, and root inside could become any
 * of them with setgid anyway. The init is our unreaped child, so its pid cannot have been reused. */
int sandbox_write_maps(Sandbox *s) {
        char map[64];
        int r;
        snprintf(map, sizeof(map), "0 %u %" PRIu64 "\n", (unsigned) s->host_uid, s->ctx->config.uid_range);
        if ((r = write_proc_file(s->init_pid, "uid_map", map)) < 0 ||
            (r = write_proc_file(s->init_pid, "setgroups", "allow")) < 0 ||
            (r = write_proc_file(s->init_pid, "gid_map", map)) < 0)
                return r;
        /* The reaper must outlive any memory hog of the sandbox. */
        (void) write_proc_file(s->init_pid, "oom_score_adj", "-1000");
        return 0;
}

/* Half the memory limit: well below memory.max, so that a full /tmp is ENOSPC and the sandbox's
 * processes keep the other half (THREATS RES-03). The same bound where the memory controller is
 * missing, where it is all that keeps a sandbox's /tmp from the host's memory. */
static uint64_t sandbox_tmpfs_size(const Sandbox *s) {
        return s->limits.memory / 2;
}

static const char **sandbox_mask_paths(Context *m) {
        static const char *paths[CONTEXT_MAX_MASKED + 2];
        size_t n = 0;
        paths[n++] = m->config.state_dir;
        for (unsigned i = 0; i < m->n_masked; i++)
                if (m->masked_paths[i])
                        paths[n++] = m->masked_paths[i];
        paths[n] = NULL;
        return paths;
}

/* The init cloned by the exec'd helper (run-exec.h): nothing of the daemon is copied, and the
 * init stays a small process whatever the daemon's heap holds. Its pidfd arrives later, on the
 * setup socket (on_setup_report).
 *
 * Where the helper can be born in the sandbox's cgroup (run_exec_into_cgroup()), it clones the
 * init straight into its leaf, with the sandbox's cgroup namespace rooted there: moving a process
 * between cgroups waits for an RCU grace period (cgroup_threadgroup_rwsem), about 9 ms each time
 * here, and was the largest part of making a sandbox. */
static pid_t sandbox_exec_init(Sandbox *s, int sp[2], InitParams *p, int *ret_pidfd) {
        Context *m = s->ctx;
        _cleanup_close_ int leaf = -EBADF;
        pid_t pid;

        /* Not into a frozen cgroup (launch.c's launch_cgroup_frozen() says why): the helper is then born
         * in ours, and the init it clones (no vfork) waits in the sandbox's for the thaw. */
        if (run_exec_into_cgroup() && cg_frozen(s->cg_fd) == 0 && cg_create(s->cg_fd, "init", &leaf) >= 0)
                p->cgroupns_ready = true;
        pid = run_exec_init(m->run_helper_fd, p, s->cg_fd, p->cgroupns_ready ? leaf : -1, ret_pidfd);
        close(sp[1]);
        s->setup_fd = sp[0];
        if (pid < 0)
                return pid;
        s->init_pending = true;
        s->init_in_leaf = p->cgroupns_ready;
        return pid;
}

/* A sandbox with egress: a new namespace of the daemon's, never the pool's nor used again, and its
 * way out into it (egress.h). What failed is kept for create's answer (s->net.error). */
static int sandbox_egress_netns(Sandbox *s) {
        Context *m = s->ctx;
        int r;

        free(s->net.error);
        s->net.error = NULL;
        s->netns_fd = netns_pool_fresh(&m->netns);
        if (s->netns_fd < 0) {
                r = s->netns_fd;
                s->net.error = strdup("no network namespace of the daemon's for the sandbox (egress needs one)");
                return r;
        }
        s->net.uid = s->owner_uid;
        r = egress_attach(m, &s->net, s->id, s->netns_fd, &s->net.error);
        if (r < 0)
                log_warning("sandbox %s: no egress: %s", s->id, s->net.error ? s->net.error : strerror(-r));
        return r;
}

/* <state>/images/<image>/rootfs, for the helper that makes an overlay root over it: NULL where
 * the sandbox has none (the host's view, or a read-only image root, which the go brings). */
static const char *sandbox_image_root_path(Sandbox *s, char *buf, size_t len) {
        ImageStore *st = s->ctx->images;

        if (!s->image || !s->root_overlay || !st)
                return NULL;
        snprintf(buf, len, "%s/%s/rootfs", st->dir, s->image);
        return buf;
}

/* One of create's sysctls as the init's "key=value". A network namespace the helper joins is the
 * host user namespace's, written by host root, and the kernel reads ping_group_range's gids in
 * the writer's user namespace: the sandbox's gids A..B are given as the host ids they map to
 * (none where A is past its range). */
static char *sysctl_entry(const Sandbox *s, const char *key, const char *value, bool host_writes_net) {
        uint64_t range = s->ctx->config.uid_range;
        unsigned long long a, b;
        char *out = NULL;
        int n;

        if (!host_writes_net || strcmp(key, "net.ipv4.ping_group_range") != 0 || sscanf(value, "%llu %llu", &a, &b) != 2)
                n = asprintf(&out, "%s=%s", key, value);
        else if (a > b || a >= range)
                n = asprintf(&out, "%s=1 0", key);
        else
                n = asprintf(&out, "%s=%llu %llu", key, (unsigned long long) s->host_uid + a,
                             (unsigned long long) s->host_uid + (b < range ? b : range - 1));
        return n < 0 ? NULL : out;
}

static void sysctl_list_free(char **kv) {
        for (size_t i = 0; kv[i]; i++)
                free(kv[i]);
}

/* kv: INIT_SYSCTLS_MAX + 1 slots, NULL-terminated. */
static int sysctl_list(const Sandbox *s, bool host_writes_net, char **kv) {
        size_t n = 0;

        kv[0] = NULL;
        if (!s->sysctls)
                return 0;
        json_object_object_foreach(s->sysctls, k, v) {
                if (n >= INIT_SYSCTLS_MAX)
                        break;
                if (!(kv[n] = sysctl_entry(s, k, json_object_get_string(v), host_writes_net))) {
                        sysctl_list_free(kv);
                        return -ENOMEM;
                }
                kv[++n] = NULL;
        }
        return 0;
}

/* A namespace where its sysctls were set is never handed to another sandbox (netns-pool.h does
 * not compare sysctls). */
static bool sandbox_sets_net_sysctls(const Sandbox *s) {
        if (!s->sysctls)
                return false;
        json_object_object_foreach(s->sysctls, k, v) {
                (void) v;
                if (strncmp(k, "net.", 4) == 0)
                        return true;
        }
        return false;
}

static pid_t sandbox_exec_init_sysctls(Sandbox *s, int sp[2], InitParams *p, int *ret_pidfd) {
        char *kv[INIT_SYSCTLS_MAX + 1];
        int r = sysctl_list(s, p->netns_fd >= 0, kv);

        if (r < 0) {
                close(sp[0]);
                close(sp[1]);
                return r;
        }
        p->sysctls = (const char *const *) kv;
        pid_t pid = sandbox_exec_init(s, sp, p, ret_pidfd);
        sysctl_list_free(kv);
        return pid;
}

/* create's masked_paths or readonly_paths as the init's list (into the sandbox's own strings). */
static const char *const *paths_list(json_object *paths, const char **out) {
        size_t n = paths ? json_object_array_length(paths) : 0;

        if (n == 0)
                return NULL;
        for (size_t i = 0; i < n && i < INIT_PATHS_MAX; i++)
                out[i] = json_object_get_string(json_object_array_get_idx(paths, i));
        out[n < INIT_PATHS_MAX ? n : INIT_PATHS_MAX] = NULL;
        return out;
}

/* The init, through the helper or cloned here (sandbox-init.h). */
pid_t sandbox_start_init(Sandbox *s, int *ret_helper_pidfd) {
        Context *m = s->ctx;
        char workdir[4096], upper[4096], image[4096];
        const char *masked[INIT_PATHS_MAX + 1], *readonly[INIT_PATHS_MAX + 1];
        InitParams p = {
                .workdir = s->memory_workspace ? NULL : sandbox_workdir_path(s, workdir, sizeof(workdir)),
                .root_dir = m->config.root_dir,
                .hostname = s->hostname ? s->hostname : "sandbox",
                .dev_dir = m->dev_dir,
                .tmpfs_size = sandbox_tmpfs_size(s),
                .mask_paths = sandbox_mask_paths(m),
                .root_binds = (const char *const *) m->config.root_binds,
                .lock_mounts = !s->unprivileged_only,
                .own_root = s->root_path != NULL,
                .own_root_read_only = s->root_read_only,
                .root_upper = { .dir = s->root_overlay ? sandbox_root_upper_path(s, upper, sizeof(upper)) : NULL,
                                .host_uid = s->host_uid,
                                .count = (unsigned) m->config.uid_range },
                .image_root = sandbox_image_root_path(s, image, sizeof(image)),
                .netns_fd = -EBADF,
                .sysfs_fd = -EBADF,
                .masked_paths = paths_list(s->masked_paths, masked),
                .readonly_paths = paths_list(s->readonly_paths, readonly),
        };
        int sp[2];
        pid_t pid;

        /* An image gone since (removed while the daemon was down): the sandbox stays down. */
        if (p.image_root && !image_find(m->images, s->image))
                return -ENOENT;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return -errno;
        p.sync_fd = sp[1];
        if (m->run_helper_fd >= 0) {
                /* A new init (a restore's) gets a namespace as a new sandbox does: every process
                 * of the last one is gone. Its interface and chain, same-named, are gone
                 * before the new ones are made. */
                egress_detach_now(m, &s->net);
                netns_pool_put(&m->netns, TAKE_FD(s->netns_fd));
                if (s->join_netns_fd >= 0) {
                        /* The client's namespace (create's network.netns_fd), as it is. */
                        s->netns_fd = fcntl(s->join_netns_fd, F_DUPFD_CLOEXEC, 3);
                        if (s->netns_fd < 0) {
                                int r = -errno;
                                close(sp[0]);
                                close(sp[1]);
                                return r;
                        }
                } else if (s->net.egress) {
                        int r = sandbox_egress_netns(s);
                        if (r < 0) {
                                close(sp[0]);
                                close(sp[1]);
                                return r;
                        }
                } else if (sandbox_sets_net_sysctls(s))
                        s->netns_fd = netns_pool_fresh(&m->netns);
                else
                        s->netns_fd = netns_pool_get(&m->netns);
                p.netns_fd = s->netns_fd;
                return sandbox_exec_init_sysctls(s, sp, &p, ret_helper_pidfd);
        }
        /* Without the helper, the daemon makes the init's trees: in the host's user namespace. An
         * overlay root needs a process of its own (root-overlay.h): refused at create. */
        if (p.root_upper.dir || s->join_netns_fd >= 0) {
                close(sp[0]);
                close(sp[1]);
                return -EOPNOTSUPP;
        }
        char *kv[INIT_SYSCTLS_MAX + 1];
        int k = sysctl_list(s, false, kv);
        if (k < 0 || init_trees_open(&p) < 0) {
                int r = k < 0 ? k : -errno;
                if (k >= 0)
                        sysctl_list_free(kv);
                close(sp[0]);
                close(sp[1]);
                return r;
        }
        p.sysctls = (const char *const *) kv;
        pid = clone3_pidfd(SANDBOX_NS_FLAGS, s->cg_fd, &s->init_pidfd);
        if (pid == 0) {
                int keep[2 + ROOT_TREES_MAX] = { 2, sp[1] };
                for (unsigned i = 0; i < p.trees.n; i++)
                        keep[2 + i] = p.trees.fd[i];
                close_all_fds_except(keep, 2 + p.trees.n);
                close(sp[0]);
                sandbox_init_main(&p);
        }
        root_trees_close(&p.trees);
        sysctl_list_free(kv);
        close(sp[1]);
        s->setup_fd = sp[0];
        if (pid < 0)
                return pid;
        s->init_pid = pid;
        return pid;
}

static void empty_and_remove(int parent_fd, const char *name) {
        _cleanup_close_ int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (fd < 0)
                return;
        /* It may have been frozen for a snapshot when the daemon died. */
        (void) cg_kill_wait_empty(fd, true, 1000);
        (void) cg_remove_tree(parent_fd, name);
}

/* A cgroup of an earlier daemon's sandbox: its processes did not survive the restart (the init
 * may have), so it is emptied and removed before the sandbox gets a new one. In a scope that
 * still exists, a placeholder keeps the scope meanwhile (systemd collects an empty one). */
int sandbox_clear_old_cgroup(Sandbox *s) {
        Context *m = s->ctx;
        char unit[SCOPE_UNIT_MAX];
        int r;

        empty_and_remove(m->cg.sandboxes_fd, s->id);
        if (!m->scopes)
                return 0;
        s->scope_fd = safe_close(s->scope_fd);
        s->scope_fd = scope_open_cgroup(m->scopes, scope_unit_name(unit, s->id), NULL);
        if (s->scope_fd < 0)
                return s->scope_fd == -ENOENT ? 0 : s->scope_fd;
        r = sandbox_hold_start(s);
        if (r < 0)
                return r;
        empty_and_remove(s->scope_fd, "sandbox");
        return 0;
}

/* A new cgroup, as a new sandbox gets: a cgroup once killed through cgroup.kill may kill what
 * is later cloned into it (seen on 6.18: the new init died of SIGKILL at birth). The scope, kept
 * by its placeholder (sandbox_restart()), stays. */
int sandbox_renew_cgroup(Sandbox *s) {
        sandbox_spare_drop(s);
        s->cg_fd = safe_close(s->cg_fd);
        int r = cg_remove_tree(sandbox_cg_parent_fd(s), sandbox_cg_name(s));
        if (r < 0)
                return r;
        return sandbox_make_cgroup_here(s);
}

/* Which mount_roots entry holds source (lexically; resolution beneath it is the child's), "/"
 * for root. NULL: none. */
static int mount_error(ProtoError *err, const char *field, const SandboxMount *sm, MountStep step, int r) {
        switch (step) {
        case MOUNT_STEP_ROOT:
        case MOUNT_STEP_RESOLVE:
        case MOUNT_STEP_ACCESS:
                if (r == -ELOOP || r == -EXDEV)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                               "%s goes through a symlink (or leaves its mount root): refused, never followed",
                                               sm->source);
                if (r == -ENOENT || r == -ENOTDIR)
                        return proto_error_set(err, SBX_E_NOT_FOUND, field, "%s: %s", sm->source, strerror(-r));
                if (r == -EACCES || r == -EPERM || r == -EROFS)
                        return proto_error_set(err, SBX_E_PERMISSION_DENIED, field,
                                               "%s: you cannot %s it yourself (%s)", sm->source,
                                               sm->read_only ? "read and search" : "read, search and write", strerror(-r));
                break;
        case MOUNT_STEP_FSTYPE:
                if (r == -EMEDIUMTYPE)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                               "%s is a kernel interface (procfs, sysfs, ...), never mounted in a sandbox",
                                               sm->source);
                break;
        case MOUNT_STEP_IDMAP:
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                       "the filesystem of %s cannot be idmapped (%s); sandboxd does not mount a directory "
                                       "whose files a sandbox would write as an unmapped uid",
                                       sm->source, strerror(-r));
        default:
                break;
        }
        if (r == -ETIMEDOUT)
                return proto_error_set(err, SBX_E_INTERNAL, field, "%s: opening it took too long (its filesystem does not answer?)",
                                       sm->source);
        return proto_error_set(err, SBX_E_INTERNAL, field, "%s: step %s: %s", sm->source, mount_step_to_string(step),
                               strerror(-r));
}

/* The init makes a missing mount point one component at a time; in an image's tree, read-only
 * and shared, it can only do so beneath /work (the sandbox's own). Elsewhere the target must be
 * a directory of the image already: said here, at create, rather than as a failed step. */
static int check_image_targets(Sandbox *s, ImageStore *st, ProtoError *err) {
        for (unsigned i = sandbox_caller_workspace(s) ? 1 : 0; i < s->n_mounts; i++) {
                const char *t = s->mounts[i].target;
                char field[48];
                int r;

                if (path_is_below(t, "/work"))
                        continue;
                r = image_dir_exists(st, s->image, t);
                if (r >= 0)
                        continue;
                snprintf(field, sizeof(field), "mounts[%u].target", i - (sandbox_caller_workspace(s) ? 1 : 0));
                return proto_error_set(err, r == -ENOMEM ? SBX_E_INTERNAL : SBX_E_INVALID_REQUEST, field,
                                       "%s %s in image %s (which is read-only): choose a target that is a directory of "
                                       "the image, or one beneath /work",
                                       t, r == -ENOENT ? "does not exist" : r == -ELOOP ? "passes through a symlink"
                                                          : r == -ENOTDIR ? "is not a directory" : strerror(-r),
                                       s->image);
        }
        return 0;
}

int sandbox_check_root(Sandbox *s, ProtoError *err) {
        ImageStore *st = s->ctx->images;

        if (s->root_path)
                return 0; /* opened and checked in sandbox_open_mounts() */

        if (!s->image)
                return 0; /* the host's view: root_trees_open() in the helper */
        if (!st || !image_find(st, s->image))
                return proto_error_set(err, SBX_E_NOT_FOUND, "image", "no image '%s' (removed?)", s->image);
        if (!st->idmap)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "image",
                                       "the filesystem of the image store (%s) cannot be idmapped on this kernel (%s): a "
                                       "sandbox cannot see image '%s' with its owners; keep the state directory on ext4, "
                                       "xfs, btrfs (or tmpfs from Linux 6.3)", st->dir, strerror(st->idmap_error), s->image);
        return check_image_targets(s, st, err);
}

/* The image's rootfs, cloned (without the mounts below it) and idmapped with the init's own
 * user namespace, whose maps are written by now: on-disk id k is host_uid + k, which is k
 * inside. Two syscalls on the daemon's side, no child: what a create from an image costs more
 * than one of the host's view. */
int sandbox_open_root(Sandbox *s) {
        struct mount_attr attr = {
                .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                .propagation = MS_PRIVATE,
        };
        struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        _cleanup_close_ int dir = -EBADF, userns = -EBADF, tree = -EBADF;
        char path[IMAGE_NAME_MAX + 16];

        if (!s->image)
                return -EBADF;
        if (!s->ctx->images || !image_find(s->ctx->images, s->image))
                return -ENOENT;
        snprintf(path, sizeof(path), "%s/rootfs", s->image);
        dir = (int) syscall(SYS_openat2, s->ctx->images->dir_fd, path, &how, sizeof(how));
        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int) s->init_pid);
        if (dir < 0 || (userns = open(path, O_RDONLY | O_CLOEXEC)) < 0)
                return -errno;
        tree = open_tree(dir, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (tree < 0)
                return -errno;
        attr.userns_fd = (uint64_t) userns;
        if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
                return -errno;
        return TAKE_FD(tree);
}

/* Host ids [0, n) on disk are the same ids inside: on disk k is host_uid + k outside, which the
 * init's maps make k again (an image's tree, a root.path, a mount with "idmap": "same"). */
static unsigned same_ids_count(const Sandbox *s) {
        return s->ctx->config.uid_range < 65536 ? (unsigned) s->ctx->config.uid_range : 65536;
}

/* Linux idmaps overlayfs's layers, never an overlayfs mount itself (no FS_ALLOW_IDMAP, still so
 * in 6.18): an engine's "merged" directory is refused, said plainly. Asked of the tree the client
 * sent where there is one: the path may show something else in the daemon's namespace. */
static bool root_is_overlay(const Sandbox *s) {
        struct statfs sfs;
        int r = s->root_sent_tree_fd >= 0 ? fstatfs(s->root_sent_tree_fd, &sfs) : statfs(s->root_path, &sfs);

        return r == 0 && (unsigned long) sfs.f_type == (unsigned long) OVERLAYFS_SUPER_MAGIC;
}

static int root_tree_error(Sandbox *s, const SandboxMount *sm, MountStep step, int r, ProtoError *err) {
        if (step == MOUNT_STEP_IDMAP && root_is_overlay(s))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "root.path",
                                       "%s is an overlayfs mount, which this kernel cannot idmap (%s; it idmaps the "
                                       "layers of an overlay, not the overlay): give a directory of ext4, xfs, btrfs or "
                                       "tmpfs", s->root_path, strerror(-r));
        if (s->root_sent_tree_fd < 0)
                return mount_error(err, "root.path", sm, step, r);
        if (step == MOUNT_STEP_ATTACH)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "root.tree_fd",
                                       "the fd sent for %s is not a detached mount tree (open_tree() with "
                                       "OPEN_TREE_CLONE of it): %s", s->root_path, strerror(-r));
        if (step == MOUNT_STEP_RESOLVE)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "root.tree_fd", "the tree sent for %s %s", s->root_path,
                                       r == -EPERM ? "is the host's root (/)" : "is not a directory");
        return mount_error(err, "root.tree_fd", sm, step, r);
}

/* create's root.path, opened as a root client's mount source is (mount-source.h: no symlink in
 * the path, no kernel filesystem), or the tree the client sent of it (root.tree_fd: a detached
 * tree, checked as strictly), read-only if asked, idmapped with the same ids: into
 * s->root_tree_fd. A sent tree is taken once: the sandbox is never opened again by its path. */
static int sandbox_open_root_path(Sandbox *s, ProtoError *err) {
        MountSource src = { .uid = 0, .gid = 0, .root = "/", .rest = s->root_path + 1, .read_only = s->root_read_only,
                            .read_only_later = s->root_read_only, .map_uid = s->host_uid, .map_gid = s->host_uid, .map_count = same_ids_count(s) };
        SandboxMount sm = { .source = s->root_path, .read_only = s->root_read_only };
        struct stat st;
        MountStep step;
        int fd;

        if (s->root_from_tree && s->root_sent_tree_fd < 0)
                return proto_error_set(err, SBX_E_CONFLICT, "root.tree_fd",
                                       "the root of sandbox %s came as a mount tree (root.tree_fd) that is used up: "
                                       "it is not opened again by its path %s", s->id, s->root_path);
        fd = s->root_sent_tree_fd >= 0 ? mount_open_tree(s->ctx->run_helper_fd, s->root_sent_tree_fd, &src, 10000, &step)
                                       : mount_open(s->ctx->run_helper_fd, &src, 10000, &step);
        if (fd < 0) {
                fd = root_tree_error(s, &sm, step, fd, err);
                s->root_sent_tree_fd = safe_close(s->root_sent_tree_fd);
                return fd;
        }
        s->root_sent_tree_fd = safe_close(s->root_sent_tree_fd);
        if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode)) {
                safe_close(fd);
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "root.path", "%s is not a directory", s->root_path);
        }
        safe_close(s->root_tree_fd);
        s->root_tree_fd = fd;
        return 0;
}

bool sandbox_opens_trees(const Sandbox *s) {
        return s->n_mounts > 0 || s->image || s->root_path;
}

int sandbox_open_mounts(Sandbox *s, ProtoError *err) {
        Context *m = s->ctx;
        int r = sandbox_check_root(s, err);

        if (r < 0)
                return r;
        if (s->root_path && (r = sandbox_open_root_path(s, err)) < 0)
                return r;

        for (unsigned i = 0; i < s->n_mounts; i++) {
                SandboxMount *sm = &s->mounts[i];
                MountSource src = {
                        .uid = s->caller.uid,
                        .gid = s->caller.gid,
                        .n_groups = s->caller.n_groups < MOUNT_GROUPS_MAX ? s->caller.n_groups : MOUNT_GROUPS_MAX,
                        .read_only = sm->read_only,
                        .map_uid = s->host_uid + SANDBOX_USER_UID,
                        .map_gid = s->host_uid + SANDBOX_USER_GID,
                };
                char field[48];
                MountStep step;
                struct stat st;
                int fd;

                if (sm->idmap_same) {
                        src.uid = src.gid = 0;
                        src.map_uid = src.map_gid = s->host_uid;
                        src.map_count = same_ids_count(s);
                }

                if (sandbox_caller_workspace(s) && i == 0)
                        snprintf(field, sizeof(field), "workspace.source");
                else
                        snprintf(field, sizeof(field), "mounts[%u].source", i - (sandbox_caller_workspace(s) ? 1 : 0));
                memcpy(src.groups, s->caller.groups, sizeof(gid_t) * src.n_groups);
                src.root = caller_mount_root(m, s->caller.uid, sm->source, &src.rest);
                if (!src.root)
                        return proto_error_set(err, SBX_E_PERMISSION_DENIED, field, "%s is not beneath any of mount_roots (%s)",
                                               sm->source, m->config.mount_roots ? "see hello's capabilities.mount_roots"
                                                                                 : "none configured");
                fd = mount_open(m->run_helper_fd, &src, 10000, &step);
                if (fd < 0)
                        return mount_error(err, field, sm, step, fd);
                /* A file is mounted only in a root.path sandbox, whose init makes file targets. */
                if (fstat(fd, &st) < 0 || (!S_ISDIR(st.st_mode) && !(s->root_path && S_ISREG(st.st_mode)))) {
                        safe_close(fd);
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                               "%s is not a directory (files are mounted in root.path sandboxes only)",
                                               sm->source);
                }
                safe_close(sm->tree_fd);
                sm->tree_fd = fd;
        }
        return 0;
}

/* A btrfs fork's workspace keeps its source's owners on disk (no chown walk: issue #20): its
 * tree idmapped so that on-disk id work_uid + k is host_uid + k, which the init's maps make k
 * inside; what the fork writes there is work_uid + k on disk again. Only the daemon can idmap
 * it (CAP_SYS_ADMIN over btrfs's superblock, the initial user namespace). */
static int sandbox_open_work(Sandbox *s) {
        struct mount_attr attr = {
                .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                .propagation = MS_PRIVATE,
        };
        unsigned n = s->ctx->config.uid_range;
        _cleanup_close_ int userns = -EBADF, tree = -EBADF;

        userns = idmap_userns_open(s->work_uid, s->host_uid, s->work_uid, s->host_uid, n);
        if (userns < 0)
                return -errno;
        tree = open_tree(s->workdir_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (tree < 0)
                return -errno;
        attr.userns_fd = (uint64_t) userns;
        if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
                return -errno;
        return TAKE_FD(tree);
}

static bool sandbox_work_idmapped(const Sandbox *s) {
        return !s->memory_workspace && !s->root_path && !sandbox_caller_workspace(s) && s->work_uid != s->host_uid;
}

/* The root's tree first, as "/" (sandbox-setup.c then builds on it instead of the host's view);
 * an overlay root over an image the helper made already (sandbox_image_root_path()). */
int sandbox_send_go(Sandbox *s) {
        InitMounts im = {};
        _cleanup_close_ int resolv = -EBADF, work = -EBADF;
        int r;

        if (s->image && !s->root_overlay) {
                safe_close(s->root_tree_fd);
                s->root_tree_fd = sandbox_open_root(s);
                if (s->root_tree_fd < 0)
                        return s->root_tree_fd;
                im.target[im.n] = "/";
                im.fd[im.n++] = s->root_tree_fd;
        } else if (s->root_path) {
                /* Opened at create, restart or restore (sandbox_open_root_path()). */
                if (s->root_tree_fd < 0)
                        return -EBADF;
                im.target[im.n] = "/";
                im.fd[im.n++] = s->root_tree_fd;
        }
        /* Over the init's own bind of the workspace, before the caller's mounts below /work. */
        if (sandbox_work_idmapped(s)) {
                work = sandbox_open_work(s);
                if (work < 0)
                        return work;
                im.target[im.n] = "/work";
                im.fd[im.n++] = work;
        }
        for (unsigned i = 0; i < s->n_mounts; i++) {
                if (s->mounts[i].tree_fd < 0)
                        return -EBADF;
                im.target[im.n] = s->mounts[i].target;
                im.fd[im.n++] = s->mounts[i].tree_fd;
        }
        /* Its resolver, after the caller's mounts (none of which may be /etc: root_binds). */
        if (s->net.attached && s->net.dns) {
                resolv = egress_resolv_tree(s->ctx);
                if (resolv < 0)
                        return resolv;
                if (im.n >= INIT_MOUNTS_MAX)
                        return -E2BIG;
                im.target[im.n] = "/etc/resolv.conf";
                im.fd[im.n++] = resolv;
        }
        r = init_go_send(s->setup_fd, &im);
        s->root_tree_fd = safe_close(s->root_tree_fd);
        for (unsigned i = 0; i < s->n_mounts; i++)
                s->mounts[i].tree_fd = safe_close(s->mounts[i].tree_fd);
        return r;
}
