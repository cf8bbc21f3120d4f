/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The final replies kept for run.attach (run-result.h). */
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
#include "proto.h"
#include "run-result.h"
#include "util.h"

#define RESULTS_DIR "results"
/* A kept reply holds at most run_output_max of each stream, escaped: far below this. */
#define RESULT_FILE_MAX (64u << 20)

typedef struct RunResult {
        struct RunResult *next;
        char id[24];
        uid_t owner;
        uint64_t expires_usec;  /* CLOCK_MONOTONIC */
        size_t bytes;
        json_object *reply;
} RunResult;

static bool result_name_valid(const char *id) {
        return strlen(id) == 16 && strncmp(id, "run-", 4) == 0 && strspn(id + 4, "0123456789abcdef") == 12;
}

static int results_dir(Context *m, bool create) {
        _cleanup_close_ int state = openat(m->state_fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int fd;

        if (state < 0)
                return -errno;
        if (create && mkdirat(state, RESULTS_DIR, 0700) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(state, RESULTS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

static void result_unlink(Context *m, const char *id) {
        _cleanup_close_ int dir = results_dir(m, false);
        char name[32];

        if (dir < 0)
                return;
        snprintf(name, sizeof(name), "%s.json", id);
        if (unlinkat(dir, name, 0) < 0 && errno != ENOENT)
                log_warning_errno(errno, "cannot remove %s/" RESULTS_DIR "/%s: %m", m->config.state_dir, name);
}

/* Temp file, fsync, rename, directory fsync: the next daemon reads all of it or none. */
static int result_save(Context *m, const RunResult *res) {
        _cleanup_close_ int dir = results_dir(m, true), fd = -EBADF;
        _cleanup_json_ json_object *o = json_object_new_object();
        uint64_t left = res->expires_usec - now_usec(CLOCK_MONOTONIC);
        char name[32], tmp[40];
        const char *text;
        int r = 0;

        if (dir < 0)
                return dir;
        if (!o)
                return -ENOMEM;
        json_object_object_add(o, "owner", json_object_new_int64(res->owner));
        json_object_object_add(o, "expires", json_object_new_uint64(now_usec(CLOCK_REALTIME) + left));
        json_object_object_add(o, "reply", json_object_get(res->reply));
        text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        snprintf(name, sizeof(name), "%s.json", res->id);
        snprintf(tmp, sizeof(tmp), ".%s.tmp", res->id);
        fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        if (write_all(fd, text, strlen(text)) < 0 || fsync(fd) < 0 || renameat(dir, tmp, dir, name) < 0 || fsync(dir) < 0)
                r = -errno;
        if (r < 0)
                (void) unlinkat(dir, tmp, 0);
        return r;
}

/* Dropped for good: taken, expired or pushed out. */
static RunResult *result_drop(Context *m, RunResult *res) {
        RunResult *next = res->next;

        result_unlink(m, res->id);
        json_object_put(res->reply);
        free(res);
        return next;
}

static void results_expire(Context *m) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        for (RunResult **p = &m->run_results; *p;)
                if ((*p)->expires_usec <= now)
                        *p = result_drop(m, *p);
                else
                        p = &(*p)->next;
}

/* Appended (oldest first); a uid's kept replies never hold more than max_buffered_per_uid (its
 * oldest go first). */
static void result_insert(Context *m, RunResult *res) {
        RunResult **tail;
        uint64_t held = 0;

        for (tail = &m->run_results; *tail; tail = &(*tail)->next)
                if ((*tail)->owner == res->owner)
                        held += (*tail)->bytes;
        *tail = res;
        for (RunResult **p = &m->run_results; *p && *p != res && held + res->bytes > m->config.max_buffered_per_uid;)
                if ((*p)->owner == res->owner) {
                        held -= (*p)->bytes;
                        *p = result_drop(m, *p);
                } else
                        p = &(*p)->next;
}

void run_result_add(Context *m, const char *run_id, uid_t owner, json_object *msg) {
        RunResult *res;
        int r;

        results_expire(m);
        if (m->config.run_result_keep_usec == 0 || !(res = calloc(1, sizeof(*res)))) {
                json_object_put(msg);
                return;
        }
        snprintf(res->id, sizeof(res->id), "%s", run_id);
        res->owner = owner;
        res->expires_usec = now_usec(CLOCK_MONOTONIC) + m->config.run_result_keep_usec;
        res->bytes = strlen(json_object_to_json_string_ext(msg, JSON_C_TO_STRING_PLAIN));
        res->reply = msg;
        result_insert(m, res);
        r = result_save(m, res);
        if (r < 0)
                log_warning_errno(r, "run %s ended with no client: its result is kept for run.attach, but not on disk "
                                     "(a restart loses it): %m", run_id);
        else
                log_info("run %s ended with no client: its result is kept for run.attach", run_id);
}

json_object *run_result_take(Context *m, const char *run_id, const ReplyPeer *peer) {
        results_expire(m);
        for (RunResult **p = &m->run_results; *p; p = &(*p)->next)
                if (strcmp((*p)->id, run_id) == 0 && (peer->admin || peer->cred.uid == (*p)->owner)) {
                        json_object *reply = json_object_get((*p)->reply);
                        *p = result_drop(m, *p);
                        return reply;
                }
        return NULL;
}

/* One file of an earlier daemon: its reply into the list, or -errno (the file is then removed). */
static int result_load(Context *m, int dir, const char *name) {
        _cleanup_close_ int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_free_ char *buf = NULL;
        _cleanup_json_ json_object *o = NULL;
        json_object *owner, *expires, *reply;
        uint64_t now = now_usec(CLOCK_REALTIME), left;
        RunResult *res;
        ProtoError err;
        struct stat st;
        ssize_t n;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || st.st_size > RESULT_FILE_MAX)
                return -EFBIG;
        if (!(buf = malloc((size_t) st.st_size + 1)))
                return -ENOMEM;
        n = read_full(fd, buf, (size_t) st.st_size);
        if (n < 0)
                return (int) n;
        buf[n] = '\0';
        if (proto_parse_line(buf, (size_t) n, SBX_MAX_DEPTH, &o, &err) < 0 ||
            !json_object_object_get_ex(o, "owner", &owner) || !json_object_is_type(owner, json_type_int) ||
            !json_object_object_get_ex(o, "expires", &expires) || !json_object_is_type(expires, json_type_int) ||
            !json_object_object_get_ex(o, "reply", &reply) || !json_object_is_type(reply, json_type_object) ||
            json_object_get_int64(owner) < 0 || json_object_get_int64(owner) >= UINT32_MAX)
                return -EBADMSG;
        if (json_object_get_uint64(expires) <= now)
                return -ETIME;
        left = json_object_get_uint64(expires) - now;
        if (left > m->config.run_result_keep_usec) /* a clock set back */
                left = m->config.run_result_keep_usec;
        if (!(res = calloc(1, sizeof(*res))))
                return -ENOMEM;
        snprintf(res->id, sizeof(res->id), "%.*s", 16, name);
        res->owner = (uid_t) json_object_get_int64(owner);
        res->expires_usec = now_usec(CLOCK_MONOTONIC) + left;
        res->reply = json_object_get(reply);
        res->bytes = strlen(json_object_to_json_string_ext(reply, JSON_C_TO_STRING_PLAIN));
        result_insert(m, res);
        return 0;
}

void run_results_load(Context *m) {
        int fd = results_dir(m, false), r;
        unsigned loaded = 0;
        struct dirent *de;
        DIR *d;

        if (fd < 0 || !(d = fdopendir(fd))) {
                safe_close(fd);
                return;
        }
        while ((de = readdir(d))) {
                char id[24];
                size_t l = strlen(de->d_name);
                if (de->d_name[0] == '.' && strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
                        (void) unlinkat(dirfd(d), de->d_name, 0); /* a save cut short */
                        continue;
                }
                if (l != 21 || strcmp(de->d_name + 16, ".json") != 0)
                        continue;
                snprintf(id, sizeof(id), "%.16s", de->d_name);
                r = !result_name_valid(id) ? -EINVAL : m->config.run_result_keep_usec == 0 ? -ETIME
                                                                                          : result_load(m, dirfd(d), de->d_name);
                if (r < 0) {
                        if (r != -ETIME)
                                log_warning_errno(r, "the kept run result %s/" RESULTS_DIR "/%s cannot be read: %m; removed",
                                                  m->config.state_dir, de->d_name);
                        (void) unlinkat(dirfd(d), de->d_name, 0);
                } else
                        loaded++;
        }
        closedir(d);
        if (loaded)
                log_info("%u run result(s) an earlier daemon kept for run.attach", loaded);
}

void run_results_free(Context *m) {
        while (m->run_results) {
                RunResult *next = m->run_results->next;
                json_object_put(m->run_results->reply);
                free(m->run_results);
                m->run_results = next;
        }
}
