/* SPDX-License-Identifier: LGPL-2.1-or-later */
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

#include "cgroup.h"
#include "log.h"
#include "macro.h"
#include "metrics.h"
#include "pidfd.h"
#include "context.h"
#include "fdstore.h"
#include "session-internal.h"
#include "run-record.h"
#include "sandbox.h"
#include "spawn.h"
#include "util.h"

#define PTY_CHUNK 65536
#define PTY_MAX_SUBSCRIBERS 16
/* Between the SIGHUP of pty.close and the cgroup.kill of whatever ignored it. */
#define PTY_CLOSE_GRACE_USEC (2 * USEC_PER_SEC)
#define PTY_RING_MARKS 4096

static void session_pump(Session *p);
static void session_end_processes(Session *p);
static int on_idle(sd_event_source *src, uint64_t usec, void *userdata);

/* ---- Lifecycle --------------------------------------------------------------------------- */

void session_link(Sandbox *s, Session *p) {
        p->next = s->sessions;
        if (s->sessions)
                s->sessions->prev = p;
        s->sessions = p;
}

static void session_unlink(Session *p) {
        Sandbox *s = p->sandbox;
        if (p->prev)
                p->prev->next = p->next;
        else if (s->sessions == p)
                s->sessions = p->next;
        if (p->next)
                p->next->prev = p->prev;
        p->next = p->prev = NULL;
}

static void session_hang_up(Session *p, SessionReason why);

/* Nobody learnt the id of a session whose pty.open was not answered: it goes with its client
 * (from the deferred close of the connection). */
void session_on_opener_gone(Hook *h, void *userdata) {
        Session *p = userdata;

        if (!p->started) {
                session_hang_up(p, SESSION_REASON_CLOSED);
                session_pump(p); /* reading was held for it */
        }
}

void session_ring_unmap(Session *p) {
        ring_done(&p->ring);
        if (p->ring_mem)
                (void) munmap(p->ring_mem, p->ring_size);
        p->ring_mem = NULL;
        p->ring_fd = safe_close(p->ring_fd);
}

/* The ring, in a memfd that the fd store keeps for the next daemon: sealed at its size, mapped
 * shared, so that what is in it when we die is what the next daemon reads. */
int session_ring_map(Session *p, int fd, size_t size) {
        void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (mem == MAP_FAILED)
                return -errno;
        p->ring_fd = fd;
        p->ring_mem = mem;
        p->ring_size = size;
        return 0;
}

int session_ring_new(Session *p, size_t cap, uint64_t seq) {
        size_t size = ring_size(cap, PTY_RING_MARKS);
        int fd = memfd_create(RING_MEMFD_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING), k;

        if (fd < 0)
                return -errno;
        if (ftruncate(fd, (off_t) size) < 0 || fcntl(fd, F_ADD_SEALS, RING_SEALS) < 0) {
                k = -errno;
                safe_close(fd);
                return k;
        }
        if ((k = session_ring_map(p, fd, size)) < 0) {
                safe_close(fd);
                return k;
        }
        return ring_format(&p->ring, p->ring_mem, size, cap, PTY_RING_MARKS, seq);
}

int session_new(Sandbox *s, Reply *reply, RunSpec *spec, bool pty, unsigned rows, unsigned cols,
            Session **ret) {
        uint8_t b[6];
        Session *p = calloc(1, sizeof(*p));
        int k;

        if (!p)
                return -ENOMEM;
        if (getrandom(b, sizeof(b), 0) != sizeof(b)) {
                free(p);
                return -EIO;
        }
        p->ring_fd = p->stage_fd = -EBADF;
        k = session_ring_new(p, s->ctx->config.session_ring_bytes, 0);
        if (k >= 0 && pty && (p->stage_fd = ring_stage_new()) < 0)
                k = p->stage_fd;
        if (k < 0) {
                session_ring_unmap(p);
                free(p);
                return k;
        }
        snprintf(p->id, sizeof(p->id), "pty-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5]);
        p->sandbox = s;
        p->spec = *spec;
        *spec = (RunSpec) {};
        p->pty = pty;
        p->rows = rows;
        p->cols = cols;
        launch_init(&p->launch, s, &session_launch_ops, p);
        p->main_pidfd = p->in_fd = -EBADF;
        p->out_fd[0] = p->out_fd[1] = -EBADF;
        p->opener = reply_ref(reply);
        hook_init(&p->opener_hook, session_on_opener_gone, p);
        reply_on_close(p->opener, &p->opener_hook);
        p->created_usec = now_usec(CLOCK_REALTIME);
        metrics.sessions_opened++;
        session_link(s, p);
        sandbox_member_add(s, &p->member, &session_member_ops);
        *ret = p;
        return 0;
}

static void pending_free_all(PendingReply **list) {
        while (*list) {
                PendingReply *w = *list;
                *list = w->next;
                reply_unref(w->reply);
                free(w);
        }
}

static void subscriber_free(Subscriber *sub) {
        hook_remove(&sub->close_hook);
        hook_remove(&sub->writable_hook);
        reply_unref(sub->reply);
        free(sub);
}

void session_destroy(Session *p) {
        sandbox_member_remove(p->sandbox, &p->member);
        run_note_forget(&p->note); /* its end is noted, or the next start finds it interrupted */
        session_unlink(p);
        for (int i = 0; i < 2; i++) {
                sd_event_source_disable_unref(p->out_source[i]);
                safe_close(p->out_fd[i]);
        }
        sd_event_source_disable_unref(p->in_source);
        launch_done(&p->launch);
        sd_event_source_disable_unref(p->idle_timer);
        sd_event_source_disable_unref(p->kill_timer);
        sd_event_source_disable_unref(p->reap_timer);
        safe_close(p->in_fd);
        safe_close(p->stage_fd);
        safe_close(p->main_pidfd);
        while (p->subs) {
                Subscriber *sub = p->subs;
                p->subs = sub->next;
                subscriber_free(sub);
        }
        pending_free_all(&p->writes);
        pending_free_all(&p->closers);
        hook_remove(&p->opener_hook);
        reply_unref(p->opener);
        session_ring_unmap(p);
        free(p->in_buf);
        run_spec_done(&p->spec);
        free(p);
}

/* A sandbox being destroyed waits for its sessions as for its runs. A session ends here (its end
 * noted); freed with its sandbox at the daemon's stop (session_member_free()), it does not end: a client that comes back after
 * the restart is told session_lost. */

static void session_free(Session *p) {
        Sandbox *s = p->sandbox;
        session_unstore(p);
        run_note_end(&p->note);
        session_destroy(p);
        if (s->state == SANDBOX_DESTROYING)
                sandbox_run_finished(s, NULL);
}

/* Every session is looked at, found or not, as in registry_find(). */
Session *session_find(Context *m, const char *id) {
        Session *found = NULL;

        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry))
                for (Session *p = s->sessions; p; p = p->next)
                        if (!found && strcmp(p->id, id) == 0)
                                found = p;
        return found;
}

json_object *session_sessions_json(Sandbox *s) {
        json_object *arr = json_object_new_array();
        char ts[UTC_TIME_MAX];

        for (Session *p = s->sessions; p; p = p->next) {
                json_object *o = json_object_new_object(), *argv = json_object_new_array();
                for (char **a = p->spec.argv; a && *a; a++)
                        json_object_array_add(argv, json_object_new_string(*a));
                json_object_object_add(o, "id", json_object_new_string(p->id));
                json_object_object_add(o, "argv", argv);
                json_object_object_add(o, "pty", json_object_new_boolean(p->pty));
                json_object_object_add(o, "rows", p->pty ? json_object_new_int((int) p->rows) : NULL);
                json_object_object_add(o, "cols", p->pty ? json_object_new_int((int) p->cols) : NULL);
                json_object_object_add(o, "state",
                                       json_object_new_string(!p->started ? "starting" : p->procs_gone ? "exited" : "running"));
                json_object_object_add(o, "attached", json_object_new_int((int) p->n_subs));
                json_object_object_add(o, "output_seq", json_object_new_int64((int64_t) ring_end(&p->ring)));
                json_object_object_add(o, "created", json_object_new_string(format_utc(ts, p->created_usec)));
                if (p->restored)
                        json_object_object_add(o, "restored", json_object_new_boolean(true));
                if (p->output_lost[0])
                        json_object_object_add(o, "output_lost", json_object_new_string(p->output_lost));
                json_object_array_add(arr, o);
        }
        return arr;
}

unsigned session_count_running(const Sandbox *s) {
        unsigned n = 0;

        for (const Session *p = s->sessions; p; p = p->next)
                if (!p->procs_gone)
                        n++;
        return n;
}

/* An exited session only keeps its output and outcome for a client to read: it does not hold
 * a place under max_sessions_per_uid. */
static bool session_exited(const Session *p) {
        return p->procs_gone && !p->free_when_done;
}

unsigned session_count_owned(Context *m, uid_t uid) {
        unsigned n = 0;
        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry))
                if (s->owner_uid == uid)
                        for (Session *p = s->sessions; p; p = p->next)
                                n += !p->procs_gone && !p->free_when_done;
        return n;
}

/* The oldest exited session of uid that no client is attached to, or NULL. */
static Session *session_oldest_exited(Context *m, uid_t uid, unsigned *ret_total) {
        Session *oldest = NULL;
        unsigned total = 0;

        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry))
                if (s->owner_uid == uid)
                        for (Session *p = s->sessions; p; p = p->next) {
                                total += !p->free_when_done;
                                if (session_exited(p) && p->n_subs == 0 &&
                                    (!oldest || p->created_usec < oldest->created_usec))
                                        oldest = p;
                        }
        *ret_total = total;
        return oldest;
}

void session_make_room(Context *m, uid_t uid, unsigned max) {
        unsigned total;

        for (Session *p; (p = session_oldest_exited(m, uid, &total)) && total >= max;) {
                log_debug("session %s: exited and unattached, closed to make room for a new one of uid %u", p->id,
                          (unsigned) uid);
                session_hang_up(p, SESSION_REASON_CLOSED);
                session_pump(p);
        }
}

/* ---- Outcome ----------------------------------------------------------------------------- */

static const char *reason_name(SessionReason why) {
        static const char *const names[] = {
                [SESSION_REASON_NONE] = "exited",     [SESSION_REASON_EXITED] = "exited",
                [SESSION_REASON_SIGNALED] = "signaled", [SESSION_REASON_CLOSED] = "closed",
                [SESSION_REASON_IDLE] = "idle_timeout", [SESSION_REASON_DESTROYED] = "destroyed",
                [SESSION_REASON_OOM] = "oom",
        };
        return names[why];
}

static bool session_oom_killed(Session *p) {
        uint64_t kills = 0;
        return (p->sandbox->enforced & CG_MEMORY) && p->launch.cg_fd >= 0 &&
               cg_read_keyed(p->launch.cg_fd, "memory.events", "oom_kill", &kills) >= 0 && kills > 0;
}

/* exit_code, signal, reason: what we did to it first, then the kernel's account, then the wait
 * status; shell-style codes as for runs. */
static void session_add_outcome(Session *p, json_object *o) {
        SessionReason why = p->forced;
        int sig = 0, code = 0;
        char sigbuf[12];
        bool exited = p->wait_code != 0;

        if (exited && p->wait_code == CLD_EXITED)
                code = p->wait_status;
        else if (exited)
                sig = p->wait_status;
        else
                sig = SIGKILL;
        if (why == SESSION_REASON_NONE)
                why = session_oom_killed(p) ? SESSION_REASON_OOM : sig ? SESSION_REASON_SIGNALED : SESSION_REASON_EXITED;
        if (sig)
                code = 128 + sig;
        json_object_object_add(o, "exit_code", json_object_new_int(code));
        json_object_object_add(o, "signal", sig > 0 ? json_object_new_string(signal_to_string(sig, sigbuf)) : NULL);
        json_object_object_add(o, "reason", json_object_new_string(reason_name(why)));
}

/* ---- Feeding subscribers ----------------------------------------------------------------- */

static json_object *session_event(Session *p, Subscriber *sub, const char *kind, uint64_t seq) {
        json_object *ev = reply_event_new(sub->reply, kind);
        json_object_object_add(ev, "session", json_object_new_string(p->id));
        json_object_object_add(ev, "seq", json_object_new_int64((int64_t) seq));
        return ev;
}

static void session_send_exit(Session *p, Subscriber *sub) {
        json_object *ev = session_event(p, sub, "exit", ring_end(&p->ring));
        session_add_outcome(p, ev);
        sub->exit_sent = true;
        reply_event(sub->reply, ev);
}

/* One event from the ring: at most PTY_CHUNK bytes of one stream. A UTF-8 character cut at the
 * end of what is there so far waits for its rest, so that text stays text. Returns false when
 * nothing could be sent yet. */
static bool session_send_chunk(Session *p, Subscriber *sub) {
        char buf[PTY_CHUNK];
        int stream = 0;
        size_t n = ring_copy(&p->ring, sub->pos, buf, sizeof(buf), &stream);
        json_object *ev;

        if ((!p->output_done && sub->pos + n == ring_end(&p->ring)) || n == sizeof(buf)) {
                size_t keep = utf8_incomplete_tail(buf, n);
                if (keep == n)
                        return false;
                n -= keep;
        }
        ev = session_event(p, sub, stream == 0 ? "stdout" : "stderr", sub->pos);
        json_object_object_add(ev, "bytes", json_object_new_int64((int64_t) n));
        proto_add_bytes(ev, "data", buf, n);
        sub->pos += n;
        reply_event(sub->reply, ev);
        return true;
}

/* Sends what the subscriber's connection has room for (everything when force); bytes the ring
 * lost before it got them are announced by a "dropped" event with their exact count. */
static void session_deliver(Session *p, Subscriber *sub, bool force) {
        while (!reply_gone(sub->reply) && sub->pos < ring_end(&p->ring) &&
               (force || reply_backlog(sub->reply) < STREAM_PAUSE_BYTES)) {
                if (sub->pos < ring_start(&p->ring)) {
                        json_object *ev = session_event(p, sub, "dropped", sub->pos);
                        json_object_object_add(ev, "bytes", json_object_new_int64((int64_t) (ring_start(&p->ring) - sub->pos)));
                        sub->pos = ring_start(&p->ring);
                        reply_event(sub->reply, ev);
                        continue;
                }
                if (!session_send_chunk(p, sub))
                        break;
        }
        if (p->output_done && sub->pos == ring_end(&p->ring) && !sub->exit_sent && !reply_gone(sub->reply))
                session_send_exit(p, sub);
}

/* How many bytes may be read now without overwriting what the most advanced attached client
 * has not been sent yet (unbounded when nobody is attached: the ring then keeps the latest).
 * Until pty.open is answered its client counts as attached from byte 0: the program may write
 * before its start is reported, and none of that is lost. */
static size_t session_room(Session *p) {
        uint64_t best = 0;
        if (p->n_subs == 0 && (!p->opener || p->free_when_done))
                return PTY_CHUNK;
        for (Subscriber *sub = p->subs; sub; sub = sub->next) {
                uint64_t pos = sub->pos > ring_start(&p->ring) ? sub->pos : ring_start(&p->ring);
                best = pos > best ? pos : best;
        }
        uint64_t room = p->ring.cap - (ring_end(&p->ring) - best);
        return room > PTY_CHUNK ? PTY_CHUNK : (size_t) room;
}

static void session_set_reading(Session *p, bool on) {
        for (int i = 0; i < 2; i++)
                if (p->out_source[i])
                        (void) sd_event_source_set_enabled(p->out_source[i], on ? SD_EVENT_ON : SD_EVENT_OFF);
}

void session_arm_idle(Session *p) {
        uint64_t t = p->sandbox->ctx->config.session_idle_timeout_usec;
        if (p->n_subs > 0 || t == 0 || p->free_when_done || !p->started) {
                if (p->idle_timer)
                        (void) sd_event_source_set_enabled(p->idle_timer, SD_EVENT_OFF);
                return;
        }
        if (p->idle_timer && sd_event_source_get_enabled(p->idle_timer, NULL) > 0)
                return;
        if (!p->idle_timer) {
                (void) sd_event_add_time_relative(p->sandbox->ctx->event, &p->idle_timer, CLOCK_MONOTONIC, t,
                                                  USEC_PER_SEC, on_idle, p);
                return;
        }
        (void) sd_event_source_set_time_relative(p->idle_timer, t);
        (void) sd_event_source_set_enabled(p->idle_timer, SD_EVENT_ONESHOT);
}

static void session_sweep_dead(Session *p) {
        for (Subscriber **sp = &p->subs; *sp;) {
                Subscriber *sub = *sp;
                /* A client that asks for nothing more has had all it can get after the exit. */
                if (!reply_gone(sub->reply) && !(sub->exit_sent && reply_input_ended(sub->reply))) {
                        sp = &sub->next;
                        continue;
                }
                *sp = sub->next;
                p->n_subs--;
                subscriber_free(sub);
        }
}

/* ---- Reading ----------------------------------------------------------------------------- */

static void session_close_out(Session *p, int i) {
        p->out_source[i] = sd_event_source_disable_unref(p->out_source[i]);
        p->out_fd[i] = safe_close(p->out_fd[i]);
}

/* One read of stream i; > 0 when bytes came, 0 when there is nothing (more) to read now. It is
 * announced in the ring first, a terminal's goes through its staging pipe (ring_read(),
 * ring_read_terminal()): a daemon killed between the read and the append loses nothing. */
static int session_read(Session *p, int i) {
        size_t room = session_room(p);
        ssize_t n;

        if (room == 0)
                return 0;
        n = p->pty ? ring_read_terminal(&p->ring, p->out_fd[0], p->stage_fd, room) : ring_read(&p->ring, i, p->out_fd[i], room);
        if (n > 0)
                return 1;
        if (n < 0 && errno == EINTR)
                return 1;
        /* EIO: the terminal's last other end is closed. After the processes are gone, "nothing
         * now" is the end too: a descendant may have passed the terminal out of the session. */
        if (n == 0 || errno != EAGAIN || p->procs_gone)
                session_close_out(p, i);
        return 0;
}

/* After the processes are gone: reads what is left, as far as the subscribers let us. True when
 * bytes came. */
static bool session_drain(Session *p) {
        bool got = false;
        for (int i = 0; i < 2; i++)
                while (p->out_fd[i] >= 0 && session_read(p, i) > 0)
                        got = true;
        return got;
}

static void session_finish_output(Session *p);
static void session_final_flush(Session *p);

/* Feeds every subscriber; once the processes are gone, reads the rest as room allows and ends
 * the output. A hook of a subscriber's client may come back here: the nested call only asks
 * for another round. A session to be freed is freed here, last. */
static void session_pump(Session *p) {
        if (p->pumping) {
                p->pump_again = true;
                return;
        }
        p->pumping = true;
        for (;;) {
                p->pump_again = false;
                for (Subscriber *sub = p->subs; sub; sub = sub->next)
                        session_deliver(p, sub, false);
                session_sweep_dead(p);
                if (!p->output_done && p->procs_gone && session_room(p) > 0) {
                        bool got = session_drain(p);
                        if (p->out_fd[0] < 0 && p->out_fd[1] < 0) {
                                session_finish_output(p);
                                p->pump_again = true; /* the exit events */
                        } else if (got)
                                p->pump_again = true;
                }
                if (!p->pump_again)
                        break;
        }
        if (p->output_done && p->free_when_done) {
                session_final_flush(p);
                session_free(p);
                return;
        }
        p->pumping = false;
        session_arm_idle(p);
        if (!p->output_done)
                session_set_reading(p, session_room(p) > 0);
}

static int on_output(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Session *p = userdata;
        int i = fd == p->out_fd[0] ? 0 : 1;

        if (session_read(p, i) > 0 || p->out_fd[i] < 0)
                session_pump(p);
        else if (session_room(p) == 0)
                session_set_reading(p, false);
        return 0;
}

/* ---- Control ----------------------------------------------------------------------------- */


int session_resize(Session *p, unsigned rows, unsigned cols, ProtoError *err) {
        struct winsize ws = { .ws_row = (unsigned short) rows, .ws_col = (unsigned short) cols };

        if (!p->pty)
                return proto_error_set(err, SBX_E_CONFLICT, "session", "session %s has no terminal (pipe mode)", p->id);
        if (p->output_done || p->in_fd < 0)
                return proto_error_set(err, SBX_E_CONFLICT, "session", "session %s has exited", p->id);
        /* The kernel sends SIGWINCH to the terminal's foreground process group. */
        if (ioctl(p->in_fd, TIOCSWINSZ, &ws) < 0)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "TIOCSWINSZ: %s", strerror(errno));
        p->rows = rows;
        p->cols = cols;
        session_record_save(p);
        return 0;
}

/* Signals the processes of the session's cgroup in process group pgid (every one when pgid is
 * 0), each through a pidfd: only processes of this session, never a recycled pid outside it.
 * The helper, which is ours, is spared. */
static unsigned session_signal_group(Session *p, pid_t pgid, int sig) {
        _cleanup_close_ int fd = openat(p->launch.cg_fd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
        FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
        unsigned count = 0;
        long pid;

        if (!f)
                return 0;
        fd = -EBADF;
        while (fscanf(f, "%ld", &pid) == 1) {
                if ((pid_t) pid == p->launch.pid)
                        continue;
                _cleanup_close_ int pidfd = (int) syscall(SYS_pidfd_open, (pid_t) pid, 0);
                if (pidfd < 0 || (pgid != 0 && getpgid((pid_t) pid) != pgid))
                        continue;
                if (syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) >= 0)
                        count++;
        }
        fclose(f);
        return count;
}

int session_signal(Session *p, int sig, unsigned *ret_count, ProtoError *err) {
        pid_t pgid = p->main_pid;

        if (p->output_done || p->procs_gone || !p->started)
                return proto_error_set(err, SBX_E_CONFLICT, "session", "session %s has exited", p->id);
        /* The terminal's foreground process group, as the daemon's pid namespace sees it. */
        if (p->pty && (p->in_fd < 0 || ioctl(p->in_fd, TIOCGPGRP, &pgid) < 0))
                return proto_error_set(err, SBX_E_CONFLICT, "session", "session %s has no foreground process group: %s",
                                       p->id, strerror(errno));
        *ret_count = session_signal_group(p, pgid, sig);
        return 0;
}

static int on_kill_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        Session *p = userdata;
        if (p->launch.cg_fd >= 0)
                (void) cg_kill_at(p->launch.kill_fd, p->launch.cg_fd);
        return 0;
}

/* Ends the session: SIGHUP to all its processes (a hung-up terminal), and cgroup.kill for
 * whatever is left after the grace. */
static void session_hang_up(Session *p, SessionReason why) {
        if (p->forced == SESSION_REASON_NONE && !p->helper_exited)
                p->forced = why;
        p->free_when_done = true;
        if (p->output_done)
                return;
        if (p->started && !p->helper_exited && p->launch.cg_fd >= 0) {
                (void) session_signal_group(p, 0, SIGHUP);
                (void) session_signal_group(p, 0, SIGCONT);
        }
        if (!p->kill_timer)
                (void) sd_event_add_time_relative(p->sandbox->ctx->event, &p->kill_timer, CLOCK_MONOTONIC,
                                                  PTY_CLOSE_GRACE_USEC, 10 * USEC_PER_MSEC, on_kill_timer, p);
}

static int on_idle(sd_event_source *src, uint64_t usec, void *userdata) {
        Session *p = userdata;
        log_debug("session %s: nobody attached for the idle timeout, closing", p->id);
        session_hang_up(p, SESSION_REASON_IDLE);
        session_pump(p);
        return 0;
}

static void session_answer_closers(Session *p) {
        while (p->closers) {
                PendingReply *w = p->closers;
                json_object *o = json_object_new_object();
                p->closers = w->next;
                json_object_object_add(o, "session", json_object_new_string(p->id));
                session_add_outcome(p, o);
                reply_ok(w->reply, o);
                reply_unref(w->reply);
                free(w);
        }
}

void session_close(Session *p, Reply *reply) {
        PendingReply *w = calloc(1, sizeof(*w));

        if (w) {
                *w = (PendingReply) { .reply = reply_ref(reply), .next = p->closers };
                p->closers = w;
        }
        session_hang_up(p, SESSION_REASON_CLOSED);
        session_pump(p);
}

/* ---- Attaching --------------------------------------------------------------------------- */

static json_object *session_describe(Session *p, json_object *o) {
        json_object_object_add(o, "session", json_object_new_string(p->id));
        json_object_object_add(o, "sandbox", json_object_new_string(p->sandbox->id));
        json_object_object_add(o, "pty", json_object_new_boolean(p->pty));
        json_object_object_add(o, "rows", p->pty ? json_object_new_int((int) p->rows) : NULL);
        json_object_object_add(o, "cols", p->pty ? json_object_new_int((int) p->cols) : NULL);
        json_object_object_add(o, "state", json_object_new_string(p->output_done ? "exited" : "running"));
        return o;
}

/* Its client went, or has room again: the session sends what it can and lets go of the gone. */
static void on_subscriber_client(Hook *h, void *userdata) {
        Subscriber *sub = userdata;
        session_pump(sub->session);
}

static int session_subscribe(Session *p, Reply *reply, uint64_t pos, ProtoError *err) {
        Subscriber *sub;

        for (sub = p->subs; sub; sub = sub->next)
                if (reply_same_peer(sub->reply, reply))
                        break;
        if (!sub) {
                if (p->n_subs >= PTY_MAX_SUBSCRIBERS)
                        return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "session",
                                               "session %s has its maximum of %d attached clients", p->id,
                                               PTY_MAX_SUBSCRIBERS);
                sub = calloc(1, sizeof(*sub));
                if (!sub)
                        return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
                sub->session = p;
                hook_init(&sub->close_hook, on_subscriber_client, sub);
                hook_init(&sub->writable_hook, on_subscriber_client, sub);
                reply_on_close(reply, &sub->close_hook);
                reply_on_writable(reply, &sub->writable_hook);
                sub->next = p->subs;
                p->subs = sub;
                p->n_subs++;
        }
        /* A second attach from the same connection moves its one subscription. */
        reply_ref(reply);
        reply_unref(sub->reply);
        sub->reply = reply;
        sub->pos = pos;
        sub->exit_sent = false;
        return 0;
}

int session_attach(Session *p, Reply *reply, uint64_t from, bool from_given, ProtoError *err) {
        uint64_t first;
        json_object *o;
        int k;

        if (p->free_when_done)
                return proto_error_set(err, SBX_E_CONFLICT, "session", "session %s is being closed", p->id);
        if (!from_given)
                from = ring_start(&p->ring);
        if (from > ring_end(&p->ring))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "from_seq",
                                       "'from_seq' is beyond the output so far (%" PRIu64 " bytes)", ring_end(&p->ring));
        first = from > ring_start(&p->ring) ? from : ring_start(&p->ring);
        if ((k = session_subscribe(p, reply, first, err)) < 0)
                return k;
        o = session_describe(p, json_object_new_object());
        json_object_object_add(o, "from_seq", json_object_new_int64((int64_t) from));
        json_object_object_add(o, "first_seq", json_object_new_int64((int64_t) first));
        json_object_object_add(o, "dropped", json_object_new_int64((int64_t) (first - from)));
        json_object_object_add(o, "next_seq", json_object_new_int64((int64_t) ring_end(&p->ring)));
        reply_ok(reply, o);
        session_pump(p);
        return 0;
}

int session_detach(Session *p, Reply *reply, ProtoError *err) {
        for (Subscriber **sp = &p->subs; *sp; sp = &(*sp)->next)
                if (reply_same_peer((*sp)->reply, reply)) {
                        Subscriber *sub = *sp;
                        *sp = sub->next;
                        p->n_subs--;
                        subscriber_free(sub);
                        session_pump(p);
                        return 0;
                }
        return proto_error_set(err, SBX_E_CONFLICT, "session", "this connection is not attached to session %s", p->id);
}

/* ---- The end ----------------------------------------------------------------------------- */

static void session_finish_output(Session *p) {
        ProtoError err;

        p->output_done = true;
        /* The cgroup is empty: it goes now. */
        if (p->launch.cg_fd >= 0 && unlinkat(p->sandbox->cg_fd, p->launch.cg_name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                log_warning("session %s: cannot remove its cgroup: %m", p->id);
        proto_error_set(&err, SBX_E_CONFLICT, "session", "session %s exited before this input was written", p->id);
        session_answer_writes(p, &err);
        session_stop_input(p);
}

/* The session goes: everything left goes to the subscribers now (bounded by the ring), then
 * the exit event, then the pty.close replies. */
static void session_final_flush(Session *p) {
        for (Subscriber *sub = p->subs; sub; sub = sub->next)
                if (!reply_gone(sub->reply))
                        session_deliver(p, sub, true);
        session_answer_closers(p);
}

static void session_reply_failure(Session *p) {
        ProtoError err;

        if (p->fail_step == STEP_CWD && (p->fail_errno == EXDEV || p->fail_errno == ENOENT || p->fail_errno == ENOTDIR ||
                                         p->fail_errno == ELOOP))
                proto_error_set(&err, SBX_E_INVALID_REQUEST, "cwd", "'cwd' %s: %s", p->spec.cwd,
                                p->fail_errno == EXDEV ? "resolves outside /work" : strerror(p->fail_errno));
        else if (p->fail_step != STEP_NONE) {
                proto_error_set(&err, SBX_E_SPAWN_FAILED, NULL, "%s failed for '%s': %s", spawn_step_to_string(p->fail_step),
                                p->spec.argv[0], strerror(p->fail_errno));
                proto_error_set_spawn(&err, spawn_step_to_string(p->fail_step), p->fail_errno);
        } else
                proto_error_set(&err, SBX_E_SPAWN_FAILED, NULL, "the session's helper died before the program started");
        reply_error(p->opener, &err);
}

static int on_reap_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        session_end_processes(userdata);
        return 0;
}

/* Kills the session's cgroup until it is empty (something may fork meanwhile), then finishes
 * the output. */
static void session_end_processes(Session *p) {
        uint64_t delay;

        if (p->launch.cg_fd < 0 || cg_populated(p->launch.cg_fd) <= 0) {
                p->reap_timer = sd_event_source_disable_unref(p->reap_timer);
                p->kill_timer = sd_event_source_disable_unref(p->kill_timer);
                p->procs_gone = true;
                /* It has ended, whether or not it stays to be read and closed. */
                session_unstore(p);
                run_note_end(&p->note);
                session_pump(p);
                return;
        }
        (void) cg_kill_at(p->launch.kill_fd, p->launch.cg_fd);
        delay = (uint64_t) 1000 << (p->reap_tries < 7 ? p->reap_tries : 7);
        p->reap_tries++;
        if (p->reap_timer) {
                (void) sd_event_source_set_time_relative(p->reap_timer, delay);
                (void) sd_event_source_set_enabled(p->reap_timer, SD_EVENT_ONESHOT);
        } else
                (void) sd_event_add_time_relative(p->sandbox->ctx->event, &p->reap_timer, CLOCK_MONOTONIC, delay, 0,
                                                  on_reap_timer, p);
}

static void session_helper_exit(void *userdata, const siginfo_t *si) {
        Session *p = userdata;

        p->helper_exited = true;
        launch_collect_reports(&p->launch);
        if (!p->started) {
                /* Never visible to anyone: it goes once its cgroup is empty. */
                if (!p->free_when_done)
                        session_reply_failure(p);
                p->free_when_done = true;
        }
        /* The session ends with its program: what it left behind is killed. */
        session_end_processes(p);
}

/* ---- Reports from the helper ------------------------------------------------------------- */

static pid_t pidfd_pid(int pidfd) {
        int pid;
        return pidfd_pids(pidfd, &pid, NULL) < 0 ? 0 : pid;
}

int session_watch_output(Session *p, int i, int fd) {
        (void) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        p->out_fd[i] = fd;
        return sd_event_add_io(p->sandbox->ctx->event, &p->out_source[i], fd, EPOLLIN, on_output, p);
}

int session_watch_input(Session *p, int fd) {
        int k;
        (void) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        p->in_fd = fd;
        k = sd_event_add_io(p->sandbox->ctx->event, &p->in_source, fd, EPOLLOUT, session_on_input, p);
        if (k >= 0)
                (void) sd_event_source_set_enabled(p->in_source, SD_EVENT_OFF);
        return k;
}

/* The master arrives from inside the sandbox; a second fd of it takes the input, so that
 * reading and writing are watched apart. */
static void session_take_terminal(Session *p, int master) {
        int in = fcntl(master, F_DUPFD_CLOEXEC, 3);

        if (p->out_fd[0] >= 0 || in < 0 || session_watch_output(p, 0, master) < 0 || session_watch_input(p, in) < 0) {
                log_warning("session %s: cannot watch its terminal", p->id);
                if (p->out_fd[0] != master)
                        safe_close(master);
                if (p->in_fd != in)
                        safe_close(in);
                if (p->launch.cg_fd >= 0)
                        (void) cg_kill_at(p->launch.kill_fd, p->launch.cg_fd);
        }
}


static void session_started(Session *p, int pidfd) {
        json_object *o;
        ProtoError err;

        p->started = true;
        p->main_pidfd = pidfd;
        p->main_pid = pidfd_pid(pidfd);
        if (p->free_when_done)
                return;
        session_store(p);
        o = session_describe(p, json_object_new_object());
        if (session_subscribe(p, p->opener, 0, &err) < 0) {
                json_object_put(o);
                reply_error(p->opener, &err);
                return;
        }
        reply_ok(p->opener, o);
        hook_remove(&p->opener_hook);
        p->opener = reply_unref(p->opener);
        session_pump(p);
}

static void session_handle_report(void *userdata, const SpawnReport *rep, int fd) {
        Session *p = userdata;
        switch (rep->kind) {
        case REPORT_TERMINAL:
                session_take_terminal(p, fd);
                return;
        case REPORT_STARTED:
                session_started(p, fd);
                return;
        case REPORT_EXITED:
                p->wait_code = rep->code;
                p->wait_status = rep->status;
                break;
        case REPORT_FAILED:
                p->fail_step = rep->step;
                p->fail_errno = rep->err;
                break;
        }
        safe_close(fd);
}

/* ---- Starting ---------------------------------------------------------------------------- */

/* Its pipes (a terminal's come later, from the helper: session_take_terminal()). */
static int session_watch(void *userdata, LaunchFds *f) {
        Session *p = userdata;
        int k;

        if (!p->pty && ((k = session_watch_output(p, 0, TAKE_FD(f->out[0]))) < 0 ||
                        (k = session_watch_output(p, 1, TAKE_FD(f->err[0]))) < 0 || (k = session_watch_input(p, TAKE_FD(f->in[1]))) < 0))
                return k;
        return 0;
}

const LaunchOps session_launch_ops = {
        .watch = session_watch,
        .report = session_handle_report,
        .helper_exit = session_helper_exit,
};

static void session_fail_start(Session *p, const ProtoError *e) {
        ProtoError err = *e;

        reply_error(p->opener, &err);
        launch_abort(&p->launch);
        session_free(p);
}

void session_start(Session *p) {
        RunParams rp = {
                .argv = p->spec.argv,
                .envp = p->spec.envp,
                .cwd = p->spec.cwd,
                .cwd_anywhere = sandbox_has_own_root(p->sandbox),
                .user = p->sandbox->user,
                .pty = p->pty,
                .rows = (unsigned short) p->rows,
                .cols = (unsigned short) p->cols,
                /* Only where the store keeps its terminal for the next daemon (restarts.md, 4). */
                .outlive_daemon = fdstore_enabled(),
        };
        LaunchSpec spec = {
                .kind = "pty",
                .pipes = !p->pty,
                .params = &rp, /* cloned, born in its cgroup */
                .what_cgroup = "cannot create the session's cgroup",
                .what_fds = "cannot start the session",
                .what_start = "cannot start the session",
        };
        ProtoError err;

        char cg[32];
        run_note_start(&p->note, p->sandbox, p->id, p->spec.argv, true,
                       launch_next_cgroup_name(p->sandbox, spec.kind, cg, sizeof(cg)));
        if (launch_start(&p->launch, &spec, &err) < 0)
                return session_fail_start(p, &err);
}

/* ---- As a member of its sandbox ---------------------------------------------------------- */

/* Its sandbox is going or restarting: the session ends as with its sandbox. */
static void session_member_kill(SandboxMember *m, int sig) {
        Session *p = SANDBOX_MEMBER_OF(m, Session, member);
        Sandbox *s = p->sandbox;

        if (!p->started && !p->free_when_done) {
                ProtoError err;
                proto_error_set(&err, SBX_E_CONFLICT, "sandbox", "sandbox %s was destroyed", s->id);
                reply_error(p->opener, &err);
        }
        if (p->forced == SESSION_REASON_NONE && !p->helper_exited)
                p->forced = SESSION_REASON_DESTROYED;
        p->free_when_done = true;
        session_pump(p); /* an exited one goes now */
}

static void session_member_free(SandboxMember *m) {
        session_destroy(SANDBOX_MEMBER_OF(m, Session, member));
}

const SandboxMemberOps session_member_ops = {
        .kill = session_member_kill,
        .free = session_member_free,
};
