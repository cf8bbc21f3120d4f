/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Parsing and formatting of the units people write: sizes ("256M"), durations ("30s"), CPUs ("0.5"). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define USEC_PER_SEC UINT64_C(1000000)
#define USEC_PER_MSEC UINT64_C(1000)

/* "4096", "64K", "256M", "1G", "2T", optional "iB"/"B" after the suffix; binary units. */
int parse_size(const char *s, uint64_t *ret);
/* "30", "30s", "500ms", "1.5s", "2m", "1h", "250us". A bare number is seconds. */
int parse_duration(const char *s, uint64_t *ret_usec);
/* A fraction of cores: "0.5", "2", "1.25"; stored in millicores. */
int parse_cpus(const char *s, uint64_t *ret_millicpus);

/* Writes "1.5G"-style text into buf (at least 16 bytes). */
const char *format_size(char *buf, size_t len, uint64_t bytes);
/* Writes "1.234s"/"12ms"-style text into buf. */
const char *format_duration(char *buf, size_t len, uint64_t usec);

bool utf8_is_valid(const char *s, size_t len);

/* Absolute and normal: no empty, "." or ".." component, no trailing slash; shorter than max
 * bytes. */
bool path_is_normal(const char *p, size_t max);
/* Whether path is dir or beneath it (both normal); "/" holds every path. */
bool path_is_below(const char *path, const char *dir);
/* A sysctl name as a request gives it: dotted components of [A-Za-z0-9_-], 1-128 bytes; no "/"
 * and no empty component, so nothing more than that entry once the dots are /proc/sys's slashes. */
bool sysctl_name_valid(const char *name);
/* Whether name is a sysctl of a namespace a sandbox has of its own (runc's list): net.* (its
 * network namespace); kernel.shmmax, shmall, shmmni, shm_rmid_forced, msgmax, msgmnb, msgmni,
 * sem and fs.mqueue.* (its ipc namespace). */
bool sysctl_name_namespaced(const char *name);
/* A sysctl value: 1-256 bytes of printable ASCII or tabs (no newline: one value, one write). */
bool sysctl_value_valid(const char *value, size_t len);
/* Length of the longest prefix of s that is valid UTF-8 (where a cut string ends cleanly). */
size_t utf8_valid_prefix(const char *s, size_t len);
/* How many bytes at the end of s form an incomplete (so far valid) UTF-8 sequence: what a stream
 * cut by a read holds back until the rest arrives. */
size_t utf8_incomplete_tail(const char *s, size_t len);

/* Standard base64 (RFC 4648) with padding; returns a malloc'ed NUL-terminated string. */
char *base64_encode(const void *data, size_t len);
/* The same into out (room for base64_encoded_len(len) bytes; no NUL added); returns the length. */
size_t base64_encode_into(const void *data, size_t len, char *out);
static inline size_t base64_encoded_len(size_t len) {
        return (len + 2) / 3 * 4;
}
/* Decodes standard base64 (padding required, no whitespace, canonical: the bits padding drops
 * are zero); -EINVAL on bad input. */
int base64_decode(const char *s, size_t len, void **ret, size_t *ret_len);
/* The same into buf (size bytes): -ENOBUFS when the result would not fit, without writing past
 * size; *ret_len set on success only. The bound for len input bytes is base64_decoded_max(). */
int base64_decode_into(const char *s, size_t len, void *buf, size_t size, size_t *ret_len);
size_t base64_decoded_max(size_t len);

/* Signal names without the SIG prefix ("KILL", "RTMIN+3", "RTMAX"); NULL when unknown (32 and
 * 33, glibc's own). */
const char *signal_to_name(int sig);
/* The name, else the number in decimal (in buf); NULL for 0 and below. What a reply reports. */
const char *signal_to_string(int sig, char buf[static 12]);
/* Accepts "KILL", "SIGKILL", "9", "RTMIN+2", "SIGRTMAX-1"; -EINVAL otherwise, 32 and 33 included. */
int signal_from_string(const char *s);

uint64_t now_usec(int clock);

/* Reads at most size-1 bytes of dir_fd/path (an absolute path ignores dir_fd) into buf and ends
 * them with a NUL; with nofollow, a last component that is a symlink is refused. Returns the
 * number of bytes read, or -errno. One read(): a small kernel file (cgroup, /proc) comes whole,
 * and a run reads several, so no second read() for the end of the file (read_full does that). */
int read_small_file(int dir_fd, const char *path, bool nofollow, char *buf, size_t size);

/* A CLOCK_REALTIME time in µs as "2026-11-30T12:00:00Z" (UTC, whole seconds) in buf. */
#define UTC_TIME_MAX 32
const char *format_utc(char buf[static UTC_TIME_MAX], uint64_t usec);

/* write() until all of data is out, retrying on EINTR; -errno on failure. */
int write_all(int fd, const void *data, size_t len);

/* flock(fd, LOCK_EX), waiting for a holder that is going: tries times, 100 ms apart. 0, -EBUSY
 * when still held, -errno. */
int flock_wait(int fd, unsigned tries);
/* read() until size bytes are in or the end of the file; the count, or -errno. */
ssize_t read_full(int fd, void *buf, size_t size);

/* The first mount of this filesystem type in /proc/self/mountinfo: 0 and its mount point (when
 * ret_mountpoint is not NULL), or -ENOENT. */
int mountinfo_find(const char *fstype, char **ret_mountpoint);

/* "a.b.c.d" or "a.b.c.d/len" (n bytes of s): the address (host order) and its prefix length
 * (32 without one). -EINVAL for anything else, -EDOM when bits below the prefix are set. */
int ipv4_prefix_parse(const char *s, size_t n, uint32_t *ret_addr, unsigned *ret_len);
/* "a.b.c.d/len", or "a.b.c.d" for a /32, into buf (at least 19 bytes). */
const char *ipv4_prefix_format(char *buf, size_t size, uint32_t addr, unsigned len);
static inline uint32_t ipv4_mask(unsigned len) {
        return len == 0 ? 0 : UINT32_MAX << (32 - len);
}
