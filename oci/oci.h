/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd-oci: what the verb files share. A runc-compatible command line (the verbs podman's
 * conmon and containerd's runc shim call) in front of sandboxd: each container is a sandbox, its
 * process a run held by a small proxy that stays the engine's child. design/oci-runtime.md. */
#pragma once

#include <dirent.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <sys/types.h>

#include "macro.h"
#include "proto.h"
#include "sandbox.h"

#define OCI_DEFAULT_ROOT "/run/sandboxd-oci"

/* The global flags runc takes (and two of ours): the only mutable globals. */
typedef struct OciArgs {
        const char *root;           /* --root: the state directory */
        const char *log;            /* --log: where errors go for the engine */
        bool log_json;              /* --log-format json */
        bool debug;                 /* --debug */
        const char *cgroup_manager; /* --cgroup-manager / --systemd-cgroup: recorded only */
        const char *socket;         /* --socket: sandboxd's socket (default $SANDBOXD_SOCKET) */
        bool best_effort;           /* --best-effort, or --cgroup-manager disabled */
} OciArgs;
extern OciArgs oci_arg;

typedef struct OciVerb {
        const char *name;
        const char *usage;
        int (*run)(int argc, char *argv[]); /* argv[0] is the verb; returns the exit status */
} OciVerb;

extern const OciVerb oci_verb_create, oci_verb_start, oci_verb_state, oci_verb_kill, oci_verb_delete,
        oci_verb_exec, oci_verb_ps, oci_verb_pause, oci_verb_resume, oci_verb_update, oci_verb_features,
        oci_verb_list;

/* ---- log.c: runc's error format on --log, and stderr ---------------------------------------- */
int oci_log_open(void);
/* The --log fd (a proxy keeps it), or -1. */
int oci_log_fd(void);
/* Writes an error line to --log (JSON: {"level":"error","msg":..,"time":..}) and to stderr;
 * returns 1, the exit status of a failed verb. */
_printf_(1, 2) int oci_error(const char *fmt, ...);
_printf_(1, 2) void oci_warn(const char *fmt, ...);
/* Informational, to --log only (and stderr with --debug). */
_printf_(1, 2) void oci_info(const char *fmt, ...);
void oci_log_notes(json_object *notes);

/* ---- client.c: calls to sandboxd ------------------------------------------------------------ */
int oci_connect(SbxClient **ret);
/* Sends request (taken) with fds; on an error reply returns -EPROTO and *ret_error says what
 * sandboxd said ("code: message (field)"); -errno when the call failed. *ret_reply on success. */
int oci_call(SbxClient *c, json_object *request, const int *fds, size_t n_fds, json_object **ret_reply,
             char **ret_error);
/* One request on a connection of its own; an error is logged (with what) and 1 returned. */
int oci_call_simple(json_object *request, const char *what, json_object **ret_reply);

/* ---- pidfile ------------------------------------------------------------------------------ */
/* The pid in decimal without a newline (go-runc's ReadPidFile), written then renamed. */
int oci_write_pid_file(const char *path, pid_t pid);

static inline void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}

static inline void sbx_client_freep(SbxClient **c) {
        sbx_client_free(*c);
}

/* ---- state.c: <root>/<id>/ ------------------------------------------------------------------
 * state.json (what create recorded), fifo (the proxy waits on it until start: present means
 * "created"), run_id (the run the proxy holds, once started). The status is computed from those
 * and the proxy's pid and start time, never stored. */
typedef struct OciState {
        char *id;
        char *sandbox;   /* sandboxd's id */
        char *bundle;
        pid_t pid;       /* the proxy */
        unsigned long long start_time; /* its /proc/PID/stat starttime: against pid reuse */
        char *created;   /* RFC 3339 */
        char *cgroups_path;
        json_object *annotations;
} OciState;

void oci_state_done(OciState *s);
bool oci_id_valid(const char *id);
/* <root>/<id>[/name], malloc'd. */
char *oci_state_path(const char *id, const char *name);
int oci_state_save(const OciState *s);
/* -ENOENT when the container does not exist. */
int oci_state_load(const char *id, OciState *ret);
/* The starttime of pid (field 22 of /proc/PID/stat); -ESRCH when gone or a zombie. */
int oci_proc_start_time(pid_t pid, unsigned long long *ret);
bool oci_proxy_alive(pid_t pid, unsigned long long start_time);
/* "created", "running" or "stopped". */
const char *oci_state_status(const OciState *s);
/* Removes the state of containers whose proxy has ended and whose bundle is gone: an engine
 * that removed a container without a delete leaves nothing behind (create calls it). */
void oci_state_sweep(void);
/* The run id the proxy recorded (malloc'd), or NULL. */
char *oci_state_run_id(const char *id);
/* oci_proxy_lookup_fn: pid is one of our proxies (a container's, by state.json and start time,
 * or any process running this very binary: exec proxies). */
int oci_lookup_proxy(pid_t pid, char **ret_id, void *userdata);
/* Removes <root>/<id> and what is in it. */
int oci_state_remove(const char *id);

/* ---- console.c -------------------------------------------------------------------------------- */
/* Sends fd to the engine's --console-socket (SCM_RIGHTS), as runc and crun do. */
int oci_console_send(const char *socket_path, int fd);
/* A host pty pair: the master for the engine at create time (before the program exists), the
 * replica raw, relayed by the proxy to the terminal sandboxd opens in the sandbox at start. */
int oci_pty_pair(unsigned rows, unsigned cols, int *ret_master, int *ret_replica);

/* ---- proxy.c ---------------------------------------------------------------------------------- */
typedef struct OciProxy {
        const char *id;             /* the container's (its state dir), NULL for an exec */
        const char *sandbox;
        json_object *run;           /* the process's run fields (borrowed) */
        bool terminal;
        unsigned rows, cols;
        unsigned n_extra;           /* --preserve-fds: fds 3..3+n-1 go along */
        int conn;                   /* the connection to sandboxd */
        int fifo;                   /* created state: the fifo's read end, else -1 */
        int relay;                  /* create with a terminal: the host replica, else -1 */
        const char *console_socket; /* exec with a terminal: where the master goes */
        int ready;                  /* written "0\n" once started, "1 why\n" when not; -1: none */
} OciProxy;

/* Closes every fd from `from` up, except those in keep[]. */
void oci_close_fds_from(int from, const int *keep, size_t n_keep);
/* Waits for start (when p->fifo >= 0), sends the run, mirrors its end: never returns. */
_noreturn_ void oci_proxy_main(OciProxy *p);
