/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* systemd's file descriptor store (FileDescriptorStoreMax= of the unit): what only the daemon's
 * process holds (a sandbox init's pidfd) is handed to the service manager as it is made, under
 * a name of ours, and taken back by the next daemon from its activation fds. Outside systemd
 * (no $NOTIFY_SOCKET) a push does nothing and nothing comes back. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Names of ours: "<letter>.<id>.<what>" ("s.sbx-0123456789ab.init"); a listening socket's name
 * (FileDescriptorName=, "metrics", "sandboxd.socket") never has this form. */
bool fdstore_name_is_ours(const char *name);
/* "<kind>.<id>.<what>" into buf (FDSTORE_NAME_MAX bytes). */
#define FDSTORE_NAME_MAX 64
const char *fdstore_name(char *buf, char kind, const char *id, const char *what);

/* Whether there is a store to push to ($NOTIFY_SOCKET) or a holder to hand the fds to at the
 * stop (fdstore_set_holder()): what outlives the daemon only there (a session's helper, its
 * terminal) is made to only then. */
bool fdstore_enabled(void);

/* With a holder (hold_timeout > 0 and stop_sandboxes 0: server/hold.c), every fd pushed, and
 * every one taken back, is also kept as a copy of ours under its name, until it is removed: the
 * list a stop hands to `sandboxd --hold`. Off: the copies are closed. */
void fdstore_set_holder(bool on);
bool fdstore_holder_enabled(void);
/* Those copies (the caller must not change them). */
struct FdStore;
const struct FdStore *fdstore_kept(void);

/* fd into the store under name (FDPOLL=0: systemd never drops it on its own), and a copy kept
 * for the holder. 0 with neither store nor holder, > 0 when it was sent or kept, -errno. */
int fdstore_push(const char *name, int fd);
/* Into systemd's store only, no copy kept (an fd a holder gave back, not in the store any more:
 * the unit was stopped). 0 outside systemd (1 with a holder), > 0 when sent, -errno. */
int fdstore_resend(const char *name, int fd);
/* Every fd of that name out of the store, and out of the holder's copies. */
int fdstore_remove(const char *name);

/* What the store gave back at start, until it is claimed. */
typedef struct FdStoreEntry {
        char *name;
        int fd;
        size_t seq; /* the order systemd gave it in */
} FdStoreEntry;

/* Sorted by name (then seq) at the first take, so that a take is a binary search: a restart takes
 * one name per sandbox, run and session, thousands of them. */
typedef struct FdStore {
        FdStoreEntry *entries;
        size_t n, allocated;
        bool sorted;
} FdStore;

/* Takes fd (named name) into st: 0 or -ENOMEM (fd then closed). */
int fdstore_add(FdStore *st, const char *name, int fd);
/* The fd stored under name (the first systemd gave of that name, if several), now the caller's
 * (a copy is kept for the holder); -ENOENT. */
int fdstore_take(FdStore *st, const char *name);
/* Whether st still has an unclaimed fd of that name. */
bool fdstore_has(const FdStore *st, const char *name);
/* What nobody claimed: closed and removed from systemd's store. Returns how many. */
size_t fdstore_drop_unclaimed(FdStore *st);
void fdstore_done(FdStore *st);

/* Whether fd is a pidfd (anon_inode:[pidfd]) of a process that has not ended: its pid (as our
 * pid namespace sees it) into *ret_pid. 0, -EBADFD (not a pidfd), -ESRCH (ended), -errno. */
int fdstore_check_pidfd(int fd, int *ret_pid);
/* The same, and the process's pid in its innermost pid namespace (fdinfo's last "NSpid:" field;
 * 0 when it has no namespace of its own) into *ret_inner_pid. */
int fdstore_check_pidfd_ns(int fd, int *ret_pid, int *ret_inner_pid);

/* Whether a stored fd is what its name says (-EBADFD when not, -errno): */
/* a pidfd, of a process that may have ended (*ret_pid 0 then); */
int fdstore_check_pidfd_any(int fd, int *ret_pid);
/* a terminal's master (/dev/ptmx of some devpts: a character device of major 5, which answers
 * TIOCGPTN; 136 and up are the slaves); */
int fdstore_check_tty_master(int fd);
/* a pipe's end opened for accmode (O_RDONLY, O_WRONLY); */
int fdstore_check_fifo(int fd, int accmode);
/* a Unix socket; */
int fdstore_check_socket(int fd);
/* a memfd named name ("memfd:<name>") with exactly the seals given: its size. */
int fdstore_check_memfd(int fd, const char *name, unsigned seals, size_t *ret_size);
