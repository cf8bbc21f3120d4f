/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "oci.h"
#include "util.h"

void oci_state_done(OciState *s) {
        free(s->id);
        free(s->sandbox);
        free(s->bundle);
        free(s->created);
        free(s->cgroups_path);
        json_object_put(s->annotations);
        *s = (OciState) {};
}

/* runc's rule (letters, digits, _ + - .), never "." or "..": the id is a path component. */
bool oci_id_valid(const char *id) {
        size_t n = id ? strlen(id) : 0;

        if (n == 0 || n > 1024 || id[0] == '.')
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = id[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                      c == '+' || c == '-' || c == '.'))
                        return false;
        }
        return true;
}

char *oci_state_path(const char *id, const char *name) {
        char *p = NULL;
        if (asprintf(&p, "%s/%s%s%s", oci_arg.root, id, name ? "/" : "", name ? name : "") < 0)
                return NULL;
        return p;
}

static int write_atomic(const char *path, const char *data) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -EBADF;
        size_t n = strlen(data);

        if (asprintf(&tmp, "%s.tmp", path) < 0)
                return -ENOMEM;
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        if (write_all(fd, data, n) < 0 || close(TAKE_FD(fd)) < 0 || rename(tmp, path) < 0) {
                int e = errno ? errno : EIO;
                unlink(tmp);
                return -e;
        }
        return 0;
}

int oci_state_save(const OciState *s) {
        _cleanup_json_ json_object *o = json_object_new_object();
        _cleanup_free_ char *path = oci_state_path(s->id, "state.json");

        if (!path)
                return -ENOMEM;
        json_object_object_add(o, "id", json_object_new_string(s->id));
        json_object_object_add(o, "sandbox", json_object_new_string(s->sandbox ? s->sandbox : ""));
        json_object_object_add(o, "bundle", json_object_new_string(s->bundle ? s->bundle : ""));
        json_object_object_add(o, "pid", json_object_new_int64(s->pid));
        json_object_object_add(o, "start_time", json_object_new_uint64(s->start_time));
        json_object_object_add(o, "created", json_object_new_string(s->created ? s->created : ""));
        json_object_object_add(o, "cgroups_path", s->cgroups_path ? json_object_new_string(s->cgroups_path) : NULL);
        json_object_object_add(o, "annotations",
                               s->annotations ? json_object_get(s->annotations) : json_object_new_object());
        return write_atomic(path, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
}

static char *dup_member(json_object *o, const char *key) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
                return NULL;
        return strdup(json_object_get_string(v));
}

int oci_state_load(const char *id, OciState *ret) {
        _cleanup_free_ char *path = NULL;
        _cleanup_json_ json_object *o = NULL;
        json_object *v;

        if (!oci_id_valid(id))
                return -ENOENT;
        path = oci_state_path(id, "state.json");
        if (!path)
                return -ENOMEM;
        o = json_object_from_file(path);
        if (!o)
                return access(path, F_OK) < 0 ? -ENOENT : -EBADMSG;
        *ret = (OciState) {
                .id = strdup(id),
                .sandbox = dup_member(o, "sandbox"),
                .bundle = dup_member(o, "bundle"),
                .created = dup_member(o, "created"),
                .cgroups_path = dup_member(o, "cgroups_path"),
        };
        if (json_object_object_get_ex(o, "pid", &v))
                ret->pid = (pid_t) json_object_get_int64(v);
        if (json_object_object_get_ex(o, "start_time", &v))
                ret->start_time = json_object_get_uint64(v);
        if (json_object_object_get_ex(o, "annotations", &v))
                ret->annotations = json_object_get(v);
        return 0;
}

int oci_proc_start_time(pid_t pid, unsigned long long *ret) {
        char path[64], buf[1024], state;
        unsigned long long start;
        const char *p;
        int r;

        if (pid <= 0)
                return -ESRCH;
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        r = read_small_file(AT_FDCWD, path, true, buf, sizeof(buf));
        if (r < 0)
                return r == -ENOENT ? -ESRCH : r;
        /* comm may hold spaces and parentheses: the fields start after the last ')'. */
        p = strrchr(buf, ')');
        if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                         &state, &start) != 2)
                return -EBADMSG;
        if (state == 'Z' || state == 'X')
                return -ESRCH;
        *ret = start;
        return 0;
}

bool oci_proxy_alive(pid_t pid, unsigned long long start_time) {
        unsigned long long t;
        return oci_proc_start_time(pid, &t) >= 0 && t == start_time;
}

const char *oci_state_status(const OciState *s) {
        _cleanup_free_ char *fifo = oci_state_path(s->id, "fifo");
        bool alive = oci_proxy_alive(s->pid, s->start_time);

        if (!alive)
                return "stopped";
        return fifo && access(fifo, F_OK) == 0 ? "created" : "running";
}

char *oci_state_run_id(const char *id) {
        _cleanup_free_ char *path = oci_state_path(id, "run_id");
        char buf[128];

        if (!path || read_small_file(AT_FDCWD, path, true, buf, sizeof(buf)) < 0)
                return NULL;
        buf[strcspn(buf, "\n")] = 0;
        return buf[0] ? strdup(buf) : NULL;
}

static bool runs_this_binary(pid_t pid) {
        char path[64], a[PATH_MAX], b[PATH_MAX];
        ssize_t na, nb;
        struct stat sa, sb;

        snprintf(path, sizeof(path), "/proc/%d/exe", (int) pid);
        na = readlink(path, a, sizeof(a) - 1);
        nb = readlink("/proc/self/exe", b, sizeof(b) - 1);
        if (na <= 0 || nb <= 0)
                return false;
        /* The same file, not just the same name: stat through the magic links. */
        return stat(path, &sa) == 0 && stat("/proc/self/exe", &sb) == 0 && sa.st_ino == sb.st_ino &&
               sa.st_dev == sb.st_dev;
}

int oci_lookup_proxy(pid_t pid, char **ret_id, void *userdata) {
        _cleanup_(closedirp) DIR *d = opendir(oci_arg.root);
        struct dirent *de;
        (void) userdata;

        while (d && (de = readdir(d))) {
                OciState s = {};
                if (!oci_id_valid(de->d_name) || oci_state_load(de->d_name, &s) < 0)
                        continue;
                bool match = s.pid == pid && oci_proxy_alive(s.pid, s.start_time);
                oci_state_done(&s);
                if (match) {
                        *ret_id = strdup(de->d_name);
                        return *ret_id ? 1 : -ENOMEM;
                }
        }
        if (pid != getpid() && runs_this_binary(pid)) {
                if (asprintf(ret_id, "(an exec of sandboxd-oci, pid %d)", (int) pid) < 0)
                        return -ENOMEM;
                return 1;
        }
        return 0;
}

int oci_state_remove(const char *id) {
        static const char *const files[] = { "state.json", "state.json.tmp", "fifo", "ack", "run_id", "run_id.tmp" };
        _cleanup_free_ char *dir = oci_state_path(id, NULL);

        if (!dir)
                return -ENOMEM;
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                _cleanup_free_ char *p = oci_state_path(id, files[i]);
                if (p)
                        unlink(p);
        }
        return rmdir(dir) < 0 && errno != ENOENT ? -errno : 0;
}

/* Orphaned: its proxy has ended (the sandbox went with the proxy's connection) and its bundle
 * is gone, so the engine removed the container without a delete (podman run --rm --timeout:
 * conmon kills the proxy and podman removes the container by itself). No engine can name it
 * again; runc's state of such a container would stay forever. */
static bool state_orphaned(const char *id) {
        OciState s = {};
        bool orphaned;

        if (oci_state_load(id, &s) < 0)
                return false;
        orphaned = !oci_proxy_alive(s.pid, s.start_time) && s.bundle && access(s.bundle, F_OK) < 0 && errno == ENOENT;
        if (orphaned)
                oci_info("container %s: its proxy has ended and its bundle %s is gone (removed by the engine without "
                         "a delete): its state is removed",
                         id, s.bundle);
        oci_state_done(&s);
        return orphaned;
}

void oci_state_sweep(void) {
        _cleanup_(closedirp) DIR *d = opendir(oci_arg.root);
        struct dirent *de;

        while (d && (de = readdir(d)))
                if (de->d_name[0] != '.' && oci_id_valid(de->d_name) && state_orphaned(de->d_name))
                        (void) oci_state_remove(de->d_name);
}
