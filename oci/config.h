/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An OCI bundle's config.json (or an exec's process.json, or update's resources) turned into
 * sandboxd requests, and everything sandboxd cannot honour refused with an error that names the
 * field (issue #24, design oci-runtime.md 4.3 and 4.5). No I/O here except what a lookup
 * callback does, so that tests/oci/ can feed fixtures. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <sys/types.h>

/* Whether pid is the proxy of one of our containers (by the state directory and the process's
 * start time); 1 and the container id in *ret_id (malloc'd), 0 when not. */
typedef int (*oci_proxy_lookup_fn)(pid_t pid, char **ret_id, void *userdata);

typedef struct OciProcess {
        json_object *run; /* argv, env, env_defaults, cwd, user, umask, rlimits, no_timeout */
        bool terminal;
        unsigned rows, cols; /* consoleSize, 24x80 when absent */
} OciProcess;

typedef struct OciSpec {
        json_object *create; /* the create request: root, mounts, limits, network, hostname, ... */
        char *netns_path;    /* a network namespace to join (create's network.netns_fd), or NULL */
        char *root_relative; /* root.path as given when relative to the bundle (oci_root_open()), or NULL */
        OciProcess process;
        json_object *notes;  /* strings: what was ignored, for the log */
} OciSpec;

void oci_process_done(OciProcess *p);
void oci_spec_done(OciSpec *s);

/* config.json → *ret. bundle is the (resolved) bundle directory, against which relative paths
 * are taken. On a refusal: -EINVAL and *ret_error (malloc'd) naming the field. */
int oci_spec_from_config(json_object *config, const char *bundle, oci_proxy_lookup_fn lookup, void *userdata,
                         OciSpec *ret, char **ret_error);

/* An OCI process object (config.json's process, exec's --process file); prefix is the field
 * path for errors ("process"). notes may be NULL. */
int oci_process_from_json(json_object *process, const char *prefix, json_object *notes, OciProcess *ret,
                          char **ret_error);

/* linux.resources → a sandboxd limits object (memory, pids, cpus); prefix as above. */
int oci_limits_from_resources(json_object *resources, const char *prefix, json_object *notes,
                              json_object **ret_limits, char **ret_error);

/* Whether path names a process's namespace through procfs (/proc/PID/ns/..., /proc/self/...,
 * /proc/thread-self/...): 1 and the pid (0 for self) in *ret_pid. */
int oci_proc_ns_path(const char *path, pid_t *ret_pid);

/* Opens a network namespace file to join: a bind-mounted nsfs file (/run/netns/...), never a
 * magic link into /proc, never the host's own. Returns the fd or -errno with *ret_error. */
int oci_netns_open(const char *path, char **ret_error);

/* A relative root.path opened beneath the bundle directory (symlinks followed only within it,
 * never out of it): its resolved absolute path in *ret_path. -errno with *ret_error. */
int oci_root_open(const char *bundle, const char *relative, char **ret_path, char **ret_error);

/* The process's program looked up in rootfs as runc does at create (process.args[0], in the
 * run's PATH unless it has a slash; resolved in the root), so that a missing one fails create
 * with runc's words and engines say 127: -ENOENT with *ret_error. One a bind (mounts: create's,
 * their targets) may bring, or one that cannot be looked up, passes. */
int oci_exec_check(const char *rootfs, json_object *run, json_object *mounts, char **ret_error);
