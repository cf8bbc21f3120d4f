/* SPDX-License-Identifier: LGPL-2.1-or-later */
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

#include "cgroup.h"
#include "fdstore.h"
#include "log.h"
#include "macro.h"
#include "metrics.h"
#include "pidfd.h"
#include "context.h"
#include "run-record.h"
#include "run-result.h"
#include "run.h"
#include "sandbox.h"
#include "spawn.h"
#include "util.h"

/* ---- Lifecycle --------------------------------------------------------------------------- */

#ifndef NSEC_PER_USEC
#  define NSEC_PER_USEC UINT64_C(1000)
#endif

static const SandboxMemberOps run_member_ops;
static const LaunchOps run_launch_ops;
static void run_set_reading(Run *r, bool on);
static void run_set_reply(Run *r, Reply *reply);

static void run_link(Run **list, Run *r) {
        r->prev = NULL;
        r->next = *list;
        if (*list)
                (*list)->prev = r;
        *list = r;
}

static void run_unlink(Run **list, Run *r) {
        if (r->prev)
                r->prev->next = r->next;
        else if (*list == r)
                *list = r->next;
        else
                return;
        if (r->next)
                r->next->prev = r->prev;
        r->next = r->prev = NULL;
}

static void run_mark_in_flight(Run *r) {
        Sandbox *s = r->sandbox;
        if (r->in_flight)
                return;
        run_link(&s->runs, r);
        s->n_runs++;
        r->in_flight = true;
}

/* One-shot runs die with the connection that asked for them (docs/protocol.md): called from the
 * deferred close, never from inside a send. */
static void on_client_gone(Hook *h, void *userdata) {
        Run *r = userdata;
        Sandbox *s = r->sandbox;

        /* The daemon stops: a kept run is the next daemon's (its fds are in the store). */
        if (r->kept && s->ctx->stopping)
                return;
        /* A client that came back with run.attach may go again: the run goes on without one. */
        if (r->attached && r->keep_reply) {
                run_set_reply(r, r->keep_reply);
                return;
        }
        if (r->in_flight) {
                run_kill(r, SIGKILL, REASON_KILLED);
                return;
        }
        run_free(r);
        sandbox_run_finished(s, NULL); /* may free s */
}


/* The client's backlog is below STREAM_PAUSE_BYTES again (the connection's OUT_PAUSE_READING / 4
 * of before): a stream it paused reads on. */
static void on_client_writable(Hook *h, void *userdata) {
        Run *r = userdata;

        if (r->paused && r->started && r->in_flight && reply_backlog(r->reply) < STREAM_PAUSE_BYTES)
                run_set_reading(r, true);
}

int run_new(Sandbox *s, Reply *reply, RunSpec *spec, Run **ret) {
        uint8_t b[6];
        Run *r = calloc(1, sizeof(*r));

        if (!r)
                return -ENOMEM;
        if (getrandom(b, sizeof(b), 0) != sizeof(b)) {
                free(r);
                return -EIO;
        }
        snprintf(r->id, sizeof(r->id), "run-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5]);
        r->sandbox = s;
        r->reply = reply_ref(reply);
        r->reserved = run_spec_held(spec);
        reply_account(r->reply, 1, (int64_t) r->reserved);
        hook_init(&r->close_hook, on_client_gone, r);
        hook_init(&r->writable_hook, on_client_writable, r);
        reply_on_close(r->reply, &r->close_hook);
        reply_on_writable(r->reply, &r->writable_hook);
        r->spec = *spec;
        *spec = (RunSpec) {};
        r->capture = CAPTURE_NONE;
        launch_init(&r->launch, s, &run_launch_ops, r);
        r->main_pidfd = r->stdin_fd = r->tty_master = -EBADF;
        r->out_fd[0] = r->out_fd[1] = -EBADF;
        output_init(&r->out[0], r->spec.output_bytes);
        output_init(&r->out[1], r->spec.output_bytes);
        sandbox_member_add(s, &r->member, &run_member_ops);
        if (s->state == SANDBOX_READY)
                run_mark_in_flight(r);
        else
                run_link(&s->pending_runs, r);
        *ret = r;
        return 0;
}

static void run_close_io(Run *r) {
        for (int i = 0; i < 2; i++) {
                r->out_source[i] = sd_event_source_disable_unref(r->out_source[i]);
                r->out_fd[i] = safe_close(r->out_fd[i]);
        }
        r->stdin_source = sd_event_source_disable_unref(r->stdin_source);
        r->stdin_fd = safe_close(r->stdin_fd);
        r->tty_master = safe_close(r->tty_master);
        r->launch.report_source = sd_event_source_disable_unref(r->launch.report_source);
        r->launch.report_fd = safe_close(r->launch.report_fd);
        r->timeout_source = sd_event_source_disable_unref(r->timeout_source);
        r->cpu_source = sd_event_source_disable_unref(r->cpu_source);
}

/* ---- Kept across a restart --------------------------------------------------------------- */

/* A direct run's (launch.h) "pid": the command's pidfd, whose end a next daemon reads from it. */
static const char *const store_what[] = { "out", "err", "in", "rep", "cap", "pid" };
#define STORE_N ELEMENTSOF(store_what)

static const char *run_store_name(const Run *r, char buf[static FDSTORE_NAME_MAX], const char *what) {
        return fdstore_name(buf, 'r', r->id, what);
}

static void run_publish(Run *r) {
        if (r->kept)
                capture_publish(&r->capture, r->out, &r->acct);
}

/* One of its pipe ends is closed (EOF, stdin all written): out of the store too. */
static void run_store_drop(Run *r, const char *what, uint32_t bit) {
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
static void run_store_forget(Run *r) {
        char name[FDSTORE_NAME_MAX];

        for (size_t i = 0; i < ELEMENTSOF(store_what); i++)
                if (r->stored & (1u << i))
                        (void) fdstore_remove(run_store_name(r, name, store_what[i]));
        r->stored = 0;
}

/* Its pipes, report socket and capture into the store. A run the store does not take whole is
 * still run, as one the next daemon reports lost. */
static void run_store_push(Run *r) {
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

static int run_keep_reply_init(Run *r) {
        reply_sink_init(&r->keep_sink, &keep_sink_ops, &(ReplyPeer) { .n_groups = -1 });
        return reply_new(&r->keep_sink, NULL, &r->keep_reply);
}

/* reply is its client from now on: the accounting and the hooks move with it. */
static void run_set_reply(Run *r, Reply *reply) {
        Reply *old = r->reply;

        if (old == reply)
                return;
        hook_remove(&r->close_hook);
        hook_remove(&r->writable_hook);
        r->reply = reply_ref(reply);
        if (old) {
                reply_account(old, -1, -(int64_t) r->reserved);
                reply_unref(old);
        }
        reply_account(r->reply, 1, (int64_t) r->reserved);
        reply_on_close(r->reply, &r->close_hook);
        reply_on_writable(r->reply, &r->writable_hook);
        r->attached = reply != r->keep_reply;
}

/* record_end false: its end is not recorded (the daemon stops; the next finds it interrupted). */
static Run *run_free_full(Run *r, bool record_end) {
        Sandbox *s;
        if (!r)
                return NULL;
        s = r->sandbox;
        sandbox_member_remove(s, &r->member);
        if (r->in_flight) {
                if (record_end) {
                        s->last_active_usec = now_usec(CLOCK_MONOTONIC);
                        run_note_end(&r->note);
                }
                run_note_forget(&r->note);
                run_unlink(&s->runs, r);
                s->n_runs--;
        } else
                run_unlink(&s->pending_runs, r);
        /* Ended, its fds leave the store; the daemon stopping leaves them for the next one. */
        if (r->kept && record_end)
                run_store_forget(r);
        run_close_io(r);
        launch_done(&r->launch);
        safe_close(r->main_pidfd);
        hook_remove(&r->close_hook);
        hook_remove(&r->writable_hook);
        if (r->reply) {
                reply_account(r->reply, -1, -(int64_t) r->reserved);
                reply_unref(r->reply);
        }
        reply_unref(r->keep_reply);
        output_done(&r->out[0]);
        output_done(&r->out[1]);
        capture_done(&r->capture);
        run_spec_done(&r->spec);
        free(r);
        return NULL;
}

Run *run_free(Run *r) {
        return run_free_full(r, true);
}

/* Every run is looked at, found or not, as in registry_find(). */
Run *manager_find_run(Context *m, const char *id) {
        Run *found = NULL;

        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry))
                for (Run *r = s->runs; r; r = r->next)
                        if (!found && strcmp(r->id, id) == 0)
                                found = r;
        return found;
}

/* ---- Finishing --------------------------------------------------------------------------- */

static const char *reason_name(RunReason why) {
        static const char *const names[] = {
                [REASON_NONE] = "exited",       [REASON_EXITED] = "exited",   [REASON_SIGNALED] = "signaled",
                [REASON_TIMEOUT] = "timeout",   [REASON_CPU_LIMIT] = "cpu_limit", [REASON_OOM] = "oom",
                [REASON_KILLED] = "killed",     [REASON_DESTROYED] = "destroyed",
        };
        return names[why];
}

/* ---- Streaming --------------------------------------------------------------------------- */

static void run_send_output(Run *r, int i, const char *data, size_t n, bool last) {
        char buf[65536 + 4];
        StreamCarry *c = &r->carry[i];
        json_object *ev;
        size_t len = c->len, keep;

        if (r->answered)
                return;
        memcpy(buf, c->bytes, c->len);
        memcpy(buf + len, data, n);
        len += n;
        keep = last ? 0 : utf8_incomplete_tail(buf, len);
        c->len = keep;
        memcpy(c->bytes, buf + len - keep, keep);
        len -= keep;
        if (len == 0)
                return;
        ev = reply_event_new(r->reply, i == 0 ? "stdout" : "stderr");
        json_object_object_add(ev, "seq", json_object_new_int64((int64_t) r->seq++));
        proto_add_bytes(ev, "data", buf, len);
        if (r->attached)
                json_object_object_add(ev, "offset", json_object_new_int64((int64_t) (r->out[i].total - len - keep)));
        reply_event(r->reply, ev);
        r->acct.seq = r->seq;
}

/* Output goes out as events: the run asked for them, or a client came back for the rest. */
static bool run_streams(const Run *r) {
        return r->spec.stream || r->attached;
}

static void run_set_reading(Run *r, bool on) {
        for (int i = 0; i < 2; i++)
                if (r->out_source[i])
                        (void) sd_event_source_set_enabled(r->out_source[i], on ? SD_EVENT_ON : SD_EVENT_OFF);
        r->paused = !on;
}

/* One read of stream i into its Output, then out as an event where the run streams. A kept run
 * reads through its capture (run-capture.h: a daemon killed in the read loses none of it); a run
 * that needs no bytes of it but the tail's reads straight into the ring. Returns what read(2)
 * returned. */
static ssize_t run_read_output(Run *r, int i) {
        char buf[65536];
        const char *data = buf;
        ssize_t n;

        if (r->kept)
                n = capture_read(&r->capture, r->out, &r->acct, i, r->out_fd[i], &data);
        else if (!run_streams(r) && output_reads_direct(&r->out[i]))
                return output_read(&r->out[i], r->out_fd[i]);
        else if ((n = read(r->out_fd[i], buf, sizeof(buf))) > 0)
                output_append(&r->out[i], buf, (size_t) n);
        if (n <= 0 || !run_streams(r))
                return n;
        run_send_output(r, i, data, (size_t) n, false);
        run_publish(r); /* the next event's seq */
        if (!reply_gone(r->reply) && reply_backlog(r->reply) > STREAM_PAUSE_BYTES)
                run_set_reading(r, false);
        return n;
}

static void drain_fd(Run *r, int i) {
        while (r->out_fd[i] >= 0) {
                ssize_t n = run_read_output(r, i);
                if (n <= 0) {
                        if (n < 0 && errno == EINTR)
                                continue;
                        break;
                }
        }
        if (run_streams(r) && r->carry[i].len)
                run_send_output(r, i, "", 0, true);
        run_publish(r);
}

static void add_u64_or_null(json_object *o, const char *key, int r, uint64_t v) {
        json_object_object_add(o, key, r < 0 ? NULL : json_object_new_int64((int64_t) v));
}

static bool run_oom_killed(Run *r) {
        uint64_t kills = 0;
        return (r->sandbox->enforced & CG_MEMORY) && cg_read_keyed(r->launch.cg_fd, "memory.events", "oom_kill", &kills) >= 0 &&
               kills > 0;
}

/* A fork refused by a pids limit while the run ran, from pids.events "max": counted in the run's
 * cgroup (the forker's, before Linux 6.11; its own limit's, since) or, since 6.11, in the
 * sandbox's when the sandbox's limit was hit. Null where pids is not enforced. */
static void run_add_pids_limit_hit(Run *r, json_object *o) {
        uint64_t run_max = 0, sandbox_max = 0;
        int k;

        if (!(r->sandbox->enforced & CG_PIDS)) {
                json_object_object_add(o, "pids_limit_hit", NULL);
                return;
        }
        k = cg_read_keyed(r->launch.cg_fd, "pids.events", "max", &run_max);
        if (k >= 0)
                k = cg_read_keyed(r->sandbox->cg_fd, "pids.events", "max", &sandbox_max);
        json_object_object_add(o, "pids_limit_hit",
                               k < 0 ? NULL : json_object_new_boolean(run_max > 0 || sandbox_max > r->sandbox_pids_max_events));
}

/* To the command's end where its helper reported one (it may have ended while no daemon ran),
 * else to now. */
static uint64_t run_duration_usec(const Run *r) {
        uint64_t end = r->end_usec > r->start_usec ? r->end_usec : now_usec(CLOCK_MONOTONIC);
        return end > r->start_usec ? end - r->start_usec : 0;
}

static void run_add_stats(Run *r, json_object *o) {
        CgroupRoot *cg = &r->sandbox->ctx->cg;
        uint64_t user = 0, sys = 0, peak = 0, pids = 0;
        int ru = cg_read_keyed(r->launch.cg_fd, "cpu.stat", "user_usec", &user);
        int rs = cg_read_keyed(r->launch.cg_fd, "cpu.stat", "system_usec", &sys);
        int rm = cg->has_memory_peak && (r->sandbox->enforced & CG_MEMORY) ? cg_read_u64(r->launch.cg_fd, "memory.peak", &peak)
                                                                           : -ENODATA;
        int rp = cg->has_pids_peak && (r->sandbox->enforced & CG_PIDS) ? cg_read_u64(r->launch.cg_fd, "pids.peak", &pids)
                                                                       : -ENODATA;

        json_object_object_add(o, "duration_s", proto_seconds(run_duration_usec(r)));
        json_object_object_add(o, "cpu_user_s", ru < 0 ? NULL : proto_seconds((uint64_t) user));
        json_object_object_add(o, "cpu_system_s", rs < 0 ? NULL : proto_seconds((uint64_t) sys));
        add_u64_or_null(o, "memory_peak_bytes", rm, peak);
        add_u64_or_null(o, "pids_peak", rp, pids);
        run_add_pids_limit_hit(r, o);
}

/* The budget ended it whatever came first: the daemon's cgroup.kill is forced already, but the
 * RLIMIT_CPU guard (SIGXCPU, then SIGKILL), a handler of SIGXCPU that exits, or a shell that
 * passes on 128+N may beat it. Only a run that exited 0 is not said to have been cut short. */
static bool run_cpu_spent(Run *r) {
        uint64_t used = 0;
        return r->spec.cpu_usec && r->exited && !(r->wait_code == CLD_EXITED && r->wait_status == 0) &&
               cg_read_keyed(r->launch.cg_fd, "cpu.stat", "usage_usec", &used) >= 0 && used >= r->spec.cpu_usec;
}

/* How it ended: what we did to it first, then the kernel's OOM account, the CPU budget, then the
 * wait status. Returns the reason's name. */
static const char *run_add_outcome(Run *r, json_object *o, bool oom) {
        RunReason why = r->forced;
        char sigbuf[12];
        int sig = 0, code = 0;

        if (why == REASON_NONE && oom)
                why = REASON_OOM;
        if (why == REASON_NONE && run_cpu_spent(r))
                why = REASON_CPU_LIMIT;
        if (why == REASON_NONE && r->exited && r->wait_code == CLD_EXITED) {
                why = REASON_EXITED;
                code = r->wait_status;
        } else if (why == REASON_NONE && r->exited) {
                why = REASON_SIGNALED;
                sig = r->wait_status;
        } else if (why == REASON_NONE)
                why = REASON_KILLED, sig = SIGKILL;
        else if (r->exited && r->wait_code != CLD_EXITED)
                sig = r->wait_status;
        else if (r->exited)
                code = r->wait_status;
        else
                sig = SIGKILL;
        if (sig)
                code = 128 + sig;
        if (why == REASON_TIMEOUT)
                code = 124;
        json_object_object_add(o, "exit_code", json_object_new_int(code));
        json_object_object_add(o, "signal", sig > 0 ? json_object_new_string(signal_to_string(sig, sigbuf)) : NULL);
        json_object_object_add(o, "reason", json_object_new_string(reason_name(why)));
        json_object_object_add(o, "timed_out", json_object_new_boolean(why == REASON_TIMEOUT));
        json_object_object_add(o, "oom_killed", json_object_new_boolean(oom));
        return reason_name(why);
}

static void run_reply_failure(Run *r) {
        ProtoError err;
        json_object *reply;

        if (r->fail_step == STEP_CWD && (r->fail_errno == EXDEV || r->fail_errno == ENOENT || r->fail_errno == ENOTDIR ||
                                         r->fail_errno == ELOOP))
                proto_error_set(&err, SBX_E_INVALID_REQUEST, "cwd", "'cwd' %s: %s", r->spec.cwd,
                                r->fail_errno == EXDEV ? "resolves outside /work" : strerror(r->fail_errno));
        else {
                proto_error_set(&err, SBX_E_SPAWN_FAILED, NULL, "%s failed for '%s': %s", spawn_step_to_string(r->fail_step),
                                r->spec.argv[0], strerror(r->fail_errno));
                proto_error_set_spawn(&err, spawn_step_to_string(r->fail_step), r->fail_errno);
        }
        reply = json_object_new_object();
        json_object_object_add(reply, "run_id", json_object_new_string(r->id));
        reply_error_extra(r->reply, &err, reply);
}

/* Returns the reason it ended for. */
static const char *run_reply(Run *r) {
        json_object *o = json_object_new_object();
        bool oom = run_oom_killed(r);
        const char *why;

        json_object_object_add(o, "run_id", json_object_new_string(r->id));
        json_object_object_add(o, "sandbox", json_object_new_string(r->sandbox->id));
        why = run_add_outcome(r, o, oom);
        if (run_spec_own_stdio(&r->spec))
                json_object_object_add(o, "captured", json_object_new_boolean(false));
        else {
                output_to_json(&r->out[0], o, "stdout");
                output_to_json(&r->out[1], o, "stderr");
        }
        run_add_stats(r, o);
        reply_ok(r->reply, o);
        return why;
}

static void run_finish(Run *r) {
        Sandbox *s = r->sandbox;
        const char *ended = "error";

        if (r->finished)
                return;
        r->finished = true;
        /* Its output is about to become its reply: counted once, as unread reply bytes. */
        reply_account(r->reply, 0, -(int64_t) r->reserved);
        r->reserved = 0;
        launch_collect_reports(&r->launch);
        drain_fd(r, 0);
        drain_fd(r, 1);
        if (r->answered)
                ; /* told teardown_stuck already */
        else if (!r->started && r->fail_step != STEP_NONE && r->forced == REASON_NONE)
                run_reply_failure(r);
        else if (!r->started && r->forced == REASON_NONE && !run_oom_killed(r)) {
                ProtoError err;
                proto_error_set(&err, SBX_E_SPAWN_FAILED, NULL, "the run's helper died before the command started");
                reply_error(r->reply, &err);
        } else
                ended = run_reply(r);
        if (r->start_usec) /* counted as started (run_start) */
                metrics_run_ended(ended, run_duration_usec(r));
        /* Background processes keep the run's cgroup until the sandbox goes; an empty one goes now. */
        if (cg_populated(r->launch.cg_fd) == 0)
                (void) unlinkat(s->cg_fd, r->launch.cg_name, AT_REMOVEDIR);
        run_free(r);
        sandbox_run_finished(s, NULL);
}

/* ---- Events ------------------------------------------------------------------------------ */

/* The pid of pidfd's process in its own (innermost) pid namespace, the sandbox's, where the
 * command is. -errno when it cannot be read. */
static int pidfd_inner_pid(int pidfd) {
        int pid, inner = 0, k = pidfd_pids(pidfd, &pid, &inner);
        return k < 0 ? k : inner > 0 ? inner : -ENOENT;
}

/* Tells the client the run's id while it is in flight, so that it (or another connection of
 * the same user) can kill it, and the command's pid inside the sandbox; a "tty" run's terminal
 * goes with it, and the daemon keeps no copy. */
static void run_send_started(Run *r) {
        json_object *ev;
        int pid;

        if (r->answered) {
                r->tty_master = safe_close(r->tty_master);
                return;
        }
        ev = reply_event_new(r->reply, "started");
        json_object_object_add(ev, "run_id", json_object_new_string(r->id));
        json_object_object_add(ev, "sandbox", json_object_new_string(r->sandbox->id));
        pid = r->main_pidfd >= 0 ? pidfd_inner_pid(r->main_pidfd) : -EBADF;
        json_object_object_add(ev, "pid", pid > 0 ? json_object_new_int(pid) : NULL);
        json_object *lowered = run_spec_rlimits_lowered(&r->spec);
        if (lowered)
                json_object_object_add(ev, "rlimits_lowered", lowered);
        if (r->tty_master < 0) {
                reply_event(r->reply, ev);
                return;
        }
        json_object_object_add(ev, "fds", json_object_new_int(1));
        json_object_object_add(ev, "master", json_object_new_int(0));
        reply_event_fds(r->reply, ev, &r->tty_master, 1);
        r->tty_master = -EBADF;
}

static void run_handle_report(void *userdata, const SpawnReport *rep, int fd) {
        Run *r = userdata;
        switch (rep->kind) {
        case REPORT_STARTED:
                r->started = true;
                r->acct.open |= CAPTURE_STARTED;
                run_publish(r);
                safe_close(r->main_pidfd);
                r->main_pidfd = fd;
                if (r->adopted)
                        return; /* its client had its "started" from the daemon before */
                run_send_started(r);
                /* Streamed output waited in the pipe so that "started" comes first. */
                if (r->spec.stream && reply_backlog(r->reply) <= STREAM_PAUSE_BYTES)
                        run_set_reading(r, true);
                return;
        case REPORT_EXITED:
                r->exited = true;
                r->wait_code = rep->code;
                r->wait_status = rep->status;
                r->end_usec = rep->end_usec;
                break;
        case REPORT_FAILED:
                r->fail_step = rep->step;
                r->fail_errno = rep->err;
                break;
        case REPORT_TERMINAL:
                /* Only a "tty" run's helper opens one; held until "started" takes it. */
                if (r->spec.tty && r->tty_master < 0 && fd >= 0) {
                        r->tty_master = fd;
                        return;
                }
                break;
        }
        safe_close(fd);
}

/* Direct: the report socket closes at the command's exec (CLOEXEC), or when it dies; either way,
 * without a failure reported first, it is started, and it is the process we made. */
static void run_report_eof(void *userdata) {
        Run *r = userdata;
        SpawnReport rep = { .kind = REPORT_STARTED };
        /* Taken back, a helper is not our child: its socket's end is its end. A direct run's end
         * is its pidfd's (launch_adopt_direct()). */
        if (r->adopted && !r->launch.direct) {
                run_finish(r);
                return;
        }
        if (!r->launch.direct || r->started || r->fail_step != STEP_NONE)
                return;
        run_handle_report(r, &rep, fcntl(r->launch.pidfd, F_DUPFD_CLOEXEC, 3));
}

static int on_output(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Run *r = userdata;
        int i = fd == r->out_fd[0] ? 0 : 1;
        ssize_t n = run_read_output(r, i);

        if (n > 0)
                return 0;
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        r->out_source[i] = sd_event_source_disable_unref(r->out_source[i]);
        r->out_fd[i] = safe_close(r->out_fd[i]);
        run_store_drop(r, store_what[i], i == 0 ? CAPTURE_OPEN_OUT : CAPTURE_OPEN_ERR);
        return 0;
}

static int on_stdin(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Run *r = userdata;
        ssize_t n = write(fd, r->spec.stdin_data + r->stdin_off, r->spec.stdin_len - r->stdin_off);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n > 0)
                r->stdin_off += (size_t) n;
        if (n < 0 || r->stdin_off >= r->spec.stdin_len) {
                r->stdin_source = sd_event_source_disable_unref(r->stdin_source);
                r->stdin_fd = safe_close(r->stdin_fd);
                run_store_drop(r, "in", CAPTURE_OPEN_IN);
        }
        return 0;
}

static void run_helper_exit(void *userdata, const siginfo_t *si) {
        Run *r = userdata;
        if (r->launch.direct) {
                /* Direct, the helper was the command: its end is the run's (si_code 0: taken
                 * back, and how it ended could not be read). */
                launch_collect_reports(&r->launch);
                if (r->started && si->si_code != 0) {
                        r->exited = true;
                        r->wait_code = si->si_code;
                        r->wait_status = si->si_status;
                }
        }
        run_finish(r);
}

static int on_timeout(sd_event_source *src, uint64_t usec, void *userdata) {
        run_kill(userdata, SIGKILL, REASON_TIMEOUT);
        return 0;
}

static void run_timeout_pause(Run *r, uint64_t now) {
        uint64_t t;
        int enabled = SD_EVENT_OFF;

        if (r->timeout_paused || !r->timeout_source || sd_event_source_get_enabled(r->timeout_source, &enabled) < 0 ||
            enabled == SD_EVENT_OFF || sd_event_source_get_time(r->timeout_source, &t) < 0)
                return;
        r->timeout_left = t > now ? t - now : 0;
        r->timeout_paused = sd_event_source_set_enabled(r->timeout_source, SD_EVENT_OFF) >= 0;
        if (r->timeout_paused) {
                r->acct = (CaptureAccount) { r->acct.seq, r->timeout_left * NSEC_PER_USEC, r->acct.open, true };
                run_publish(r);
        }
}

static void run_timeout_resume(Run *r, uint64_t now) {
        if (!r->timeout_paused)
                return;
        r->timeout_paused = false;
        r->acct = (CaptureAccount) { r->acct.seq, (now + r->timeout_left) * NSEC_PER_USEC, r->acct.open, false };
        run_publish(r);
        if (sd_event_source_set_time(r->timeout_source, now + r->timeout_left) < 0 ||
            sd_event_source_set_enabled(r->timeout_source, SD_EVENT_ONESHOT) < 0)
                run_kill(r, SIGKILL, REASON_TIMEOUT); /* a timeout that cannot be kept is over */
}

static int on_cpu_check(sd_event_source *src, uint64_t usec, void *userdata) {
        Run *r = userdata;
        uint64_t used = 0, left, next;
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

        if (cg_read_keyed(r->launch.cg_fd, "cpu.stat", "usage_usec", &used) >= 0 && used >= r->spec.cpu_usec) {
                run_kill(r, SIGKILL, REASON_CPU_LIMIT);
                return 0;
        }
        /* The budget cannot be spent faster than all CPUs at once: sleep until that could be. */
        left = r->spec.cpu_usec - used;
        next = left / (uint64_t) (ncpu > 0 ? ncpu : 1);
        next = next < 10 * USEC_PER_MSEC ? 10 * USEC_PER_MSEC : next > USEC_PER_SEC ? USEC_PER_SEC : next;
        (void) sd_event_source_set_time_relative(src, next);
        (void) sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
        return 0;
}

void run_answer_stuck(Run *r, const ProtoError *err) {
        json_object *reply;

        if (r->finished || r->answered)
                return;
        reply = json_object_new_object();
        json_object_object_add(reply, "run_id", json_object_new_string(r->id));
        reply_error_extra(r->reply, err, reply);
        r->answered = true;
}

int run_kill(Run *r, int sig, RunReason why) {
        if (r->finished)
                return 0;
        if (sig == SIGKILL) {
                if (r->forced == REASON_NONE)
                        r->forced = why;
                /* A helper born outside the run's cgroup (launch_cgroup_frozen()) may not be in it yet. */
                if (!r->started && r->launch.pidfd >= 0)
                        (void) syscall(SYS_pidfd_send_signal, r->launch.pidfd, SIGKILL, NULL, 0);
                return r->launch.cg_fd >= 0 ? cg_kill_at(r->launch.kill_fd, r->launch.cg_fd) : 0;
        }
        if (r->main_pidfd < 0)
                return -ESRCH;
        return syscall(SYS_pidfd_send_signal, r->main_pidfd, sig, NULL, 0) < 0 ? -errno : 0;
}

/* ---- Starting ---------------------------------------------------------------------------- */

static void run_rlimit_cpu(Run *r, RunParams *p) {
        /* A second above the budget, so that the daemon's own check (on_cpu_check) ends the run
         * first; the rlimit only guards a run the daemon could not watch. */
        if (r->spec.cpu_usec) {
                rlim_t sec = (rlim_t) ((r->spec.cpu_usec + USEC_PER_SEC - 1) / USEC_PER_SEC) + 1;
                p->rl_cpu = (struct rlimit) { sec, sec + 1 };
                p->rl_cpu_set = true;
        }
}

#define RUN_PIPE_SIZE (1 << 20)

/* Its timeout (none with no_timeout) and CPU budget watched. */
static int run_watch_clock(Run *r) {
        sd_event *e = r->sandbox->ctx->event;
        uint64_t deadline;
        int k;

        /* On CLOCK_BOOTTIME, which a next daemon reads as this one does (run_adopt()), and which
         * counts a suspend of the host as the time it is; UINT64_MAX: no timeout. */
        r->acct.deadline_ns = UINT64_MAX;
        if (!r->spec.no_timeout) {
                deadline = now_usec(CLOCK_BOOTTIME) + r->spec.timeout_usec;
                r->acct.deadline_ns = deadline * NSEC_PER_USEC;
                if ((k = sd_event_add_time(e, &r->timeout_source, CLOCK_BOOTTIME, deadline, 1000, on_timeout, r)) < 0)
                        return k;
        }
        if (r->kept)
                run_store_push(r);
        /* Started while its sandbox is frozen for a snapshot: the clock starts at the thaw. */
        if (r->sandbox->frozen)
                run_timeout_pause(r, now_usec(CLOCK_BOOTTIME));
        if (r->spec.cpu_usec &&
            (k = sd_event_add_time_relative(e, &r->cpu_source, CLOCK_MONOTONIC, 10 * USEC_PER_MSEC, 1000, on_cpu_check, r)) < 0)
                return k;
        return 0;
}

/* Its pipes: the output read, stdin written; its timeout and CPU budget watched. */
static int run_watch(void *userdata, LaunchFds *f) {
        Run *r = userdata;
        sd_event *e = r->sandbox->ctx->event;
        int k;

        /* The client's own fds or a terminal: nothing to read or write here. */
        if (run_spec_own_stdio(&r->spec))
                return run_watch_clock(r);
        r->out_fd[0] = TAKE_FD(f->out[0]);
        r->out_fd[1] = TAKE_FD(f->err[0]);
        r->stdin_fd = TAKE_FD(f->in[1]);
        for (int i = 0; i < 2; i++) {
                (void) fcntl(r->out_fd[i], F_SETFL, O_NONBLOCK);
                /* A flood is read in fewer, larger pieces (a pipe's pages are only taken when
                 * filled, so a quiet run costs nothing more). */
                (void) fcntl(r->out_fd[i], F_SETPIPE_SZ, RUN_PIPE_SIZE);
                if ((k = sd_event_add_io(e, &r->out_source[i], r->out_fd[i], EPOLLIN, on_output, r)) < 0)
                        return k;
        }
        /* A streaming run's output is not read before its "started" event is out. */
        if (r->spec.stream)
                run_set_reading(r, false);
        if (r->spec.stdin_len > 0) {
                (void) fcntl(r->stdin_fd, F_SETFL, O_NONBLOCK);
                if ((k = sd_event_add_io(e, &r->stdin_source, r->stdin_fd, EPOLLOUT, on_stdin, r)) < 0)
                        return k;
        } else
                r->stdin_fd = safe_close(r->stdin_fd);
        return run_watch_clock(r);
}

static const LaunchOps run_launch_ops = {
        .watch = run_watch,
        .report = run_handle_report,
        .report_eof = run_report_eof,
        .helper_exit = run_helper_exit,
};

static void run_fail_start(Run *r, const ProtoError *e) {
        ProtoError err = *e;
        Sandbox *s = r->sandbox;

        reply_error(r->reply, &err);
        metrics_run_ended("error", now_usec(CLOCK_MONOTONIC) - r->start_usec);
        launch_abort(&r->launch);
        run_free(r);
        sandbox_run_finished(s, NULL);
}

/* What the run asked of its process besides the command: its ids, umask, rlimits, its own fds
 * or a terminal, a cwd anywhere in a root of its own. */
static void run_params_process(Run *r, RunParams *p) {
        const RunSpec *sp = &r->spec;

        p->cwd_anywhere = sandbox_has_own_root(r->sandbox);
        p->ids_set = sp->ids_set;
        p->uid = sp->uid;
        p->gid = sp->gid;
        p->n_groups = (unsigned) sp->n_groups;
        memcpy(p->groups, sp->groups, sp->n_groups * sizeof(uint32_t));
        p->caps_set = sp->caps_set;
        p->caps = sp->caps;
        p->umask_set = sp->umask >= 0;
        p->umask = sp->umask >= 0 ? (unsigned) sp->umask : 0;
        p->rl_mask = sp->rlimit_mask;
        memcpy(p->rl, sp->rlimit, sizeof(p->rl));
        p->n_extra = (unsigned) sp->n_extra;
        memcpy(p->extra_fds, sp->extra_fd, sp->n_extra * sizeof(int));
        p->pty = sp->tty;
        p->own_pidns = sp->own_pidns;
        p->rows = sp->rows;
        p->cols = sp->cols;
}

/* A run outlives the daemon where a next one can take it back: its sandbox is recorded (and
 * kept at a stop), and the daemon has an fd store for its pipes and capture. */
static bool run_keep(Run *r) {
        Sandbox *s = r->sandbox;
        CaptureFixed f = {
                .cap = r->spec.output_bytes,
                .start_usec = r->start_usec,
                .cpu_usec = r->spec.cpu_usec,
                .pids_max_events = r->sandbox_pids_max_events,
                .stdin_len = r->spec.stdin_len,
                .stream = r->spec.stream,
        };
        int k;

        /* A run on the client's own fds (an OCI proxy's) has nothing of ours to keep, and ends
         * with its client; so do the runs of sandboxes that are never recorded. */
        if (s->ephemeral || s->pooled || s->transient || run_spec_own_stdio(&r->spec) || s->ctx->config.stop_sandboxes ||
            !fdstore_enabled())
                return false;
        if ((k = run_keep_reply_init(r)) < 0 || (k = capture_new(&r->capture, &f, r->out)) < 0) {
                log_warning_errno(k, "run %s: cannot make its capture, it will not outlive the daemon: %m", r->id);
                return false;
        }
        r->kept = true;
        return true;
}

void run_start(Run *r) {
        RunParams p = {
                .argv = r->spec.argv,
                .envp = r->spec.envp,
                .cwd = r->spec.cwd,
                .user = r->spec.user,
        };
        LaunchSpec spec = {
                .kind = "run",
                .memory = r->spec.memory,
                .pids = r->spec.pids,
                .file_size = r->spec.file_size,
                .open_files = r->spec.open_files,
                .pipes = !run_spec_own_stdio(&r->spec),
                .stdio = r->spec.n_stdio == 3 ? r->spec.stdio_fd : NULL,
                .nofile_given = r->spec.rlimit_mask & (UINT32_C(1) << RLIMIT_NOFILE),
                .fsize_given = r->spec.rlimit_mask & (UINT32_C(1) << RLIMIT_FSIZE),
                .via_helper = true,
                .params = &p,
                .what_cgroup = "cannot create the run's cgroup",
                .what_fds = "cannot create pipes",
                .what_start = "cannot start the run",
        };
        ProtoError err;

        run_mark_in_flight(r);
        r->sandbox->last_active_usec = now_usec(CLOCK_MONOTONIC);
        char cg[32];
        run_note_start(&r->note, r->sandbox, r->id, r->spec.argv, false,
                       launch_next_cgroup_name(r->sandbox, spec.kind, cg, sizeof(cg)));
        r->start_usec = now_usec(CLOCK_MONOTONIC);
        metrics.runs_started++;
        if (r->sandbox->enforced & CG_PIDS)
                (void) cg_read_keyed(r->sandbox->cg_fd, "pids.events", "max", &r->sandbox_pids_max_events);
        run_rlimit_cpu(r, &p);
        run_params_process(r, &p);
        spec.keep = run_keep(r);
        if (launch_start(&r->launch, &spec, &err) < 0)
                return run_fail_start(r, &err);
        /* The helper has its copies: ours would keep the client's pipes open (no EOF for its
         * reader) for as long as the run lasts. */
        for (size_t i = 0; i < r->spec.n_stdio; i++)
                r->spec.stdio_fd[i] = safe_close(r->spec.stdio_fd[i]);
        for (size_t i = 0; i < r->spec.n_extra; i++)
                r->spec.extra_fd[i] = safe_close(r->spec.extra_fd[i]);
}

/* ---- As a member of its sandbox ---------------------------------------------------------- */

static void run_member_kill(SandboxMember *m, int sig) {
        Run *r = SANDBOX_MEMBER_OF(m, Run, member);
        Sandbox *s = r->sandbox;
        ProtoError err;

        if (r->in_flight) {
                run_kill(r, sig, s->state == SANDBOX_DESTROYING ? REASON_DESTROYED : REASON_KILLED);
                return;
        }
        /* Waiting for the sandbox: a restart's new init serves it, a destroy answers it. */
        if (s->state != SANDBOX_DESTROYING)
                return;
        sandbox_gone_error(s, &err);
        reply_error(r->reply, &err);
        run_free(r);
}

static void run_member_answer_stuck(SandboxMember *m, const ProtoError *err) {
        Run *r = SANDBOX_MEMBER_OF(m, Run, member);
        if (r->in_flight)
                run_answer_stuck(r, err);
}

static bool run_member_start(SandboxMember *m) {
        Run *r = SANDBOX_MEMBER_OF(m, Run, member);
        if (r->in_flight)
                return false;
        run_unlink(&r->sandbox->pending_runs, r);
        run_start(r);
        return true;
}

/* Frozen for a snapshot, nothing of the run can run: its wall-clock timeout stops while the
 * sandbox is frozen and goes on from where it was when it is thawed. */
static void run_member_frozen(SandboxMember *m) {
        Run *r = SANDBOX_MEMBER_OF(m, Run, member);
        uint64_t now = now_usec(CLOCK_BOOTTIME);

        if (r->sandbox->frozen)
                run_timeout_pause(r, now);
        else
                run_timeout_resume(r, now);
}

static void run_member_free(SandboxMember *m) {
        run_free_full(SANDBOX_MEMBER_OF(m, Run, member), false);
}

static const SandboxMemberOps run_member_ops = {
        .kill = run_member_kill,
        .answer_stuck = run_member_answer_stuck,
        .start = run_member_start,
        .frozen = run_member_frozen,
        .free = run_member_free,
};

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
                if ((k = sd_event_add_io(e, &r->out_source[i], r->out_fd[i], EPOLLIN, on_output, r)) < 0)
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
                if ((k = sd_event_add_time(e, &r->timeout_source, CLOCK_BOOTTIME, deadline, 1000, on_timeout, r)) < 0)
                        return k;
        }
        if (r->spec.cpu_usec &&
            (k = sd_event_add_time_relative(e, &r->cpu_source, CLOCK_MONOTONIC, 0, 1000, on_cpu_check, r)) < 0)
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
        hook_init(&r->close_hook, on_client_gone, r);
        hook_init(&r->writable_hook, on_client_writable, r);
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

/* ---- run.attach -------------------------------------------------------------------------- */

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

/* A run of one of the caller's sandboxes that a restart cut short says so (inspect lists it in
 * interrupted_runs); any other unknown id is just not found. */
int run_gone(Context *ctx, const ReplyPeer *peer, const char *run_id, ProtoError *err) {
        Sandbox *s;
        json_object *e = run_records_lost(ctx, peer, run_id, false, &s), *at, *why;

        if (!e)
                return proto_error_set(err, SBX_E_NOT_FOUND, "run_id", "no run '%.64s' in flight or kept", run_id);
        return proto_error_set(err, SBX_E_NOT_FOUND, "run_id",
                               "run %s of sandbox %s was interrupted when the daemon restarted (it had started at %s; "
                               "%s): its output and exit status are gone (inspect lists it in interrupted_runs)",
                               run_id, s->id, json_object_object_get_ex(e, "started_at", &at) ? json_object_get_string(at) : "?",
                               json_object_object_get_ex(e, "reason", &why) ? json_object_get_string(why) : "?");
}
