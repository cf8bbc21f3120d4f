/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A session across a restart (docs/design/restarts.md, section 4): its fds in systemd's fd store
 * by name, its record beside its sandbox's, and a session an earlier daemon left taken back, or
 * reported lost with the reason (session.h, session_restore_all()). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "log.h"
#include "macro.h"
#include "session-internal.h"
#include "util.h"

/* ---- Across a restart (docs/design/restarts.md, section 4) -------------------------------- */

/* What a session keeps in the fd store, by the last part of its name (p.<session>.<what>). */
static const char *const stored_pty[] = { "master", "ring", "rep", "helper", "stage", NULL };
static const char *const stored_pipes[] = { "out", "err", "in", "ring", "rep", "helper", NULL };

static const char *const *session_stored_names(bool pty) {
        return pty ? stored_pty : stored_pipes;
}

/* <sandbox>/sessions/<session>.json below the state directory. */
static void session_record_path(char *buf, size_t len, const Sandbox *s, const char *id, bool tmp) {
        snprintf(buf, len, "%s/sessions/%s.json%s", s->id, id, tmp ? ".tmp" : "");
}

static json_object *session_record_json(Session *p) {
        json_object *o = json_object_new_object(), *argv = json_object_new_array();

        for (char **a = p->spec.argv; a && *a; a++)
                json_object_array_add(argv, json_object_new_string(*a));
        json_object_object_add(o, "id", json_object_new_string(p->id));
        json_object_object_add(o, "argv", argv);
        json_object_object_add(o, "pty", json_object_new_boolean(p->pty));
        json_object_object_add(o, "rows", json_object_new_int((int) p->rows));
        json_object_object_add(o, "cols", json_object_new_int((int) p->cols));
        json_object_object_add(o, "created_usec", json_object_new_int64((int64_t) p->created_usec));
        json_object_object_add(o, "cgroup", json_object_new_string(p->launch.cg_name));
        json_object_object_add(o, "main_pid", json_object_new_int((int) p->main_pid));
        /* Whether its fds went into a store: a daemon without one (standalone) could not keep it. */
        json_object_object_add(o, "stored", json_object_new_boolean(p->stored));
        json_object_object_add(o, "fd_store", json_object_new_boolean(fdstore_enabled()));
        if (p->stdin_closed)
                json_object_object_add(o, "stdin_closed", json_object_new_boolean(true));
        return o;
}

/* Written aside and renamed into place: a record is whole or the old one. */
void session_record_save(Session *p) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *text = NULL;
        char dir[64], path[96], tmp[96];
        int fd, state_fd = p->sandbox->ctx->state_fd;
        size_t n;

        if (!p->in_store || p->sandbox->ephemeral)
                return;
        o = session_record_json(p);
        text = proto_serialize(o, &n);
        snprintf(dir, sizeof(dir), "%s/sessions", p->sandbox->id);
        session_record_path(path, sizeof(path), p->sandbox, p->id, false);
        session_record_path(tmp, sizeof(tmp), p->sandbox, p->id, true);
        if (!text || (mkdirat(state_fd, dir, 0700) < 0 && errno != EEXIST)) {
                log_warning("session %s: cannot record it for a restart: %m", p->id);
                return;
        }
        fd = openat(state_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 || write_all(fd, text, n) < 0 || renameat(state_fd, tmp, state_fd, path) < 0)
                log_warning("session %s: cannot record it for a restart: %m", p->id);
        safe_close(fd);
}

static int session_push(Session *p, const char *what, int fd) {
        char name[FDSTORE_NAME_MAX];
        return fdstore_push(fdstore_name(name, 'p', p->id, what), fd);
}

static int session_stored_fd(Session *p, const char *what) {
        if (strcmp(what, "master") == 0 || strcmp(what, "out") == 0)
                return p->out_fd[0];
        if (strcmp(what, "err") == 0)
                return p->out_fd[1];
        if (strcmp(what, "in") == 0)
                return p->in_fd;
        if (strcmp(what, "ring") == 0)
                return p->ring_fd;
        if (strcmp(what, "rep") == 0)
                return p->launch.report_fd;
        if (strcmp(what, "stage") == 0)
                return p->stage_fd;
        return p->launch.pidfd; /* "helper" */
}

/* Its terminal (or pipes), ring, report socket and helper's pidfd into the store, once the
 * program runs, and its record beside its sandbox's. Without a store (standalone) the record
 * says so, for the next daemon to say why the session is lost. */
void session_store(Session *p) {
        bool all = fdstore_enabled();

        if (p->sandbox->ephemeral)
                return;
        for (const char *const *w = session_stored_names(p->pty); all && *w; w++)
                if (session_push(p, *w, session_stored_fd(p, *w)) <= 0) {
                        log_warning("session %s: cannot put its %s into the fd store; it will not outlive the daemon",
                                    p->id, *w);
                        all = false;
                }
        p->in_store = true;
        p->stored = all;
        session_record_save(p);
}

/* The store's copy of a pipe session's stdin would keep the pipe open: the program must see its
 * EOF, and the next daemon must not look for it. */
void session_input_closed(Session *p) {
        char name[FDSTORE_NAME_MAX];

        if (p->pty || !p->in_store || p->stdin_closed)
                return;
        p->stdin_closed = true;
        (void) fdstore_remove(fdstore_name(name, 'p', p->id, "in"));
        session_record_save(p);
}

static void session_remove_stored(const char *id, bool pty) {
        char name[FDSTORE_NAME_MAX];
        for (const char *const *w = session_stored_names(pty); *w; w++)
                (void) fdstore_remove(fdstore_name(name, 'p', id, *w));
}

static void session_record_remove(Sandbox *s, const char *id) {
        char path[96];
        session_record_path(path, sizeof(path), s, id, false);
        (void) unlinkat(s->ctx->state_fd, path, 0);
}

/* It ended: nothing of it is kept for a next daemon. */
void session_unstore(Session *p) {
        if (!p->in_store)
                return;
        p->in_store = false;
        session_remove_stored(p->id, p->pty);
        session_record_remove(p->sandbox, p->id);
}

/* ---- Taking a session back --------------------------------------------------------------- */

static void argv_free(char **v) {
        for (char **a = v; a && *a; a++)
                free(*a);
        free(v);
}

/* What a record says, checked: hostile input as any file may be. */
typedef struct SessionRecord {
        const char *id, *cgroup;
        char **argv;
        bool pty, stored, had_store, stdin_closed;
        unsigned rows, cols;
        uint64_t created_usec;
        pid_t main_pid;
} SessionRecord;

static bool session_id_valid(const char *id) {
        if (!id || strlen(id) != 16 || strncmp(id, "pty-", 4) != 0)
                return false;
        for (const char *c = id + 4; *c; c++)
                if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
                        return false;
        return true;
}

static bool member_cgroup_valid(const char *name) {
        unsigned n;
        char end;
        return name && strlen(name) < 32 && sscanf(name, "pty-%u%c", &n, &end) == 1;
}

static const char *rec_string(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string) ? json_object_get_string(v)
                                                                                               : NULL;
}

static int64_t rec_int(json_object *o, const char *key, int64_t min, int64_t max, bool *ok) {
        json_object *v;
        int64_t n;
        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int)) {
                *ok = false;
                return 0;
        }
        n = json_object_get_int64(v);
        if (n < min || n > max)
                *ok = false;
        return n;
}

static int session_record_parse(json_object *o, SessionRecord *r) {
        json_object *argv, *v;
        bool ok = true;
        size_t n;

        *r = (SessionRecord) { .id = rec_string(o, "id"), .cgroup = rec_string(o, "cgroup") };
        if (!session_id_valid(r->id) || !member_cgroup_valid(r->cgroup) || !json_object_object_get_ex(o, "argv", &argv) ||
            !json_object_is_type(argv, json_type_array) || (n = json_object_array_length(argv)) == 0 || n > 4096)
                return -EBADMSG;
        r->pty = json_object_object_get_ex(o, "pty", &v) && json_object_get_boolean(v);
        r->stored = json_object_object_get_ex(o, "stored", &v) && json_object_get_boolean(v);
        r->had_store = json_object_object_get_ex(o, "fd_store", &v) && json_object_get_boolean(v);
        r->stdin_closed = !r->pty && json_object_object_get_ex(o, "stdin_closed", &v) && json_object_get_boolean(v);
        r->rows = (unsigned) rec_int(o, "rows", 0, 65535, &ok);
        r->cols = (unsigned) rec_int(o, "cols", 0, 65535, &ok);
        r->created_usec = (uint64_t) rec_int(o, "created_usec", 0, INT64_MAX, &ok);
        r->main_pid = (pid_t) rec_int(o, "main_pid", 0, INT32_MAX, &ok);
        if (!ok || !(r->argv = calloc(n + 1, sizeof(char *))))
                return -EBADMSG;
        for (size_t i = 0; i < n; i++) {
                json_object *a = json_object_array_get_idx(argv, i);
                if (!json_object_is_type(a, json_type_string) || !(r->argv[i] = strdup(json_object_get_string(a)))) {
                        argv_free(r->argv);
                        r->argv = NULL;
                        return -EBADMSG;
                }
        }
        return 0;
}

/* The fds of a record, each taken from the store and checked to be what its name says; one
 * that is not is closed and removed from the store. */
typedef struct SessionFds {
        int fd[6];
        char missing[96];
} SessionFds;

static int stored_check(const char *what, int fd) {
        int pid;
        size_t size;
        if (strcmp(what, "master") == 0)
                return fdstore_check_tty_master(fd);
        if (strcmp(what, "out") == 0 || strcmp(what, "err") == 0)
                return fdstore_check_fifo(fd, O_RDONLY);
        if (strcmp(what, "in") == 0)
                return fdstore_check_fifo(fd, O_WRONLY);
        if (strcmp(what, "ring") == 0)
                return fdstore_check_memfd(fd, RING_MEMFD_NAME, RING_SEALS, &size);
        if (strcmp(what, "rep") == 0)
                return fdstore_check_socket(fd);
        if (strcmp(what, "stage") == 0)
                return fdstore_check_fifo(fd, O_RDWR);
        return fdstore_check_pidfd_any(fd, &pid);
}

static const char *stored_what_words(const char *what) {
        static const char *const words[][2] = {
                { "master", "terminal" }, { "out", "stdout" },           { "err", "stderr" },
                { "in", "stdin" },        { "ring", "output ring" },     { "rep", "report socket" },
                { "helper", "helper" },   { "stage", "staging pipe" },
        };
        for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
                if (strcmp(words[i][0], what) == 0)
                        return words[i][1];
        return what;
}

static void session_fds_take(Sandbox *s, const SessionRecord *r, SessionFds *f) {
        const char *const *names = session_stored_names(r->pty);
        char name[FDSTORE_NAME_MAX];

        f->missing[0] = '\0';
        for (size_t i = 0; names[i]; i++) {
                int fd = fdstore_take(&s->ctx->fdstore, fdstore_name(name, 'p', r->id, names[i]));
                if (fd >= 0 && stored_check(names[i], fd) < 0) {
                        log_warning("session %s: the stored %s is not one (%s); closed", r->id, names[i], name);
                        fd = safe_close(fd);
                        (void) fdstore_remove(name);
                }
                f->fd[i] = fd < 0 ? -EBADF : fd;
                /* The ring alone may be missing: the session goes on, its output lost. An earlier
                 * daemon's terminal session has no staging pipe: it gets one. */
                if (fd < 0 && strcmp(names[i], "ring") != 0 && strcmp(names[i], "stage") != 0 &&
                    !(r->stdin_closed && strcmp(names[i], "in") == 0)) {
                        size_t n = strlen(f->missing);
                        snprintf(f->missing + n, sizeof(f->missing) - n, "%s%s", n ? ", " : "", stored_what_words(names[i]));
                }
        }
}

static void session_fds_close(const SessionRecord *r, SessionFds *f) {
        for (size_t i = 0; session_stored_names(r->pty)[i]; i++)
                f->fd[i] = safe_close(f->fd[i]);
}

static int session_fd_of(const SessionRecord *r, SessionFds *f, const char *what) {
        const char *const *names = session_stored_names(r->pty);
        for (size_t i = 0; names[i]; i++)
                if (strcmp(names[i], what) == 0)
                        return TAKE_FD(f->fd[i]);
        return -EBADF;
}

/* A session that cannot be taken back: its processes are killed (nothing could supervise them
 * any more), and it is listed as lost with the reason, which a pty.* on it then says. */
static void session_lost(Sandbox *s, const SessionRecord *r, const char *reason) {
        _cleanup_close_ int fd = openat(s->cg_fd, r->cgroup, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        json_object *rec = json_object_new_object(), *argv = json_object_new_array();
        char ts[UTC_TIME_MAX];

        log_warning("sandbox %s: session %s is lost: %s", s->id, r->id, reason);
        if (fd >= 0 && cg_populated(fd) > 0)
                (void) cg_kill(fd);
        for (char **a = r->argv; *a; a++)
                json_object_array_add(argv, json_object_new_string(*a));
        json_object_object_add(rec, "id", json_object_new_string(r->id));
        json_object_object_add(rec, "session", json_object_new_boolean(true));
        json_object_object_add(rec, "argv", argv);
        json_object_object_add(rec, "argv_truncated", json_object_new_boolean(false));
        json_object_object_add(rec, "started_at", json_object_new_string(format_utc(ts, r->created_usec)));
        json_object_object_add(rec, "reason", json_object_new_string(reason));
        run_records_add_lost(s, rec);
        session_remove_stored(r->id, r->pty);
        session_record_remove(s, r->id);
}

/* The ring the earlier daemon left, checked; a header that fails is output lost: a new ring
 * from the end it still says (then every byte before it is reported dropped, exactly), or from 0
 * when even that is gone. No ring at all: the same, from 0. */
static int session_ring_take(Session *p, int fd) {
        size_t size = 0, cap = p->sandbox->ctx->config.session_ring_bytes;
        uint64_t end = 0;
        bool known;
        int k;

        if (fd >= 0 && fdstore_check_memfd(fd, RING_MEMFD_NAME, RING_SEALS, &size) >= 0 && session_ring_map(p, fd, size) >= 0) {
                if ((k = ring_open(&p->ring, p->ring_mem, size)) >= 0) {
                        if (k > 0)
                                log_info("session %s: the %d bytes the last daemon read and did not append are in its ring",
                                         p->id, k);
                        return 0;
                }
                known = ring_torn_end(p->ring_mem, size, &end);
                session_ring_unmap(p);
                snprintf(p->output_lost, sizeof(p->output_lost),
                         known ? "its output ring's header was torn: the %" PRIu64 " bytes before seq %" PRIu64 " are lost"
                               : "its output ring's header was unreadable: all output before the restart is lost",
                         end, end);
        } else {
                safe_close(fd);
                snprintf(p->output_lost, sizeof(p->output_lost),
                         "its output ring was not in the fd store: all output before the restart is lost");
        }
        log_warning("session %s: %s", p->id, p->output_lost);
        (void) fdstore_remove(fdstore_name((char[FDSTORE_NAME_MAX]) {}, 'p', p->id, "ring"));
        if ((k = session_ring_new(p, cap, end)) < 0)
                return k;
        return session_push(p, "ring", p->ring_fd) > 0 ? 0 : -EIO;
}


/* Its terminal (and a second fd of it for input), or its pipes, watched again. */
static int session_rewatch(Session *p, const SessionRecord *r, SessionFds *f) {
        int k, in;

        if (p->pty) {
                int master = session_fd_of(r, f, "master");
                p->stage_fd = session_fd_of(r, f, "stage");
                if (p->stage_fd < 0) {
                        /* An earlier daemon's session; one out of the store would lose what it holds. */
                        p->stage_fd = ring_stage_new();
                        if (p->stage_fd < 0 || session_push(p, "stage", p->stage_fd) <= 0) {
                                p->stage_fd = safe_close(p->stage_fd);
                                log_warning("session %s: no staging pipe for its terminal: a daemon killed in a read will "
                                            "lose what it read", p->id);
                        }
                }
                in = fcntl(master, F_DUPFD_CLOEXEC, 3);
                if (in < 0) {
                        safe_close(master);
                        return -errno;
                }
                if ((k = session_watch_output(p, 0, master)) < 0) {
                        safe_close(in);
                        return k;
                }
                return session_watch_input(p, in);
        }
        if ((k = session_watch_output(p, 0, session_fd_of(r, f, "out"))) < 0 ||
            (k = session_watch_output(p, 1, session_fd_of(r, f, "err"))) < 0)
                return k;
        in = session_fd_of(r, f, "in");
        if (r->stdin_closed) {
                safe_close(in);
                p->in_eof = p->stdin_closed = true;
                return 0;
        }
        return session_watch_input(p, in);
}

static int session_adopt(Sandbox *s, SessionRecord *r, SessionFds *f, Session **ret) {
        Session *p = calloc(1, sizeof(*p));
        int helper, k;

        if (!p)
                return -ENOMEM;
        snprintf(p->id, sizeof(p->id), "%s", r->id);
        p->sandbox = s;
        p->spec.argv = TAKE_PTR(r->argv);
        p->pty = r->pty;
        p->rows = r->rows;
        p->cols = r->cols;
        p->created_usec = r->created_usec;
        p->main_pid = r->main_pid;
        p->main_pidfd = p->in_fd = p->ring_fd = p->stage_fd = -EBADF;
        p->out_fd[0] = p->out_fd[1] = -EBADF;
        p->started = p->restored = p->in_store = p->stored = true;
        launch_init(&p->launch, s, &session_launch_ops, p);
        hook_init(&p->opener_hook, session_on_opener_gone, p);
        session_link(s, p);
        sandbox_member_add(s, &p->member, &session_member_ops);
        run_note_adopt(&p->note, s, p->id, p->spec.argv, true, r->cgroup);
        *ret = p;
        if ((k = session_ring_take(p, session_fd_of(r, f, "ring"))) < 0 || (k = session_rewatch(p, r, f)) < 0)
                return k;
        ring_read_staged(&p->ring, p->stage_fd); /* before anything more of its terminal */
        helper = session_fd_of(r, f, "helper");
        return launch_adopt(&p->launch, r->cgroup, helper, session_fd_of(r, f, "rep"));
}

static void session_restore_one(Sandbox *s, json_object *o, const char *file) {
        SessionRecord r;
        SessionFds f;
        Session *p = NULL;
        char why[160], want[32];
        int k;

        /* One record a session, named by its id: never two claims on one session's fds. */
        k = session_record_parse(o, &r);
        if (k >= 0 && (size_t) snprintf(want, sizeof(want), "%s.json", r.id) < sizeof(want) && strcmp(want, file) != 0)
                k = -EBADMSG;
        if (k < 0) {
                argv_free(r.argv);
                log_warning("sandbox %s: the session record %s is not one; removed (a session of it is reported lost)", s->id,
                            file);
                return;
        }
        session_fds_take(s, &r, &f);
        if (!r.stored && !r.had_store)
                snprintf(why, sizeof(why), "the daemon had no fd store and no holder: its terminal and output "
                                           "ended with it; its processes were killed");
        else if (!r.stored)
                snprintf(why, sizeof(why), "the fd store refused some of its fds (full?): its terminal and output ended "
                                           "with the daemon; its processes were killed");
        else if (f.missing[0])
                snprintf(why, sizeof(why), "not in the fd store: its %s; its processes were killed", f.missing);
        if (!r.stored || f.missing[0]) {
                session_fds_close(&r, &f);
                session_lost(s, &r, why);
                argv_free(r.argv);
                return;
        }
        k = session_adopt(s, &r, &f, &p);
        session_fds_close(&r, &f);
        if (k < 0) {
                /* Half taken back: it ends here as one lost. */
                log_warning_errno(k, "session %s: cannot take it back: %m", r.id);
                if (p) {
                        r.argv = p->spec.argv;
                        snprintf(why, sizeof(why), "cannot take it back: %s; its processes were killed", strerror(-k));
                        p->in_store = false;
                        session_lost(s, &r, why);
                        r.argv = NULL; /* p's, freed with it */
                        session_destroy(p);
                }
                argv_free(r.argv);
                return;
        }
        argv_free(r.argv);
        log_info("sandbox %s: session %s taken back after the restart", s->id, p->id);
        session_arm_idle(p);
        /* What it wrote while no daemon ran waits in the terminal: read on the first turn. */
}

void session_restore_all(Sandbox *s) {
        char dir[64];
        _cleanup_close_ int fd = -EBADF;
        DIR *d;
        struct dirent *de;

        snprintf(dir, sizeof(dir), "%s/sessions", s->id);
        fd = openat(s->ctx->state_fd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || !(d = fdopendir(fd)))
                return;
        fd = -EBADF;
        while ((de = readdir(d))) {
                _cleanup_json_ json_object *o = NULL;
                _cleanup_free_ char *buf = NULL;
                size_t n = strlen(de->d_name);

                if (de->d_name[0] == '.' || n < 6 || strcmp(de->d_name + n - 5, ".json") != 0) {
                        if (de->d_name[0] != '.' || n > 2)
                                (void) unlinkat(dirfd(d), de->d_name, 0); /* a .tmp a crash left */
                        continue;
                }
                /* A sandbox that did not keep its processes has no sessions to take back: the
                 * notes in runs.log report them. */
                if (s->init_adopted && (buf = malloc(SESSION_RECORD_MAX)) &&
                    read_small_file(dirfd(d), de->d_name, true, buf, SESSION_RECORD_MAX) >= 0 && (o = json_tokener_parse(buf)))
                        session_restore_one(s, o, de->d_name);
                (void) unlinkat(dirfd(d), de->d_name, 0);
        }
        closedir(d);
        /* The ones taken back are written again (their record went with the walk). */
        for (Session *p = s->sessions; p; p = p->next)
                if (p->restored)
                        session_record_save(p);
}
