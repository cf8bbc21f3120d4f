/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* port.open, port.close: a sandbox's server reached by its owner (sandbox/port.c). */
#include "ops.h"
#include "port.h"
#include "sandbox.h"

static int get_port(json_object *req, uint16_t *ret, ProtoError *err) {
        uint64_t v = 0;
        int r = proto_get_uint(req, "port", 1, 65535, &v, err);

        if (r < 0)
                return r;
        *ret = (uint16_t) v;
        return 0;
}

int op_port_open(Request *c, json_object *id, json_object *req, ProtoError *err) {
        const char *listen = "unix";
        uint16_t port = 0;
        Sandbox *s;
        int r;

        if ((r = ops_lookup_sandbox(c, req, &s, err)) < 0 || (r = get_port(req, &port, err)) < 0 ||
            (r = proto_get_string(req, "listen", 16, &listen, err)) < 0)
                return r;
        return port_open(s, c->peer.uid, c->peer.uid == 0, port, listen, c->reply, err);
}

int op_port_close(Request *c, json_object *id, json_object *req, ProtoError *err) {
        uint16_t port = 0;
        Sandbox *s;
        int r;

        if ((r = ops_lookup_sandbox(c, req, &s, err)) < 0 || (r = get_port(req, &port, err)) < 0 ||
            (r = port_close(s, port, err)) < 0)
                return r;
        reply_ok(c->reply, NULL);
        return 0;
}
