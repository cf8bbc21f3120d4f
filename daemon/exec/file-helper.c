/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd-file-helper: exec'd by sandboxd for a file operation (file-helper.h), never by hand.
 * Its argv is the run helper's (RunParams and the filter as hex, the cwd) and then the op. It
 * enters the sandbox exactly as a run's command does (helper_enter_sandbox(): cgroup, namespaces,
 * the request's user), takes the runs' seccomp filter with no_new_privs, and resolves every path
 * inside, from the sandbox's root, with openat2(RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS) and O_PATH
 * first: a FIFO or a device is never opened, a symlink is followed only inside the sandbox.
 * What it finds goes to stdout as FileRecords. It never execs. */
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

#include "dir-names.h"
#include "file-helper-internal.h"
#include "file-tar.h"
#include "macro.h"
#include "open-beneath.h"
#include "rm-rf.h"
#include "run-exec.h"
#include "spawn.h"

#define LIST_MAX_ENTRIES 100000u


static int out_fd = 1;
int helper_data_fd = -1; /* file.read into the client's fd: its fd 2 (file-op.c) */

/* All of it, to fd: a non-blocking one (the client's may be) is waited for with poll. */
static int write_fd_all(int fd, const void *data, size_t n) {
        const char *p = data;
        while (n > 0) {
                ssize_t k = write(fd, p, n);
                if (k < 0 && errno == EAGAIN) {
                        struct pollfd pfd = { .fd = fd, .events = POLLOUT };
                        (void) poll(&pfd, 1, -1);
                        continue;
                }
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return -1;
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

static int write_all(const void *data, size_t n) {
        return write_fd_all(out_fd, data, n);
}

int helper_record_send(FileRecord *r, const char *path, const char *target) {
        r->path_len = path ? (uint32_t) strlen(path) : 0;
        r->target_len = target ? (uint32_t) strlen(target) : 0;
        if (write_all(r, sizeof(*r)) < 0 || write_all(path, r->path_len) < 0 || write_all(target, r->target_len) < 0)
                return -1;
        return 0;
}

static uint64_t progress_bytes;
static int64_t progress_ns;

/* bytes so far of a transfer the daemon does not see (file-helper.h: FILE_RECORD_PROGRESS): a
 * record only once FILE_PROGRESS_BYTES more came and FILE_PROGRESS_NSEC passed, so the record
 * pipe never slows the copy. */
void helper_progress_note(uint64_t bytes) {
        struct timespec ts;
        int64_t now;

        if (bytes < progress_bytes + FILE_PROGRESS_BYTES || clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
                return;
        now = (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
        if (now - progress_ns < FILE_PROGRESS_NSEC)
                return;
        progress_bytes = bytes;
        progress_ns = now;
        FileRecord r = { .kind = FILE_RECORD_PROGRESS, .offset = bytes };
        if (helper_record_send(&r, NULL, NULL) < 0)
                _exit(1); /* the daemon is gone */
}

_Noreturn void helper_fail(int err, FileReason reason) {
        FileRecord r = { .kind = FILE_RECORD_ERROR, .err = err ? err : EIO, .reason = reason };
        (void) helper_record_send(&r, NULL, NULL);
        _exit(0);
}

_Noreturn void helper_done(uint64_t count, bool truncated) {
        FileRecord r = { .kind = FILE_RECORD_DONE, .count = count, .truncated = truncated };
        (void) helper_record_send(&r, NULL, NULL);
        _exit(0);
}

/* ---- Resolution inside the sandbox ------------------------------------------------------- */

static int root_fd = -1;

/* path from the sandbox's root; ELOOP/EXDEV from a magic link say so. */
int helper_resolve(const char *path, int flags) {
        struct open_how how = {
                .flags = (uint64_t) (flags | O_CLOEXEC),
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };
        int fd = openat2_retry(root_fd, path, &how);
        if (fd < 0 && errno == EXDEV)
                helper_fail(EXDEV, FILE_REASON_MAGICLINK);
        return fd;
}

/* Splits path (absolute) into its parent, opened O_PATH|O_DIRECTORY, and its last component
 * (trailing slashes dropped; "." and ".." refused: there is no name to act on). */
int helper_resolve_parent(char *path, const char **ret_name) {
        size_t n = strlen(path);
        char *slash;
        int fd;

        while (n > 1 && path[n - 1] == '/')
                path[--n] = '\0';
        slash = strrchr(path, '/');
        if (!slash || !slash[1])
                helper_fail(EINVAL, FILE_REASON_PROTECTED); /* "/" itself */
        if (strcmp(slash + 1, ".") == 0 || strcmp(slash + 1, "..") == 0)
                helper_fail(EINVAL, FILE_REASON_DOT);
        *ret_name = slash + 1;
        if (slash == path)
                return helper_resolve("/", O_PATH | O_DIRECTORY);
        *slash = '\0';
        fd = helper_resolve(path, O_PATH | O_DIRECTORY);
        *slash = '/';
        return fd;
}

static FileType type_of(mode_t m) {
        switch (m & S_IFMT) {
        case S_IFDIR: return FILE_TYPE_DIR;
        case S_IFLNK: return FILE_TYPE_SYMLINK;
        case S_IFIFO: return FILE_TYPE_FIFO;
        case S_IFSOCK: return FILE_TYPE_SOCKET;
        case S_IFCHR: return FILE_TYPE_CHAR;
        case S_IFBLK: return FILE_TYPE_BLOCK;
        default: return FILE_TYPE_FILE;
        }
}

/* The entry dir_fd/name (name "" for dir_fd itself), never followed, as a record. */
static int entry_send(int dir_fd, const char *name, const char *path, dev_t parent_dev) {
        char target[FILE_RECORD_TEXT_MAX];
        FileRecord r = { .kind = FILE_RECORD_ENTRY };
        struct stat st;
        ssize_t n = -1;

        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW | (name[0] ? 0 : AT_EMPTY_PATH)) < 0)
                return -errno;
        r.type = type_of(st.st_mode);
        r.mode = st.st_mode & 07777;
        r.uid = st.st_uid;
        r.gid = st.st_gid;
        r.size = (uint64_t) st.st_size;
        r.nlink = st.st_nlink;
        r.blocks_bytes = (uint64_t) st.st_blocks * 512;
        r.mtime_ns = (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        if (parent_dev && st.st_dev != parent_dev)
                r.flags |= FILE_RECORD_MOUNT;
        if (S_ISLNK(st.st_mode)) {
                n = readlinkat(dir_fd, name, target, sizeof(target) - 1);
                if (n < 0)
                        return -errno;
                target[n] = '\0';
        }
        return helper_record_send(&r, path, n >= 0 ? target : NULL) < 0 ? -EPIPE : 0;
}

/* ---- The ops ------------------------------------------------------------------------------ */

static void op_stat(FileArgs *a) {
        int fd = helper_resolve(a->path, O_PATH | (a->follow ? 0 : O_NOFOLLOW));
        if (fd < 0)
                helper_fail(errno, FILE_REASON_NONE);
        if (entry_send(fd, "", a->path, 0) < 0)
                helper_fail(errno, FILE_REASON_NONE);
        helper_done(1, false);
}

/* The names of a directory, sorted (dir-names.c); out of memory ends the operation, an
 * unreadable directory is NULL. */
static char **dir_names(int dir_fd, size_t *ret_n) {
        char **names = dir_names_sorted(dir_fd, ret_n);
        if (!names && errno == ENOMEM)
                helper_fail(ENOMEM, FILE_REASON_NONE);
        return names;
}

typedef struct ListState {
        uint64_t entries, max_entries;
        unsigned max_depth;
        bool recursive, truncated;
} ListState;

/* Below the listed path nothing is followed: each directory is opened beneath its parent with
 * no symlink and no magic link allowed, so one swapped for a symlink is refused, never entered;
 * a mount point is reported, not entered. */
static int open_dir_beneath(int dir_fd, const char *name) {
        struct open_how how = {
                .flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        return openat2_retry(dir_fd, name, &how);
}

static void list_dir(ListState *ls, int dir_fd, const char *path, unsigned depth) {
        struct stat self;
        size_t n = 0;
        char **names;
        char sub[FILE_RECORD_TEXT_MAX + 1];

        if (fstat(dir_fd, &self) < 0 || !(names = dir_names(dir_fd, &n)))
                return;
        for (size_t i = 0; i < n; i++) {
                int k = snprintf(sub, sizeof(sub), "%s%s%s", path, strcmp(path, "/") == 0 ? "" : "/", names[i]);
                struct stat st;

                if (ls->entries >= ls->max_entries) {
                        ls->truncated = true;
                        break;
                }
                if (k < 0 || (size_t) k >= sizeof(sub))
                        continue; /* deeper than PATH_MAX: not reported */
                if (entry_send(dir_fd, names[i], sub, self.st_dev) == -EPIPE)
                        _exit(1);
                ls->entries++;
                if (ls->recursive && depth < ls->max_depth && fstatat(dir_fd, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    S_ISDIR(st.st_mode) && st.st_dev == self.st_dev) {
                        int fd = open_dir_beneath(dir_fd, names[i]);
                        if (fd >= 0) {
                                list_dir(ls, fd, sub, depth + 1);
                                safe_close(fd);
                        }
                }
        }
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
}

static void op_list(FileArgs *a) {
        ListState ls = { .max_entries = a->max_entries, .max_depth = a->max_depth, .recursive = a->recursive };
        struct stat st;
        int fd = helper_resolve(a->path, O_PATH);

        if (fd < 0)
                helper_fail(errno, FILE_REASON_NONE);
        if (fstat(fd, &st) < 0)
                helper_fail(errno, FILE_REASON_NONE);
        if (!S_ISDIR(st.st_mode))
                helper_fail(ENOTDIR, FILE_REASON_NOT_DIR);
        list_dir(&ls, fd, a->path, 1);
        helper_done(ls.entries, ls.truncated);
}

/* mkdir -p: each missing component made beneath its parent's fd and then opened O_NOFOLLOW (a
 * symlink raced into its place is refused, never followed); existing ones are resolved as the
 * sandbox sees them. */
static uint64_t make_parents(char *p, unsigned mode) {
        char *slash;
        uint64_t created = 0;
        int dir = helper_resolve("/", O_PATH | O_DIRECTORY);

        for (slash = strchr(p + 1, '/');; slash = strchr(slash + 1, '/')) {
                char *name;
                int fd;

                if (slash)
                        *slash = '\0';
                name = strrchr(p, '/') + 1;
                fd = helper_resolve(p, O_PATH | O_DIRECTORY);
                if (fd < 0 && errno == ENOENT && *name && strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
                        if (mkdirat(dir, name, slash ? 0755 : mode) < 0 && errno != EEXIST)
                                helper_fail(errno, FILE_REASON_NONE);
                        created++;
                        fd = openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                }
                if (fd < 0)
                        helper_fail(errno, errno == ENOTDIR ? FILE_REASON_NOT_DIR : FILE_REASON_NONE);
                safe_close(dir);
                dir = fd;
                if (!slash || !slash[1])
                        break;
                *slash = '/';
        }
        if (slash)
                *slash = '/';
        safe_close(dir);
        return created;
}

/* The missing directories above path (0755), for a write or a put with "parents": what cannot
 * be made shows when path's parent is resolved. */
void helper_make_parents_of(char *path) {
        char *slash = strrchr(path, '/');
        if (slash && slash != path) {
                *slash = '\0';
                (void) make_parents(path, 0755);
                *slash = '/';
        }
}

static void op_mkdir_parents(FileArgs *a) {
        helper_done(make_parents(a->path, a->mode), false);
}

static void op_mkdir(FileArgs *a) {
        const char *name;
        int dir;

        if (a->parents)
                op_mkdir_parents(a);
        dir = helper_resolve_parent(a->path, &name);
        if (dir < 0)
                helper_fail(errno, FILE_REASON_NONE);
        if (mkdirat(dir, name, a->mode) < 0)
                helper_fail(errno, errno == EEXIST ? FILE_REASON_EXISTS : FILE_REASON_NONE);
        helper_done(1, false);
}

/* Counts what a recursive remove takes, for its reply (the tree is walked once more by rm_rf_at,
 * which never follows a symlink and never crosses a mount). */
static uint64_t count_tree(int dir_fd, const char *name) {
        struct stat st;
        uint64_t n = 1;
        size_t k = 0;
        char **names;
        int fd;

        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                return 1;
        fd = open_dir_beneath(dir_fd, name);
        if (fd < 0)
                return 1;
        names = dir_names(fd, &k);
        for (size_t i = 0; names && i < k; i++) {
                n += count_tree(fd, names[i]);
                free(names[i]);
        }
        free(names);
        safe_close(fd);
        return n;
}

/* / and /work themselves are never removed, by whatever path they are named. */
static bool protected_dir(int dir, const char *name) {
        struct stat st, root, work;
        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                return false;
        if (fstat(root_fd, &root) == 0 && root.st_dev == st.st_dev && root.st_ino == st.st_ino)
                return true;
        return fstatat(root_fd, "work", &work, AT_SYMLINK_NOFOLLOW) == 0 && work.st_dev == st.st_dev &&
               work.st_ino == st.st_ino;
}

static void op_remove(FileArgs *a) {
        const char *name;
        uint64_t n;
        int dir = helper_resolve_parent(a->path, &name);

        if (dir < 0 && errno == ENOENT && a->missing_ok)
                helper_done(0, false);
        if (dir < 0)
                helper_fail(errno, FILE_REASON_NONE);
        if (protected_dir(dir, name))
                helper_fail(EINVAL, FILE_REASON_PROTECTED);
        if (unlinkat(dir, name, 0) == 0)
                helper_done(1, false);
        if (errno == ENOENT && a->missing_ok)
                helper_done(0, false);
        if (errno != EISDIR && errno != EPERM)
                helper_fail(errno, FILE_REASON_NONE);
        if (!a->recursive) {
                if (unlinkat(dir, name, AT_REMOVEDIR) < 0)
                        helper_fail(errno, errno == ENOTEMPTY || errno == EEXIST ? FILE_REASON_NOT_EMPTY : FILE_REASON_NONE);
                helper_done(1, false);
        }
        n = count_tree(dir, name);
        if (rm_rf_at(dir, name) < 0)
                helper_fail(errno, FILE_REASON_NONE);
        helper_done(n, false);
}

/* Only a regular file is opened for its data: a FIFO would block, a device is no file. */
void helper_need_regular(const struct stat *st) {
        if (S_ISREG(st->st_mode))
                return;
        if (S_ISDIR(st->st_mode))
                helper_fail(EISDIR, FILE_REASON_IS_DIR);
        if (S_ISLNK(st->st_mode))
                helper_fail(ELOOP, FILE_REASON_SYMLINK);
        if (S_ISFIFO(st->st_mode))
                helper_fail(EINVAL, FILE_REASON_FIFO);
        if (S_ISSOCK(st->st_mode))
                helper_fail(EINVAL, FILE_REASON_SOCKET);
        helper_fail(EINVAL, FILE_REASON_DEVICE);
}

/* The file's data, opened only once its O_PATH handle showed a regular file, then checked to be
 * that same inode (a swap between the two is refused, never read). */
static int open_regular(FileArgs *a, struct stat *ret) {
        int nofollow = a->nofollow ? O_NOFOLLOW : 0;
        int pfd = helper_resolve(a->path, O_PATH | nofollow), fd;
        struct stat st;

        if (pfd < 0 || fstat(pfd, &st) < 0)
                helper_fail(errno, FILE_REASON_NONE);
        helper_need_regular(&st);
        fd = helper_resolve(a->path, O_RDONLY | O_NOCTTY | O_NONBLOCK | nofollow);
        if (fd < 0 || fstat(fd, ret) < 0)
                helper_fail(errno, FILE_REASON_NONE);
        if (ret->st_dev != st.st_dev || ret->st_ino != st.st_ino)
                helper_fail(EBUSY, FILE_REASON_SWAPPED);
        safe_close(pfd);
        return fd;
}

/* The client's fd: written in order from its own position (holes skipped with lseek where it
 * is a regular file, zeros into a pipe); its flags are never changed (shared with the client). */
static int sink_write(const char *p, size_t n) {
        return write_fd_all(helper_data_fd, p, n);
}

static bool sink_seekable;

static void sink_hole(uint64_t n) {
        static const char zeros[65536];
        if (sink_seekable) {
                if (lseek(helper_data_fd, (off_t) n, SEEK_CUR) < 0)
                        helper_fail(errno, FILE_REASON_NONE);
                return;
        }
        while (n > 0) {
                size_t k = n < sizeof(zeros) ? (size_t) n : sizeof(zeros);
                if (sink_write(zeros, k) < 0)
                        helper_fail(errno, FILE_REASON_NONE);
                n -= k;
        }
}

/* A regular file ending in a hole: its length is made by ftruncate, as cp does. */
static void sink_finish(void) {
        struct stat st;
        off_t pos;
        if (!sink_seekable || (pos = lseek(helper_data_fd, 0, SEEK_CUR)) < 0 || fstat(helper_data_fd, &st) < 0 || st.st_size >= pos)
                return;
        if (ftruncate(helper_data_fd, pos) < 0)
                helper_fail(errno, FILE_REASON_NONE);
}

static void data_send(uint64_t offset, const void *data, size_t n) {
        FileRecord r = { .kind = FILE_RECORD_DATA, .offset = offset, .length = n };
        if (write_all(&r, sizeof(r)) < 0 || write_all(data, n) < 0)
                _exit(1);
}

/* The next byte of data at or after pos, and where that data ends (holes are not sent: the
 * next DATA record's offset jumps). Without SEEK_DATA, everything is data. */
uint64_t helper_next_data(int fd, uint64_t pos, uint64_t end, uint64_t *ret_data_end) {
        off_t d = lseek(fd, (off_t) pos, SEEK_DATA), h;

        if (d < 0)
                d = errno == ENXIO ? (off_t) end : (off_t) pos;
        if ((uint64_t) d >= end)
                return end;
        h = lseek(fd, d, SEEK_HOLE);
        *ret_data_end = h < 0 || (uint64_t) h > end ? end : (uint64_t) h;
        return (uint64_t) d;
}

static void op_read(FileArgs *a) {
        static char buf[FILE_DATA_MAX];
        FileRecord sz = { .kind = FILE_RECORD_SIZE };
        struct stat st, after;
        uint64_t pos, end, size;
        int fd = open_regular(a, &st);
        struct stat sst;

        sink_seekable = a->sink && fstat(helper_data_fd, &sst) == 0 && S_ISREG(sst.st_mode) && lseek(helper_data_fd, 0, SEEK_CUR) >= 0;
        size = (uint64_t) st.st_size;
        pos = a->offset < size ? a->offset : size;
        end = a->length < size - pos ? pos + a->length : size;
        sz.size = size;
        sz.offset = pos;
        sz.length = end - pos;
        if (helper_record_send(&sz, NULL, NULL) < 0)
                _exit(1);
        while (pos < end) {
                uint64_t data_end = end, d = helper_next_data(fd, pos, end, &data_end);
                ssize_t k;

                if (d >= end) {
                        if (a->sink)
                                sink_hole(end - pos);
                        pos = end; /* a hole to the end: the client makes it */
                        break;
                }
                if (a->sink && d > pos)
                        sink_hole(d - pos);
                pos = d;
                k = pread(fd, buf, data_end - pos < sizeof(buf) ? data_end - pos : sizeof(buf), (off_t) pos);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        helper_fail(errno, FILE_REASON_NONE);
                if (k == 0)
                        break; /* it shrank: ends early */
                if (a->sink && sink_write(buf, (size_t) k) < 0)
                        helper_fail(errno, FILE_REASON_NONE);
                if (!a->sink)
                        data_send(pos, buf, (size_t) k); /* the daemon counts these itself */
                pos += (uint64_t) k;
                if (a->sink)
                        helper_progress_note(pos - sz.offset);
        }
        if (a->sink)
                sink_finish();
        helper_done(pos - sz.offset, fstat(fd, &after) < 0 || after.st_size != st.st_size ||
                                      after.st_mtim.tv_sec != st.st_mtim.tv_sec || after.st_mtim.tv_nsec != st.st_mtim.tv_nsec);
}

/* ---- file.put, file.get (the tar code is file-tar.c) ------------------------------------- */

static void tar_totals(const TarStats *st) {
        FileRecord r = { .kind = FILE_RECORD_TAR, .count = st->entries, .size = st->bytes, .offset = st->skipped,
                         .length = st->changed };
        if (helper_record_send(&r, NULL, NULL) < 0)
                _exit(1);
}

_Noreturn static void tar_done(const TarStats *st) {
        tar_totals(st);
        helper_done(st->entries, false);
}

static FileReason tar_reason(TarReason r) {
        static const FileReason map[] = {
                [TAR_REASON_NONE] = FILE_REASON_NONE,
                [TAR_REASON_EXISTS] = FILE_REASON_EXISTS,
                [TAR_REASON_ABSOLUTE] = FILE_REASON_TAR_ABSOLUTE,
                [TAR_REASON_DOTDOT] = FILE_REASON_TAR_DOTDOT,
                [TAR_REASON_EMPTY] = FILE_REASON_TAR_EMPTY,
                [TAR_REASON_LONG] = FILE_REASON_TAR_LONG,
                [TAR_REASON_UNDER_SYMLINK] = FILE_REASON_TAR_UNDER_SYMLINK,
                [TAR_REASON_NOT_DIR] = FILE_REASON_TAR_NOT_DIR,
                [TAR_REASON_LINK] = FILE_REASON_TAR_LINK,
                [TAR_REASON_FORMAT] = FILE_REASON_TAR_FORMAT,
                [TAR_REASON_ENTRY] = FILE_REASON_TAR_ENTRY,
        };
        return (unsigned) r < sizeof(map) / sizeof(map[0]) ? map[r] : FILE_REASON_NONE;
}

_Noreturn static void tar_failed(const TarStats *st, const TarFail *tf) {
        FileRecord r = { .kind = FILE_RECORD_ERROR, .err = tf->err ? tf->err : EIO, .reason = tar_reason(tf->reason),
                         .count = st->entries, .offset = tf->entry, .flags = tf->entry ? FILE_RECORD_TAR_ENTRY : 0 };
        tar_totals(st);
        (void) helper_record_send(&r, tf->name[0] ? tf->name : NULL, NULL);
        _exit(0);
}

/* Into a directory that exists: entry by entry (each file atomically). Into a new one: the whole
 * tree in .sbx-put-XXXXXXXX beside it, renamed into place at the end, removed on failure. */
static void op_put(FileArgs *a) {
        char tmpname[32];
        const char *name;
        TarStats st;
        TarFail tf;
        struct stat sb;
        int fd = helper_resolve(a->path, O_PATH), dir, root;

        if (fd >= 0) {
                if (fstat(fd, &sb) < 0)
                        helper_fail(errno, FILE_REASON_NONE);
                if (!S_ISDIR(sb.st_mode))
                        helper_fail(ENOTDIR, FILE_REASON_NOT_DIR);
                if (tar_put(helper_data_fd, fd, false, a->overwrite, helper_progress_note, &st, &tf) < 0)
                        tar_failed(&st, &tf);
                tar_done(&st);
        }
        if (errno != ENOENT)
                helper_fail(errno, FILE_REASON_NONE);
        if (a->parents)
                helper_make_parents_of(a->path);
        dir = helper_resolve_parent(a->path, &name);
        if (dir < 0)
                helper_fail(errno, FILE_REASON_NONE);
        for (int i = 0;; i++) {
                snprintf(tmpname, sizeof(tmpname), ".sbx-put-%08x", (unsigned) random());
                if (mkdirat(dir, tmpname, 0755) == 0)
                        break;
                if (errno != EEXIST || i == 16)
                        helper_fail(errno, FILE_REASON_NONE);
        }
        root = openat(dir, tmpname, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0 || tar_put(helper_data_fd, root, true, true, helper_progress_note, &st, &tf) < 0) {
                if (root < 0)
                        tf = (TarFail) { .err = errno }, st = (TarStats) {};
                (void) rm_rf_at(dir, tmpname);
                tar_failed(&st, &tf);
        }
        if (renameat2(dir, tmpname, dir, name, RENAME_NOREPLACE) < 0) {
                int e = errno;
                (void) rm_rf_at(dir, tmpname);
                helper_fail(e, e == EEXIST ? FILE_REASON_EXISTS : FILE_REASON_NONE);
        }
        tar_done(&st);
}

static int get_to_sink(const void *p, size_t n, void *userdata) {
        uint64_t *offset = userdata;
        if (write_fd_all(helper_data_fd, p, n) < 0)
                return -1;
        *offset += n;
        helper_progress_note(*offset);
        return 0;
}

static int get_to_records(const void *p, size_t n, void *userdata) {
        uint64_t *offset = userdata;
        data_send(*offset, p, n);
        *offset += n;
        return 0;
}

/* Names start with path's basename; a path ending in "/." archives the contents as "./...". */
static void op_get(FileArgs *a) {
        size_t n = strlen(a->path);
        bool contents = strcmp(a->path, "/") == 0 || (n >= 2 && strcmp(a->path + n - 2, "/.") == 0);
        TarWriteFn w = a->sink ? get_to_sink : get_to_records;
        uint64_t offset = 0;
        const char *name;
        struct stat sb;
        TarStats st;
        TarFail tf;
        int fd, data = -1, r;

        if (contents || a->follow) {
                fd = helper_resolve(a->path, O_PATH);
                if (fd < 0 || fstat(fd, &sb) < 0)
                        helper_fail(errno, FILE_REASON_NONE);
                if (contents && !S_ISDIR(sb.st_mode))
                        helper_fail(ENOTDIR, FILE_REASON_NOT_DIR);
                if (S_ISREG(sb.st_mode))
                        data = helper_resolve(a->path, O_RDONLY | O_NONBLOCK | O_NOCTTY); /* checked to be fd's inode */
                name = strrchr(a->path, '/') + 1;
                r = tar_get(fd, "", data, contents ? "." : name, w, &offset, &st, &tf);
        } else {
                fd = helper_resolve_parent(a->path, &name);
                if (fd < 0 || fstatat(fd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
                        helper_fail(errno, FILE_REASON_NONE);
                r = tar_get(fd, name, -1, name, w, &offset, &st, &tf);
        }
        if (r < 0)
                tar_failed(&st, &tf);
        tar_done(&st);
}

/* ---- Arguments ---------------------------------------------------------------------------- */

static int parse_args(char **argv, FileArgs *a) {
        const char *hex;

        if (!argv[0] || !argv[1])
                return -1;
        a->op = argv[0];
        hex = argv[1];
        if (strlen(hex) % 2 || strlen(hex) / 2 > FILE_RECORD_TEXT_MAX || strlen(hex) == 0 ||
            run_exec_unhex(hex, a->path, strlen(hex) / 2) < 0)
                return -1;
        a->path[strlen(hex) / 2] = '\0';
        if (strlen(a->path) != strlen(hex) / 2 || a->path[0] != '/')
                return -1; /* a NUL inside, or not absolute: the daemon never sends one */
        a->mode = 0755;
        a->max_entries = 10000;
        a->max_depth = 64;
        a->length = UINT64_MAX;
        a->overwrite = true;
        for (char **w = argv + 2; *w; w++) {
                char *eq = strchr(*w, '=');
                unsigned long long v;
                if (!eq)
                        return -1;
                v = strtoull(eq + 1, NULL, 10);
                if (strncmp(*w, "follow=", 7) == 0)
                        a->follow = v;
                else if (strncmp(*w, "recursive=", 10) == 0)
                        a->recursive = v;
                else if (strncmp(*w, "parents=", 8) == 0)
                        a->parents = v;
                else if (strncmp(*w, "missing_ok=", 11) == 0)
                        a->missing_ok = v;
                else if (strncmp(*w, "exclusive=", 10) == 0)
                        a->exclusive = v;
                else if (strncmp(*w, "in_place=", 9) == 0)
                        a->in_place = v;
                else if (strncmp(*w, "sync=", 5) == 0)
                        a->sync = v;
                else if (strncmp(*w, "overwrite=", 10) == 0)
                        a->overwrite = v;
                else if (strncmp(*w, "chunks=", 7) == 0)
                        a->chunks = v;
                else if (strncmp(*w, "size=", 5) == 0)
                        a->size = v, a->has_size = true;
                else if (strncmp(*w, "new_mode=", 9) == 0 && v <= 0777)
                        a->mode = (unsigned) v, a->has_mode = true;
                else if (strncmp(*w, "sink=", 5) == 0)
                        a->sink = v;
                else if (strncmp(*w, "nofollow=", 9) == 0)
                        a->nofollow = v;
                else if (strncmp(*w, "offset=", 7) == 0)
                        a->offset = v;
                else if (strncmp(*w, "length=", 7) == 0)
                        a->length = v;
                else if (strncmp(*w, "mode=", 5) == 0 && v <= 0777)
                        a->mode = (unsigned) v;
                else if (strncmp(*w, "max_entries=", 12) == 0 && v <= LIST_MAX_ENTRIES)
                        a->max_entries = v;
                else if (strncmp(*w, "max_depth=", 10) == 0 && v <= 64)
                        a->max_depth = (unsigned) v;
                else
                        return -1;
        }
        return 0;
}

static void run_op(FileArgs *a) {
        if (strcmp(a->op, FILE_OP_STAT) == 0)
                op_stat(a);
        if (strcmp(a->op, FILE_OP_LIST) == 0)
                op_list(a);
        if (strcmp(a->op, FILE_OP_MKDIR) == 0)
                op_mkdir(a);
        if (strcmp(a->op, FILE_OP_REMOVE) == 0)
                op_remove(a);
        if (strcmp(a->op, FILE_OP_READ) == 0)
                op_read(a);
        if (strcmp(a->op, FILE_OP_WRITE) == 0)
                op_write(a);
        if (strcmp(a->op, FILE_OP_PUT) == 0)
                op_put(a);
        if (strcmp(a->op, FILE_OP_GET) == 0)
                op_get(a);
        helper_fail(EINVAL, FILE_REASON_NONE);
}

/* ---- The helper's own filter (docs/design/files.md, 5.1 item 4) --------------------------- */

#if defined(__x86_64__)
#define HELPER_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define HELPER_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

/* On top of the runs' filter: no execve or execveat, and no mapping made executable. Our
 * libraries are mapped by now (-z now binds them all at exec); whatever the sandbox put in its
 * view (a gconv module, a "gzip" for a filter libarchive lacks) can be neither run nor loaded in
 * the process that holds the client's fd: it fails with EPERM. */
static int helper_filter_apply(void) {
        struct sock_filter insns[] = {
#ifdef HELPER_AUDIT_ARCH
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, HELPER_AUDIT_ARCH, 1, 0),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
#endif
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#ifdef __x86_64__
                BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 8, 0), /* x32 numbers */
#else
                BPF_JUMP(BPF_JMP | BPF_JA, 0, 0, 0),
#endif
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_execve, 7, 0),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_execveat, 6, 0),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 3, 0),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mprotect, 2, 0),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_pkey_mprotect, 1, 0),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
                /* mmap, mprotect, pkey_mprotect: prot is their third argument (its low word). */
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
                BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 0, 1),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = { .len = sizeof(insns) / sizeof(insns[0]), .filter = insns };
        void *m;

        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
                return -errno;
        /* Fails closed: a filter that does not refuse what it must is a setup failure. */
        m = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m != MAP_FAILED || errno != EPERM ||
            (syscall(SYS_execveat, -1, "", NULL, NULL, AT_EMPTY_PATH) == 0 || errno != EPERM)) {
                errno = EPROTO;
                return -EPROTO;
        }
        return 0;
}

_Noreturn static void setup_fail(int report_fd, SpawnStep step) {
        SpawnReport r = { .kind = REPORT_FAILED, .step = step, .err = errno ? errno : EIO };
        report_send(report_fd, &r, -1);
        _exit(0);
}

int main(int argc, char **argv) {
        static struct sock_filter insns[BPF_MAXINSNS];
        SeccompProgram filter = { .insns = insns };
        FileArgs a = {};
        SpawnStep step;
        RunParams p;
        size_t len;
        int keep[RUN_PARAMS_FDS + 3] = { 0, 1, 2 };

        if (argc < 6 || run_exec_unhex(argv[1], &p, sizeof(p)) < 0 || parse_args(argv + 4, &a) < 0) {
                fprintf(stderr, "%s: started by sandboxd only\n", FILE_HELPER_NAME);
                return 127;
        }
        len = strlen(argv[2]) / 2;
        if (len == 0 || len % sizeof(struct sock_filter) != 0 || len > sizeof(insns) ||
            run_exec_unhex(argv[2], insns, len) < 0)
                return 127;
        filter.len = (unsigned short) (len / sizeof(struct sock_filter));
        (void) prctl(PR_SET_NAME, FILE_HELPER_NAME);
        /* Built into glibc: no locale file is read. libarchive's pax names are UTF-8 through it. */
        (void) setlocale(LC_ALL, "C.UTF-8");
        /* The sandbox must not ptrace us or reach our fds through /proc (CVE-2019-5736). */
        (void) prctl(PR_SET_DUMPABLE, 0);
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != (p.direct ? 0 : p.parent))
                _exit(1);
        close_all_fds_except(keep, 3 + run_params_fds(&p, keep + 3));
        out_fd = p.stdio[1];
        helper_data_fd = p.stdio[2];
        if (helper_enter_sandbox(&p, &step) < 0)
                setup_fail(p.report_fd, step);
        /* A client that closes its pipe gets EPIPE reported, not a helper killed by SIGPIPE. */
        (void) signal(SIGPIPE, SIG_IGN);
        /* Modes are applied as given (docs/protocol.md); at most a few fds are ever needed. */
        umask(0);
        if (setrlimit(RLIMIT_NOFILE, &(struct rlimit) { 256, 256 }) < 0)
                setup_fail(p.report_fd, STEP_RLIMIT);
        root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                setup_fail(p.report_fd, STEP_ROOT);
        if (seccomp_apply(&filter) < 0 || helper_filter_apply() < 0)
                setup_fail(p.report_fd, STEP_SECCOMP);
        safe_close(p.report_fd); /* EOF there: setup helper_done */
        run_op(&a);
}
