/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An interactive session: one program in a sandbox, on a terminal that belongs to the sandbox
 * (or on pipes, stdout and stderr apart), in its own child cgroup. Its output goes into a
 * bounded ring (ring.c) from which every attached client is fed at its own pace; it outlives
 * the connection that opened it until it is closed, its sandbox goes, or nobody was attached
 * for the idle timeout. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "launch.h"
#include "proto.h"
#include "reply.h"
#include "run-record.h"
#include "ring.h"
#include "run-spec.h"
#include "sandbox.h"

typedef struct Sandbox Sandbox;
typedef struct Context Context;
typedef struct Registry Registry;

typedef enum SessionReason {
        SESSION_REASON_NONE,
        SESSION_REASON_EXITED,
        SESSION_REASON_SIGNALED,
        SESSION_REASON_CLOSED,
        SESSION_REASON_IDLE,
        SESSION_REASON_DESTROYED,
        SESSION_REASON_OOM,
} SessionReason;

/* A client fed from the ring: events carry the id of its pty.open or pty.attach. */
typedef struct Subscriber {
        Reply *reply;
        struct Session *session;
        Hook close_hook, writable_hook; /* its client went, or has room again: the session pumps */
        uint64_t pos;           /* seq of the next byte to send it */
        bool exit_sent;
        struct Subscriber *next;
} Subscriber;

/* A request answered later: a pty.write once its bytes are in, a pty.close once all is gone. */
typedef struct PendingReply {
        Reply *reply;
        uint64_t until;         /* pty.write: input offset its last byte ends at */
        struct PendingReply *next;
} PendingReply;

typedef struct Session {
        Sandbox *sandbox;
        SandboxMember member;   /* in sandbox->members from session_new() to its end */
        char id[24];
        RunSpec spec;           /* argv, envp, cwd */
        bool pty;
        unsigned rows, cols;
        Launch launch;          /* its cgroup, its helper, the helper's reports (as a run's) */
        int main_pidfd;
        pid_t main_pid;         /* as the daemon sees it */
        int out_fd[2];          /* pty: [0] is the master; pipes: stdout, stderr */
        int in_fd;              /* pty: a dup of the master; pipes: stdin */
        int stage_fd;           /* pty: a pipe (both ends) the master's bytes are spliced into
                                 * before the ring takes them (in the fd store as p.<id>.stage) */
        sd_event_source *out_source[2], *in_source;
        sd_event_source *idle_timer, *kill_timer, *reap_timer;
        unsigned reap_tries;
        Ring ring;              /* on ring_mem, the memfd ring_fd (in the fd store as p.<id>.ring) */
        int ring_fd;
        void *ring_mem;
        size_t ring_size;
        /* Its fds went into the fd store and its record beside its sandbox's (session_store()):
         * taken out again when it ends, left for the next daemon when this one stops. */
        bool in_store, stored;
        bool stdin_closed;      /* a pipe session's stdin closed (eof): out of the store too */
        bool restored;          /* taken back from an earlier daemon */
        char output_lost[160];  /* what of its output a restart lost, for inspect ("" none) */
        Subscriber *subs;
        unsigned n_subs;
        bool pumping, pump_again;
        /* Input not yet written, and the writes waiting for it. */
        char *in_buf;
        size_t in_len, in_off;
        uint64_t in_written, in_queued;
        bool in_eof;            /* close stdin once the queue is out (pipes) */
        PendingReply *writes, *closers;
        Reply *opener;          /* the pty.open, until the program started */
        Hook opener_hook;       /* its client went before: the session is hung up */
        bool started, helper_exited, procs_gone, output_done, free_when_done;
        RunNote note;           /* in runs.log from its start to its end (run-record.h) */
        SessionReason forced;
        uint64_t created_usec;  /* CLOCK_REALTIME, for inspect */
        int wait_code, wait_status;
        int fail_step, fail_errno;
        struct Session *next, *prev;
} Session;

int session_new(Sandbox *s, Reply *reply, RunSpec *spec, bool pty, unsigned rows, unsigned cols,
            Session **ret);
/* Starts the program; the pty.open reply comes once it was exec'd (or could not be). */
void session_start(Session *p);
Session *session_find(Context *m, const char *id);
/* The sandbox's sessions for inspect: [{id, argv, pty, rows, cols, state, attached, output_seq,
 * created}] (an empty array when there are none). */
json_object *session_sessions_json(Sandbox *s);
/* The sandbox's sessions whose processes still run (or are starting). */
unsigned session_count_running(const Sandbox *s);
/* The sessions of uid that have not exited (what max_sessions_per_uid caps). */
unsigned session_count_owned(Context *m, uid_t uid);
/* Closes the oldest exited, unattached sessions of uid while it has max or more in all, so that
 * what exited sessions keep stays bounded although they are not counted. */
void session_make_room(Context *m, uid_t uid, unsigned max);

int session_attach(Session *p, Reply *reply, uint64_t from_seq, bool from_given, ProtoError *err);
/* The subscription of reply's client. */
int session_detach(Session *p, Reply *reply, ProtoError *err);
int session_write(Session *p, Reply *reply, const char *data, size_t n, bool eof, ProtoError *err);
int session_resize(Session *p, unsigned rows, unsigned cols, ProtoError *err);
/* To the terminal's foreground process group (pipes: the program's process group). */
int session_signal(Session *p, int sig, unsigned *ret_count, ProtoError *err);
/* SIGHUP, a grace, then cgroup.kill; the reply comes once nothing of the session is left. */
void session_close(Session *p, Reply *reply);

/* At start, for a sandbox whose processes were kept: the sessions of its records
 * (<id>/sessions/<session>.json) taken back with their fds from the store, checked; one that
 * cannot be is ended, its processes killed, and listed in interrupted_runs with what was lost. */
void session_restore_all(Sandbox *s);


