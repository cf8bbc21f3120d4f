/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A run request (or a session's) read into a RunSpec (run-spec.c). */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "identity.h"
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
} RunSpec;

/* The optional "user" field of a create or run request. Leaves *ret alone when absent. */
int sandbox_user_parse(json_object *req, SandboxUser *ret, ProtoError *err);
/* Checks a client's environment object: names without '=', string values, at most 1024. */
int sandbox_env_check(json_object *env, ProtoError *err);
/* Parses a run request into spec (sandbox-independent checks). */
int run_spec_parse(json_object *req, uint64_t max_stdin, RunSpec *spec, ProtoError *err);
void run_spec_done(RunSpec *spec);
/* What a run's output may take in the daemon, up to its reply (both streams at their cap, as
 * base64), and its stdin. */
uint64_t run_spec_held(const RunSpec *spec);
/* Fills sandbox defaults and checks against sandbox limits. */
int run_spec_resolve(RunSpec *spec, Sandbox *s, ProtoError *err);
