/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libsandbox: talk to sandboxd from a local program.
 *
 *     SbxClient *c;
 *     json_object *reply;
 *     if (sbx_client_connect(NULL, &c) < 0) ...            // $SANDBOXD_SOCKET or the default
 *     json_object *req = json_object_new_object();
 *     json_object_object_add(req, "op", json_object_new_string("run"));
 *     ...
 *     int r = sbx_client_call(c, req, on_event, userdata, &reply); // takes req
 *     if (r >= 0 && sbx_reply_ok(reply)) ...
 *     json_object_put(reply);
 *     sbx_client_free(c);
 *
 * Every function returns a negative errno on failure. The wire protocol is in sandboxd's
 * docs/protocol.md; replies are handed back as json-c objects. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SBX_SOCKET_ENV "SANDBOXD_SOCKET"

typedef struct SbxClient SbxClient;

/* Called for every event line ({"id":..,"event":..}) of the request in flight; a negative return
 * aborts the call with that error. The event is borrowed. */
typedef int (*sbx_event_fn)(json_object *event, void *userdata);

/* path NULL: $SANDBOXD_SOCKET, else /run/sandboxd/sandboxd.sock. */
int sbx_client_connect(const char *path, SbxClient **ret);
SbxClient *sbx_client_free(SbxClient *c);
/* The connected socket, for poll(); the client owns it. */
int sbx_client_fd(SbxClient *c);

/* Sends request (a JSON object with at least "op"; an "id" is added when missing), then reads
 * events and the final reply for it. Takes ownership of request. On success *ret_reply is the
 * final reply, ok or not; the caller puts it. */
int sbx_client_call(SbxClient *c, json_object *request, sbx_event_fn on_event, void *userdata,
                    json_object **ret_reply);

/* Sends one request without waiting (for streaming writes such as pty input); returns its id. */
int sbx_client_send(SbxClient *c, json_object *request, long long *ret_id);
/* Reads the next line from the daemon, whatever request it belongs to. */
int sbx_client_read(SbxClient *c, json_object **ret_message);
/* The same without blocking: -EAGAIN when no whole line is there yet (poll sbx_client_fd() for
 * more); call it until -EAGAIN before polling again, since lines may be buffered already. */
int sbx_client_read_nowait(SbxClient *c, json_object **ret_message);

bool sbx_reply_ok(json_object *reply);
/* The error code ("not_found", ...) and message of a failed reply, or NULL. */
const char *sbx_reply_error_code(json_object *reply);
const char *sbx_reply_error_message(json_object *reply);

#ifdef __cplusplus
}
#endif
