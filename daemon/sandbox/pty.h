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

#include "proto.h"
#include "ring.h"
#include "run.h"

typedef struct Sandbox Sandbox;
typedef struct Context Context;
typedef struct Connection Connection;
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
        Connection *conn;
        json_object *req_id;
        uint64_t pos;           /* seq of the next byte to send it */
        bool exit_sent;
        struct Subscriber *next;
} Subscriber;

/* A request answered later: a pty.write once its bytes are in, a pty.close once all is gone. */
typedef struct PendingReply {
        Connection *conn;
        json_object *req_id;
        uint64_t until;         /* pty.write: input offset its last byte ends at */
        struct PendingReply *next;
} PendingReply;

typedef struct Session {
        Sandbox *sandbox;
        char id[24];
        char cg_name[32];
        RunSpec spec;           /* argv, envp, cwd */
        bool pty;
        unsigned rows, cols;
        int cg_fd;
        int kill_fd;            /* its cgroup.kill, open from the start (as a run's) */
        pid_t pid;              /* the helper */
        int pidfd;
        int main_pidfd;
        pid_t main_pid;         /* as the daemon sees it */
        int report_fd;
        int out_fd[2];          /* pty: [0] is the master; pipes: stdout, stderr */
        int in_fd;              /* pty: a dup of the master; pipes: stdin */
        sd_event_source *out_source[2], *in_source, *report_source, *child_source;
        sd_event_source *idle_timer, *kill_timer, *reap_timer;
        unsigned reap_tries;
        Ring ring;
        Subscriber *subs;
        unsigned n_subs;
        bool pumping, pump_again;
        /* Input not yet written, and the writes waiting for it. */
        char *in_buf;
        size_t in_len, in_off;
        uint64_t in_written, in_queued;
        bool in_eof;            /* close stdin once the queue is out (pipes) */
        PendingReply *writes, *closers;
        Connection *opener;     /* until the program started */
        json_object *open_id;
        bool started, helper_exited, procs_gone, output_done, free_when_done;
        bool end_recorded;      /* its end is in runs.log: a restart does not call it interrupted */
        SessionReason forced;
        uint64_t created_usec;  /* CLOCK_REALTIME, for inspect */
        int wait_code, wait_status;
        int fail_step, fail_errno;
        struct Session *next, *prev;
} Session;

int pty_new(Sandbox *s, Connection *c, json_object *id, RunSpec *spec, bool pty, unsigned rows, unsigned cols,
            Session **ret);
/* Starts the program; the pty.open reply comes once it was exec'd (or could not be). */
void pty_start(Session *p);
Session *pty_find(Context *m, const char *id);
/* The sandbox's sessions for inspect: [{id, argv, pty, rows, cols, state, attached, output_seq,
 * created}] (an empty array when there are none). */
json_object *pty_sessions_json(Sandbox *s);
unsigned pty_count_owned(Context *m, uid_t uid);

int pty_attach(Session *p, Connection *c, json_object *id, uint64_t from_seq, bool from_given, ProtoError *err);
int pty_detach(Session *p, Connection *c, ProtoError *err);
int pty_write(Session *p, Connection *c, json_object *id, const char *data, size_t n, bool eof, ProtoError *err);
int pty_resize(Session *p, unsigned rows, unsigned cols, ProtoError *err);
/* To the terminal's foreground process group (pipes: the program's process group). */
int pty_signal(Session *p, int sig, unsigned *ret_count, ProtoError *err);
/* SIGHUP, a grace, then cgroup.kill; the reply comes once nothing of the session is left. */
void pty_close(Session *p, Connection *c, json_object *id);

/* Hooks: a connection closed, a connection has room again, a sandbox is going, or is freed. */
void pty_connection_closed(Registry *reg, Connection *c);
void pty_resume_streams(Registry *reg, Connection *c);
void pty_sandbox_destroying(Sandbox *s);
void pty_free_all(Sandbox *s);
