/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl status, hello, health: what the daemon is, can enforce here, and how it is doing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxctl.h"

static int verb_hello_run(int argc, char *argv[]);
static int verb_health_run(int argc, char *argv[]);
static int verb_status_run(int argc, char *argv[]);

const Verb verb_hello = {
        .name = "hello",
        .args = "",
        .summary = "Show the daemon's protocol version and capabilities, as it sends them",
        .help = "Prints each member of the hello reply as \"key: value\".\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_hello_run,
};

const Verb verb_health = {
        .name = "health",
        .args = "",
        .summary = "Show the daemon's health counters, as it sends them",
        .help = "Prints each member of the health reply as \"key: value\".\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_health_run,
};

const Verb verb_status = {
        .name = "status",
        .args = "",
        .summary = "Show the daemon's version, the limits it can enforce on this host, and its health",
        .help = "With --json prints {\"hello\":{...},\"health\":{...}}, the two replies.\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_status_run,
};

static int simple_op(const Verb *v, int argc, char *argv[]) {
        _cleanup_json_ json_object *reply = NULL;
        int r = parse_common_only(v, argc, argv, 0, 0);

        if (r <= 0)
                return r;
        r = daemon_request(request_new(v->name), &reply);
        if (r < 0)
                return r;
        if (!arg.json)
                print_flat(reply, "");
        return 0;
}

static int verb_hello_run(int argc, char *argv[]) {
        return simple_op(&verb_hello, argc, argv);
}

static int verb_health_run(int argc, char *argv[]) {
        return simple_op(&verb_health, argc, argv);
}

/* ---- status ------------------------------------------------------------------------------ */

static const char *const controllers[] = { "memory", "pids", "cpu" };

/* 1 when some controller cannot be enforced. */
static int print_cgroup_capabilities(json_object *cgroup) {
        char key[32];
        int missing = 0;

        for (size_t i = 0; i < ELEMENTSOF(controllers); i++) {
                bool ok = json_true(cgroup, controllers[i]);
                snprintf(key, sizeof(key), "%s limits", controllers[i]);
                print_kv(key, "%s", ok ? "enforced" : "NOT enforceable on this host");
                missing |= !ok;
        }
        return missing;
}

/* "clone_into_cgroup=yes pidfd=yes ..." on one line. */
static void print_kernel_features(json_object *kernel) {
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        FILE *f;

        if (!json_object_is_type(kernel, json_type_object))
                return;
        f = open_memstream(&line, &size);
        if (!f)
                return;
        json_object_object_foreach(kernel, key, v)
                fprintf(f, "%s%s=%s", ftell(f) > 0 ? " " : "", key, json_object_get_boolean(v) ? "yes" : "no");
        if (fclose(f) == 0)
                print_kv("kernel features", "%s", line);
}

/* Whether create --root overlay works here, over the host's root and over an image (hello's
 * capabilities.root_overlay and its "image"; absent from an older daemon). */
static void print_root_overlay(json_object *o) {
        json_object *v = json_child(o, "available"), *img = json_child(o, "image");

        if (!v)
                return;
        if (json_object_get_boolean(v))
                print_kv("overlay roots", "yes (create --root overlay)");
        else
                print_kv("overlay roots", "no: %s", json_str(o, "error") ?: "?");
        if (!json_child(img, "available"))
                return;
        if (json_true(img, "available"))
                print_kv("image overlays", "yes (create --image NAME --root overlay)");
        else
                print_kv("image overlays", "no: %s", json_str(img, "error") ?: "?");
}

static void print_hello(json_object *hello) {
        json_object *caps = json_child(hello, "capabilities"), *peer = json_child(hello, "peer");
        char a[FIELD_BUF], b[FIELD_BUF], c[FIELD_BUF];

        print_kv("sandboxd", "%s (protocol %s)", fmt_value(a, hello, "version"), fmt_value(b, hello, "protocol"));
        print_kv("cgroup root", "%s", fmt_value(a, caps, "cgroup_root"));
        if (json_child(caps, "placement"))
                print_kv("placement", "%s", fmt_value(a, caps, "placement"));
        if (print_cgroup_capabilities(json_child(caps, "cgroup")))
                printf("%18s(such limits are refused unless --best-effort is given)\n", "");
        print_kernel_features(json_child(caps, "kernel"));
        print_root_overlay(json_child(caps, "root_overlay"));
        if (peer)
                print_kv("you", "uid %s, gid %s, pid %s", fmt_value(a, peer, "uid"), fmt_value(b, peer, "gid"),
                         fmt_value(c, peer, "pid"));
}

static void print_health(json_object *health) {
        /* Anyone but root and admins is told about their own only (scope "caller"). */
        const char *whose = strcmp(json_str(health, "scope") ?: "", "caller") == 0 ? " (yours)" : "";
        char buf[FIELD_BUF];

        print_kv("health", "%s", fmt_value(buf, health, "status"));
        print_kv("uptime", "%s", fmt_seconds(buf, health, "uptime_s"));
        print_kv("sandboxes", "%s%s", fmt_value(buf, health, "sandboxes"), whose);
        print_kv("runs", "%s%s", fmt_value(buf, health, "runs"), whose);
        print_kv("connections", "%s%s", fmt_value(buf, health, "connections"), whose);
}

static void print_status_json(json_object *hello, json_object *health) {
        _cleanup_json_ json_object *o = json_object_new_object();

        json_object_object_add(o, "hello", json_object_get(hello));
        json_object_object_add(o, "health", json_object_get(health));
        print_json(o);
}

static int verb_status_run(int argc, char *argv[]) {
        _cleanup_(sbx_client_freep) SbxClient *c = NULL;
        _cleanup_json_ json_object *hello = NULL, *health = NULL;
        int r = parse_common_only(&verb_status, argc, argv, 0, 0);

        if (r <= 0)
                return r;
        r = daemon_connect(&c);
        if (r < 0)
                return r;
        r = daemon_call(c, request_new("hello"), &hello);
        if (r < 0)
                return r;
        if (!sbx_reply_ok(hello)) {
                if (arg.json)
                        print_json(hello);
                return reply_check(hello);
        }
        r = daemon_call(c, request_new("health"), &health);
        if (r < 0)
                return r;
        if (arg.json)
                print_status_json(hello, health);
        if (reply_check(hello) < 0 || reply_check(health) < 0)
                return -EREMOTEIO;
        if (!arg.json) {
                print_hello(hello);
                print_health(health);
        }
        return 0;
}
