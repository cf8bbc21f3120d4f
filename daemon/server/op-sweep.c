/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sweep: disk usage of the caller's sandboxes (every sandbox for root and admin_group), or of
 * the one named, with the quota, budget and expiry actions that follow (sweep.c). */

#include "sandbox.h"
#include "ops.h"
#include "sweep.h"

int op_sweep(Request *c, json_object *id, json_object *req, ProtoError *err) {
        bool dry_run = false;
        Sandbox *s = NULL;
        int r = proto_get_bool(req, "dry_run", &dry_run, err);

        if (r < 0)
                return r;
        if (json_object_object_get_ex(req, "sandbox", NULL) && (r = ops_lookup_sandbox(c, req, &s, err)) < 0)
                return r;
        /* Answered when the walk is done. */
        return sweep_start(c->ctx, c->reply, s, dry_run, err);
}
