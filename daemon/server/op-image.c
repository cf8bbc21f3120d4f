/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* image.import, image.list, image.inspect, image.remove (sandbox/image.h). Images are the
 * daemon's, shared by every user: importing and removing are for root and admin_group (an
 * import reads the source with its caller's rights); listing and inspecting for everyone, who see among the
 * users of an image only the sandboxes they may see. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "image.h"
#include "ops.h"
#include "pool.h"
#include "sandbox.h"
#include "util.h"

static int admin_only(Request *c, const char *op, ProtoError *err) {
        if (c->admin)
                return 0;
        return proto_error_set(err, SBX_E_PERMISSION_DENIED, NULL,
                               "%s is for root and members of admin_group: images are shared by every user of the daemon", op);
}

static int get_image_name(json_object *req, const char *field, const char **ret, ProtoError *err) {
        const char *name = NULL;
        int r = proto_get_string(req, field, 128, &name, err);
        if (r < 0)
                return r;
        if (!image_name_valid(name))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                       "'%s' must be 1-%d of [A-Za-z0-9._-], not starting with '.' or '-'", field, IMAGE_NAME_MAX);
        *ret = name;
        return 0;
}

static int lookup_image(Request *c, json_object *req, Image **ret, ProtoError *err) {
        const char *name;
        int r = get_image_name(req, "image", &name, err);
        if (r < 0)
                return r;
        *ret = image_find(c->ctx->images, name);
        if (!*ret)
                return proto_error_set(err, SBX_E_NOT_FOUND, "image", "no image '%s'%s", name,
                                       image_importing(c->ctx->images, name) ? " yet (being imported)" : "");
        return 0;
}

/* How many sandboxes use img, as the caller may count them: all for root and admins, else only
 * the caller's own (other users' sandboxes do not exist for them, as in health). */
static long users_seen(Request *c, const Image *img) {
        long n = 0;
        if (c->admin)
                return -1;
        for (Sandbox *s = registry_first(c->ctx->registry); s; s = registry_next(&s->entry))
                n += s->image && strcmp(s->image, img->name) == 0 && sandbox_visible_to(s, reply_peer(c->reply));
        return n;
}

/* The ids of the sandboxes the caller may see that use img. */
static json_object *used_by(Request *c, const Image *img) {
        json_object *a = json_object_new_array();
        for (Sandbox *s = registry_first(c->ctx->registry); s; s = registry_next(&s->entry))
                if (s->image && strcmp(s->image, img->name) == 0 && sandbox_visible_to(s, reply_peer(c->reply)))
                        json_object_array_add(a, json_object_new_string(s->id));
        return a;
}

int op_image_import(Request *c, json_object *id, json_object *req, ProtoError *err) {
        ImageImportRequest rq = {};
        SandboxCaller caller;
        int r;

        if ((r = admin_only(c, "image.import", err)) < 0 || (r = get_image_name(req, "name", &rq.name, err)) < 0 ||
            (r = proto_get_string(req, "source", 4096, &rq.source, err)) < 0 ||
            (r = proto_get_string(req, "tag", 256, &rq.tag, err)) < 0 ||
            (r = proto_get_bool(req, "owner_only", &rq.owner_only, err)) < 0)
                return r;
        rq.importer = c->peer.uid;
        ops_caller(c, &caller);
        rq.caller = &caller;
        if (!rq.source || rq.source[0] != '/')
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "source",
                                       "'source' must be an absolute path (a directory, a tar archive or an OCI image layout)");
        return image_import_start(c->ctx->images, &rq, c->reply, err);
}

int op_image_list(Request *c, json_object *id, json_object *req, ProtoError *err) {
        json_object *a = json_object_new_array(), *o = json_object_new_object();
        for (Image *img = c->ctx->images->images; img; img = img->next)
                json_object_array_add(a, image_to_json(img, users_seen(c, img), NULL));
        json_object_object_add(o, "images", a);
        reply_ok(c->reply, o);
        return 0;
}

int op_image_inspect(Request *c, json_object *id, json_object *req, ProtoError *err) {
        json_object *o;
        Image *img;
        int r = lookup_image(c, req, &img, err);
        if (r < 0)
                return r;
        o = json_object_new_object();
        json_object_object_add(o, "image", image_to_json(img, users_seen(c, img), used_by(c, img)));
        reply_ok(c->reply, o);
        return 0;
}

int op_image_remove(Request *c, json_object *id, json_object *req, ProtoError *err) {
        json_object *o;
        Image *img;
        char name[IMAGE_NAME_MAX + 1];
        int r;

        if ((r = admin_only(c, "image.remove", err)) < 0 || (r = lookup_image(c, req, &img, err)) < 0)
                return r;
        snprintf(name, sizeof(name), "%s", img->name);
        pool_drop_image(c->ctx, name); /* pooled sandboxes are no one's: they go */
        if (img->users > 0) {
                json_object *ids = used_by(c, img);
                char list[256] = "";
                size_t n = 0;
                for (size_t i = 0; i < json_object_array_length(ids) && n < sizeof(list) - 32; i++)
                        n += (size_t) snprintf(list + n, sizeof(list) - n, "%s%s", i ? ", " : " (",
                                               json_object_get_string(json_object_array_get_idx(ids, i)));
                if (n)
                        snprintf(list + n, sizeof(list) - n, ")");
                r = proto_error_set(err, SBX_E_CONFLICT, "image", "image '%s' is used by %u sandbox%s%s: destroy %s first", name,
                                    img->users, img->users == 1 ? "" : "es", list, img->users == 1 ? "it" : "them");
                json_object_put(ids);
                return r;
        }
        r = image_remove(c->ctx->images, name);
        if (r < 0)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "cannot remove image '%s': %s", name, strerror(-r));
        o = json_object_new_object();
        json_object_object_add(o, "removed", json_object_new_string(name));
        reply_ok(c->reply, o);
        return 0;
}
