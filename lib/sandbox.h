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
#include <stddef.h>
#include <stdint.h>

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

/* The fds (SCM_RIGHTS, O_CLOEXEC) that came with the line read last, by sbx_client_read*() or
 * the event sbx_client_call() is handing to its on_event (a "tty" run's "started" carries the
 * terminal's master, "master": its index): taken by the caller, who closes them; 0 of them for a
 * line that came without. The next line read closes those not taken. -EMSGSIZE: more than
 * max_fds (they stay). */
int sbx_client_line_fds(SbxClient *c, int *ret_fds, size_t max_fds, size_t *ret_n_fds);

/* sbx_client_call() with file descriptors (at most 8) sent in the same sendmsg() as the request
 * line, which gets "fds": n_fds; fields of the request name them by index ("fd": 0). The caller
 * keeps its fds (the kernel passes copies). */
int sbx_client_call_fds(SbxClient *c, json_object *request, const int *fds, size_t n_fds,
                        sbx_event_fn on_event, void *userdata, json_object **ret_reply);

/* ---- Files in a sandbox (sandboxd's docs/design/files.md) ---------------------------------
 * Paths are the sandbox's own (absolute, or relative to /work), resolved inside it as its user.
 * Each call returns a negative errno when the call could not be made or the connection failed;
 * otherwise 0 and the daemon's final reply in *ret_reply, ok or not (sbx_reply_error_code():
 * "not_found", "no_space", "too_large", ...), which the caller puts. on_event, when not NULL,
 * gets the request's events ("progress" with "bytes" and "total", "entries" of file.list). */

#define SBX_FILE_PARENTS (1u << 0)    /* write, mkdir, put: make missing parent directories */
#define SBX_FILE_EXCLUSIVE (1u << 1)  /* write: fail (conflict) when the path exists */
#define SBX_FILE_SYNC (1u << 2)       /* write: fsync before the reply */
#define SBX_FILE_RECURSIVE (1u << 3)  /* list: the whole tree; remove: a tree */
#define SBX_FILE_NOFOLLOW (1u << 4)   /* read: refuse a symlink as the last component */
#define SBX_FILE_FOLLOW (1u << 5)     /* stat, get: follow a symlink as the last component */
#define SBX_FILE_AS_ROOT (1u << 6)    /* as root of the sandbox's user namespace ("user":"root") */
#define SBX_FILE_IN_PLACE (1u << 7)   /* write: not atomic (written in place) */
#define SBX_FILE_NO_OVERWRITE (1u << 8) /* put: conflict at the first entry that exists ("overwrite": false) */
#define SBX_FILE_MODE_DEFAULT (-1)    /* mode: 0644 for a new file, the old mode when replacing */

int sbx_file_stat(SbxClient *c, const char *sandbox, const char *path, unsigned flags, json_object **ret_reply);
int sbx_file_list(SbxClient *c, const char *sandbox, const char *path, unsigned flags, sbx_event_fn on_event,
                  void *userdata, json_object **ret_reply);
int sbx_file_mkdir(SbxClient *c, const char *sandbox, const char *path, int mode, unsigned flags,
                   json_object **ret_reply);
int sbx_file_remove(SbxClient *c, const char *sandbox, const char *path, unsigned flags, json_object **ret_reply);

/* Writes len bytes of data to path: inline for small data, else in file.chunk lines within the
 * window the daemon announces (base64 in JSON: for any client, remote ones included). */
int sbx_file_write(SbxClient *c, const char *sandbox, const char *path, const void *data, size_t len, int mode,
                   unsigned flags, sbx_event_fn on_event, void *userdata, json_object **ret_reply);
/* Writes what fd holds (a regular file from its offset to its end, its holes kept, or a pipe read
 * to its end) to path, read here and sent in file.chunk lines: for a daemon that cannot take the
 * fd itself (not on this machine), or where it should not (the fd stays the caller's). */
int sbx_file_write_from(SbxClient *c, const char *sandbox, const char *path, int fd, int mode, unsigned flags,
                        sbx_event_fn on_event, void *userdata, json_object **ret_reply);
/* Writes what fd holds (a regular file or a pipe of the caller's, read to its end) to path: the fd
 * itself goes to the daemon (SCM_RIGHTS), no byte passes through this process. size is the total
 * when known (UINT64_MAX when not). */
int sbx_file_write_fd(SbxClient *c, const char *sandbox, const char *path, int fd, uint64_t size, int mode,
                      unsigned flags, sbx_event_fn on_event, void *userdata, json_object **ret_reply);
/* Reads length bytes (UINT64_MAX: to the end) from offset of path, as data events that are
 * written to out_fd (a regular file: at their offsets, holes kept; a pipe: in order, holes as
 * zeros). */
int sbx_file_read(SbxClient *c, const char *sandbox, const char *path, uint64_t offset, uint64_t length, int out_fd,
                  unsigned flags, sbx_event_fn on_event, void *userdata, json_object **ret_reply);
/* The same, with out_fd itself passed to the daemon (a regular file or a pipe open for writing). */
int sbx_file_read_fd(SbxClient *c, const char *sandbox, const char *path, uint64_t offset, uint64_t length,
                     int out_fd, unsigned flags, sbx_event_fn on_event, void *userdata, json_object **ret_reply);
/* A tar stream (uncompressed) read from tar_fd is unpacked into the directory path (made
 * atomically when missing; SBX_FILE_PARENTS, SBX_FILE_NO_OVERWRITE). Reply: entries, bytes,
 * skipped. */
int sbx_file_put_fd(SbxClient *c, const char *sandbox, const char *path, int tar_fd, unsigned flags,
                    sbx_event_fn on_event, void *userdata, json_object **ret_reply);
/* path (a file or a tree; "DIR/." for its contents) is packed as a tar stream written to tar_fd
 * (SBX_FILE_FOLLOW). Reply: entries, bytes, skipped, changed. */
int sbx_file_get_fd(SbxClient *c, const char *sandbox, const char *path, int tar_fd, unsigned flags,
                    sbx_event_fn on_event, void *userdata, json_object **ret_reply);

/* ---- Images (sandboxd's docs/protocol.md, "Images") -----------------------------------------
 * The same conventions: a negative errno when the call could not be made, else 0 and the final
 * reply in *ret_reply, ok or not. image.import's on_event gets its "progress" events; source is
 * a path on the daemon's host; tag (NULL: none) picks an OCI index's manifest. Importing and
 * removing are for root and the daemon's admin_group. */
int sbx_image_import(SbxClient *c, const char *name, const char *source, const char *tag, sbx_event_fn on_event,
                     void *userdata, json_object **ret_reply);
int sbx_image_list(SbxClient *c, json_object **ret_reply);
int sbx_image_inspect(SbxClient *c, const char *image, json_object **ret_reply);
int sbx_image_remove(SbxClient *c, const char *image, json_object **ret_reply);

bool sbx_reply_ok(json_object *reply);
/* The error code ("not_found", ...) and message of a failed reply, or NULL. */
const char *sbx_reply_error_code(json_object *reply);
const char *sbx_reply_error_message(json_object *reply);

#ifdef __cplusplus
}
#endif
