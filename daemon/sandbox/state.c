/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "log.h"
#include "macro.h"
#include "context.h"
#include "proto.h"
#include "rm-rf.h"
#include "run-record.h"
#include "sandbox.h"
#include "snapshot.h"
#include "state.h"
#include "sweep.h"
#include "util.h"

#define META "meta.json"
#define META_TMP "meta.json.tmp"
#define META_MAX (1u << 20)

static json_object *state_to_json(Sandbox *s) {
        json_object *o = json_object_new_object(), *l = json_object_new_object();

        json_object_object_add(o, "version", json_object_new_int(1));
        json_object_object_add(o, "id", json_object_new_string(s->id));
        json_object_object_add(o, "name", s->name ? json_object_new_string(s->name) : NULL);
        json_object_object_add(o, "owner_uid", json_object_new_int64(s->owner_uid));
        json_object_object_add(o, "uid_slot", json_object_new_int64(s->uid_slot));
        json_object_object_add(o, "created_usec", json_object_new_int64((int64_t) s->created_usec));
        json_object_object_add(o, "best_effort", json_object_new_boolean(s->best_effort));
        json_object_object_add(o, "user", json_object_new_string(sandbox_user_to_string(s->user)));
        json_object_object_add(l, "memory", json_object_new_int64((int64_t) s->limits.memory));
        json_object_object_add(l, "pids", json_object_new_int64((int64_t) s->limits.pids));
        json_object_object_add(l, "millicpus", json_object_new_int64((int64_t) s->limits.millicpus));
        json_object_object_add(l, "timeout_usec", json_object_new_int64((int64_t) s->limits.timeout_usec));
        json_object_object_add(l, "output_bytes", json_object_new_int64((int64_t) s->limits.output_bytes));
        json_object_object_add(o, "limits", l);
        json_object_object_add(o, "env", s->env ? json_object_get(s->env) : NULL);
        sweep_meta_save(s, o);
        run_records_meta_save(s, o);
        return o;
}

int state_save(Sandbox *s) {
        _cleanup_json_ json_object *o = state_to_json(s);
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int dfd = -EBADF, fd = -EBADF;
        size_t n;
        int r;

        text = proto_serialize(o, &n);
        /* Never a record the next start could not read back (read_meta): the old one stays. */
        if (text && n > META_MAX)
                return -EFBIG;
        if (!text)
                return -ENOMEM;
        dfd = openat(s->manager->state_fd, s->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        fd = openat(dfd, META_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        if ((r = write_all(fd, text, n)) < 0)
                return r;
        /* Data first, then the name, then the directory entry: a crash leaves the old file or
         * the new one, never a torn one. */
        if (fsync(fd) < 0 || renameat(dfd, META_TMP, dfd, META) < 0 || fsync(dfd) < 0)
                return -errno;
        /* And the sandbox's own entry in sandboxes/, new at its first save. */
        if (fsync(s->manager->state_fd) < 0)
                return -errno;
        return 0;
}

static int read_meta(int state_fd, const char *id, json_object **ret) {
        _cleanup_close_ int dfd = openat(state_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        ProtoError err;
        ssize_t n;

        if (dfd < 0)
                return -errno;
        fd = openat(dfd, META, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        buf = malloc(META_MAX + 2);
        if (!buf)
                return -ENOMEM;
        /* One byte more than a record may have: a longer file is refused whole, never parsed cut. */
        n = read_full(fd, buf, META_MAX + 1);
        if (n < 0)
                return (int) n;
        if ((size_t) n > META_MAX)
                return -EFBIG;
        while (n > 0 && buf[n - 1] == '\n')
                n--;
        buf[n] = '\0';
        return proto_parse_line(buf, (size_t) n, SBX_MAX_DEPTH, ret, &err) < 0 ? -EBADMSG : 0;
}

static bool is_sandbox_id(const char *name) {
        return strncmp(name, "sbx-", 4) == 0 && strlen(name) == 16 && strspn(name + 4, "0123456789abcdef") == 12;
}

/* A sandbox whose record cannot be read (torn by a disk fault, edited by hand, too large) keeps
 * everything it has: renamed to .quarantine-<id>, which no start touches again, and counted in
 * health. Its workspace and snapshots are the user's; only a person can tell what went wrong. */
static void quarantine(Context *m, const char *name, int why) {
        char to[NAME_MAX + 32];

        snprintf(to, sizeof(to), QUARANTINE_PREFIX "%s", name);
        for (unsigned i = 1; renameat2(m->state_fd, name, m->state_fd, to, RENAME_NOREPLACE) < 0; i++) {
                if (errno != EEXIST || i > 100) {
                        log_error("sandbox %s: its record is unreadable (%s) and it cannot be set aside: %m; "
                                  "left in place", name, strerror(-why));
                        return;
                }
                snprintf(to, sizeof(to), QUARANTINE_PREFIX "%s.%u", name, i);
        }
        log_error("sandbox %s: its record (meta.json) is unreadable: %s; its workspace and snapshots are kept "
                  "in %s for a person to look at",
                  name, strerror(-why), to);
}

/* One entry of <state>/sandboxes: a recorded sandbox comes back; a sandbox never recorded (no
 * meta.json: a throwaway one, a create cut short) or a workspace being removed is what a crash
 * interrupted, and goes; a record that cannot be read is set aside, never removed. */
static void restore_entry(Context *m, const char *name) {
        _cleanup_json_ json_object *meta = NULL;
        Sandbox *s;
        int r;

        bool unfinished_fork = is_sandbox_id(name) && snapshot_cleanup_partial(m->state_fd, name) == -ESTALE;

        if (unfinished_fork)
                snapshot_discard_cgroup(m, name);
        r = is_sandbox_id(name) && !unfinished_fork ? read_meta(m->state_fd, name, &meta) : -ENOENT;
        if (r == -ENOMEM) {
                log_error("sandbox %s: no memory to read its record; left as it is for the next start", name);
                return;
        }
        if (r < 0 && r != -ENOENT) {
                quarantine(m, name, r);
                return;
        }
        if (r >= 0) {
                r = sandbox_restore(m, meta, &s);
                if (r < 0)
                        log_warning("sandbox %s: cannot restore it: %s; its workspace stays in place", name, strerror(-r));
                else {
                        log_info("sandbox %s restored after a restart", name);
                        sweep_meta_restore(s, meta);
                        run_records_meta_restore(s, meta);
                        (void) run_records_collect(s);
                }
                return;
        }
        if (name[0] == '.' && strncmp(name, ".trash-", 7) != 0)
                return;
        log_info("removing %s, left half-done by an earlier run", name);
        r = rm_rf_at(m->state_fd, name);
        if (r < 0)
                log_warning("cannot remove %s: %s", name, strerror(-r));
}

/* A cgroup below sandboxes/ that no restored sandbox claims: a throwaway sandbox (never
 * recorded) of a daemon that died, with whatever still runs in it. Its processes are killed and
 * the cgroup removed; recorded sandboxes replaced theirs in sandbox_restore(). */
static void remove_stale_cgroup(Context *m, const char *name) {
        _cleanup_close_ int fd = openat(m->cg.sandboxes_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int r;

        if (fd < 0)
                return;
        for (int i = 0; i < 1000 && cg_populated(fd) > 0; i++) {
                (void) cg_kill(fd);
                usleep(1000);
        }
        r = cg_remove_tree(m->cg.sandboxes_fd, name);
        if (r < 0)
                log_warning("cannot remove the stale cgroup sandboxes/%s: %s", name, strerror(-r));
        else
                log_info("removed the stale cgroup sandboxes/%s of an earlier daemon", name);
}

static void remove_stale_cgroups(Context *m) {
        int fd = openat(m->cg.sandboxes_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d;
        struct dirent *de;

        if (fd < 0 || !(d = fdopendir(fd))) {
                safe_close(fd);
                return;
        }
        while ((de = readdir(d)))
                if (de->d_type == DT_DIR && is_sandbox_id(de->d_name) && !registry_find(m->registry, de->d_name))
                        remove_stale_cgroup(m, de->d_name);
        closedir(d);
}

int state_restore_all(Context *m) {
        int fd = openat(m->state_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d;
        struct dirent *de;

        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        restore_entry(m, de->d_name);
        /* Counted once the renames are done: a directory renamed while it is read may be seen
         * under both names. */
        rewinddir(d);
        m->registry->n_quarantined = 0;
        while ((de = readdir(d)))
                if (strncmp(de->d_name, QUARANTINE_PREFIX, strlen(QUARANTINE_PREFIX)) == 0)
                        m->registry->n_quarantined++;
        closedir(d);
        remove_stale_cgroups(m);
        return 0;
}
