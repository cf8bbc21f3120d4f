/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Pools of ready sandboxes. For throwaway runs (pool_size): made with the configured default
 * limits, owned by no one, invisible to every client, and handed out to a throwaway run whose
 * request asks for exactly what they are: the default limits, no name, the default user and its
 * workspace in memory (so they are made with neither a workspace on disk nor the child user
 * namespace that locks mounts against root, sandbox.h). Refilled in the background at idle priority. A sandbox
 * leaves the pool once, and is destroyed after its run like any throwaway sandbox: none is ever
 * given to a second run.
 * For create (pool_create with the host's root, pool_images per image): made as a create with the
 * default limits makes them (a workspace on disk, the child user namespace that locks mounts),
 * then handed out to a create that asks for what they are, which sets their name, env, user, ttl
 * and idle and records them; a pooled sandbox has never been anyone's, so it is fresh: a new
 * id, an empty workspace, a uid range of its own. Refilled after a burst of takes. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "proto.h"

typedef struct Context Context;
typedef struct Sandbox Sandbox;

/* The pool's own state (Context.pool). */
typedef struct Pool {
        Context *ctx;
        sd_event_source *refill, *retry, *taken, *records;
        bool stopping;
} Pool;

/* Observes ctx->registry: a pooled sandbox freed is refilled, a taken one's end refills. */
int pool_init(Pool *p, Context *ctx);

/* Starts (or continues) filling the pool; cheap to call often. */
void pool_schedule_refill(Context *m);

/* A sandbox taken from the pool is gone (destroyed): its place is refilled now.
 * Until then (or POOL_TAKEN_REFILL_USEC after it was taken, for a long run), making its successor
 * would compete for the CPUs with the very run it was taken for, unless the take left the pool
 * empty: then the refill starts at once. */
void pool_taken_done(Context *m);

/* A pooled sandbox (ready, else the one closest to it) that fits a throwaway run's request, now
 * the owner's and ephemeral:
 * 1 with *ret set, 0 when none fits (the caller makes one), or < 0 with err set when the request
 * itself is invalid (as sandbox_create would say). */
int pool_take(Context *m, json_object *req, uid_t owner, Sandbox **ret, ProtoError *err);

/* The same for a create (op_create): a pooled sandbox made for create from req's image (or the
 * host's root) where pool_create or pool_images keeps one, handed out as req asks
 * (sandbox_hand_out()): 1 with *ret set (ready, or still being made: answer it when it is), 0
 * when none fits, < 0 with err set when its record could not be written (it is destroyed). Its
 * create is answered once its record is written, with the records of the creates around it. */
typedef struct SandboxCaller SandboxCaller;
int pool_take_create(Context *m, json_object *req, const SandboxCaller *caller, Sandbox **ret, ProtoError *err);

/* The records of the sandboxes created or handed out (Sandbox.record_pending) are written soon,
 * all at once: once every request already read is handled. */
int pool_schedule_records(Context *m);

/* image is being removed: its pooled sandboxes let go of it and are destroyed. */
void pool_drop_image(Context *m, const char *image);

/* The pool's event sources go, and it refills no more (the sandboxes are the registry's, like any
 * other). */
void pool_done(Context *m);
