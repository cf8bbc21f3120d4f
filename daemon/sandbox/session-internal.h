/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What session.c (a session's life) and session-keep.c (a session across a restart) share, and
 * nobody else: the rest of the daemon knows a session through session.h. */
#pragma once

#include "launch.h"
#include "sandbox.h"
#include "session.h"

/* The output ring's memfd, as the fd store checks it. */
#define RING_MEMFD_NAME "sandboxd-ring"
#define RING_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
/* Input queued for a session at most: pty.write past it waits. */
#define PTY_MAX_PENDING_INPUT (1u << 20)
/* A session's record at most (<sandbox>/sessions/<session>.json). */
#define SESSION_RECORD_MAX (256u << 10)

extern const LaunchOps session_launch_ops;
extern const SandboxMemberOps session_member_ops;

/* ---- session.c's, for session-keep.c ---- */

/* Into its sandbox's list of sessions. */
void session_link(Sandbox *s, Session *p);
/* Its opener's connection went: a session not detached is hung up. */
void session_on_opener_gone(Hook *h, void *userdata);
/* The output ring: mapped from fd (size bytes), unmapped, or new (cap bytes, from seq). */
int session_ring_map(Session *p, int fd, size_t size);
void session_ring_unmap(Session *p);
int session_ring_new(Session *p, size_t cap, uint64_t seq);
/* Its terminal's or pipe i's output, and its input, watched by the loop (fd taken). */
int session_watch_output(Session *p, int i, int fd);
int session_watch_input(Session *p, int fd);
/* Its idle timer, again. */
void session_arm_idle(Session *p);
/* Freed with everything it holds. */
void session_destroy(Session *p);

/* ---- session-input.c's, for session.c ---- */

/* Its terminal or stdin writable again (the loop's callback). */
int session_on_input(sd_event_source *src, int fd, uint32_t revents, void *userdata);
/* Every pty.write its written bytes cover answered (err: every one, with it). */
void session_answer_writes(Session *p, const ProtoError *err);
/* Its input closed: the watch, the fd, and the store's copy. */
void session_stop_input(Session *p);

/* ---- session-keep.c's, for session.c ---- */

/* Its fds into the fd store once the program runs, and its record beside its sandbox's. */
void session_store(Session *p);
/* Its record written again (a resize, stdin closed). */
void session_record_save(Session *p);
/* A pipe session's stdin closed: the store's copy goes, so that the program sees its EOF. */
void session_input_closed(Session *p);
/* It ended: nothing of it kept for a next daemon. */
void session_unstore(Session *p);
