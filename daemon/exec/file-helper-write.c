/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* file.write in sandboxd-file-helper (file-helper.h): a file written whole into a temporary name
 * and linked into place, or in place, from its stdin or by chunks framed on fd 2. */
#include <dirent.h>
#include <linux/falloc.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <locale.h>
#include <stddef.h>
#include <sys/mman.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/statvfs.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "file-helper-internal.h"
#include "open-beneath.h"

/* ---- file.write ---------------------------------------------------------------------------- */

_Noreturn static void fail_count(int err, FileReason reason, uint64_t count) {
        FileRecord r = { .kind = FILE_RECORD_ERROR, .err = err, .reason = reason, .count = count };
        (void) helper_record_send(&r, NULL, NULL);
        _exit(0);
}

/* All of n bytes at off: a short write (the disk filling up) is retried, so that the error
 * that stops it is the kernel's own (ENOSPC, EFBIG). */
static int pwrite_all(int fd, const char *p, size_t n, off_t off) {
        while (n > 0) {
                ssize_t k = pwrite(fd, p, n, off);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -1;
                if (k == 0) {
                        errno = EIO;
                        return -1;
                }
                p += k;
                n -= (size_t) k;
                off += k;
        }
        return 0;
}

/* The source (the client's fd, or the daemon's memfd of inline data: our fd 2) into dst from
 * its offset 0: data ranges of a regular source by copy_file_range (else pread/pwrite), its
 * holes left as holes; a pipe read to its end. At most max bytes. Returns the count. */
static uint64_t copy_in(int dst, uint64_t max) {
        static char buf[FILE_DATA_MAX];
        struct stat st;
        uint64_t pos = 0, src_base = 0;
        bool regular = fstat(helper_data_fd, &st) == 0 && S_ISREG(st.st_mode);
        off_t cur = regular ? lseek(helper_data_fd, 0, SEEK_CUR) : -1;

        regular = regular && cur >= 0;
        src_base = regular ? (uint64_t) cur : 0;
        if (regular && max > (uint64_t) st.st_size - (src_base < (uint64_t) st.st_size ? src_base : (uint64_t) st.st_size))
                max = (uint64_t) st.st_size > src_base ? (uint64_t) st.st_size - src_base : 0;
        while (pos < max) {
                uint64_t data_end = max, want;
                ssize_t k;

                if (regular) {
                        uint64_t d = helper_next_data(helper_data_fd, src_base + pos, src_base + max, &data_end);
                        if (d >= src_base + max) {
                                pos = max;
                                break;
                        }
                        pos = d - src_base;
                        data_end -= src_base;
                }
                want = data_end - pos < sizeof(buf) ? data_end - pos : sizeof(buf);
                if (regular) {
                        loff_t in = (loff_t) (src_base + pos), out = (loff_t) pos;
                        k = copy_file_range(helper_data_fd, &in, dst, &out, want, 0);
                        if (k < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
                                k = pread(helper_data_fd, buf, want, (off_t) (src_base + pos));
                                if (k > 0 && pwrite_all(dst, buf, (size_t) k, (off_t) pos) < 0)
                                        fail_count(errno, FILE_REASON_NONE, pos);
                        }
                } else {
                        k = read(helper_data_fd, buf, want);
                        if (k > 0 && pwrite_all(dst, buf, (size_t) k, (off_t) pos) < 0)
                                fail_count(errno, FILE_REASON_NONE, pos);
                }
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        fail_count(errno, FILE_REASON_NONE, pos);
                if (k == 0)
                        break;
                pos += (uint64_t) k;
                helper_progress_note(pos);
        }
        /* A file ending in a hole: its length. */
        if (ftruncate(dst, (off_t) pos) < 0)
                fail_count(errno, FILE_REASON_NONE, pos);
        return pos;
}

/* ---- file.write by chunks: frames on fd 2 (file-helper.h) ---------------------------------- */

static int read_full(int fd, void *buf, size_t n) {
        char *p = buf;
        while (n > 0) {
                ssize_t k = read(fd, p, n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return -1;
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

static void send_progress(FileRecordKind kind, uint64_t seq, uint64_t bytes) {
        FileRecord r = { .kind = kind, .count = seq, .offset = bytes };
        if (helper_record_send(&r, NULL, NULL) < 0)
                _exit(1); /* the daemon is gone */
}

/* A hole in a file that has bytes there already (in place): punched where the filesystem can,
 * else written as zeros. */
static int zero_range(int fd, uint64_t off, uint64_t n) {
        static const char zeros[65536];
        if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t) off, (off_t) n) == 0)
                return 0;
        while (n > 0) {
                size_t k = n < sizeof(zeros) ? (size_t) n : sizeof(zeros);
                if (pwrite_all(fd, zeros, k, (off_t) off) < 0)
                        return -1;
                off += k;
                n -= k;
        }
        return 0;
}

/* The frames into dst from base, each acknowledged once written; a hole in a new file stays a
 * hole (the caller sets the length). Returns the count when the eof frame is written. */
static uint64_t chunks_in(int dst, uint64_t base, bool in_place) {
        static char buf[FILE_DATA_MAX];
        uint64_t pos = 0;

        send_progress(FILE_RECORD_READY, 0, 0);
        for (;;) {
                FileFrame h;
                if (read_full(helper_data_fd, &h, sizeof(h)) < 0 || h.len > FILE_DATA_MAX || read_full(helper_data_fd, buf, h.len) < 0)
                        fail_count(EPIPE, FILE_REASON_NONE, pos);
                if (h.zeros > (uint64_t) INT64_MAX - base - pos - h.len)
                        fail_count(EFBIG, FILE_REASON_NONE, pos);
                if (h.len > 0 && pwrite_all(dst, buf, h.len, (off_t) (base + pos)) < 0)
                        fail_count(errno, FILE_REASON_NONE, pos);
                pos += h.len;
                if (h.zeros > 0 && in_place && zero_range(dst, base + pos, h.zeros) < 0)
                        fail_count(errno, FILE_REASON_NONE, pos);
                pos += h.zeros;
                send_progress(FILE_RECORD_ACK, h.seq, pos);
                if (h.flags & FILE_FRAME_EOF)
                        return pos;
        }
}

/* The new inode: O_TMPFILE in the target's directory (it vanishes with us on any failure, a
 * client gone or a kill included), linked in by its /proc/self/fd name under a temporary name
 * and renamed over the target. Where O_TMPFILE or our /proc/self is not there, a named
 * temporary file, removed on every failure path we live through. */
static int tmp_open(int dir, const char *name, unsigned mode, char *tmpname, size_t size, bool *ret_named) {
        int fd = openat(dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);

        *ret_named = false;
        if (fd >= 0)
                return fd;
        for (int i = 0; i < 16; i++) {
                snprintf(tmpname, size, ".%.200s.sbx-%08x", name, (unsigned) random());
                fd = openat(dir, tmpname, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, mode);
                if (fd >= 0 || errno != EEXIST)
                        break;
        }
        *ret_named = fd >= 0;
        return fd;
}

static int tmp_link(int fd, int dir, const char *name, char *tmpname, size_t size) {
        char proc[64];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        for (int i = 0; i < 16; i++) {
                snprintf(tmpname, size, ".%.200s.sbx-%08x", name, (unsigned) random());
                if (linkat(AT_FDCWD, proc, dir, tmpname, AT_SYMLINK_FOLLOW) == 0)
                        return 0;
                if (errno != EEXIST)
                        return -1;
        }
        return -1;
}

static int dir_free_check(int dir, uint64_t size) {
        struct statvfs vfs;
        if (fstatvfs(dir, &vfs) < 0)
                return 0;
        return (uint64_t) vfs.f_bavail * vfs.f_frsize < size ? -1 : 0;
}

static void write_in_place(FileArgs *a, int dir, const char *name) {
        struct open_how how = { .flags = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        struct stat st;
        int pfd = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC), fd;
        uint64_t n;

        if (pfd < 0 || fstat(pfd, &st) < 0)
                helper_fail(errno, FILE_REASON_NONE);
        helper_need_regular(&st);
        fd = openat2_retry(dir, name, &how);
        if (fd < 0)
                helper_fail(errno, FILE_REASON_NONE);
        if (a->chunks) {
                n = chunks_in(fd, a->offset, true);
                if (fstat(fd, &st) < 0 || ((uint64_t) st.st_size < a->offset + n && ftruncate(fd, (off_t) (a->offset + n)) < 0))
                        fail_count(errno, FILE_REASON_NONE, n);
        } else {
                static char buf[FILE_DATA_MAX];
                uint64_t pos = 0, max = a->has_size ? a->size : UINT64_MAX;
                for (;;) {
                        ssize_t k = read(helper_data_fd, buf, max - pos < sizeof(buf) ? max - pos : sizeof(buf));
                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k < 0)
                                fail_count(errno, FILE_REASON_NONE, pos);
                        if (k == 0)
                                break;
                        if (pwrite_all(fd, buf, (size_t) k, (off_t) (a->offset + pos)) < 0)
                                fail_count(errno, FILE_REASON_NONE, pos);
                        pos += (uint64_t) k;
                        helper_progress_note(pos);
                        if (pos == max)
                                break;
                }
                n = pos;
        }
        if (a->has_size && n != a->size)
                fail_count(EINVAL, FILE_REASON_SHORT, n);
        if (a->sync && fsync(fd) < 0)
                helper_fail(errno, FILE_REASON_NONE);
        helper_done(n, false);
}

void op_write(FileArgs *a) {
        char tmpname[NAME_MAX + 1];
        const char *name;
        struct stat st;
        bool exists, named;
        unsigned mode;
        uint64_t n;
        int dir, fd;

        if (a->parents)
                helper_make_parents_of(a->path);
        dir = helper_resolve_parent(a->path, &name);
        if (dir < 0)
                helper_fail(errno, FILE_REASON_NONE);
        exists = fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
        if (exists && S_ISDIR(st.st_mode))
                helper_fail(EISDIR, FILE_REASON_IS_DIR);
        if (exists && a->exclusive)
                helper_fail(EEXIST, FILE_REASON_EXISTS);
        if (a->in_place) {
                if (!exists)
                        helper_fail(ENOENT, FILE_REASON_NONE);
                write_in_place(a, dir, name);
        }
        mode = a->has_mode ? a->mode : exists && S_ISREG(st.st_mode) ? (unsigned) (st.st_mode & 0777) : 0644;
        if (a->has_size && dir_free_check(dir, a->size) < 0)
                helper_fail(ENOSPC, FILE_REASON_SPACE);
        fd = tmp_open(dir, name, mode, tmpname, sizeof(tmpname), &named);
        if (fd < 0)
                helper_fail(errno, FILE_REASON_NONE);
        if (a->chunks) {
                n = chunks_in(fd, 0, false);
                if (ftruncate(fd, (off_t) n) < 0) /* a file ending in a hole */
                        fail_count(errno, FILE_REASON_NONE, n);
        } else
                n = copy_in(fd, a->has_size ? a->size : UINT64_MAX);
        if ((a->has_size && n != a->size && (errno = EINVAL, 1)) || fchmod(fd, mode) < 0 || (a->sync && fsync(fd) < 0) ||
            (!named && tmp_link(fd, dir, name, tmpname, sizeof(tmpname)) < 0) ||
            renameat2(dir, tmpname, dir, name, a->exclusive ? RENAME_NOREPLACE : 0) < 0) {
                int e = errno;
                bool short_ = a->has_size && n != a->size;
                if (named || tmpname[0])
                        (void) unlinkat(dir, tmpname, 0);
                fail_count(short_ ? EINVAL : e, short_ ? FILE_REASON_SHORT : e == EEXIST ? FILE_REASON_EXISTS : FILE_REASON_NONE, n);
        }
        if (a->sync)
                (void) fsync(dir);
        helper_done(n, !exists);
}
