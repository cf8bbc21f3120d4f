/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl snapshot, snapshots, restore, snapshot-delete: a sandbox's workspace snapshots. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandboxctl.h"
#include "util.h"

static int verb_snapshot_run(int argc, char *argv[]);
static int verb_snapshots_run(int argc, char *argv[]);
static int verb_restore_run(int argc, char *argv[]);
static int verb_snapshot_delete_run(int argc, char *argv[]);

const Verb verb_snapshot = {
        .name = "snapshot",
        .args = "SANDBOX [--label LABEL]",
        .summary = "Take a snapshot of a sandbox's workspace",
        .help = "Options:\n"
                "  -l --label LABEL       A note kept with the snapshot (at most 128 bytes)\n"
                "\nThe sandbox's processes are frozen while the workspace is copied. Prints the\n"
                "snapshot's id, size and file count; a progress bar on a terminal (stderr).\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_snapshot_run,
};

const Verb verb_snapshots = {
        .name = "snapshots",
        .args = "SANDBOX [--delete SNAPSHOT]",
        .summary = "List a sandbox's snapshots (or delete one)",
        .help = "Options:\n"
                "  -q --quiet             Print the ids only, one a line, oldest first\n"
                "     --delete SNAPSHOT   Delete that snapshot instead (as snapshot-delete)\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_snapshots_run,
};

const Verb verb_restore = {
        .name = "restore",
        .args = "SANDBOX SNAPSHOT",
        .summary = "Replace a sandbox's workspace with a snapshot (kills its processes)",
        .help = "The new tree is built aside and swapped in as a whole. Every process of the\n"
                "sandbox is killed (runs in flight end as \"killed\", sessions end) and it gets a new\n"
                "init; nothing that ran is started again. SNAPSHOT is an id, or SANDBOX/ID naming\n"
                "the same sandbox.\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_restore_run,
};

const Verb verb_snapshot_delete = {
        .name = "snapshot-delete",
        .args = "SANDBOX SNAPSHOT...",
        .summary = "Delete snapshots of a sandbox",
        .help = "Each SNAPSHOT is an id, or SANDBOX/ID naming the same sandbox.\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_snapshot_delete_run,
};

/* ---- The progress bar -------------------------------------------------------------------- */

typedef struct Progress {
        bool shown;
} Progress;

static int on_progress(json_object *ev, void *userdata) {
        Progress *p = userdata;
        char size[FIELD_BUF];
        int64_t files = 0, bytes = 0, total = 0;
        const char *what = json_str(ev, "event");

        if (!what || strcmp(what, "progress") != 0)
                return 0;
        (void) json_int(ev, "files", &files);
        (void) json_int(ev, "bytes", &bytes);
        fmt_size(size, ev, "bytes");
        if (json_int(ev, "total_bytes", &total) && total > 0)
                progress_bar(bytes, total, size); /* a restore knows its snapshot's size */
        else
                /* A snapshot's total is unknown before its walk ends: a counter that spins. */
                fprintf(stderr, "\r%c copied %s in %lld file%s   ", "|/-\\"[files % 4], esc(size), (long long) files,
                        files == 1 ? "" : "s");
        p->shown = true;
        return 0;
}

static int request_with_progress(json_object *req, json_object **ret_reply) {
        Progress p = {};
        bool tty = !arg.json && isatty(STDERR_FILENO);
        int r = daemon_request_events(req, tty ? on_progress : NULL, &p, ret_reply);
        if (p.shown)
                progress_clear();
        return r;
}

/* ---- snapshot ---------------------------------------------------------------------------- */

static int snapshot_parse(int argc, char *argv[], const char **label) {
        const VerbOption options[] = { { "label", 'l', .value = label }, {} };
        return parse_verb_options(&verb_snapshot, argc, argv, "hl:", options, 1, 1);
}

static int verb_snapshot_run(int argc, char *argv[]) {
        _cleanup_json_ json_object *req = request_new("snapshot"), *reply = NULL;
        const char *label = NULL;
        json_object *snap;
        char size[FIELD_BUF], files[FIELD_BUF];
        int r = snapshot_parse(argc, argv, &label);

        if (r <= 0)
                return r;
        if ((r = add_string(req, "sandbox", argv[optind])) < 0 || (label && (r = add_string(req, "label", label)) < 0))
                return r;
        r = request_with_progress(TAKE_PTR(req), &reply);
        if (r < 0 || arg.json)
                return r;
        snap = json_child(reply, "snapshot");
        fmt_value(files, snap, "files");
        printf("%s  %s in %s %s  %s\n", esc(json_str(snap, "id") ?: "-"), esc(fmt_size(size, snap, "bytes")), esc(files),
               strcmp(files, "1") == 0 ? "file" : "files", esc(json_str(snap, "created_at") ?: "-"));
        return 0;
}

/* ---- snapshots --------------------------------------------------------------------------- */

static int snapshots_print(json_object *list, bool quiet) {
        static const char *const headers[] = { "ID", "LABEL", "CREATED", "SIZE", "FILES" };
        _cleanup_table_ Table *t = table_new(ELEMENTSOF(headers), headers);
        size_t n = json_object_array_length(list);

        if (!t)
                return log_error_errno(-ENOMEM, "%m");
        for (size_t i = 0; i < n; i++) {
                json_object *s = json_object_array_get_idx(list, i);
                char l[FIELD_BUF], b[FIELD_BUF], f[FIELD_BUF];
                const char *row[] = { json_str(s, "id"), fmt_value(l, s, "label"), json_str(s, "created_at"),
                                      fmt_size(b, s, "bytes"), fmt_value(f, s, "files") };
                if (quiet)
                        printf("%s\n", esc(json_str(s, "id") ?: ""));
                else if (table_add_row(t, row) < 0)
                        return log_error_errno(-ENOMEM, "%m");
        }
        if (quiet)
                return 0;
        if (n == 0) {
                printf("No snapshots.\n");
                return 0;
        }
        table_print(t);
        return 0;
}

static int delete_one(SbxClient *c, const char *sandbox, const char *snapshot) {
        _cleanup_json_ json_object *req = request_new("snapshot.delete"), *reply = NULL;
        int r;

        if ((r = add_string(req, "sandbox", sandbox)) < 0 || (r = add_string(req, "snapshot", snapshot)) < 0)
                return r;
        r = daemon_call(c, TAKE_PTR(req), &reply);
        if (r < 0)
                return r;
        if (arg.json)
                print_json(reply);
        r = reply_check(reply);
        if (r < 0 || arg.json)
                return r;
        printf("deleted %s\n", esc(json_str(reply, "deleted") ?: snapshot));
        return 0;
}

static int delete_many(const char *sandbox, char **snapshots, int n) {
        _cleanup_(sbx_client_freep) SbxClient *c = NULL;
        int r = daemon_connect(&c), ret = 0;

        if (r < 0)
                return r;
        for (int i = 0; i < n; i++) {
                r = delete_one(c, sandbox, snapshots[i]);
                if (r == -EREMOTEIO || r == -EINVAL)
                        ret = r; /* go on with the others */
                else if (r < 0)
                        return r;
        }
        return ret;
}

static int snapshots_parse(int argc, char *argv[], bool *quiet, const char **del) {
        enum { ARG_DELETE = ARG_VERB_FIRST };
        const VerbOption options[] = { { "quiet", 'q', .flag = quiet }, { "delete", ARG_DELETE, .value = del }, {} };
        return parse_verb_options(&verb_snapshots, argc, argv, "hq", options, 1, 1);
}

static int verb_snapshots_run(int argc, char *argv[]) {
        _cleanup_json_ json_object *req = request_new("snapshot.list"), *reply = NULL;
        const char *del = NULL;
        bool quiet = false;
        json_object *list;
        int r = snapshots_parse(argc, argv, &quiet, &del);

        if (r <= 0)
                return r;
        if (del)
                return delete_many(argv[optind], (char **) &del, 1);
        r = add_string(req, "sandbox", argv[optind]);
        if (r < 0)
                return r;
        r = daemon_request(TAKE_PTR(req), &reply);
        if (r < 0 || arg.json)
                return r;
        list = json_child(reply, "snapshots");
        if (!json_object_is_type(list, json_type_array))
                return log_error("the reply to snapshot.list has no snapshots array");
        return snapshots_print(list, quiet);
}

/* ---- restore, snapshot-delete ------------------------------------------------------------ */

/* " (1 run in flight ended as killed, 2 sessions ended)", or "" when nothing was running. */
static const char *restore_ended(char *buf, size_t len, json_object *reply) {
        int64_t runs = 0, sessions = 0;
        int n = 0;

        (void) json_int(reply, "runs_killed", &runs);
        (void) json_int(reply, "sessions_ended", &sessions);
        buf[0] = '\0';
        if (runs > 0)
                n = snprintf(buf, len, " (%lld run%s in flight ended as killed", (long long) runs, runs == 1 ? "" : "s");
        if (sessions > 0 && n >= 0 && (size_t) n < len)
                n += snprintf(buf + n, len - (size_t) n, "%s%lld session%s ended", n ? ", " : " (", (long long) sessions,
                              sessions == 1 ? "" : "s");
        if (n > 0 && (size_t) n < len)
                snprintf(buf + n, len - (size_t) n, ")");
        return buf;
}

static int verb_restore_run(int argc, char *argv[]) {
        _cleanup_json_ json_object *req = request_new("snapshot.restore"), *reply = NULL;
        char size[FIELD_BUF], ended[128];
        int r = parse_common_only(&verb_restore, argc, argv, 2, 2);

        if (r <= 0)
                return r;
        if ((r = add_string(req, "sandbox", argv[optind])) < 0 || (r = add_string(req, "snapshot", argv[optind + 1])) < 0)
                return r;
        r = request_with_progress(TAKE_PTR(req), &reply);
        if (r < 0 || arg.json)
                return r;
        /* The processes are killed, not restarted: nothing of them runs again by itself. */
        printf("restored %s from %s (%s); every process of it was killed%s and it has a new init\n", esc(argv[optind]),
               esc(argv[optind + 1]), esc(fmt_size(size, reply, "bytes")), restore_ended(ended, sizeof(ended), reply));
        return 0;
}

static int verb_snapshot_delete_run(int argc, char *argv[]) {
        int r = parse_common_only(&verb_snapshot_delete, argc, argv, 2, -1);
        if (r <= 0)
                return r;
        return delete_many(argv[optind], argv + optind + 1, argc - optind - 1);
}
