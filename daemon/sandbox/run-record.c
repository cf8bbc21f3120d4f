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
#include "cgroup.h"
#include "context.h"
#include "registry.h"
#include "run-record.h"
#include "sandbox.h"
#include "util.h"

#define NOTE_MAX (256u << 10)
#define NOTE_ARGS_MAX 64
#define NOTE_ARG_BYTES 1024
/* All of a note's argv: 32 interrupted runs stay under 400 KiB of meta.json even when JSON
 * escapes every byte (6 for 1), beside an env of at most 64 KiB (sandbox.c). */
#define NOTE_ARGV_BYTES 2048
#define INTERRUPTED_KEEP 32
#define REASON "daemon restarted"

/* Rewritten with only the runs in flight once it has grown past this. */
#define LOG_COMPACT_BYTES (64u << 10)
#define LOG_READ_MAX (16u << 20)
#define LOG_NAME "runs.log"
#define LOG_TMP_NAME "runs.log.tmp"

static int state_dir_fd(Context *m) {
        return openat(m->state_fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* The start note of a run, or of a session ("session": true). */
static json_object *note_json(const Sandbox *s, const char *id, char *const *args, bool session, const char *cgroup) {
        json_object *o = json_object_new_object(), *argv = json_object_new_array();
        char ts[UTC_TIME_MAX];
        size_t i, left = NOTE_ARGV_BYTES;
        bool cut = false;

        for (i = 0; args && args[i] && i < NOTE_ARGS_MAX && left > 0; i++) {
                size_t n = strnlen(args[i], NOTE_ARG_BYTES < left ? NOTE_ARG_BYTES : left);
                cut = cut || args[i][n] != '\0';
                json_object_array_add(argv, json_object_new_string_len(args[i], (int) n));
                left -= n;
        }
        format_utc(ts, now_usec(CLOCK_REALTIME));
        json_object_object_add(o, "sandbox", json_object_new_string(s->id));
        json_object_object_add(o, "id", json_object_new_string(id));
        if (session)
                json_object_object_add(o, "session", json_object_new_boolean(true));
        json_object_object_add(o, "argv", argv);
        json_object_object_add(o, "argv_truncated", json_object_new_boolean(cut || (args && args[i])));
        json_object_object_add(o, "started_at", json_object_new_string(ts));
        if (cgroup && cgroup[0])
                json_object_object_add(o, "cgroup", json_object_new_string(cgroup));
        return o;
}

/* One line, in one write where it fits (a line a dying daemon cut short is skipped when the log
 * is read back). */
static int log_append(int fd, const char *line, size_t n, uint64_t *bytes) {
        if (fd < 0)
                return -EBADF;
        if (write_all(fd, line, n) < 0)
                return -errno;
        *bytes += n;
        return 0;
}

static int log_note(int fd, const Sandbox *s, const RunNote *note, uint64_t *bytes) {
        _cleanup_json_ json_object *o = note_json(s, note->id, note->argv, note->session, note->cgroup);
        _cleanup_free_ char *text = NULL;
        size_t n;

        text = proto_serialize(o, &n); /* one line, with its newline */
        return text ? log_append(fd, text, n, bytes) : -ENOMEM;
}

/* Past LOG_COMPACT_BYTES: emptied when nothing is in flight, else rewritten aside with the notes
 * of the runs and sessions in flight and renamed over the log (a crash in between leaves the old
 * log). ending: the run or session whose end was just written, still linked. */
static void log_compact(Context *m, const RunNote *ending) {
        _cleanup_close_ int dir = -EBADF, fd = -EBADF;
        uint64_t bytes = 0;
        bool busy = false;

        if (m->run_log->fd < 0 || m->run_log->bytes <= LOG_COMPACT_BYTES)
                return;
        for (Sandbox *s = registry_first(m->registry); s && !busy; s = registry_next(&s->entry))
                for (const RunNote *n = s->notes; n && !busy; n = n->next)
                        busy = n != ending;
        if (!busy) {
                if (ftruncate(m->run_log->fd, 0) < 0)
                        log_warning("cannot empty %s: %m", LOG_NAME);
                else
                        m->run_log->bytes = 0;
                return;
        }
        dir = state_dir_fd(m);
        fd = dir < 0 ? -EBADF : openat(dir, LOG_TMP_NAME, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
                log_warning("cannot compact %s: %m", LOG_NAME);
                return;
        }
        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry))
                for (const RunNote *n = s->notes; n; n = n->next)
                        if (n != ending && log_note(fd, s, n, &bytes) < 0) {
                                log_warning("cannot compact %s: %m", LOG_NAME);
                                return;
                        }
        if (renameat(dir, LOG_TMP_NAME, dir, LOG_NAME) < 0) {
                log_warning("cannot compact %s: %m", LOG_NAME);
                return;
        }
        safe_close(m->run_log->fd);
        m->run_log->fd = TAKE_FD(fd);
        m->run_log->bytes = bytes;
}

static void record_start(Sandbox *s, const RunNote *n) {
        if (!s->ephemeral && log_note(s->ctx->run_log->fd, s, n, &s->ctx->run_log->bytes) < 0)
                log_warning("%s %s: cannot record it in the state directory: %m", n->session ? "session" : "run", n->id);
}

static void record_end(Sandbox *s, const char *id, const RunNote *ending) {
        char line[128];
        int n;

        if (s->ephemeral)
                return;
        n = snprintf(line, sizeof(line), "{\"sandbox\":\"%s\",\"end\":\"%s\"}\n", s->id, id);
        if (log_append(s->ctx->run_log->fd, line, (size_t) n, &s->ctx->run_log->bytes) < 0)
                log_warning("%s: cannot record its end in the state directory: %m", id);
        log_compact(s->ctx, ending);
}

static void note_unlink(RunNote *n) {
        Sandbox *s = n->sandbox;
        if (!n->linked)
                return;
        if (n->prev)
                n->prev->next = n->next;
        else
                s->notes = n->next;
        if (n->next)
                n->next->prev = n->prev;
        n->next = n->prev = NULL;
        n->linked = false;
}

static void note_link(RunNote *n, Sandbox *s) {
        n->next = s->notes;
        if (s->notes)
                s->notes->prev = n;
        s->notes = n;
        n->linked = true;
}

void run_note_start(RunNote *n, Sandbox *s, const char *id, char *const *argv, bool session, const char *cgroup) {
        *n = (RunNote) { .sandbox = s, .id = id, .argv = argv, .session = session };
        snprintf(n->cgroup, sizeof(n->cgroup), "%s", cgroup ?: "");
        if (s->ephemeral)
                return;
        record_start(s, n);
        note_link(n, s);
}

void run_note_adopt(RunNote *n, Sandbox *s, const char *id, char *const *argv, bool session, const char *cgroup) {
        *n = (RunNote) { .sandbox = s, .id = id, .argv = argv, .session = session };
        snprintf(n->cgroup, sizeof(n->cgroup), "%s", cgroup ?: "");
        if (!s->ephemeral)
                note_link(n, s);
}

static bool note_linked(const Sandbox *s, const char *id) {
        for (const RunNote *n = s->notes; n; n = n->next)
                if (strcmp(n->id, id) == 0)
                        return true;
        return false;
}

/* The end line is written with n still linked: a compaction it sets off leaves n out. */
void run_note_end(RunNote *n) {
        if (!n->linked)
                return;
        record_end(n->sandbox, n->id, n);
        note_unlink(n);
}

void run_note_forget(RunNote *n) {
        note_unlink(n);
}

static json_object *lost_in(Sandbox *s, const char *id, bool session) {
        size_t n = s->interrupted_runs ? json_object_array_length(s->interrupted_runs) : 0;
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(s->interrupted_runs, i), *v;
                bool is_session = json_object_object_get_ex(e, "session", &v) && json_object_get_boolean(v);
                if (is_session == session && json_object_object_get_ex(e, "id", &v) &&
                    strcmp(json_object_get_string(v), id) == 0)
                        return e;
        }
        return NULL;
}

json_object *run_records_lost(Context *ctx, const ReplyPeer *peer, const char *id, bool session, Sandbox **ret_sandbox) {
        for (Sandbox *s = registry_first(ctx->registry); s; s = registry_next(&s->entry)) {
                json_object *e;
                if (sandbox_visible_to(s, peer) && (e = lost_in(s, id, session))) {
                        *ret_sandbox = s;
                        return e;
                }
        }
        return NULL;
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

/* A run or session cut short in a sandbox that kept its processes (sandbox.h, init_adopted) lost
 * what supervised it (its timeout, its output's reader, its terminal): what is left of it is
 * killed, so that it ends as surely as with a sandbox started anew. */
static void end_lost(Sandbox *s, json_object *note) {
        _cleanup_close_ int fd = -EBADF;
        char name[32] = "";
        json_object *v;

        if (!json_object_object_get_ex(note, "cgroup", &v))
                return;
        if (json_object_is_type(v, json_type_string))
                snprintf(name, sizeof(name), "%s", json_object_get_string(v));
        json_object_object_del(note, "cgroup"); /* not part of the interrupted run's record */
        if (!s->init_adopted || s->cg_fd < 0 || !name[0] || strcmp(name, "init") == 0 || strchr(name, '/') || name[0] == '.')
                return;
        fd = openat(s->cg_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 && cg_populated(fd) > 0)
                (void) cg_kill(fd);
}

/* A run in a sandbox that kept its processes, taken back from the fd store (run_adopt()): true.
 * Else note is its interrupted run's record, with what could not be kept where some of it was. */
static bool note_adopt(Sandbox *s, json_object *note) {
        json_object *lost = NULL, *v;
        const char *why = NULL;
        char reason[160];
        int k;

        if (!s->init_adopted || !s->ctx->run_log->adopt ||
            (json_object_object_get_ex(note, "session", &v) && json_object_get_boolean(v)))
                return false;
        k = s->ctx->run_log->adopt(s, note, &lost, &why);
        if (k == 0)
                return true;
        if (k != -ENOENT && lost) {
                snprintf(reason, sizeof(reason), "%s: %s", REASON, why ?: "not all of it was kept");
                log_warning("sandbox %s: run %s cannot be taken back: %s", s->id, json_object_get_string(json_object_object_get(note, "id")),
                            reason + strlen(REASON) + 2);
                json_object_object_add(note, "lost", lost);
                json_object_object_add(note, "reason", json_object_new_string(reason));
        } else
                json_object_put(lost);
        return false;
}

/* Parses the log: every start without an end becomes its sandbox's interrupted run, but for the
 * runs taken back. */
static void log_recover(Context *m, char *buf, size_t n) {
        _cleanup_json_ json_object *ended = json_object_new_object();
        char key[64];

        /* Two passes: the ends first, then the starts that have none. */
        for (int pass = 0; pass < 2; pass++)
                for (char *line = buf, *nl; line < buf + n; line = nl + 1) {
                        json_object *o, *sb, *v;
                        Sandbox *s;
                        char saved;

                        nl = strchrnul(line, '\n');
                        saved = *nl;
                        *nl = '\0';
                        o = json_tokener_parse(line);
                        *nl = saved;
                        if (o && json_object_object_get_ex(o, "sandbox", &sb) && json_object_is_type(sb, json_type_string)) {
                                bool end = json_object_object_get_ex(o, "end", &v);
                                if (!end)
                                        json_object_object_get_ex(o, "id", &v);
                                if (json_object_is_type(v, json_type_string)) {
                                        snprintf(key, sizeof(key), "%s/%s", json_object_get_string(sb), json_object_get_string(v));
                                        if (pass == 0 && end)
                                                json_object_object_add(ended, key, NULL);
                                        else if (pass == 1 && !end && !json_object_object_get_ex(ended, key, NULL) &&
                                                 json_object_object_get_ex(o, "argv", NULL) &&
                                                 json_object_object_get_ex(o, "started_at", NULL) &&
                                                 (s = registry_find(m->registry, json_object_get_string(sb))) &&
                                                 strcmp(s->id, json_object_get_string(sb)) == 0 &&
                                                 !interrupted_has(s, json_object_get_string(v)) &&
                                                 !note_linked(s, json_object_get_string(v)) && !note_adopt(s, o)) {
                                                log_warning("sandbox %s: run %s was interrupted: the daemon restarted", s->id,
                                                            json_object_get_string(v));
                                                end_lost(s, o);
                                                json_object_object_del(o, "sandbox");
                                                if (!json_object_object_get_ex(o, "reason", NULL))
                                                        json_object_object_add(o, "reason", json_object_new_string(REASON));
                                                interrupted_add(s, TAKE_PTR(o));
                                                s->interrupted_changed = true;
                                        }
                                }
                        }
                        json_object_put(o);
                        if (!*nl)
                                break;
                }
}

int run_log_open(Context *m) {
        _cleanup_close_ int dir = state_dir_fd(m), fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        bool all_saved = true;
        ssize_t n;

        if (dir < 0)
                return -errno;
        (void) unlinkat(dir, LOG_TMP_NAME, 0);
        fd = openat(dir, LOG_NAME, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        if (!(buf = malloc(LOG_READ_MAX + 1)))
                return -ENOMEM;
        n = pread(fd, buf, LOG_READ_MAX, 0);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        log_recover(m, buf, (size_t) n);
        /* The log is emptied only once meta.json holds what it said. */
        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry))
                if (s->interrupted_changed) {
                        int r = registry_changed(&s->entry); /* state.c saves it */
                        if (r < 0) {
                                log_warning_errno(r, "sandbox %s: cannot record its interrupted runs: %m", s->id);
                                all_saved = false;
                        }
                        s->interrupted_changed = false;
                }
        if (all_saved && ftruncate(fd, 0) < 0)
                return -errno;
        m->run_log->bytes = all_saved ? 0 : (uint64_t) n;
        m->run_log->fd = TAKE_FD(fd);
        /* What was taken back is in flight again: noted anew, for the next restart (the runs
         * that adopt took back are noted, and linked, by adopted()). */
        if (all_saved)
                for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry))
                        for (const RunNote *note = s->notes; note; note = note->next)
                                record_start(s, note);
        for (Sandbox *s = registry_first(m->registry); s && m->run_log->adopted; s = registry_next(&s->entry))
                m->run_log->adopted(s);
        return 0;
}

void run_records_add_lost(Sandbox *s, json_object *rec) {
        interrupted_add(s, rec);
        s->interrupted_changed = true;
}

/* The one-file-per-run notes of earlier versions (<id>/runs/<run-id>.json). */
static int collect_dir(Sandbox *s, json_object *found, DIR **ret) {
        char dir[48];
        int fd;
        DIR *d;
        struct dirent *de;

        snprintf(dir, sizeof(dir), "%s/runs", s->id);
        fd = openat(s->ctx->state_fd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!(d = fdopendir(fd))) {
                close(fd);
                return -errno;
        }
        while ((de = readdir(d))) {
                json_object *rec, *id;
                if (de->d_name[0] == '.' || !(rec = note_read(fd, de->d_name)))
                        continue;
                json_object_object_get_ex(rec, "id", &id);
                if (interrupted_has(s, json_object_get_string(id)))
                        json_object_put(rec);
                else
                        json_object_array_add(found, rec);
        }
        json_object_array_sort(found, sort_by_started);
        *ret = d;
        return 0;
}

int run_records_collect(Sandbox *s) {
        _cleanup_json_ json_object *found = json_object_new_array();
        DIR *d = NULL;
        struct dirent *de;
        int r;

        if ((r = collect_dir(s, found, &d)) < 0 || !d)
                return r;
        for (size_t i = 0; i < json_object_array_length(found); i++) {
                json_object *rec = json_object_get(json_object_array_get_idx(found, i)), *id;
                json_object_object_get_ex(rec, "id", &id);
                log_warning("sandbox %s: run %s was interrupted: the daemon restarted", s->id, json_object_get_string(id));
                interrupted_add(s, rec);
        }
        /* The notes go only once meta.json holds what they said. */
        r = json_object_array_length(found) ? registry_changed(&s->entry) : 0; /* state.c saves it */
        if (r >= 0) {
                rewinddir(d);
                while ((de = readdir(d)))
                        if (de->d_name[0] != '.')
                                (void) unlinkat(dirfd(d), de->d_name, 0);
        } else
                log_warning_errno(r, "sandbox %s: cannot record its interrupted runs: %m", s->id);
        closedir(d);
        return r;
}

void run_records_json(Sandbox *s, json_object *o) {
        json_object_object_add(o, "interrupted_runs",
                               s->interrupted_runs ? json_object_get(s->interrupted_runs) : json_object_new_array());
}
