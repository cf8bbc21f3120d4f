/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl: what the verb files share. Each verb is one static function in a verb-*.c file,
 * exported as a Verb and dispatched from the table in sandboxctl.c. */
#pragma once

#include <getopt.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"
#include "proto.h"
#include "sandbox.h"

/* The exit status of `run` when sandboxctl or sandboxd failed rather than the program (as env(1)
 * and docker do), so that it cannot be mistaken for the program's own status. */
#define EXIT_RUNNER_FAILED 125

typedef struct Verb {
        const char *name;
        const char *args;    /* the usage line after the verb's name */
        const char *summary; /* one line for the overview */
        const char *help;    /* options and notes, for `sandboxctl VERB --help` */
        int failure_status;  /* exit status when the verb returns a negative errno */
        /* argv[0] is the program name (for getopt's messages), options start at argv[1].
         * Returns the exit status (>= 0), or a negative errno after logging. */
        int (*run)(int argc, char *argv[]);
        /* Pairs of a request field and the option that sets it, NULL-ended: the daemon's errors
         * name the field ("'timeout_s' must be positive"), sandboxctl's name the option. */
        const char *const *field_options;
} Verb;

extern const Verb verb_network, verb_status, verb_hello, verb_health, verb_create, verb_list, verb_inspect,
        verb_destroy, verb_run, verb_kill, verb_reattach, verb_shell, verb_exec, verb_attach, verb_sweep, verb_top, verb_doctor, verb_call,
        verb_snapshot, verb_snapshots, verb_restore, verb_snapshot_delete, verb_cp, verb_cat, verb_ls, verb_rm;
extern const Verb verb_port, verb_image, verb_sessions, verb_session;

/* The options given before the verb (and --json/--socket after it): the only mutable globals. */
typedef struct GlobalArgs {
        const char *socket; /* NULL: libsandbox picks $SANDBOXD_SOCKET or the default */
        bool json;
        const Verb *verb; /* the verb being run */
} GlobalArgs;
extern GlobalArgs arg;

/* Long-only option values; verbs number theirs from ARG_VERB_FIRST. */
enum {
        ARG_JSON = 0x100,
        ARG_SOCKET,
        ARG_VERB_FIRST,
};

/* The options every verb accepts. */
#define COMMON_OPTIONS                                              \
        { "help", no_argument, NULL, 'h' },                         \
        { "json", no_argument, NULL, ARG_JSON },                    \
        { "socket", required_argument, NULL, ARG_SOCKET }

/* ---- common.c ---------------------------------------------------------------------------- */

int log_error_errno(int error, const char *fmt, ...) _printf_(2, 3);
#define log_error(...) log_error_errno(-EINVAL, __VA_ARGS__)
void log_info(const char *fmt, ...) _printf_(1, 2);

/* Prints the verb's help on stdout. */
void verb_help(const Verb *v);
/* Handles COMMON_OPTIONS and getopt's errors: 1 to go on, 0 after --help, negative on error. */
int common_option(const Verb *v, int c);
static inline bool is_common_option(int c) {
        return c == 'h' || c == ARG_JSON || c == ARG_SOCKET || c == '?';
}
/* For verbs without options of their own: parses argv and checks the number of positional
 * arguments (left from optind). Same return convention as common_option(). */
int parse_common_only(const Verb *v, int argc, char *argv[], int min_args, int max_args);
/* The same for verbs with a few simple options of their own: a flag (no argument) sets *flag,
 * an option with an argument stores it in *value. extra ends with a zeroed entry. */
#define VERB_OPTIONS_MAX 8
typedef struct VerbOption {
        const char *name;   /* the long name */
        int val;            /* the short letter, or a value from ARG_VERB_FIRST */
        const char **value; /* set for an option with an argument */
        bool *flag;         /* set for a flag */
} VerbOption;
int parse_verb_options(const Verb *v, int argc, char *argv[], const char *shortopts, const VerbOption *extra,
                       int min_args, int max_args);
int check_arg_count(const Verb *v, int argc, char *argv[], int min_args, int max_args);

/* Values given on the command line, validated here and added to obj as the protocol wants them.
 * opt names the option in error messages. */
int add_size(json_object *obj, const char *key, const char *opt, const char *value);
int add_duration(json_object *obj, const char *key, const char *opt, const char *value);
int add_cpus(json_object *obj, const char *key, const char *opt, const char *value);
int add_uint(json_object *obj, const char *key, const char *opt, const char *value);
/* The same, 0 allowed (a byte offset). */
int add_offset(json_object *obj, const char *key, const char *opt, const char *value);
int add_string(json_object *obj, const char *key, const char *value);
/* "K=V" into the env object, creating it on first use. */
int add_env(json_object **env, const char *assignment);
/* The first n bytes of path made absolute for the daemon (the current directory joined, "." and
 * empty components dropped); -EINVAL for a ".." after a name. */
int path_for_daemon(const char *path, size_t n, char **ret);
int add_mount(json_object **mounts, const char *spec);
/* --allow CIDR[:PORT[/tcp|/udp]] (repeatable) into *allow, checked by the daemon. */
int add_allow(json_object **allow, const char *entry);
/* --allow-sni NAME[:PORT] (repeatable) into *allow: {"name", "port", "match": "sni"}. */
int add_allow_sni(json_object **allow, const char *entry);
/* --network none, --egress all and --allow's entries into req's "network" (create, and run
 * without --sandbox): at most one of the three kinds. */
int add_network(json_object *req, const char *network, const char *egress, json_object *allow);
int check_sandbox_name(const char *name);
/* Adds obj[key] = child unless child is NULL or an empty object; takes child either way. */
void add_object_unless_empty(json_object *obj, const char *key, json_object *child);

static inline void sbx_client_freep(SbxClient **c) {
        sbx_client_free(*c);
}

json_object *request_new(const char *op);
/* --socket, else $SANDBOXD_SOCKET, else the default. */
const char *daemon_socket_path(void);
int daemon_connect(SbxClient **ret);
/* Sends request (taken) and waits for its final reply, ok or not. Logs transport errors. */
int daemon_call(SbxClient *c, json_object *request, json_object **ret_reply);
/* Called for each event line of the request; a negative return aborts the call. */
typedef int (*event_fn)(json_object *event, void *userdata);
int daemon_call_events(SbxClient *c, json_object *request, event_fn on_event, void *userdata,
                       json_object **ret_reply);
/* Says what went wrong talking to sandboxd (a negative errno of libsandbox); returns it. */
int log_transport_error(int r);
/* A sandbox as the user wrote it, as the daemon takes it ("USER/NAME" becomes "UID/NAME"). */
int sandbox_ref_for_daemon(const char *ref, char **ret);
/* 0 when the reply is ok; otherwise prints "sandboxctl: <code>: <message>" and fails. */
int reply_check(json_object *reply);
/* connect + call + (with --json) print the reply + reply_check. */
int daemon_request(json_object *request, json_object **ret_reply);
int daemon_request_events(json_object *request, event_fn on_event, void *userdata, json_object **ret_reply);

void print_json(json_object *o);
int read_all(int fd, char **ret, size_t *ret_len);

/* ---- format.c ---------------------------------------------------------------------------- */

#define FIELD_BUF 64

const char *json_str(json_object *o, const char *key);
bool json_number(json_object *o, const char *key, double *ret);
bool json_int(json_object *o, const char *key, int64_t *ret);
bool json_true(json_object *o, const char *key);
json_object *json_child(json_object *o, const char *key);

/* Human text for a member: "-" when absent or null; strings as they are. */
const char *fmt_size(char buf[static FIELD_BUF], json_object *o, const char *key);
const char *fmt_seconds(char buf[static FIELD_BUF], json_object *o, const char *key);
const char *fmt_value(char buf[static FIELD_BUF], json_object *o, const char *key);
/* "mem,pids,cpu" from an "enforced" object, "none" when nothing is. */
const char *fmt_enforced(char buf[static FIELD_BUF], json_object *enforced);

/* Text for a person, from a string that came from a sandbox, a client or the daemon: control
 * characters (C0, DEL, C1 as U+0080-U+009F, bidi and line separators) and invalid UTF-8 as \xNN
 * for each byte, a backslash doubled. text_escape() returns it malloc'd (NULL: no memory);
 * esc() keeps it in a ring of 16 (for printf arguments; NULL stays NULL). --json is never escaped. */
char *text_escape(const char *text);
const char *esc(const char *text);

/* "key:            value" lines (both escaped). */
void print_kv(const char *key, const char *fmt, ...) _printf_(2, 3);
/* A progress bar on stderr (a terminal), and its removal once done. */
void progress_bar(int64_t done, int64_t total, const char *text);
void progress_clear(void);
/* Every scalar member as "a.b.c: value", objects flattened; skips the envelope (id, ok). */
void print_flat(json_object *o, const char *prefix);

typedef struct Table Table;
Table *table_new(size_t n_columns, const char *const *headers);
Table *table_free(Table *t);
/* Cells are escaped (text_escape()). */
int table_add_row(Table *t, const char *const *cells);
void table_print(const Table *t);
static inline void table_freep(Table **t) {
        table_free(*t);
}
#define _cleanup_table_ _cleanup_(table_freep)
