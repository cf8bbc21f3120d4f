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
#include "output.h"
#include "proto.h"

typedef struct Sandbox Sandbox;
typedef struct Context Context;
typedef struct Connection Connection;
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

typedef struct RunSpec {
        char **argv;
        char **envp;
        char *cwd;
        char *stdin_data;
        size_t stdin_len;
        uint64_t timeout_usec;
        uint64_t cpu_usec;      /* 0: none */
        uint64_t output_bytes;
        uint64_t memory;        /* 0: the sandbox's */
        uint64_t pids;          /* 0: the sandbox's */
        bool stream;            /* output as events while it is produced */
        SandboxUser user;       /* unset: the sandbox's */
} RunSpec;

/* A streamed output's trailing bytes that may be the start of a UTF-8 character cut by the
 * read: held back until the next chunk, so that text stays text. */
typedef struct StreamCarry {
        char bytes[4];
        size_t len;
} StreamCarry;

typedef struct Run {
        Sandbox *sandbox;
        Connection *conn;
        json_object *req_id;
        char id[24];
        char cg_name[32];
        RunSpec spec;
        int cg_fd;
        int kill_fd;            /* its cgroup.kill, open from the start: a kill needs no new fd */
        pid_t pid;              /* the helper that joins the sandbox */
        int pidfd;
        int main_pidfd;         /* the command itself, once started */
        int report_fd;
        int out_fd[2];
        int stdin_fd;
        size_t stdin_off;
        Output out[2];
        StreamCarry carry[2];
        uint64_t seq;           /* of the next output event */
        bool paused;            /* not reading its pipes until the client catches up */
        sd_event_source *child_source, *report_source, *out_source[2], *stdin_source;
        sd_event_source *timeout_source, *cpu_source;
        uint64_t timeout_left;  /* while its sandbox is frozen: what was left of the timeout */
        bool timeout_paused;
        uint64_t start_usec;
        uint64_t sandbox_pids_max_events; /* the sandbox's pids.events "max" when it started */
        uint64_t reserved;      /* in conn->run_reserved until it ends: run_spec_held() */
        RunReason forced;       /* what we did to it: timeout, cpu_limit, killed, destroyed */
        bool in_flight, started, exited, finished;
        bool answered;          /* told teardown_stuck already (run_answer_stuck()): nothing more is sent */
        bool direct;            /* the helper becomes the command (RunParams.direct) */
        int wait_code, wait_status; /* siginfo si_code/si_status of the command */
        int fail_step, fail_errno;
        struct Run *next, *prev;
} Run;

/* The optional "user" field of a create or run request. Leaves *ret alone when absent. */
int sandbox_user_parse(json_object *req, SandboxUser *ret, ProtoError *err);
/* Parses a run request into spec (sandbox-independent checks). */
int run_spec_parse(json_object *req, uint64_t max_stdin, RunSpec *spec, ProtoError *err);
void run_spec_done(RunSpec *spec);
/* What a run's output may take in the daemon, up to its reply (both streams at their cap, as
 * base64), and its stdin. */
uint64_t run_spec_held(const RunSpec *spec);
/* Fills sandbox defaults and checks against sandbox limits. */
int run_spec_resolve(RunSpec *spec, Sandbox *s, ProtoError *err);

int run_new(Sandbox *s, Connection *c, json_object *id, RunSpec *spec, Run **ret);
/* Starts a run whose sandbox is ready; on failure the reply has been sent. */
void run_start(Run *r);

/* A sandbox frozen for a snapshot: nothing of its runs can run, so their wall-clock timeouts stop
 * while it is frozen and go on from where they were when it is thawed. */
void run_timeouts_pause(Sandbox *s);
void run_timeouts_resume(Sandbox *s);

/* A run's (or a session's) pipes and report socket as made for its helper: [0] is the read end,
 * [1] the write end; the child's ends are in[0], out[1], err[1], rep[1]. -1 where not made. */
typedef struct RunFds {
        int in[2], out[2], err[2], rep[2];
} RunFds;
#define RUN_FDS_NONE ((RunFds) { { -1, -1 }, { -1, -1 }, { -1, -1 }, { -1, -1 } })
void run_fds_close_child(RunFds *f);
void run_fds_close_all(RunFds *f);

/* The second guard (rlimits where a cgroup controller is missing), the signals to reset and the
 * seccomp filter of a command started in s; pids/memory 0: the sandbox's limits. */
struct RunParams;
void run_params_guard(Sandbox *s, uint64_t pids, uint64_t memory, struct RunParams *p);
/* Kills the run's cgroup (reason given) or signals its main process. */
int run_kill(Run *r, int sig, RunReason why);
/* Its sandbox's teardown is stuck with its processes (THREATS DMN-06): the client is told now, with
 * err, rather than when the kernel lets them die; the run itself ends later, silently. */
void run_answer_stuck(Run *r, const ProtoError *err);
Run *run_free(Run *r);
Run *manager_find_run(Context *m, const char *id);
/* The connection has room again: streaming runs it paused read their pipes again. */
void run_resume_streams(Registry *reg, Connection *c);
