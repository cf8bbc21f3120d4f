/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A run request (or a session's) read into a RunSpec (run-spec.c). */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include <sys/resource.h>

#include "identity.h"
#include "spawn.h"
#include "proto.h"

typedef struct Sandbox Sandbox;

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
        uint64_t file_size;     /* RLIMIT_FSIZE; 0: the sandbox's */
        uint64_t open_files;    /* RLIMIT_NOFILE; 0: the sandbox's */
        bool stream;            /* output as events while it is produced */
        SandboxUser user;       /* unset: the sandbox's */
        /* "user": {"uid", "gid"}: ids of the sandbox's user namespace (user is then ROOT for uid 0,
         * else SANDBOX); ids_set false: the user's own (0/0 or 1000/1000) */
        bool ids_set;
        uint32_t uid, gid;
        uint32_t groups[RUN_GROUPS_MAX]; /* "user.groups": its supplementary gids */
        size_t n_groups;
        /* "capabilities": the five sets exactly (caps_set), instead of what the user has */
        bool caps_set;
        IdentityCaps caps;
        int umask;              /* "umask"; -1: none given (the helper's, 022) */
        bool no_timeout;        /* "no_timeout": no wall-clock limit */
        bool env_exact;         /* "env_defaults": false: no PATH/HOME added */
        bool cwd_outside;       /* cwd is not /work or beneath: only where the root is the sandbox's */
        /* "stdio" (n_stdio == 3) or "tty": the command's fds are the client's (stdio_fd, dups of
         * the line's, /dev/null for null) or a terminal whose master goes to the client; no
         * capture. extra_fd become its fds 3, 4, ... ("extra_fds"). All owned by the spec. */
        size_t n_stdio;
        int stdio_fd[3];
        size_t n_extra;
        int extra_fd[RUN_EXTRA_FDS_MAX];
        bool tty;
        unsigned short rows, cols;
        /* "rlimits": bit r of rlimit_mask set for RLIMIT_r given (rlimit[r]) */
        uint32_t rlimit_mask;
        struct rlimit rlimit[RUN_RLIMITS_MAX];
        /* "rlimits_lower": one above the run's maximum is lowered to it (bit r of rlimit_lowered) */
        bool rlimits_lower;
        uint32_t rlimit_lowered;
        /* "pid_namespace": "own": the command is pid 1 of a pid namespace of its own, nested in
         * the sandbox's (a container's process, as runc has it) */
        bool own_pidns;
} RunSpec;

/* With "stdio" or "tty": the client's fds or terminal, nothing captured. */
static inline bool run_spec_own_stdio(const RunSpec *spec) {
        return spec->n_stdio > 0 || spec->tty;
}

/* The optional "user" field of a create or run request. Leaves *ret alone when absent. */
int sandbox_user_parse(json_object *req, SandboxUser *ret, ProtoError *err);
/* Checks a client's environment object: names without '=', string values, at most 1024. */
int sandbox_env_check(json_object *env, ProtoError *err);
/* Parses a run request into spec (sandbox-independent checks). */
int run_spec_parse(json_object *req, uint64_t max_stdin, RunSpec *spec, ProtoError *err);
/* "stdio" and "extra_fds": the line's fds they name, type-checked (SBX_FD_STDIO) and duplicated
 * into spec; a fd of the line that no field names is refused. After run_spec_parse(). */
int run_spec_take_fds(json_object *req, const int *fds, size_t n_fds, RunSpec *spec, ProtoError *err);
void run_spec_done(RunSpec *spec);
/* {"NOFILE": [soft, hard], ...}: the rlimits "rlimits_lower" lowered, as set; NULL for none. */
json_object *run_spec_rlimits_lowered(const RunSpec *spec);
/* What a run's output may take in the daemon, up to its reply (both streams at their cap, as
 * base64), and its stdin. */
uint64_t run_spec_held(const RunSpec *spec);
/* Fills sandbox defaults and checks against sandbox limits. */
int run_spec_resolve(RunSpec *spec, Sandbox *s, ProtoError *err);
