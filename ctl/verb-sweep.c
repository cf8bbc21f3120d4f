/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl sweep: disk usage per sandbox (workspace, snapshots), totals, and what the sweep
 * did about quotas, the budget and expiry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandboxctl.h"

static int verb_sweep_run(int argc, char *argv[]);

const Verb verb_sweep = {
        .name = "sweep",
        .args = "[--dry-run] [SANDBOX]",
        .summary = "Measure sandboxes' disk use; evict, refuse and expire as configured",
        .help = "Options:\n"
                "  -n --dry-run           Report what would be done, change nothing\n"
                "\nSizes are allocated bytes (what du prints, in bytes, on one filesystem);\n"
                "files are inodes counted once. Over its disk limit a sandbox loses its oldest\n"
                "snapshots first; if still over, its runs are refused until it is back under.\n"
                "Sandboxes past their ttl or idle time are destroyed. Root and admin_group\n"
                "members sweep every sandbox. With SANDBOX, that one only, now: a sandbox\n"
                "whose runs were refused and whose files were removed since takes runs again.\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_sweep_run,
};

/* "file" for a count of 1 as fmt_value() wrote it, else "files". */
static const char *files_word(const char *count) {
        return strcmp(count, "1") == 0 ? "file" : "files";
}

static const char *sweep_state(json_object *sbx) {
        if (json_str(sbx, "expired"))
                return json_str(sbx, "expired")[0] == 't' ? "expired (ttl)" : "expired (idle)";
        if (json_true(sbx, "runs_refused"))
                return json_true(sbx, "partial") ? "over: runs refused (at least)" : "over: runs refused";
        return json_true(sbx, "partial") ? "not measured in full" : "ok";
}

static int sweep_add_row(Table *t, json_object *sbx) {
        char n[FIELD_BUF], w[FIELD_BUF], s[FIELD_BUF], b[FIELD_BUF], f[FIELD_BUF], l[FIELD_BUF], c[FIELD_BUF];
        json_object *snaps = json_child(sbx, "snapshots");
        const char *row[] = {
                json_str(sbx, "id") ?: "-",
                fmt_value(n, sbx, "name"),
                fmt_size(w, json_child(sbx, "workspace"), "bytes"),
                fmt_size(s, sbx, "snapshot_bytes"),
                c,
                fmt_size(b, sbx, "bytes"),
                fmt_value(f, sbx, "files"),
                fmt_size(l, sbx, "disk_limit"),
                sweep_state(sbx),
        };
        snprintf(c, sizeof(c), "%zu", json_object_is_type(snaps, json_type_array) ? json_object_array_length(snaps) : 0);
        return table_add_row(t, row);
}

static void sweep_print_action(json_object *a) {
        char b[FIELD_BUF];
        const char *what = json_str(a, "action") ?: "?";

        printf("  %-15s %s", esc(what), esc(json_str(a, "sandbox") ?: ""));
        if (json_str(a, "snapshot"))
                printf(" snapshot %s (created %s)", esc(json_str(a, "snapshot")), esc(json_str(a, "created_at") ?: "-"));
        if (json_child(a, "bytes"))
                printf(" %s", esc(fmt_size(b, a, "bytes")));
        if (json_child(a, "files"))
                printf(" in %s %s", esc(fmt_value(b, a, "files")), files_word(b));
        if (json_str(a, "reason"))
                printf(" [%s]", esc(json_str(a, "reason")));
        printf("\n");
}

static int sweep_print(json_object *reply) {
        static const char *const headers[] = { "SANDBOX", "NAME",  "WORKSPACE", "SNAPSHOTS", "N",
                                               "TOTAL",   "FILES", "LIMIT",     "STATE" };
        _cleanup_table_ Table *t = table_new(ELEMENTSOF(headers), headers);
        json_object *sandboxes = json_child(reply, "sandboxes"), *tot = json_child(reply, "totals"),
                    *actions = json_child(reply, "actions");
        char b[FIELD_BUF], f[FIELD_BUF], fr[FIELD_BUF], bu[FIELD_BUF];
        size_t n;

        if (!t || !json_object_is_type(sandboxes, json_type_array))
                return log_error("the reply to sweep has no sandboxes array");
        n = json_object_array_length(sandboxes);
        for (size_t i = 0; i < n; i++)
                if (sweep_add_row(t, json_object_array_get_idx(sandboxes, i)) < 0)
                        return log_error_errno(-ENOMEM, "%m");
        if (n > 0)
                table_print(t);
        fmt_value(f, tot, "files");
        printf("%sTotal: %s in %s %s over %zu sandbox%s; %s free", n > 0 ? "\n" : "", esc(fmt_size(b, tot, "bytes")), esc(f),
               files_word(f), n, n == 1 ? "" : "es", esc(fmt_size(fr, reply, "free_bytes")));
        if (json_child(reply, "free_files"))
                printf(" (%s %s)", esc(fmt_value(f, reply, "free_files")), files_word(f));
        printf("; budget %s", esc(fmt_size(bu, reply, "disk_budget")));
        if (json_child(reply, "files_budget"))
                printf(" (%s %s)", esc(fmt_value(f, reply, "files_budget")), files_word(f));
        printf("\n");
        n = json_object_is_type(actions, json_type_array) ? json_object_array_length(actions) : 0;
        if (json_true(reply, "partial"))
                printf("The walk was cut short by sweep_timeout: the figures of sandboxes not measured in full are "
                       "lower bounds.\n");
        printf("%s: %s\n", json_true(reply, "dry_run") ? "Would do (dry run)" : "Done", n ? "" : "nothing");
        for (size_t i = 0; i < n; i++)
                sweep_print_action(json_object_array_get_idx(actions, i));
        return 0;
}

/* "[#####.....]  40%  2/5 sandboxes, 1.2G in 3400 files" while the walk goes on. */
static int on_sweep_progress(json_object *ev, void *userdata) {
        bool *shown = userdata;
        int64_t done = 0, total = 0, files = 0;
        char size[FIELD_BUF], text[3 * FIELD_BUF];
        const char *what = json_str(ev, "event");

        if (!what || strcmp(what, "progress") != 0)
                return 0;
        (void) json_int(ev, "sandboxes_done", &done);
        (void) json_int(ev, "sandboxes_total", &total);
        (void) json_int(ev, "files", &files);
        snprintf(text, sizeof(text), "%lld/%lld sandbox%s, %s in %lld file%s", (long long) done, (long long) total,
                 total == 1 ? "" : "es", fmt_size(size, ev, "bytes"), (long long) files, files == 1 ? "" : "s");
        progress_bar(done, total, text);
        *shown = true;
        return 0;
}

static int verb_sweep_run(int argc, char *argv[]) {
        _cleanup_json_ json_object *reply = NULL;
        bool dry_run = false, shown = false;
        const VerbOption options[] = { { "dry-run", 'n', .flag = &dry_run }, {} };
        json_object *request;
        int r = parse_verb_options(&verb_sweep, argc, argv, "hn", options, 0, 1);

        if (r <= 0)
                return r;
        request = request_new("sweep");
        if (optind < argc)
                json_object_object_add(request, "sandbox", json_object_new_string(argv[optind]));
        if (dry_run)
                json_object_object_add(request, "dry_run", json_object_new_boolean(1));
        r = daemon_request_events(request, !arg.json && isatty(STDERR_FILENO) ? on_sweep_progress : NULL, &shown, &reply);
        if (shown)
                progress_clear();
        if (r < 0 || arg.json)
                return r;
        return sweep_print(reply);
}
