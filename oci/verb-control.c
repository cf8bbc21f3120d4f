/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* state, kill, delete, ps, pause, resume, update, features, list: each a sandboxd op on the
 * container's sandbox, or the state directory alone. */

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "oci.h"
#include "util.h"

static int load_or_fail(const char *id, OciState *s) {
        int r = oci_state_load(id, s);
        if (r == -ENOENT)
                return oci_error("container %s does not exist", id);
        if (r < 0)
                return oci_error("container %s: its state cannot be read: %s", id, strerror(-r));
        return 0;
}

static json_object *sandbox_request(const char *op, const char *sandbox) {
        json_object *req = json_object_new_object();
        json_object_object_add(req, "op", json_object_new_string(op));
        json_object_object_add(req, "sandbox", json_object_new_string(sandbox));
        return req;
}

/* Signals the proxy itself, through a pidfd taken before its start time is checked: never
 * another process that got its pid. */
static int signal_proxy(const OciState *s, int sig) {
        _cleanup_close_ int pidfd = (int) syscall(SYS_pidfd_open, s->pid, 0);

        if (pidfd < 0 || !oci_proxy_alive(s->pid, s->start_time))
                return -ESRCH;
        return syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) < 0 ? -errno : 0;
}

/* ---- state ----------------------------------------------------------------------------------- */

static bool sandbox_frozen(const char *sandbox) {
        _cleanup_(sbx_client_freep) SbxClient *c = NULL;
        _cleanup_json_ json_object *reply = NULL;
        json_object *sb, *f;

        if (oci_connect(&c) < 0 || oci_call(c, sandbox_request("inspect", sandbox), NULL, 0, &reply, NULL) < 0)
                return false;
        return json_object_object_get_ex(reply, "sandbox", &sb) && json_object_object_get_ex(sb, "frozen", &f) &&
               json_object_get_boolean(f);
}

static int state_main(int argc, char *argv[]) {
        _cleanup_json_ json_object *o = json_object_new_object();
        OciState s = {};

        if (argc != 2)
                return oci_error("state: expects exactly one container id");
        if (load_or_fail(argv[1], &s) != 0)
                return 1;
        const char *status = oci_state_status(&s);
        if (strcmp(status, "running") == 0 && sandbox_frozen(s.sandbox))
                status = "paused";
        json_object_object_add(o, "ociVersion", json_object_new_string("1.0.2"));
        json_object_object_add(o, "id", json_object_new_string(s.id));
        json_object_object_add(o, "status", json_object_new_string(status));
        json_object_object_add(o, "pid", json_object_new_int64(strcmp(status, "stopped") == 0 ? 0 : s.pid));
        json_object_object_add(o, "bundle", json_object_new_string(s.bundle ? s.bundle : ""));
        json_object_object_add(o, "created", json_object_new_string(s.created ? s.created : ""));
        json_object_object_add(o, "owner", json_object_new_string(""));
        json_object_object_add(o, "annotations", s.annotations ? json_object_get(s.annotations) : json_object_new_object());
        json_object_object_add(o, "sandbox", json_object_new_string(s.sandbox ? s.sandbox : ""));
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
        oci_state_done(&s);
        return 0;
}

const OciVerb oci_verb_state = { "state", "ID", state_main };

/* ---- kill ------------------------------------------------------------------------------------ */

static int kill_running(const OciState *s, int sig, bool all) {
        _cleanup_(sbx_client_freep) SbxClient *c = NULL;
        _cleanup_free_ char *run_id = oci_state_run_id(s->id), *err = NULL;
        json_object *req;
        int r;

        /* Started but not yet recorded: the proxy forwards what it gets (and KILL ends it, which
         * ends the run with its connection). */
        if (!all && !run_id) {
                (void) signal_proxy(s, sig);
                return 0;
        }
        if ((r = oci_connect(&c)) < 0)
                return oci_error("kill: cannot reach sandboxd: %s", strerror(-r));
        if (all) {
                req = sandbox_request("sandbox.signal", s->sandbox);
        } else {
                req = json_object_new_object();
                json_object_object_add(req, "op", json_object_new_string("kill"));
                json_object_object_add(req, "run_id", json_object_new_string(run_id));
        }
        json_object_object_add(req, "signal", json_object_new_int(sig));
        r = oci_call(c, req, NULL, 0, NULL, &err);
        /* A run that has just ended is not_found: as runc, that is no error. */
        if (r == -EPROTO && err && strncmp(err, "not_found", 9) == 0)
                return 0;
        if (r == -EPROTO)
                return oci_error("kill: %s", err ? err : "refused");
        return r < 0 ? oci_error("kill: %s", strerror(-r)) : 0;
}

static int kill_main(int argc, char *argv[]) {
        static const struct option opts[] = { { "all", no_argument, NULL, 'a' }, {} };
        OciState s = {};
        bool all = false;
        int c, sig = SIGTERM, r;

        while ((c = getopt_long(argc, argv, "a", opts, NULL)) >= 0)
                if (c == 'a')
                        all = true;
                else
                        return oci_error("kill: unknown option");
        if (optind >= argc || argc - optind > 2)
                return oci_error("kill: expects ID [SIGNAL]");
        if (argc - optind == 2 && (sig = signal_from_string(argv[optind + 1])) <= 0)
                return oci_error("kill: unknown signal \"%s\"", argv[optind + 1]);
        if (load_or_fail(argv[optind], &s) != 0)
                return 1;
        const char *status = oci_state_status(&s);
        r = 0;
        if (strcmp(status, "created") == 0)
                (void) signal_proxy(&s, sig);
        else if (strcmp(status, "running") == 0)
                r = kill_running(&s, sig, all);
        /* The spec: a signal to a container neither created nor running is an error. runc's
         * words, which containerd's shim matches to "process already finished"; with --all
         * runc ignores it (the shim's kill of what is left after the init ended). */
        else if (!all)
                r = oci_error("kill: container %s: container not running", s.id);
        oci_state_done(&s);
        return r;
}

const OciVerb oci_verb_kill = { "kill", "[--all] ID [SIGNAL]", kill_main };

/* ---- delete ---------------------------------------------------------------------------------- */

static int delete_main(int argc, char *argv[]) {
        static const struct option opts[] = { { "force", no_argument, NULL, 'f' }, {} };
        _cleanup_(sbx_client_freep) SbxClient *c = NULL;
        _cleanup_free_ char *err = NULL;
        OciState s = {};
        bool force = false;
        int opt, r;

        while ((opt = getopt_long(argc, argv, "f", opts, NULL)) >= 0)
                if (opt == 'f')
                        force = true;
                else
                        return oci_error("delete: unknown option");
        if (optind != argc - 1)
                return oci_error("delete: expects exactly one container id");
        /* runc's and crun's rule: --force of a container that is not there is done (an engine's
         * cleanup may come after conmon's own delete); without it, it is an error (the spec's). */
        if (force && (r = oci_state_load(argv[optind], &s)) == -ENOENT)
                return 0;
        if (force && r < 0)
                return oci_error("container %s: its state cannot be read: %s", argv[optind], strerror(-r));
        if (!force && load_or_fail(argv[optind], &s) != 0)
                return 1;
        /* crun's rule: a created container is deleted as with --force, a running one needs it. */
        if (!force && strcmp(oci_state_status(&s), "running") == 0) {
                oci_state_done(&s);
                return oci_error("cannot delete container %s that is not stopped: running", argv[optind]);
        }
        if ((r = oci_connect(&c)) < 0)
                oci_warn("delete: cannot reach sandboxd (%s): sandbox %s is left to it", strerror(-r), s.sandbox);
        else if ((r = oci_call(c, sandbox_request("destroy", s.sandbox), NULL, 0, NULL, &err)) < 0 &&
                 !(r == -EPROTO && err && strncmp(err, "not_found", 9) == 0))
                oci_warn("delete: destroying sandbox %s: %s", s.sandbox, err ? err : strerror(-r));
        (void) signal_proxy(&s, SIGKILL);
        r = oci_state_remove(s.id);
        oci_state_done(&s);
        return r < 0 ? oci_error("delete: cannot remove the state of %s: %s", argv[optind], strerror(-r)) : 0;
}

const OciVerb oci_verb_delete = { "delete", "[--force] ID", delete_main };

/* ---- ps -------------------------------------------------------------------------------------- */

static int ps_main(int argc, char *argv[]) {
        static const struct option opts[] = { { "format", required_argument, NULL, 'f' }, {} };
        _cleanup_json_ json_object *reply = NULL;
        const char *format = "table";
        OciState s = {};
        json_object *sb, *pids;
        int opt;

        while ((opt = getopt_long(argc, argv, "f:", opts, NULL)) >= 0)
                if (opt == 'f')
                        format = optarg;
                else
                        return oci_error("ps: unknown option");
        if (strcmp(format, "json") != 0 && strcmp(format, "table") != 0)
                return oci_error("ps: --format json or table");
        if (optind >= argc)
                return oci_error("ps: expects a container id");
        if (load_or_fail(argv[optind], &s) != 0)
                return 1;
        json_object *req = sandbox_request("inspect", s.sandbox);
        json_object_object_add(req, "pids", json_object_new_boolean(true));
        oci_state_done(&s);
        if (oci_call_simple(req, "ps", &reply) != 0)
                return 1;
        if (!json_object_object_get_ex(reply, "sandbox", &sb) || !json_object_object_get_ex(sb, "pids", &pids) ||
            !json_object_is_type(pids, json_type_array))
                return oci_error("ps: sandboxd's reply has no pids");
        if (strcmp(format, "json") == 0) {
                puts(json_object_to_json_string_ext(pids, JSON_C_TO_STRING_PLAIN));
                return 0;
        }
        puts("PID");
        for (size_t i = 0; i < json_object_array_length(pids); i++)
                printf("%s\n", json_object_get_string(json_object_array_get_idx(pids, i)));
        return 0;
}

const OciVerb oci_verb_ps = { "ps", "[--format json|table] ID", ps_main };

/* ---- pause, resume, update ------------------------------------------------------------------- */

static int sandbox_op(int argc, char *argv[], const char *op) {
        OciState s = {};
        int r;

        if (argc != 2)
                return oci_error("%s: expects exactly one container id", argv[0]);
        if (load_or_fail(argv[1], &s) != 0)
                return 1;
        if (strcmp(oci_state_status(&s), "running") != 0) {
                r = oci_error("%s: container %s is not running", argv[0], argv[1]);
        } else
                r = oci_call_simple(sandbox_request(op, s.sandbox), argv[0], NULL);
        oci_state_done(&s);
        return r;
}

static int pause_main(int argc, char *argv[]) {
        return sandbox_op(argc, argv, "sandbox.freeze");
}

static int resume_main(int argc, char *argv[]) {
        return sandbox_op(argc, argv, "sandbox.thaw");
}

const OciVerb oci_verb_pause = { "pause", "ID", pause_main };
const OciVerb oci_verb_resume = { "resume", "ID", resume_main };

static int update_main(int argc, char *argv[]) {
        static const struct option opts[] = { { "resources", required_argument, NULL, 'r' }, {} };
        _cleanup_json_ json_object *res = NULL, *limits = NULL, *notes = json_object_new_array();
        _cleanup_free_ char *err = NULL;
        const char *file = NULL;
        OciState s = {};
        int opt, r;

        while ((opt = getopt_long(argc, argv, "r:", opts, NULL)) >= 0)
                if (opt == 'r')
                        file = optarg;
                else
                        return oci_error("update: only --resources FILE is supported");
        if (!file || optind != argc - 1)
                return oci_error("update: expects --resources FILE ID");
        res = strcmp(file, "-") == 0 ? json_object_from_fd(STDIN_FILENO) : json_object_from_file(file);
        if (!res)
                return oci_error("update: %s: cannot be read or is not JSON", file);
        if (oci_limits_from_resources(res, "resources", notes, &limits, &err) < 0)
                return oci_error("update: %s", err ? err : "refused");
        oci_log_notes(notes);
        if (load_or_fail(argv[optind], &s) != 0)
                return 1;
        if (json_object_object_length(limits) == 0) {
                oci_state_done(&s);
                return 0;
        }
        json_object *req = sandbox_request("sandbox.update", s.sandbox);
        json_object_object_add(req, "limits", TAKE_PTR(limits));
        r = oci_call_simple(req, "update", NULL);
        oci_state_done(&s);
        return r;
}

const OciVerb oci_verb_update = { "update", "--resources FILE ID", update_main };

/* ---- features, list -------------------------------------------------------------------------- */

static const char features_json[] =
        "{\"ociVersionMin\":\"1.0.0\",\"ociVersionMax\":\"1.0.2\",\"hooks\":[],"
        "\"mountOptions\":[\"bind\",\"rbind\",\"ro\",\"rw\",\"private\",\"rprivate\",\"nosuid\",\"nodev\"],"
        "\"linux\":{\"namespaces\":[\"cgroup\",\"ipc\",\"mount\",\"network\",\"pid\",\"user\",\"uts\"],"
        "\"capabilities\":[\"CAP_AUDIT_WRITE\",\"CAP_CHOWN\",\"CAP_DAC_OVERRIDE\",\"CAP_FOWNER\",\"CAP_FSETID\","
        "\"CAP_KILL\",\"CAP_MKNOD\",\"CAP_NET_BIND_SERVICE\",\"CAP_NET_RAW\",\"CAP_SETFCAP\",\"CAP_SETGID\","
        "\"CAP_SETPCAP\",\"CAP_SETUID\",\"CAP_SYS_CHROOT\"],"
        "\"cgroup\":{\"v1\":false,\"v2\":true,\"systemd\":false,\"systemdUser\":false},"
        "\"seccomp\":{\"enabled\":true,\"actions\":[],\"operators\":[],\"archs\":[]},"
        "\"apparmor\":{\"enabled\":false},\"selinux\":{\"enabled\":false}},"
        "\"annotations\":{\"org.sandboxd.oci.runtime\":\"sandboxd-oci " PACKAGE_VERSION "\"}}";

static int features_main(int argc, char *argv[]) {
        (void) argv;
        if (argc != 1)
                return oci_error("features: takes no arguments");
        _cleanup_json_ json_object *o = json_tokener_parse(features_json);
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
        return 0;
}

const OciVerb oci_verb_features = { "features", "", features_main };

static int list_main(int argc, char *argv[]) {
        _cleanup_(closedirp) DIR *d = opendir(oci_arg.root);
        struct dirent *de;

        (void) argv;
        if (argc != 1)
                return oci_error("list: takes no arguments");
        printf("%-24s %-8s %-8s %s\n", "ID", "PID", "STATUS", "SANDBOX");
        while (d && (de = readdir(d))) {
                OciState s = {};
                if (!oci_id_valid(de->d_name) || oci_state_load(de->d_name, &s) < 0)
                        continue;
                const char *st = oci_state_status(&s);
                printf("%-24s %-8d %-8s %s\n", s.id, strcmp(st, "stopped") ? (int) s.pid : 0, st, s.sandbox);
                oci_state_done(&s);
        }
        return 0;
}

const OciVerb oci_verb_list = { "list", "", list_main };
