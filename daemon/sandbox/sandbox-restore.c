/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A sandbox's record (meta.json, written by state.c) taken back at a start, and a sandbox an
 * earlier daemon left running adopted as it is: its cgroup, its init, its egress (sandbox.h,
 * sandbox_restore()). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image.h"
#include "log.h"
#include "macro.h"
#include "sandbox-internal.h"
#include "util.h"

static int restore_u64(json_object *o, const char *key, uint64_t *ret) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int) ||
            json_object_get_int64(v) < 0)
                return -EBADMSG;
        *ret = (uint64_t) json_object_get_int64(v);
        return 0;
}

bool sandbox_uid_base_valid(const Context *m, uint64_t u) {
        uint64_t off = u - m->config.uid_base;
        return u >= m->config.uid_base && off % m->config.uid_range == 0 &&
               off / m->config.uid_range < m->registry->n_uid_slots;
}

/* The base of a slot of the daemon's uid range (a record predating the field: host_uid). */
static int sandbox_restore_work_uid(Sandbox *s, json_object *meta) {
        const Context *m = s->ctx;
        uint64_t u;

        s->work_uid = s->host_uid;
        if (!json_object_object_get_ex(meta, "work_uid", NULL))
                return 0;
        if (restore_u64(meta, "work_uid", &u) < 0 || !sandbox_uid_base_valid(m, u))
                return -EBADMSG;
        s->work_uid = (uid_t) u;
        return 0;
}

/* A record's masked_paths or readonly_paths, checked as a create's are. */
static int restore_paths(json_object *meta, const char *field, json_object **ret) {
        json_object *v;
        ProtoError err;

        if (!json_object_object_get_ex(meta, field, &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (sandbox_paths_check(v, field, &err) < 0)
                return -EBADMSG;
        *ret = json_object_get(v);
        return 0;
}

static int sandbox_restore_fields(Sandbox *s, json_object *meta) {
        json_object *l, *v;
        uint64_t owner, slot;
        int r;

        if (!json_object_object_get_ex(meta, "limits", &l) || restore_u64(meta, "owner_uid", &owner) < 0 ||
            restore_u64(meta, "uid_slot", &slot) < 0 || restore_u64(meta, "created_usec", &s->created_usec) < 0 ||
            restore_u64(l, "memory", &s->limits.memory) < 0 || restore_u64(l, "pids", &s->limits.pids) < 0 ||
            restore_u64(l, "millicpus", &s->limits.millicpus) < 0 ||
            restore_u64(l, "timeout_usec", &s->limits.timeout_usec) < 0 ||
            restore_u64(l, "output_bytes", &s->limits.output_bytes) < 0)
                return -EBADMSG;
        /* Records written before these limits existed: none, and the default. */
        s->limits.open_files = s->ctx->config.default_open_files;
        if ((json_object_object_get_ex(l, "file_size", NULL) && restore_u64(l, "file_size", &s->limits.file_size) < 0) ||
            (json_object_object_get_ex(l, "open_files", NULL) && restore_u64(l, "open_files", &s->limits.open_files) < 0))
                return -EBADMSG;
        s->owner_uid = (uid_t) owner;
        s->uid_slot = (unsigned) slot;
        if (json_object_object_get_ex(meta, "name", &v) && json_object_is_type(v, json_type_string) &&
            !(s->name = strdup(json_object_get_string(v))))
                return -ENOMEM;
        if (json_object_object_get_ex(meta, "best_effort", &v))
                s->best_effort = json_object_get_boolean(v);
        if (json_object_object_get_ex(meta, "env", &v) && json_object_is_type(v, json_type_object))
                s->env = json_object_get(v);
        if (json_object_object_get_ex(meta, "image", &v) && json_object_is_type(v, json_type_string)) {
                /* Held even when it is gone: the sandbox then stays down (sandbox_open_root()). */
                Image *img = image_find(s->ctx->images, json_object_get_string(v));
                if (!(s->image = strdup(json_object_get_string(v))))
                        return -ENOMEM;
                if (img)
                        image_hold(img);
        }
        /* A record without it predates the option: it gets the default (its workspace's files
         * made as root inside may then be read-only to its runs; "user":"root" on a run helps). */
        if (json_object_object_get_ex(meta, "user", &v) && json_object_is_type(v, json_type_string))
                s->user = sandbox_user_from_string(json_object_get_string(v));
        if (s->user == SANDBOX_USER_UNSET)
                return -EBADMSG;
        if (json_object_object_get_ex(meta, "hostname", &v) && json_object_is_type(v, json_type_string) &&
            !(s->hostname = strdup(json_object_get_string(v))))
                return -ENOMEM;
        if (json_object_object_get_ex(meta, "sysctls", &v) && !json_object_is_type(v, json_type_null)) {
                ProtoError err;
                if (sandbox_sysctls_check(v, &err) < 0)
                        return -EBADMSG;
                s->sysctls = json_object_get(v);
        }
        if ((r = restore_paths(meta, "masked_paths", &s->masked_paths)) < 0 ||
            (r = restore_paths(meta, "readonly_paths", &s->readonly_paths)) < 0)
                return r;
        /* Absent: a record from before overlay roots, or a read-only root. */
        if (json_object_object_get_ex(meta, "root", &v) && json_object_is_type(v, json_type_object)) {
                json_object *path, *ro;
                if (!json_object_object_get_ex(v, "path", &path) || !json_object_is_type(path, json_type_string) ||
                    !path_is_normal(json_object_get_string(path), PATH_MAX))
                        return -EBADMSG;
                if (!(s->root_path = strdup(json_object_get_string(path))))
                        return -ENOMEM;
                s->root_read_only = json_object_object_get_ex(v, "read_only", &ro) && json_object_get_boolean(ro);
        } else if (json_object_object_get_ex(meta, "root", &v)) {
                if (!json_object_is_type(v, json_type_string))
                        return -EBADMSG;
                if (strcmp(json_object_get_string(v), "overlay") == 0)
                        s->root_overlay = true;
                else if (strcmp(json_object_get_string(v), "readonly") != 0)
                        return -EBADMSG;
        }
        return 0;
}

/* "mounts" and "mount_caller" of a record (state.c), as a create left them. */
static int sandbox_restore_mounts(Sandbox *s, json_object *meta) {
        json_object *a, *c, *g, *v;
        uint64_t uid, gid;

        if (!json_object_object_get_ex(meta, "mounts", &a))
                return 0;
        if (!json_object_is_type(a, json_type_array) || json_object_array_length(a) > SANDBOX_MOUNTS_MAX + 1 ||
            !json_object_object_get_ex(meta, "mount_caller", &c) || restore_u64(c, "uid", &uid) < 0 ||
            restore_u64(c, "gid", &gid) < 0 || uid >= UINT32_MAX || gid >= UINT32_MAX)
                return -EBADMSG;
        s->caller = (SandboxCaller) { .uid = (uid_t) uid, .gid = (gid_t) gid };
        if (json_object_object_get_ex(c, "groups", &g) && json_object_is_type(g, json_type_array))
                for (size_t i = 0; i < json_object_array_length(g) && s->caller.n_groups < SANDBOX_GROUPS_MAX; i++)
                        s->caller.groups[s->caller.n_groups++] = (gid_t) json_object_get_int64(json_object_array_get_idx(g, i));
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *e = json_object_array_get_idx(a, i), *src, *dst;
                SandboxMount *sm = &s->mounts[s->n_mounts];
                if (!json_object_object_get_ex(e, "source", &src) || !json_object_is_type(src, json_type_string) ||
                    !json_object_object_get_ex(e, "target", &dst) || !json_object_is_type(dst, json_type_string))
                        return -EBADMSG;
                *sm = (SandboxMount) { .source = strdup(json_object_get_string(src)),
                                       .target = strdup(json_object_get_string(dst)), .tree_fd = -EBADF };
                s->n_mounts++;
                if (!sm->source || !sm->target)
                        return -ENOMEM;
                sm->read_only = json_object_object_get_ex(e, "read_only", &v) && json_object_get_boolean(v);
                sm->idmap_same = json_object_object_get_ex(e, "idmap", &v) && json_object_is_type(v, json_type_string) &&
                                 strcmp(json_object_get_string(v), "same") == 0;
        }
        return 0;
}

/* "network" of a record: what the create asked. One this daemon would refuse now (egress_deny
 * changed, say) is not a reason to set the record aside: the sandbox comes back without egress. */
static void sandbox_restore_network(Sandbox *s, json_object *meta) {
        ProtoError err;

        if (egress_parse(s->ctx, json_object_object_get(meta, "network"), &s->net, &err) < 0) {
                log_warning("sandbox %s: its network (%s) is refused now: restored without egress", s->id, err.message);
                s->net = (SandboxNet) {};
        }
}

static int sandbox_restore_claim(Sandbox *s, json_object *meta) {
        Context *m = s->ctx;
        json_object *id;

        if (!json_object_object_get_ex(meta, "id", &id) || !json_object_is_type(id, json_type_string))
                return -EBADMSG;
        snprintf(s->id, sizeof(s->id), "%s", json_object_get_string(id));
        if (sandbox_restore_fields(s, meta) < 0 || sandbox_restore_mounts(s, meta) < 0)
                return -EBADMSG;
        sandbox_restore_network(s, meta);
        if (registry_find(m->registry, s->id) || (s->name && registry_find_named(m->registry, s->owner_uid, s->name)) ||
            registry_claim_uid_slot(m->registry, s->uid_slot) < 0)
                return -EEXIST;
        s->host_uid = (uid_t) (m->config.uid_base + (uint64_t) s->uid_slot * m->config.uid_range);
        if (sandbox_restore_work_uid(s, meta) < 0)
                return -EBADMSG;
        /* What the host enforces now, which need not be what it enforced before. */
        s->enforced = m->cg.enforceable & (CG_MEMORY | CG_PIDS | CG_CPU);
        return 0;
}

/* ---- A restart: the init an earlier daemon left running ------------------------------------ */

/* The init of a sandbox is pid 1 of its own pid namespace ("NSpid: <ours> 1"), alive (not a
 * zombie waiting for its new parent), and its uid map was written (the earlier daemon sent its
 * go: an init cut short before that is not one to keep). */
static bool is_set_up_init(pid_t pid) {
        char path[64], buf[4096], *p, *nl;

        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        if (read_small_file(AT_FDCWD, path, false, buf, sizeof(buf)) < 0)
                return false;
        p = strstr(buf, "\nState:\t");
        if (!p || p[8] == 'Z' || p[8] == 'X')
                return false;
        p = strstr(buf, "\nNSpid:\t");
        if (!p)
                return false;
        nl = strchr(p + 1, '\n');
        if (nl)
                *nl = '\0';
        p = strrchr(p, '\t');
        if (!p || strcmp(p + 1, "1") != 0 || p == strchr(buf, '\t'))
                return false;
        snprintf(path, sizeof(path), "/proc/%d/uid_map", (int) pid);
        return read_small_file(AT_FDCWD, path, false, buf, sizeof(buf)) > 0;
}

static bool pid_in_cgroup(int cg_fd, pid_t pid) {
        pid_t pids[16];
        int n = cg_list_own_pids(cg_fd, pids, (int) ELEMENTSOF(pids));

        for (int i = 0; i < n && i < (int) ELEMENTSOF(pids); i++)
                if (pids[i] == pid)
                        return true;
        return false;
}

/* The pid 1 among the processes of <cgroup>/init, as a pidfd. Each is opened before it is checked:
 * the checks then hold for the process the pidfd names, whatever became of the pid meanwhile
 * (sandbox_find_live_init() looks at the cgroup again). */
static int init_from_cgroup(int leaf_fd, pid_t *ret_pid) {
        pid_t pids[16];
        int n = cg_list_own_pids(leaf_fd, pids, (int) ELEMENTSOF(pids));

        if (n < 0)
                return n;
        for (int i = 0; i < n && i < (int) ELEMENTSOF(pids); i++) {
                int fd = (int) syscall(SYS_pidfd_open, pids[i], 0);
                if (fd < 0)
                        continue;
                if (is_set_up_init(pids[i])) {
                        *ret_pid = pids[i];
                        return fd;
                }
                close(fd);
        }
        return -ESRCH;
}

/* A stored pidfd's process is that process for good (a pid is not): what is_set_up_init() reads in
 * /proc/<pid>/status comes from the pidfd's own fdinfo (its pid namespace's pid) and poll (a
 * pidfd turns readable once its process has exited, a zombie too), which is one procfs file
 * fewer per sandbox at a restart. The uid_map is read before the poll: a process that had not
 * exited after it was read could not have given its pid away before. */
static bool is_set_up_stored_init(int pidfd, pid_t pid, int inner_pid) {
        char path[64], buf[4096];
        struct pollfd p = { .fd = pidfd, .events = POLLIN };
        int k;

        if (inner_pid != 1)
                return false;
        snprintf(path, sizeof(path), "/proc/%d/uid_map", (int) pid);
        if (read_small_file(AT_FDCWD, path, false, buf, sizeof(buf)) <= 0)
                return false;
        do
                k = poll(&p, 1, 0);
        while (k < 0 && errno == EINTR);
        return k == 0;
}

/* An earlier daemon's init of the sandbox, still running and set up: from the fd store
 * (*ret_from_store) or its cgroup's init leaf, into s->init_pid and s->init_pidfd; -ESRCH: none. */
static int sandbox_find_live_init(Sandbox *s, bool *ret_from_store) {
        _cleanup_close_ int leaf = -EBADF, fd = -EBADF;
        char name[FDSTORE_NAME_MAX];
        bool stored = false;
        pid_t pid = 0;
        int inner = 0;

        leaf = openat(s->cg_fd, "init", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (leaf < 0)
                return -ESRCH;
        fd = fdstore_take(&s->ctx->fdstore, fdstore_name(name, 's', s->id, "init"));
        if (fd >= 0 && fdstore_check_pidfd_ns(fd, &pid, &inner) >= 0)
                stored = true;
        else {
                /* Not a pidfd of a live process: out of the store (sandbox_adopt() puts the one
                 * found in the cgroup there). */
                if (fd >= 0)
                        (void) fdstore_remove(name);
                fd = safe_close(fd);
                fd = init_from_cgroup(leaf, &pid);
                if (fd < 0)
                        return fd;
        }
        /* A pid that is no longer what the cgroup or the store said is not the sandbox's. */
        if (!pid_in_cgroup(leaf, pid))
                return -ESRCH;
        if (stored ? !is_set_up_stored_init(fd, pid, inner)
                   : !is_set_up_init(pid) || syscall(SYS_pidfd_send_signal, fd, 0, NULL, 0) < 0)
                return -ESRCH;
        s->init_pid = pid;
        s->init_pidfd = TAKE_FD(fd);
        *ret_from_store = stored;
        return 0;
}

/* The highest N of the "<kind>-N" cgroups below the sandbox's: runs and sessions of the earlier
 * daemon, whose processes may live on; a new one must not be created into theirs. */
static unsigned sandbox_highest_member_cgroup(Sandbox *s) {
        int fd = openat(s->cg_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        unsigned max = 0;
        struct dirent *de;
        DIR *d;

        if (fd < 0 || !(d = fdopendir(fd))) {
                safe_close(fd);
                return 0;
        }
        while ((de = readdir(d))) {
                const char *dash = strrchr(de->d_name, '-');
                char *end;
                unsigned long n;

                if (de->d_type != DT_DIR || !dash || !dash[1])
                        continue;
                errno = 0;
                n = strtoul(dash + 1, &end, 10);
                if (!errno && !*end && n > max && n < UINT_MAX)
                        max = (unsigned) n;
        }
        closedir(d);
        return max;
}

/* An earlier daemon's init is not our child: its pidfd turns readable when it exits, and whoever
 * inherited it reaps it. */
static int on_adopted_init_exit(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        return sandbox_on_init_exit(src, NULL, userdata);
}

static void sandbox_adopt_undo(Sandbox *s) {
        s->init_exit_source = sd_event_source_disable_unref(s->init_exit_source);
        s->init_pidfd = safe_close(s->init_pidfd);
        s->init_pid = 0;
        s->cg_fd = safe_close(s->cg_fd);
        s->scope_fd = safe_close(s->scope_fd);
        free(s->cg_path);
        s->cg_path = NULL;
}

/* Where an earlier daemon left the sandbox's cgroup: its scope's sandbox/, or sandboxes/<id> (a
 * daemon that had no systemd to ask). */
static int sandbox_open_old_cgroup(Sandbox *s) {
        Context *m = s->ctx;
        char unit[SCOPE_UNIT_MAX];
        _cleanup_free_ char *path = NULL;

        if (m->scopes) {
                s->scope_fd = scope_open_cgroup(m->scopes, scope_unit_name(unit, s->id), &path);
                if (s->scope_fd >= 0) {
                        s->cg_fd = openat(s->scope_fd, "sandbox", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (s->cg_fd >= 0)
                                return asprintf(&s->cg_path, "%s/sandbox", path) < 0 ? -ENOMEM : 0;
                        s->scope_fd = safe_close(s->scope_fd);
                }
        }
        s->cg_fd = openat(m->cg.sandboxes_fd, s->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (s->cg_fd < 0)
                return -errno;
        return asprintf(&s->cg_path, "%s/sandboxes/%s", m->cg.base, s->id) < 0 ? -ENOMEM : 0;
}

/* The sandbox an earlier daemon left is still running (a restart that kept its processes): its
 * cgroup and its init are taken back as they are, and nothing is started. 0, or < 0 with s as it
 * was (a new init is then made, as after a reboot). */
static int sandbox_adopt(Sandbox *s) {
        Context *m = s->ctx;
        CgLimits l = sandbox_cg_limits(s);
        bool stored = false;
        int r;

        r = sandbox_open_old_cgroup(s);
        if (r >= 0)
                r = sandbox_find_live_init(s, &stored);
        /* What the host enforces now, and this configuration's swap_max. */
        if (r >= 0)
                r = cg_apply_limits(&m->cg, s->cg_path, &l, s->enforced);
        if (r >= 0)
                r = cg_enable_controllers(s->cg_fd, s->enforced);
        if (r >= 0)
                r = sd_event_add_io(m->event, &s->init_exit_source, s->init_pidfd, EPOLLIN, on_adopted_init_exit, s);
        if (r < 0) {
                sandbox_adopt_undo(s);
                return r;
        }
        /* It may have been frozen for a snapshot when the daemon died (the copy is gone), or
         * restarted with a placeholder in its scope. */
        (void) cg_write(s->cg_fd, "cgroup.freeze", "0");
        sandbox_hold_end(s);
        if (!stored)
                sandbox_store_init(s);
        s->next_run_no = sandbox_highest_member_cgroup(s);
        s->init_in_leaf = true;
        s->init_adopted = stored ? "fd store" : "cgroup";
        return 0;
}

int sandbox_restore(Context *m, json_object *meta, Sandbox **ret) {
        Sandbox *s = sandbox_alloc(m);
        int r;

        if (!s)
                return -ENOMEM;
        r = sandbox_restore_claim(s, meta);
        if (r < 0) {
                sandbox_free(s);
                return r;
        }
        s->restored_usec = now_usec(CLOCK_REALTIME);
        sandbox_link(m, s);
        s->state = SANDBOX_CREATING;
        /* stop_sandboxes: nothing of a sandbox outlives its daemon, a crashed one's either. */
        if (!m->config.stop_sandboxes && sandbox_adopt(s) >= 0) {
                if ((r = sandbox_make_workspace(s, true)) < 0) {
                        log_warning_errno(r, "sandbox %s: its workspace cannot be opened: %m; its processes are kept", s->id);
                        s->workdir_fd = -EBADF;
                }
                s->net.uid = s->owner_uid;
                if (s->net.egress && egress_adopt(m, &s->net, s->id, s->init_pid, s->init_pidfd, &s->net.error) < 0)
                        log_warning("sandbox %s: its egress cannot be given back (%s): it has no way out until its init "
                                    "is restarted", s->id, s->net.error ? s->net.error : "out of memory");
                sandbox_go_ready(s);
                *ret = s;
                return 0;
        }
        if (sandbox_opens_trees(s)) {
                /* The caller's directories again, as the caller: one removed or no longer
                 * readable to them leaves the sandbox down (its workspace kept, retried at the
                 * next start). */
                ProtoError err;
                r = sandbox_open_mounts(s, &err);
                if (r < 0) {
                        log_warning("sandbox %s: not restored: %s", s->id, err.message);
                        s->keep_workspace = true;
                        sandbox_destroy(s, "restore failed");
                        return r;
                }
        }
        if ((r = sandbox_clear_old_cgroup(s)) < 0 || (r = sandbox_make_cgroup(s, sandbox_on_scope_done)) < 0 ||
            (r = sandbox_make_workspace(s, true)) < 0 || (!s->scope_job && (r = sandbox_spawn_init(s)) < 0)) {
                /* Keep the workspace: only the processes are given up. */
                s->keep_workspace = true;
                sandbox_destroy(s, "restore failed");
                return r;
        }
        *ret = s;
        return 0;
}
