/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one start path of runs and sessions (launch.c): the child cgroup, the fds, the helper, the
 * watch on the helper and on its report socket, and the failure report. A Run or a Session embeds
 * a Launch and is told what happens through its LaunchOps. */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "proto.h"
#include "spawn.h"

typedef struct Sandbox Sandbox;

/* The pipes and report socket made for the helper: [0] is the read end, [1] the write end; the
 * child's ends are in[0], out[1], err[1], rep[1]. -1 where not made. */
typedef struct LaunchFds {
        int in[2], out[2], err[2], rep[2];
} LaunchFds;

/* What the owner is told; userdata is the one given to launch_init(). */
typedef struct LaunchOps {
        /* The helper is spawned: the owner takes the ends it watches from f (TAKE_FD: output,
         * input) and adds its own sources; what it leaves is closed. */
        int (*watch)(void *userdata, LaunchFds *f);
        /* A report of the helper (spawn.h); fd came with it (or -1): the owner's, to keep or close. */
        void (*report)(void *userdata, const SpawnReport *rep, int fd);
        /* The report socket is at its end, no failure said (a direct helper exec'd). May be NULL. */
        void (*report_eof)(void *userdata);
        /* The helper was reaped (child_source is gone). */
        void (*helper_exit)(void *userdata, const siginfo_t *si);
} LaunchOps;

typedef struct Launch {
        Sandbox *sandbox;
        const LaunchOps *ops;
        void *userdata;
        char cg_name[32];       /* <kind>-<n> below the sandbox's cgroup */
        int cg_fd;
        int kill_fd;            /* its cgroup.kill, open from the start: a kill needs no new fd */
        pid_t pid;              /* the helper that joins the sandbox */
        int pidfd;
        int report_fd;          /* the helper's reports (spawn.h) */
        sd_event_source *report_source, *child_source;
        sd_event_source *exit_retry;  /* taken back direct: its end not readable yet (pidfd.h) */
        unsigned exit_tries;
        bool direct;            /* the helper becomes the command (RunParams.direct) */
        pid_t inner_pid;        /* direct: the command's pid inside, where known before (a warm helper's); else 0 */
        WarmHelper warm;        /* the one waiting in the cgroup taken (sandbox_spare_take()), until used */
} Launch;

/* What to start. */
typedef struct LaunchSpec {
        const char *kind;       /* "run", "pty": the cgroup is named <kind>-<n> */
        uint64_t memory, pids;  /* the command's limits; 0: the sandbox's (pids: none on its cgroup) */
        uint64_t file_size, open_files; /* its rlimits; 0: the sandbox's */
        bool pipes;             /* stdin, stdout and stderr on pipes (else a terminal, the helper's) */
        bool via_helper;        /* through the exec'd run helper where the daemon has one; else a clone */
        bool keep;              /* outlives the daemon (RunParams.outlive_daemon): direct only where the
                                 * kernel keeps its end with its pidfd (pidfd.h), else only its
                                 * parent, a helper, could read it */
        bool file_helper;       /* sandboxd-file-helper instead (file-op.c): exec'd, never a clone */
        const int *stderr_fd;   /* the helper's fd 2 instead of the stderr pipe (file.read's sink), or NULL */
        const int *stdio;       /* the command's 0..2 (a run's "stdio": the client's), or NULL */
        bool nofile_given, fsize_given; /* the run's rlimits name NOFILE / FSIZE (params->rl): the
                                         * sandbox's limit is not set over them */
        RunParams *params;      /* the owner's part (argv, envp, cwd, user, terminal, rl_cpu); the rest
                                 * (fds, cgroup, rlimit guards, signals, filter) is filled here */
        /* What the failure report says first: the cgroup, the fds, the rest could not be made. */
        const char *what_cgroup, *what_fds, *what_start;
} LaunchSpec;

void launch_init(Launch *l, Sandbox *s, const LaunchOps *ops, void *userdata);
/* The cgroup, the fds, the helper, the watches. < 0 with err set (SBX_E_SPAWN_FAILED): the owner
 * answers with it, then calls launch_abort(). */
int launch_start(Launch *l, const LaunchSpec *spec, ProtoError *err);
/* The name the next launch_start() of that kind in s gives its cgroup ("run-8"): what a run's note
 * records before it starts (run-record.h). */
const char *launch_next_cgroup_name(Sandbox *s, const char *kind, char *buf, size_t len);
/* A run taken back after a restart (run_adopt()): its cgroup (cg_fd) and its helper's report
 * socket, both taken, watched; the helper is not our child, its end is the socket's EOF
 * (ops->report_eof) rather than a pidfd's, as launch_adopt() has it for a session. */
int launch_adopt_reports(Launch *l, const char *cg_name, int cg_fd, int report_fd);
/* A direct run taken back (launch_adopt_reports(), and the command's pidfd, now l's): not our
 * child, its end is the pidfd's POLLIN, and how it ended is read from the pidfd
 * (pidfd_exit_status()); ops->helper_exit() gets that as a siginfo, or one with si_code 0 where
 * it could not be read. */
int launch_adopt_direct(Launch *l, const char *cg_name, int cg_fd, int report_fd, int pidfd);
/* After a failed start: the helper (ours, unreaped) killed and waited for, the cgroup removed. */
void launch_abort(Launch *l);
/* Reads the reports the helper left (ops->report, then ops->report_eof at the end). */
void launch_collect_reports(Launch *l);
/* A helper an earlier daemon started, taken back after a restart: its cgroup (by name, below
 * the sandbox's), its pidfd (not our child: its end is seen as the pidfd's POLLIN) and its
 * report socket, both now l's. ops->helper_exit() then gets an empty siginfo. */
int launch_adopt(Launch *l, const char *cg_name, int pidfd, int report_fd);
/* Its fds and sources closed (the cgroup stays). */
void launch_done(Launch *l);
