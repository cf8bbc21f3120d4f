/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "manager.h"
#include "run-record.h"
#include "run.h"
#include "sandbox.h"
#include "state.h"
#include "util.h"

#define NOTE_MAX (256u << 10)
#define NOTE_ARGS_MAX 64
#define NOTE_ARG_BYTES 1024
#define INTERRUPTED_KEEP 32
#define REASON "daemon restarted"

static void note_path(const Run *r, char buf[static 96]) {
        snprintf(buf, 96, "%s/runs/%s.json", r->sandbox->id, r->id);
}

static json_object *note_json(Run *r) {
        json_object *o = json_object_new_object(), *argv = json_object_new_array();
        char ts[32];
        time_t t = time(NULL);
        struct tm tm;
        size_t i;

        for (i = 0; r->spec.argv && r->spec.argv[i] && i < NOTE_ARGS_MAX; i++)
                json_object_array_add(argv, json_object_new_string_len(r->spec.argv[i],
                                                                       (int) strnlen(r->spec.argv[i], NOTE_ARG_BYTES)));
        gmtime_r(&t, &tm);
        strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
        json_object_object_add(o, "id", json_object_new_string(r->id));
        json_object_object_add(o, "argv", argv);
        json_object_object_add(o, "argv_truncated", json_object_new_boolean(r->spec.argv && r->spec.argv[i]));
        json_object_object_add(o, "started_at", json_object_new_string(ts));
        return o;
}

void run_record_start(Run *r) {
        Sandbox *s = r->sandbox;
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = -EBADF;
        char path[96], dir[48];
        size_t n;

        s->last_active_usec = now_usec(CLOCK_MONOTONIC);
        if (s->ephemeral)
                return;
        o = note_json(r);
        text = proto_serialize(o, &n);
        if (!text)
                return;
        note_path(r, path);
        fd = openat(s->manager->state_fd, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno == ENOENT) {
                snprintf(dir, sizeof(dir), "%s/runs", s->id);
                (void) mkdirat(s->manager->state_fd, dir, 0700);
                fd = openat(s->manager->state_fd, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        }
        if (fd < 0 || write_all(fd, text, n) < 0)
                log_warning("run %s: cannot record it in the state directory: %m", r->id);
}

void run_record_end(Run *r) {
        char path[96];

        r->sandbox->last_active_usec = now_usec(CLOCK_MONOTONIC);
        if (r->sandbox->ephemeral)
                return;
        note_path(r, path);
        if (unlinkat(r->sandbox->manager->state_fd, path, 0) < 0 && errno != ENOENT)
                log_warning("run %s: cannot remove its note from the state directory: %m", r->id);
}

static bool interrupted_has(Sandbox *s, const char *id) {
        size_t n = s->interrupted_runs ? json_object_array_length(s->interrupted_runs) : 0;
        for (size_t i = 0; i < n; i++) {
                json_object *v;
                if (json_object_object_get_ex(json_object_array_get_idx(s->interrupted_runs, i), "id", &v) &&
                    strcmp(json_object_get_string(v), id) == 0)
                        return true;
        }
        return false;
}

/* A note as the record of an interrupted run, or NULL when it is not one of ours. */
static json_object *note_read(int dir_fd, const char *name) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        _cleanup_free_ char *buf = NULL;
        json_object *o, *id, *argv, *at;
        ssize_t n;

        if (fd < 0 || !(buf = malloc(NOTE_MAX + 1)))
                return NULL;
        n = read(fd, buf, NOTE_MAX);
        if (n <= 0)
                return NULL;
        buf[n] = '\0';
        o = json_tokener_parse(buf);
        if (!o || !json_object_object_get_ex(o, "id", &id) || !json_object_is_type(id, json_type_string) ||
            !json_object_object_get_ex(o, "argv", &argv) || !json_object_is_type(argv, json_type_array) ||
            !json_object_object_get_ex(o, "started_at", &at)) {
                json_object_put(o);
                return NULL;
        }
        json_object_object_add(o, "reason", json_object_new_string(REASON));
        return o;
}

static void interrupted_add(Sandbox *s, json_object *rec) {
        if (!s->interrupted_runs)
                s->interrupted_runs = json_object_new_array();
        json_object_array_add(s->interrupted_runs, rec);
        while (json_object_array_length(s->interrupted_runs) > INTERRUPTED_KEEP)
                json_object_array_del_idx(s->interrupted_runs, 0, 1);
}

static int sort_by_started(const void *a, const void *b) {
        json_object *x = *(json_object *const *) a, *y = *(json_object *const *) b, *vx, *vy;
        json_object_object_get_ex(x, "started_at", &vx);
        json_object_object_get_ex(y, "started_at", &vy);
        return strcmp(json_object_get_string(vx) ?: "", json_object_get_string(vy) ?: "");
}

int run_records_collect(Sandbox *s) {
        char dir[48];
        int fd, r;
        DIR *d;
        struct dirent *de;
        bool found = false;

        snprintf(dir, sizeof(dir), "%s/runs", s->id);
        fd = openat(s->manager->state_fd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!(d = fdopendir(fd))) {
                close(fd);
                return -errno;
        }
        {
                json_object *found_arr = json_object_new_array();
                while ((de = readdir(d))) {
                        json_object *rec, *id;
                        if (de->d_name[0] == '.' || !(rec = note_read(fd, de->d_name)))
                                continue;
                        json_object_object_get_ex(rec, "id", &id);
                        if (interrupted_has(s, json_object_get_string(id)))
                                json_object_put(rec);
                        else
                                json_object_array_add(found_arr, rec);
                        found = true;
                }
                json_object_array_sort(found_arr, sort_by_started);
                for (size_t i = 0; i < json_object_array_length(found_arr); i++) {
                        json_object *rec = json_object_get(json_object_array_get_idx(found_arr, i)), *id;
                        json_object_object_get_ex(rec, "id", &id);
                        log_warning("sandbox %s: run %s was interrupted: the daemon restarted", s->id,
                                    json_object_get_string(id));
                        interrupted_add(s, rec);
                }
                json_object_put(found_arr);
        }
        /* The notes go only once meta.json holds what they said. */
        r = found ? state_save(s) : 0;
        if (r >= 0) {
                rewinddir(d);
                while ((de = readdir(d)))
                        if (de->d_name[0] != '.')
                                (void) unlinkat(fd, de->d_name, 0);
        } else
                log_warning("sandbox %s: cannot record its interrupted runs: %s", s->id, strerror(-r));
        closedir(d);
        return r;
}

void run_records_meta_save(Sandbox *s, json_object *meta) {
        if (s->interrupted_runs)
                json_object_object_add(meta, "interrupted_runs", json_object_get(s->interrupted_runs));
}

void run_records_meta_restore(Sandbox *s, json_object *meta) {
        json_object *v;
        if (json_object_object_get_ex(meta, "interrupted_runs", &v) && json_object_is_type(v, json_type_array)) {
                json_object_put(s->interrupted_runs);
                s->interrupted_runs = json_object_get(v);
        }
}

void run_records_json(Sandbox *s, json_object *o) {
        json_object_object_add(o, "interrupted_runs",
                               s->interrupted_runs ? json_object_get(s->interrupted_runs) : json_object_new_array());
}
