/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libsandbox: the image store (image.import, image.list, image.inspect, image.remove). */

#include <errno.h>
#include <stdlib.h>

#include "client-internal.h"

static json_object *image_request(const char *op) {
        json_object *req = json_object_new_object();
        if (req)
                json_object_object_add(req, "op", json_object_new_string(op));
        return req;
}

static int image_call(SbxClient *c, json_object *req, sbx_event_fn on_event, void *userdata, json_object **ret_reply) {
        if (!req)
                return -ENOMEM;
        return sbx_client_call(c, req, on_event, userdata, ret_reply);
}

SBX_CLIENT_EXPORT int sbx_image_import(SbxClient *c, const char *name, const char *source, const char *tag,
                                       sbx_event_fn on_event, void *userdata, json_object **ret_reply) {
        json_object *req;

        if (!name || !source)
                return -EINVAL;
        req = image_request("image.import");
        if (req) {
                json_object_object_add(req, "name", json_object_new_string(name));
                json_object_object_add(req, "source", json_object_new_string(source));
                if (tag)
                        json_object_object_add(req, "tag", json_object_new_string(tag));
        }
        return image_call(c, req, on_event, userdata, ret_reply);
}

SBX_CLIENT_EXPORT int sbx_image_list(SbxClient *c, json_object **ret_reply) {
        return image_call(c, image_request("image.list"), NULL, NULL, ret_reply);
}

static int image_one(SbxClient *c, const char *op, const char *image, json_object **ret_reply) {
        json_object *req;

        if (!image)
                return -EINVAL;
        req = image_request(op);
        if (req)
                json_object_object_add(req, "image", json_object_new_string(image));
        return image_call(c, req, NULL, NULL, ret_reply);
}

SBX_CLIENT_EXPORT int sbx_image_inspect(SbxClient *c, const char *image, json_object **ret_reply) {
        return image_one(c, "image.inspect", image, ret_reply);
}

SBX_CLIENT_EXPORT int sbx_image_remove(SbxClient *c, const char *image, json_object **ret_reply) {
        return image_one(c, "image.remove", image, ret_reply);
}
