/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Create-request parsing (sandbox-request.c), for sandbox.c. */
#pragma once

#include <json-c/json.h>

#include "proto.h"

typedef struct Manager Manager;
typedef struct Sandbox Sandbox;

/* Reads a create request (or a throwaway run's) into s, which is being made for s->owner_uid
 * (s->ephemeral set): name, limits, best_effort, user, workspace, env, and the sweep's fields. */
int sandbox_parse(Manager *m, Sandbox *s, json_object *req, ProtoError *err);
