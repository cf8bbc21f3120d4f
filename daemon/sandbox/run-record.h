/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Runs in flight (and sessions, below) leave a note in the state directory, so that a daemon that died under them
 * (crash, SIGKILL, or a stop while they ran) is never silent about them: a line {sandbox, id,
 * argv, started_at} is appended to <state>/runs.log when a run starts, and a line {sandbox,
 * "end": id} when it ends. Past 64 KiB the log is emptied (nothing in flight) or rewritten with
 * the runs in flight and renamed into place. One file for all, kept open, rather than a file per
 * run: making and removing an inode per run cost more than the run itself on an ext4 without a
 * journal (its allocator looks for recently freed inodes), and a first file per sandbox made a
 * first run in each of 1,000 sandboxes half again as slow. At start, starts without an end
 * become their sandbox's interrupted_runs (reason "daemon restarted"), kept in meta.json and
 * shown by list/inspect; notes of earlier versions (<id>/runs/<run-id>.json) are read too.
 * Notes are not fsync'ed: they survive the daemon's death (the page cache holds them), not a
 * power loss of the host. Throwaway runs are not noted (their sandbox goes with the daemon). */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct Context Context;
typedef struct Sandbox Sandbox;
typedef struct ReplyPeer ReplyPeer;

/* runs.log, kept open (Context.run_log); fd -1: none, nothing is noted. */
typedef struct RunLog {
        int fd;
        uint64_t bytes; /* its size, counted as it is written (no fstat per run) */
        /* At start, a note of a run cut short in a sandbox that kept its processes is offered to
         * adopt first (run.h, run_adopt(): 0 taken back; -ENOENT nothing of it kept; else *lost
         * and *why for its record); adopted(s) writes the start notes of what s took back once
         * the log is open. NULL: runs are never taken back. */
        int (*adopt)(Sandbox *s, json_object *note, json_object **lost, const char **why);
        void (*adopted)(Sandbox *s);
} RunLog;

/* The note of one run or session in flight, embedded in it (Run.note, Session.note): linked in
 * its sandbox's notes from its start line to its end line, which is what a compaction of the log
 * writes again. run-record.c knows runs and sessions only by their notes. */
typedef struct RunNote {
        Sandbox *sandbox;
        const char *id;
        char *const *argv;
        bool session;
        bool linked;
        /* Its cgroup below the sandbox's ("run-7"), which a daemon that finds it cut short empties
         * (the run or session lost its supervision: timeout, output cap, terminal). */
        char cgroup[32];
        struct RunNote *next, *prev;
} RunNote;

/* Its start line (a throwaway sandbox's runs are not noted), and n linked in s->notes. */
void run_note_start(RunNote *n, Sandbox *s, const char *id, char *const *argv, bool session, const char *cgroup);
/* Its end line, once; nothing for a note never started. Sessions are noted alike ("session":
 * true): one the daemon's death ended is in interrupted_runs afterwards, and a client that comes
 * back for it is told session_lost. A session's end is noted when its processes are gone, not
 * when it is freed: one that exited and stayed to be read was not ended by the restart. */
void run_note_end(RunNote *n);
/* A note an earlier daemon wrote, of a run or session taken back after a restart: linked again
 * without a line (run_log_open() writes the linked notes anew once it has read the log). */
void run_note_adopt(RunNote *n, Sandbox *s, const char *id, char *const *argv, bool session, const char *cgroup);
/* A run or session of s that a restart lost, rec its interrupted_runs entry (with its "reason"):
 * listed, saved with the others by run_log_open(); its note in the log is then not listed twice. */
void run_records_add_lost(Sandbox *s, json_object *rec);
/* Unlinked without an end line (freed with the daemon's stop: the next start finds it
 * interrupted). */
void run_note_forget(RunNote *n);
/* The interrupted_runs entry of a run (session false) or a session that a restart ended, in one
 * of the sandboxes peer may see (its sandbox in *ret_sandbox), or NULL: an unknown id, or
 * another's (no oracle). */
json_object *run_records_lost(Context *ctx, const ReplyPeer *peer, const char *id, bool session, Sandbox **ret_sandbox);
/* At restore: notes of earlier versions left by the previous daemon into s->interrupted_runs,
 * saved in meta.json, then the notes go. */
int run_records_collect(Sandbox *s);
/* Once every sandbox is restored: reads runs.log into their interrupted_runs, saves them, empties
 * the log and keeps it open (m->run_log->fd) for the runs to come. */
int run_log_open(Context *m);
/* interrupted_runs in list/inspect replies (an empty array when there are none). */
void run_records_json(Sandbox *s, json_object *o);
