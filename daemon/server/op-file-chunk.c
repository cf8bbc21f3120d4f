/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* file.chunk lines: not requests but the bytes of a file.write in flight on the same
 * connection, found by its id (an Inlet of its reply, file-inflow.c). The canonical form is
 * taken by ops_route() before any JSON parse (lib/file-proto.h); every other form, and a
 * canonical line whose data does not decode, comes through the op table to op_file_chunk(). */
#include <errno.h>

#include "file-proto.h"
#include "macro.h"
#include "ops.h"

bool ops_route(ReplySink *sink, const char *line, size_t len, void *userdata) {
        FileChunk c;
        int64_t id;
        bool ended;
        Inlet *in;

        if (file_chunk_scan(line, len, &id, &c) != 1)
                return false;
        in = reply_sink_inlet_int(sink, id, &ended);
        if (!in)
                return ended; /* an ended transfer's: dropped; no transfer: op_file_chunk() answers */
        if (in->take(in, &c, true, in->userdata) >= 0)
                return true;
        /* Its data did not decode: the general path says exactly why. A line that is no JSON
         * at all (a raw control byte in it) would get an answer of its own and leave the
         * transfer waiting for a chunk that never comes: it ends the transfer here. */
        _cleanup_json_ json_object *req = NULL;
        ProtoError err;
        if (proto_parse_line(line, len, SBX_MAX_DEPTH, &req, &err) >= 0)
                return false;
        in->refuse(in, &err, in->userdata);
        return true;
}

int op_file_chunk(Request *c, json_object *id, json_object *req, ProtoError *err) {
        FileChunk chunk;
        bool ended;
        Inlet *in = reply_peer_inlet(c->reply, id, &ended);

        if (!in && ended)
                return 0; /* up to a window of chunks may follow an error: dropped, no reply */
        if (!in)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "id", "no file.write with this id in flight");
        if (c->n_fds > 0) {
                proto_error_set(err, SBX_E_INVALID_REQUEST, "fds", "a file.chunk line takes no file descriptors");
                in->refuse(in, err, in->userdata);
        } else if (file_chunk_parse(req, &chunk, err) < 0)
                in->refuse(in, err, in->userdata);
        else
                (void) in->take(in, &chunk, false, in->userdata);
        return 0;
}
