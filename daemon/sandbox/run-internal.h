/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What run.c (a run's life) and run-keep.c (a run across a restart) share, and nobody else: the
 * rest of the daemon knows a run through run.h. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "launch.h"
#include "run.h"
#include "sandbox.h"

#ifndef NSEC_PER_USEC
#  define NSEC_PER_USEC UINT64_C(1000)
#endif

extern const LaunchOps run_launch_ops;
extern const SandboxMemberOps run_member_ops;

/* ---- run.c's, for run-keep.c ---- */

/* Counted among its sandbox's runs in flight (its note written). */
void run_mark_in_flight(Run *r);
/* Its client's connection closed, or has room again. */
void run_on_client_gone(Hook *h, void *userdata);
void run_on_client_writable(Hook *h, void *userdata);
/* The loop's callbacks: output on pipe i, its timeout, its CPU budget's check. */
int run_on_output(sd_event_source *src, int fd, uint32_t revents, void *userdata);
int run_on_timeout(sd_event_source *src, uint64_t usec, void *userdata);
int run_on_cpu_check(sd_event_source *src, uint64_t usec, void *userdata);
/* Its output pipes read (on) or left to fill (off: its client is behind). */
void run_set_reading(Run *r, bool on);
/* reply is its client from now on: the accounting and the hooks move with it. */
void run_set_reply(Run *r, Reply *reply);
/* Freed; record_end false: its end is not recorded (the daemon stops; the next finds it
 * interrupted). */
Run *run_free_full(Run *r, bool record_end);

/* ---- run-keep.c's, for run.c ---- */

/* Its capture's header updated (what it read, what is still open), for a next daemon. */
void run_publish(Run *r);
/* Its pipes, report socket, capture and (direct) pidfd into the store. */
void run_store_push(Run *r);
/* One of its pipe ends ("out", "err", "in") closed: out of the store too (bit: CAPTURE_OPEN_*). */
void run_store_drop(Run *r, const char *what, uint32_t bit);
/* What is left of it in the store goes. */
void run_store_forget(Run *r);
/* The reply of a run with no client: its events go nowhere, its final reply is kept. */
int run_keep_reply_init(Run *r);
