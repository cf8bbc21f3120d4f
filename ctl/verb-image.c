/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl image import|list|inspect|rm: the daemon's image store (image.* operations). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandboxctl.h"
#include "util.h"

static int verb_image_run(int argc, char *argv[]);

const Verb verb_image = {
        .name = "image",
        .args = "import NAME SOURCE [--tag TAG] [--owner-only] | list [-q] | inspect NAME | rm NAME",
        .summary = "Import, list, inspect and remove images (roots of sandboxes)",
        .help = "Sub-verbs:\n"
                "  import NAME SOURCE   Import SOURCE (a path on the daemon's host: a directory, a\n"
                "                       .tar, .tar.gz or .tar.zst of a root filesystem, or an OCI\n"
                "                       image layout such as 'skopeo copy docker://IMAGE oci:DIR:TAG'\n"
                "                       writes) as image NAME; root and admin_group only\n"
                "  list                 The images: name, kind, size, files, when imported, users\n"
                "  inspect NAME         One image, with the sandboxes of yours that use it\n"
                "  rm NAME              Remove an image no sandbox uses; root and admin_group only\n"
                "\nOptions:\n"
                "     --tag TAG          import: the manifest of an OCI layout's index with that\n"
                "                        tag (org.opencontainers.image.ref.name); needed when the\n"
                "                        index lists more than one\n"
                "     --owner-only       import: only you (and admins) may make sandboxes of it;\n"
                "                        else every user may, and uid 0 of an image is root in\n"
                "                        every sandbox of it: its root-only files are theirs\n"
                "  -q --quiet            list: the names only, one a line\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_image_run,
};

enum { ARG_TAG = ARG_VERB_FIRST, ARG_OWNER_ONLY };

static int on_progress(json_object *ev, void *userdata) {
        json_object *imp = json_child(ev, "imported");
        bool *shown = userdata;
        char size[FIELD_BUF];
        int64_t files = 0, layer = 0, layers = 0;

        if (!json_str(ev, "event") || strcmp(json_str(ev, "event"), "progress") != 0 || !imp)
                return 0;
        (void) json_int(imp, "files", &files);
        fmt_size(size, imp, "bytes");
        if (json_int(ev, "layer", &layer) && json_int(ev, "layers", &layers))
                fprintf(stderr, "\r%c layer %lld/%lld: %s in %lld file%s   ", "|/-\\"[files % 4], (long long) layer,
                        (long long) layers, esc(size), (long long) files, files == 1 ? "" : "s");
        else
                fprintf(stderr, "\r%c %s in %lld file%s   ", "|/-\\"[files % 4], esc(size), (long long) files,
                        files == 1 ? "" : "s");
        *shown = true;
        return 0;
}

static void image_print(json_object *img) {
        char size[FIELD_BUF], files[FIELD_BUF], users[FIELD_BUF];
        json_object *used = json_child(img, "used_by");

        print_kv("name", "%s", json_str(img, "name") ?: "-");
        print_kv("kind", "%s", json_str(img, "kind") ?: "-");
        print_kv("source", "%s", json_str(img, "source") ?: "-");
        print_kv("digest", "%s", json_str(img, "digest") ?: "-");
        print_kv("size", "%s", fmt_size(size, img, "size"));
        print_kv("files", "%s", fmt_value(files, img, "files"));
        print_kv("imported_at", "%s", json_str(img, "imported_at") ?: "-");
        print_kv("owner_only", "%s", json_object_get_boolean(json_child(img, "owner_only")) ? "yes" : "no");
        print_kv("users", "%s", fmt_value(users, img, "users"));
        for (size_t i = 0; used && i < json_object_array_length(used); i++)
                print_kv("used_by", "%s", json_object_get_string(json_object_array_get_idx(used, i)));
}

static int image_import(const char *name, const char *source, const char *tag, bool owner_only) {
        _cleanup_json_ json_object *req = request_new("image.import"), *reply = NULL;
        _cleanup_free_ char *abs = NULL;
        bool shown = false, tty = !arg.json && isatty(STDERR_FILENO);
        int r;

        /* The daemon resolves the path on its host: a relative one is made absolute here, and
         * "./x.tar" is named as /dir/x.tar in what it says. */
        r = path_for_daemon(source, strlen(source), &abs);
        if (r == -EINVAL)
                return log_error("image import: '%s': '..' after a name is not resolved here (the name may be a "
                                 "symlink): give the path without it", source);
        if (r < 0)
                return log_error_errno(r, "image import: cannot make %s absolute: %m", source);
        source = abs;
        if ((r = add_string(req, "name", name)) < 0 || (r = add_string(req, "source", source)) < 0 ||
            (tag && (r = add_string(req, "tag", tag)) < 0))
                return r;
        if (owner_only)
                json_object_object_add(req, "owner_only", json_object_new_boolean(true));
        r = daemon_request_events(TAKE_PTR(req), tty ? on_progress : NULL, &shown, &reply);
        if (shown)
                progress_clear();
        if (r < 0 || arg.json)
                return r;
        image_print(json_child(reply, "image"));
        return 0;
}

static int image_list(bool quiet) {
        static const char *const headers[] = { "NAME", "KIND", "SIZE", "FILES", "IMPORTED", "USERS" };
        _cleanup_json_ json_object *reply = NULL;
        _cleanup_table_ Table *t = table_new(ELEMENTSOF(headers), headers);
        json_object *list;
        int r = daemon_request(request_new("image.list"), &reply);

        if (r < 0 || arg.json)
                return r;
        if (!t)
                return log_error_errno(-ENOMEM, "%m");
        list = json_child(reply, "images");
        for (size_t i = 0; list && i < json_object_array_length(list); i++) {
                json_object *img = json_object_array_get_idx(list, i);
                char s[FIELD_BUF], f[FIELD_BUF], u[FIELD_BUF];
                const char *row[] = { json_str(img, "name"), json_str(img, "kind"), fmt_size(s, img, "size"),
                                      fmt_value(f, img, "files"), json_str(img, "imported_at"), fmt_value(u, img, "users") };
                if (quiet)
                        printf("%s\n", esc(json_str(img, "name") ?: ""));
                else if (table_add_row(t, row) < 0)
                        return log_error_errno(-ENOMEM, "%m");
        }
        if (!quiet)
                table_print(t);
        return 0;
}

static int image_one(const char *op, const char *name) {
        _cleanup_json_ json_object *req = request_new(op), *reply = NULL;
        int r = add_string(req, "image", name);

        if (r < 0 || (r = daemon_request(TAKE_PTR(req), &reply)) < 0 || arg.json)
                return r;
        if (strcmp(op, "image.inspect") == 0)
                image_print(json_child(reply, "image"));
        else
                printf("%s\n", esc(json_str(reply, "removed") ?: name));
        return 0;
}

static int verb_image_run(int argc, char *argv[]) {
        const char *tag = NULL, *sub;
        bool quiet = false, owner_only = false;
        const VerbOption options[] = { { "tag", ARG_TAG, .value = &tag }, { "owner-only", ARG_OWNER_ONLY, .flag = &owner_only },
                                       { "quiet", 'q', .flag = &quiet }, {} };
        int r = parse_verb_options(&verb_image, argc, argv, "hq", options, 1, 3), n;

        if (r <= 0)
                return r;
        sub = argv[optind];
        n = argc - optind - 1;
        if (strcmp(sub, "import") == 0 && n == 2)
                return image_import(argv[optind + 1], argv[optind + 2], tag, owner_only);
        if (tag || owner_only)
                return log_error("image: --tag and --owner-only are for 'image import'");
        if (strcmp(sub, "list") == 0 && n == 0)
                return image_list(quiet);
        if (quiet)
                return log_error("image: --quiet is for 'image list'");
        if (strcmp(sub, "inspect") == 0 && n == 1)
                return image_one("image.inspect", argv[optind + 1]);
        if ((strcmp(sub, "rm") == 0 || strcmp(sub, "remove") == 0) && n == 1)
                return image_one("image.remove", argv[optind + 1]);
        return log_error("image: usage: sandboxctl image %s", verb_image.args);
}
