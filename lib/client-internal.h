/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What client.c and client-file.c share inside libsandbox (not exported). */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "fdpass.h"
#include "proto.h"
#include "sandbox.h"

#define SBX_CLIENT_EXPORT __attribute__((visibility("default")))

struct SbxClient {
        int fd;
        long long next_id;
        LineBuffer in;
        SbxFdQueue fds;      /* received with SCM_RIGHTS, until their line is read */
        int line_fds[SBX_FDS_PER_MESSAGE]; /* those of the line read last, until taken or the next */
        size_t n_line_fds;
};

/* Sends request (taken) with n_fds fds in the sendmsg of its first byte ("fds":N is added);
 * *ret_id gets a reference to its id. */
int client_send_fds(SbxClient *c, json_object *request, const int *fds, size_t n_fds, json_object **ret_id);
/* Whether msg answers the request with this id (or is an error tied to no request). */
bool client_answers(json_object *msg, json_object *id);
/* Events to on_event, then the final reply of that request. */
int client_wait_reply(SbxClient *c, json_object *id, sbx_event_fn on_event, void *userdata, json_object **ret_reply);
/* The next line from the daemon as it came (valid until the next read), for the lines a fast
 * path scans without json-c (lib/file-proto.h). */
int client_read_line(SbxClient *c, char **ret_line, size_t *ret_len);
