/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A run across a restart (docs/design/restarts.md): its pipes, report socket, capture and pidfd
 * in systemd's fd store by name, its final reply kept when no client is there to take it, and a
 * run an earlier daemon left taken back from its note in runs.log, or reported lost with the
 * reason (run.h, run_adopt()); run.attach, a client again for a run that outlived its own. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "log.h"
#include "macro.h"
#include "metrics.h"
#include "run-result.h"
#include "run-internal.h"
#include "util.h"

/* ---- Kept across a restart --------------------------------------------------------------- */

/* A direct run's (launch.h) "pid": the command's pidfd, whose end a next daemon reads from it. */
static const char *const store_what[] = { "out", "err", "in", "rep", "cap", "pid" };
#define STORE_N ELEMENTSOF(store_what)

static const char *run_store_name(const Run *r, char buf[static FDSTORE_NAME_MAX], const char *what) {
        return fdstore_name(buf, 'r', r->id, what);
}

void run_publish(Run *r) {
        if (r->kept)
                capture_publish(&r->capture, r->out, &r->acct);
}

/* One of its pipe ends is closed (EOF, stdin all written): out of the store too. */
void run_store_drop(Run *r, const char *what, uint32_t bit) {
        char name[FDSTORE_NAME_MAX];

        if (!r->kept || !(r->acct.open & bit))
                return;
        r->acct.open &= ~bit;
        run_publish(r);
        for (size_t i = 0; i < ELEMENTSOF(store_what); i++)
                if (strcmp(store_what[i], what) == 0)
                        r->stored &= ~(1u << i);
        (void) fdstore_remove(run_store_name(r, name, what));
}

/* What is left of it in the store goes: not the names it never had, nor those already dropped
 * (a run true used to send five removes after the two drops, each one a walk of the manager's
 * store, whose size is the number of sandboxes alive). */
void run_store_forget(Run *r) {
        char name[FDSTORE_NAME_MAX];

        for (size_t i = 0; i < ELEMENTSOF(store_what); i++)
                if (r->stored & (1u << i))
                        (void) fdstore_remove(run_store_name(r, name, store_what[i]));
        r->stored = 0;
}

/* Its pipes, report socket and capture into the store. A run the store does not take whole is
 * still run, as one the next daemon reports lost. */
void run_store_push(Run *r) {
        int fds[] = { r->out_fd[0], r->out_fd[1], r->stdin_fd, r->launch.report_fd, r->capture.fd,
                      r->launch.direct ? r->launch.pidfd : -EBADF };
        char name[FDSTORE_NAME_MAX];

        r->acct.open = CAPTURE_OPEN_OUT | CAPTURE_OPEN_ERR | (r->stdin_fd >= 0 ? CAPTURE_OPEN_IN : 0);
        run_publish(r);
        for (size_t i = 0; i < ELEMENTSOF(store_what); i++) {
                int k = fds[i] >= 0 ? fdstore_push(run_store_name(r, name, store_what[i]), fds[i]) : 0;
                if (fds[i] >= 0)
                        r->stored |= 1u << i; /* a failed push may still have kept a copy for the holder */
                if (k < 0)
                        log_warning_errno(k, "run %s: cannot put %s into the fd store, it will not outlive the daemon: %m",
                                          r->id, name);
        }
}

/* The sink of a run with no client: events go nowhere, the final reply is kept. */
static Run *run_of_sink(ReplySink *sink) {
        return (Run *) ((char *) sink - offsetof(Run, keep_sink));
}

static void keep_send(ReplySink *sink, json_object *msg) {
        if (json_object_object_get_ex(msg, "event", NULL))
                json_object_put(msg);
        else
                run_result_add(run_of_sink(sink)->sandbox->ctx, run_of_sink(sink)->id,
                               run_of_sink(sink)->sandbox->owner_uid, msg);
}

static size_t keep_backlog(const ReplySink *sink) {
        return 0;
}

static bool keep_input_ended(const ReplySink *sink) {
        return false;
}

static void keep_ref(ReplySink *sink) {
}

static const ReplySinkOps keep_sink_ops = {
        .send = keep_send,
        .backlog = keep_backlog,
        .input_ended = keep_input_ended,
        .ref = keep_ref,
        .unref = keep_ref,
};

int run_keep_reply_init(Run *r) {
        reply_sink_init(&r->keep_sink, &keep_sink_ops, &(ReplyPeer) { .n_groups = -1 });
        return reply_new(&r->keep_sink, NULL, &r->keep_reply);
}

/* ---- Taken back after a restart ---------------------------------------------------------- */

/* What a run's stored fds must be: its pipes' ends (a FIFO, read or written), its report socket
 * (a SOCK_SEQPACKET). */
static bool fd_is_pipe_end(int fd, int accmode) {
        struct stat st;
        int fl = fcntl(fd, F_GETFL);
        return fl >= 0 && (fl & O_ACCMODE) == accmode && fstat(fd, &st) >= 0 && S_ISFIFO(st.st_mode);
}

static bool fd_is_report_socket(int fd) {
        struct stat st;
        int type = 0;
        socklen_t len = sizeof(type);
        return fstat(fd, &st) >= 0 && S_ISSOCK(st.st_mode) && getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) >= 0 &&
               type == SOCK_SEQPACKET;
}

/* The run's stored fds, taken out of the context's store: fds[i] for store_what[i], -1 where
 * there was none. Returns how many there were. */
static int adopt_take(Context *m, const char *id, int fds[static STORE_N]) {
        char name[FDSTORE_NAME_MAX];
        int n = 0;

        for (size_t i = 0; i < ELEMENTSOF(store_what); i++) {
                fds[i] = fdstore_take(&m->fdstore, fdstore_name(name, 'r', id, store_what[i]));
                if (fds[i] >= 0)
                        n++;
                else
                        fds[i] = -EBADF;
        }
        return n;
}

/* A run that cannot be taken back: its fds closed and out of the store. */
static void adopt_drop(const char *id, int fds[static STORE_N]) {
        char name[FDSTORE_NAME_MAX];

        for (size_t i = 0; i < ELEMENTSOF(store_what); i++) {
                (void) fdstore_remove(fdstore_name(name, 'r', id, store_what[i]));
                fds[i] = safe_close(fds[i]);
        }
}

static bool run_id_valid(const char *id) {
        if (strlen(id) != 16 || strncmp(id, "run-", 4) != 0)
                return false;
        for (const char *p = id + 4; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return false;
        return true;
}

/* What of its fds is missing or not what its name says, into lost; the capture checked first
 * (it says which pipe ends must be there). */
static void adopt_check(Run *r, int fds[static STORE_N], json_object *lost, const char **why) {
        static const char *const lost_name[STORE_N] = { "stdout", "stderr", "stdin", "report", "capture", "process" };
        CaptureFixed f;
        bool bad[STORE_N] = { false };
        int pid;

        if (fds[4] < 0) {
                bad[4] = true;
                *why = "its capture is not in the fd store";
        } else if (capture_open(&r->capture, fds[4], &f, &r->acct, r->out, why) < 0)
                bad[4] = true;
        else {
                fds[4] = -EBADF; /* the capture's now */
                r->spec.output_bytes = f.cap;
                r->spec.cpu_usec = f.cpu_usec;
                r->spec.stream = f.stream;
                r->start_usec = f.start_usec;
                r->sandbox_pids_max_events = f.pids_max_events;
                r->stdin_lost = (r->acct.open & CAPTURE_OPEN_IN) && f.stdin_len > 0;
                r->seq = r->acct.seq;
                r->started = r->acct.open & CAPTURE_STARTED;
        }
        for (int i = 0; i < 2 && !bad[4]; i++)
                if ((r->acct.open & (i ? CAPTURE_OPEN_ERR : CAPTURE_OPEN_OUT)) && (fds[i] < 0 || !fd_is_pipe_end(fds[i], O_RDONLY))) {
                        bad[i] = true;
                        *why = fds[i] < 0 ? "a pipe of its output is not in the fd store" : "a stored pipe end is no pipe's";
                }
        if (fds[3] < 0 || !fd_is_report_socket(fds[3])) {
                bad[3] = true;
                *why = fds[3] < 0 ? "its helper's report socket is not in the fd store" : "its stored report socket is no socket";
        }
        if (fds[5] >= 0 && fdstore_check_pidfd_any(fds[5], &pid) < 0) {
                bad[5] = true;
                *why = "its stored command is no pidfd";
        }
        for (size_t i = 0; i < ELEMENTSOF(lost_name); i++)
                if (bad[i])
                        json_object_array_add(lost, json_object_new_string(lost_name[i]));
}

static int adopt_watch(Run *r, int fds[static STORE_N], const char *cgroup) {
        sd_event *e = r->sandbox->ctx->event;
        uint64_t now = now_usec(CLOCK_BOOTTIME), deadline = r->acct.deadline_ns / NSEC_PER_USEC;
        int k, cg_fd = openat(r->sandbox->cg_fd, cgroup, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (cg_fd < 0)
                return -errno;
        /* Direct, the command was the helper: its end is read from its pidfd (launch.h). */
        if (fds[5] >= 0) {
                r->main_pidfd = fcntl(fds[5], F_DUPFD_CLOEXEC, 3);
                k = launch_adopt_direct(&r->launch, cgroup, cg_fd, TAKE_FD(fds[3]), TAKE_FD(fds[5]));
        } else
                k = launch_adopt_reports(&r->launch, cgroup, cg_fd, TAKE_FD(fds[3]));
        if (k < 0)
                return k;
        for (int i = 0; i < 2; i++) {
                if (fds[i] < 0)
                        continue;
                r->out_fd[i] = TAKE_FD(fds[i]);
                (void) fcntl(r->out_fd[i], F_SETFL, O_NONBLOCK);
                if ((k = sd_event_add_io(e, &r->out_source[i], r->out_fd[i], EPOLLIN, run_on_output, r)) < 0)
                        return k;
        }
        /* The rest of its stdin was in the old daemon's memory: the command sees its end now. */
        fds[2] = safe_close(fds[2]);
        if (r->acct.open & CAPTURE_OPEN_IN)
                run_store_drop(r, "in", CAPTURE_OPEN_IN);
        /* Its timeout counted on while no daemon ran: one passed is over now, as it would have been. */
        if (r->acct.paused)
                deadline = now + deadline;
        r->acct.paused = false;
        /* A run without a timeout (no_timeout) has none after the restart either. */
        if (r->acct.deadline_ns != UINT64_MAX) {
                r->acct.deadline_ns = deadline * NSEC_PER_USEC;
                if ((k = sd_event_add_time(e, &r->timeout_source, CLOCK_BOOTTIME, deadline, 1000, run_on_timeout, r)) < 0)
                        return k;
        }
        if (r->spec.cpu_usec &&
            (k = sd_event_add_time_relative(e, &r->cpu_source, CLOCK_MONOTONIC, 0, 1000, run_on_cpu_check, r)) < 0)
                return k;
        run_publish(r);
        return 0;
}

static int adopt_argv(Run *r, json_object *note) {
        json_object *argv;
        size_t n;

        if (!json_object_object_get_ex(note, "argv", &argv) || !json_object_is_type(argv, json_type_array))
                return -EINVAL;
        n = json_object_array_length(argv);
        if (n == 0 || !(r->spec.argv = calloc(n + 1, sizeof(char *))))
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (!(r->spec.argv[i] = strdup(json_object_get_string(json_object_array_get_idx(argv, i)) ?: "")))
                        return -ENOMEM;
        return 0;
}

int run_adopt(Sandbox *s, json_object *note, json_object **ret_lost, const char **ret_why) {
        _cleanup_json_ json_object *lost = json_object_new_array();
        const char *id = NULL, *cgroup = NULL;
        int fds[STORE_N], k;
        json_object *v;
        Run *r;

        if (json_object_object_get_ex(note, "id", &v))
                id = json_object_get_string(v);
        if (json_object_object_get_ex(note, "cgroup", &v) && json_object_is_type(v, json_type_string))
                cgroup = json_object_get_string(v);
        if (!id || !run_id_valid(id) || adopt_take(s->ctx, id, fds) == 0)
                return -ENOENT;
        *ret_why = "its cgroup was not recorded";
        if (!cgroup || strncmp(cgroup, "run-", 4) != 0 || strchr(cgroup, '/') || !(r = calloc(1, sizeof(*r)))) {
                adopt_drop(id, fds);
                json_object_array_add(lost, json_object_new_string("cgroup"));
                *ret_lost = TAKE_PTR(lost);
                return -EBADMSG;
        }
        snprintf(r->id, sizeof(r->id), "%s", id);
        r->sandbox = s;
        r->main_pidfd = r->stdin_fd = r->out_fd[0] = r->out_fd[1] = -EBADF;
        r->capture = CAPTURE_NONE;
        r->kept = r->adopted = true;
        r->stored = (1u << STORE_N) - 1; /* what the last daemon stored is not known here */
        launch_init(&r->launch, s, &run_launch_ops, r);
        hook_init(&r->close_hook, run_on_client_gone, r);
        hook_init(&r->writable_hook, run_on_client_writable, r);
        adopt_check(r, fds, lost, ret_why);
        if (json_object_array_length(lost) > 0 || (k = adopt_argv(r, note)) < 0 || (k = run_keep_reply_init(r)) < 0) {
                adopt_drop(id, fds);
                r->kept = false; /* its store names are gone already; the capture is unmapped below */
                capture_done(&r->capture);
                output_done(&r->out[0]);
                output_done(&r->out[1]);
                run_spec_done(&r->spec);
                reply_unref(r->keep_reply);
                free(r);
                if (json_object_array_length(lost) == 0)
                        json_object_array_add(lost, json_object_new_string("memory"));
                *ret_lost = TAKE_PTR(lost);
                return -EBADMSG;
        }
        sandbox_member_add(s, &r->member, &run_member_ops);
        run_mark_in_flight(r);
        run_set_reply(r, r->keep_reply);
        if ((k = adopt_watch(r, fds, cgroup)) < 0) {
                /* Half taken back: it is killed and reported lost, as one with nothing stored. */
                log_warning_errno(k, "run %s: cannot be watched again: %m", r->id);
                adopt_drop(id, fds);
                if (r->launch.cg_fd >= 0)
                        (void) cg_kill(r->launch.cg_fd);
                run_store_forget(r);
                r->kept = false;
                run_free_full(r, false);
                json_object_array_add(lost, json_object_new_string(k == -ENOENT ? "cgroup" : "watch"));
                *ret_why = k == -ENOENT ? "its cgroup is gone" : "it cannot be watched again";
                *ret_lost = TAKE_PTR(lost);
                return k;
        }
        /* Its end is counted here: so is its start, or started would no longer equal ended plus
         * in flight (docs/metrics.md). */
        metrics.runs_started++;
        log_info("sandbox %s: run %s taken back from the fd store (%" PRIu64 " + %" PRIu64 " bytes of output so far)", s->id,
                 r->id, r->out[0].total, r->out[1].total);
        return 0;
}

void run_note_adopted(Sandbox *s) {
        for (Run *r = s->runs; r; r = r->next)
                if (r->adopted && !r->note.linked)
                        run_note_start(&r->note, s, r->id, r->spec.argv, false, r->launch.cg_name);
}

/* ---- run.attach: a client again, for a run that outlived its own ------------------------ */

static void attach_send(Run *r, int i, const char *data, size_t n, uint64_t offset) {
        for (size_t done = 0; done < n;) {
                size_t len = n - done > 65536 ? 65536 : n - done;
                json_object *ev = reply_event_new(r->reply, i == 0 ? "stdout" : "stderr");
                json_object_object_add(ev, "seq", json_object_new_int64((int64_t) r->seq++));
                proto_add_bytes(ev, "data", data + done, len);
                json_object_object_add(ev, "offset", json_object_new_int64((int64_t) (offset + done)));
                reply_event(r->reply, ev);
                done += len;
        }
}

/* Stream i from byte from on, as the capture holds it: the head, what was dropped (counted), the
 * tail. */
static void attach_catch_up(Run *r, int i, uint64_t from) {
        const Output *o = &r->out[i];
        uint64_t tail_from = o->total - o->tail_len, pos = from;
        json_object *ev;

        if (pos < o->head_len) {
                attach_send(r, i, o->head + pos, o->head_len - pos, pos);
                pos = o->head_len;
        }
        if (pos < tail_from) {
                ev = reply_event_new(r->reply, "dropped");
                json_object_object_add(ev, "stream", json_object_new_string(i == 0 ? "stdout" : "stderr"));
                json_object_object_add(ev, "offset", json_object_new_int64((int64_t) pos));
                json_object_object_add(ev, "bytes", json_object_new_int64((int64_t) (tail_from - pos)));
                reply_event(r->reply, ev);
                pos = tail_from;
        }
        /* The ring from its oldest byte: at most two pieces. */
        for (uint64_t k = pos - tail_from; k < o->tail_len;) {
                size_t at = (o->tail_start + k) % o->tail_cap, len = o->tail_len - k;
                if (len > o->tail_cap - at)
                        len = o->tail_cap - at;
                attach_send(r, i, o->tail + at, len, tail_from + k);
                k += len;
        }
}

int run_attach(Run *r, Reply *reply, const uint64_t from[2], ProtoError *err) {
        json_object *ev;

        if (!r->keep_reply || r->attached || r->reply != r->keep_reply || r->finished)
                return proto_error_set(err, SBX_E_CONFLICT, "run_id", "run %s has a client", r->id);
        for (int i = 0; i < 2; i++)
                if (from[i] > r->out[i].total)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, "from",
                                               "'from' passes what the run wrote to %s (%" PRIu64 " bytes)",
                                               i == 0 ? "stdout" : "stderr", r->out[i].total);
        run_set_reply(r, reply);
        ev = reply_event_new(r->reply, "attached");
        json_object_object_add(ev, "run_id", json_object_new_string(r->id));
        json_object_object_add(ev, "sandbox", json_object_new_string(r->sandbox->id));
        json_object_object_add(ev, "stdout_bytes", json_object_new_int64((int64_t) r->out[0].total));
        json_object_object_add(ev, "stderr_bytes", json_object_new_int64((int64_t) r->out[1].total));
        reply_event(r->reply, ev);
        for (int i = 0; i < 2; i++) {
                r->carry[i].len = 0; /* in the capture, and so in what is sent now */
                attach_catch_up(r, i, from[i]);
        }
        r->acct.seq = r->seq;
        run_publish(r);
        if (r->started && r->in_flight)
                run_set_reading(r, reply_backlog(r->reply) <= STREAM_PAUSE_BYTES);
        return 0;
}
