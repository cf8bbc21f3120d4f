/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A run: one command in a sandbox, in its own child cgroup, with captured output, a timeout, a
 * CPU budget and an exact account of how it ended. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "identity.h"
#include "launch.h"
#include "output.h"
#include "proto.h"
#include "reply.h"
#include "run-capture.h"
#include "run-record.h"
#include "run-spec.h"
#include "sandbox.h"

typedef struct Sandbox Sandbox;
typedef struct Context Context;
typedef struct Registry Registry;

typedef enum RunReason {
        REASON_NONE,
        REASON_EXITED,
        REASON_SIGNALED,
        REASON_TIMEOUT,
        REASON_CPU_LIMIT,
        REASON_OOM,
        REASON_KILLED,
        REASON_DESTROYED,
} RunReason;

/* A streamed output's trailing bytes that may be the start of a UTF-8 character cut by the
 * read: held back until the next chunk, so that text stays text. */
typedef struct StreamCarry {
        char bytes[4];
        size_t len;
} StreamCarry;

typedef struct Run {
        Sandbox *sandbox;
        SandboxMember member;   /* in sandbox->members from run_new() to run_free() */
        RunNote note;           /* in runs.log while in flight (run-record.h) */
        Reply *reply;           /* answers the run request */
        Hook close_hook;        /* its client went: it is killed (pending: freed) */
        Hook writable_hook;     /* its client has room again: a paused stream reads on */
        char id[24];
        RunSpec spec;
        Launch launch;          /* its cgroup, its helper, the helper's reports */
        int main_pidfd;         /* the command itself, once started */
        int tty_master;         /* a "tty" run's terminal, until it goes to the client with "started" */
        int out_fd[2];
        int stdin_fd;
        size_t stdin_off;
        Output out[2];
        StreamCarry carry[2];
        uint64_t seq;           /* of the next output event */
        bool paused;            /* not reading its pipes until the client catches up */
        sd_event_source *out_source[2], *stdin_source;
        sd_event_source *timeout_source, *cpu_source;
        uint64_t timeout_left;  /* while its sandbox is frozen: what was left of the timeout */
        bool timeout_paused;
        uint64_t start_usec;
        uint64_t end_usec;      /* when the command ended, if its helper said (SpawnReport) */
        uint64_t sandbox_pids_max_events; /* the sandbox's pids.events "max" when it started */
        uint64_t reserved;      /* accounted on its reply until it ends: run_spec_held() */
        RunReason forced;       /* what we did to it: timeout, cpu_limit, killed, destroyed */
        bool in_flight, started, exited, finished;
        bool answered;          /* told teardown_stuck already (run_answer_stuck()): nothing more is sent */
        /* Kept (a recorded sandbox, a daemon with an fd store): its capture in a memfd, its pipe
         * ends, report socket and capture in the fd store (r.<id>.out, .err, .in, .rep, .cap), so
         * that it outlives the daemon and the next one takes it back (run_adopt()). */
        bool kept, adopted;
        /* Which of store_what[] (bit i) may still be in the fd store: only those are removed
         * when it ends (each message costs the service manager a look at its whole store). */
        uint8_t stored;
        bool attached;          /* reply is a run.attach's: its client going detaches, not kills */
        bool stdin_lost;        /* taken back with stdin not all written: the rest is lost */
        Capture capture;
        CaptureAccount acct;
        /* With no client (taken back, or its attached client gone): events are dropped, the
         * final reply kept for run.attach (run_result_keep). */
        ReplySink keep_sink;
        Reply *keep_reply;
        int wait_code, wait_status; /* siginfo si_code/si_status of the command */
        int fail_step, fail_errno;
        struct Run *next, *prev;
} Run;

int run_new(Sandbox *s, Reply *reply, RunSpec *spec, Run **ret);
/* Starts a run whose sandbox is ready; on failure the reply has been sent. */
void run_start(Run *r);

/* Kills the run's cgroup (reason given) or signals its main process. */
int run_kill(Run *r, int sig, RunReason why);
/* Its sandbox's teardown is stuck with its processes (THREATS DMN-06): the client is told now, with
 * err, rather than when the kernel lets them die; the run itself ends later, silently. */
void run_answer_stuck(Run *r, const ProtoError *err);
Run *run_free(Run *r);
Run *manager_find_run(Context *m, const char *id);

/* At restore, in a sandbox that kept its processes: the run of this runs.log note taken back from
 * the fd store (its capture, pipes, report socket) and its cgroup, its timeout re-armed from the
 * stored deadline. 0; -ENOENT: nothing of it was stored; else -errno with *ret_lost (a new array:
 * "capture", "stdout", ...) and *ret_why saying what could not be kept. What it took of the store
 * is closed and removed from it on failure. */
int run_adopt(Sandbox *s, json_object *note, json_object **ret_lost, const char **ret_why);
/* Once runs.log is open again: the start notes of the runs s took back. */
void run_note_adopted(Sandbox *s);

/* run.attach: reply becomes the run's client; it is sent what it lacks of each stream (from[i]:
 * the bytes it has), then the rest as it comes and the final reply. */
int run_attach(Run *r, Reply *reply, const uint64_t from[2], ProtoError *err);
/* run.attach of an id that is neither in flight nor kept: not_found, saying so where a restart
 * interrupted that run of one of peer's sandboxes (its interrupted_runs). Always < 0. */
int run_gone(Context *ctx, const ReplyPeer *peer, const char *run_id, ProtoError *err);
