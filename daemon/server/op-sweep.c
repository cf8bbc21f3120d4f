/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sweep: disk usage of the caller's sandboxes (every sandbox for root and admin_group), with the
 * quota, budget and expiry actions that follow (sweep.c). */

#include "sandbox.h"
#include "ops.h"
#include "sweep.h"

int op_sweep(Request *c, json_object *id, json_object *req, ProtoError *err) {
        bool dry_run = false;
        int r = proto_get_bool(req, "dry_run", &dry_run, err);

        if (r < 0)
                return r;
        /* Answered when the walk is done. */
        return sweep_start(c->ctx, c->reply, dry_run, err);
}
