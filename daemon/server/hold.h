/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The holder (docs/design/restarts.md, section 6): what the fd store keeps across a restart, kept
 * across a stop and a start too, and by a standalone daemon. On SIGTERM the daemon spawns
 * `sandboxd --hold` (the same binary): under systemd in a transient scope of its own
 * (sandboxd-hold-<pid>.scope, so that the service's stop does not kill it), standalone in a leaf
 * of the daemon's subtree (<cgroup>/hold). The daemon hands it every fd it pushed or took back
 * (fdstore_kept()), with the names, over a socketpair; the holder listens on RUNTIME/hold.sock
 * (0600), gives everything to the first client of its own uid (SO_PEERCRED) that connects and
 * acknowledges, then exits. Nobody within hold_timeout: it closes everything and exits.
 *
 * The wire (SOCK_SEQPACKET, both sockets): messages of a HoldHeader, `count` NUL-terminated names
 * and `count` fds (SCM_RIGHTS, at most HOLD_FDS_PER_MESSAGE), then one with HOLD_END and no fd;
 * the receiver answers 'K' once it has all. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "context.h"
#include "fdstore.h"

#define HOLD_SOCKET_NAME "hold.sock"
#define HOLD_FDS_PER_MESSAGE 253 /* SCM_MAX_FD */
#define HOLD_MAX_FDS 65536       /* more than FileDescriptorStoreMax=, refused beyond */

/* `sandboxd --hold PATH TIMEOUT_USEC`, the daemon's socketpair end on fd 3: the exit status. */
int hold_main(int argc, char **argv);

typedef struct Holder Holder;

/* At SIGTERM: the holder is spawned (its socket at dir/hold.sock) and placed; ready(userdata) is
 * called once it may be handed the fds (under systemd: once its scope's job is over), maybe from
 * here. -errno: no holder (ready is not called). */
int hold_spawn(Context *ctx, const char *dir, void (*ready)(void *userdata), void *userdata, Holder **ret);
/* After the loop: every kept fd to the holder, then its word that it listens. */
int hold_hand_over(Holder *h);
Holder *hold_free(Holder *h);

/* At start, before the restore: a holder's fds into ctx->fdstore, as if from systemd's store
 * (those systemd still had are closed: one fd a name), and pushed into systemd's store again
 * when there is one. 0 also when there is no holder (a stale socket is removed), -errno. */
int hold_take_back(Context *ctx, const char *dir);

/* The wire, for the tests too. hold_send: n entries (those with fd < 0 skipped), then the end.
 * hold_recv: into `into`, at most max fds (-E2BIG beyond); *ret_complete once the end came;
 * returns how many came, or -errno (-EBADMSG: not our wire; what came stays in `into`). */
int hold_send(int sock, const FdStoreEntry *entries, size_t n);
int hold_recv(int sock, FdStore *into, size_t max, bool *ret_complete);
