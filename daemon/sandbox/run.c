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
#include "log.h"
#include "macro.h"
#include "metrics.h"
#include "pidfd.h"
#include "context.h"
#include "run-record.h"
#include "run-result.h"
#include "run-internal.h"
#include "sandbox.h"
#include "spawn.h"
#include "util.h"

/* ---- Lifecycle --------------------------------------------------------------------------- */



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

void run_mark_in_flight(Run *r) {
        Sandbox *s = r->sandbox;
        if (r->in_flight)
                return;
        run_link(&s->runs, r);
        s->n_runs++;
        r->in_flight = true;
}

/* One-shot runs die with the connection that asked for them (docs/protocol.md): called from the
 * deferred close, never from inside a send. */
void run_on_client_gone(Hook *h, void *userdata) {
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
void run_on_client_writable(Hook *h, void *userdata) {
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
        hook_init(&r->close_hook, run_on_client_gone, r);
        hook_init(&r->writable_hook, run_on_client_writable, r);
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

/* reply is its client from now on: the accounting and the hooks move with it. */
void run_set_reply(Run *r, Reply *reply) {
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
Run *run_free_full(Run *r, bool record_end) {
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

void run_set_reading(Run *r, bool on) {
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
        char stat[4096];
        int ru = cg_read(r->launch.cg_fd, "cpu.stat", stat, sizeof(stat)), rs = ru;

        if (ru >= 0) {
                ru = cg_parse_keyed(stat, "user_usec", &user);
                rs = cg_parse_keyed(stat, "system_usec", &sys);
        }
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
        pid = r->launch.direct && r->launch.inner_pid > 0 ? r->launch.inner_pid
              : r->main_pidfd >= 0                        ? pidfd_inner_pid(r->main_pidfd)
                                                          : -EBADF;
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

int run_on_output(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Run *r = userdata;
        int i = fd == r->out_fd[0] ? 0 : 1;
        ssize_t n = run_read_output(r, i);

        if (n > 0)
                return 0;
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        r->out_source[i] = sd_event_source_disable_unref(r->out_source[i]);
        r->out_fd[i] = safe_close(r->out_fd[i]);
        run_store_drop(r, i == 0 ? "out" : "err", i == 0 ? CAPTURE_OPEN_OUT : CAPTURE_OPEN_ERR);
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

int run_on_timeout(sd_event_source *src, uint64_t usec, void *userdata) {
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

int run_on_cpu_check(sd_event_source *src, uint64_t usec, void *userdata) {
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
        /* A second above the budget, so that the daemon's own check (run_on_cpu_check) ends the run
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
                if ((k = sd_event_add_time(e, &r->timeout_source, CLOCK_BOOTTIME, deadline, 1000, run_on_timeout, r)) < 0)
                        return k;
        }
        if (r->kept)
                run_store_push(r);
        /* Started while its sandbox is frozen for a snapshot: the clock starts at the thaw. */
        if (r->sandbox->frozen)
                run_timeout_pause(r, now_usec(CLOCK_BOOTTIME));
        if (r->spec.cpu_usec &&
            (k = sd_event_add_time_relative(e, &r->cpu_source, CLOCK_MONOTONIC, 10 * USEC_PER_MSEC, 1000, run_on_cpu_check, r)) < 0)
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
                if ((k = sd_event_add_io(e, &r->out_source[i], r->out_fd[i], EPOLLIN, run_on_output, r)) < 0)
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

const LaunchOps run_launch_ops = {
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
        if (!sandbox_keeps_runs(s) || run_spec_own_stdio(&r->spec))
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

static const char *run_member_cgroup(SandboxMember *m) {
        Run *r = SANDBOX_MEMBER_OF(m, Run, member);
        return r->launch.cg_fd >= 0 ? r->launch.cg_name : NULL;
}

const SandboxMemberOps run_member_ops = {
        .kill = run_member_kill,
        .answer_stuck = run_member_answer_stuck,
        .start = run_member_start,
        .frozen = run_member_frozen,
        .free = run_member_free,
        .cgroup = run_member_cgroup,
};

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
