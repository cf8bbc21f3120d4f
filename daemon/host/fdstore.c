/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "fdstore.h"
#include "log.h"
#include "macro.h"
#include "pidfd.h"
#include "util.h"

bool fdstore_name_is_ours(const char *name) {
        return name && name[0] >= 'a' && name[0] <= 'z' && name[1] == '.' && strchr(name + 2, '.');
}

const char *fdstore_name(char *buf, char kind, const char *id, const char *what) {
        snprintf(buf, FDSTORE_NAME_MAX, "%c.%s.%s", kind, id, what);
        return buf;
}

/* systemd's fdname_is_valid(): printable ASCII without ':', at most 255 bytes. */
static bool name_is_valid(const char *name) {
        size_t n = strlen(name);
        if (n == 0 || n > 255)
                return false;
        for (size_t i = 0; i < n; i++)
                if (name[i] < ' ' || name[i] > '~' || name[i] == ':')
                        return false;
        return true;
}

/* A copy of every fd pushed (and of every one taken back), under its name, for a holder at the
 * stop (server/hold.c): systemd's store does not tell what it holds, and is dropped at a stop. */
static FdStore kept;
static bool holder_on;

static bool have_notify_socket(void) {
        const char *e = getenv("NOTIFY_SOCKET");
        return e && e[0];
}

void fdstore_set_holder(bool on) {
        holder_on = on;
        if (!on)
                fdstore_done(&kept);
}

bool fdstore_holder_enabled(void) {
        return holder_on;
}

const FdStore *fdstore_kept(void) {
        return &kept;
}

bool fdstore_enabled(void) {
        return holder_on || have_notify_socket();
}

static void kept_add(const char *name, int fd) {
        int copy;

        if (!holder_on)
                return;
        copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (copy < 0 || fdstore_add(&kept, name, copy) < 0)
                log_warning("cannot keep a copy of %s for the holder: it will not outlive a stop", name);
}

static void kept_remove(const char *name) {
        size_t j = 0;

        for (size_t i = 0; i < kept.n; i++) {
                if (strcmp(kept.entries[i].name, name) == 0) {
                        safe_close(kept.entries[i].fd);
                        free(kept.entries[i].name);
                } else
                        kept.entries[j++] = kept.entries[i];
        }
        kept.n = j;
}

int fdstore_push(const char *name, int fd) {
        if (!name_is_valid(name) || strlen(name) >= FDSTORE_NAME_MAX || fd < 0)
                return -EINVAL;
        if (!fdstore_enabled())
                return 0;
        kept_add(name, fd);
        return fdstore_resend(name, fd);
}

int fdstore_resend(const char *name, int fd) {
        char msg[64 + FDSTORE_NAME_MAX];

        if (!name_is_valid(name) || strlen(name) >= FDSTORE_NAME_MAX || fd < 0)
                return -EINVAL;
        if (!have_notify_socket())
                return holder_on;
        /* FDPOLL=0 (systemd 246+): a pidfd whose process ended, a pipe whose writer is gone, must
         * stay until the next daemon has looked at it, not be dropped by systemd on POLLIN/HUP. */
        snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s\nFDPOLL=0", name);
        return sd_pid_notify_with_fds(0, false, msg, &fd, 1);
}

int fdstore_remove(const char *name) {
        char msg[64 + FDSTORE_NAME_MAX];

        if (!name_is_valid(name) || strlen(name) >= FDSTORE_NAME_MAX)
                return -EINVAL;
        kept_remove(name);
        if (!have_notify_socket())
                return 0;
        snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", name);
        return sd_notify(0, msg);
}

int fdstore_add(FdStore *st, const char *name, int fd) {
        char *copy;

        if (st->n == st->allocated) {
                size_t a = st->allocated ? st->allocated * 2 : 16;
                FdStoreEntry *e = reallocarray(st->entries, a, sizeof(*e));
                if (!e) {
                        safe_close(fd);
                        return -ENOMEM;
                }
                st->entries = e;
                st->allocated = a;
        }
        copy = strdup(name);
        if (!copy) {
                safe_close(fd);
                return -ENOMEM;
        }
        st->entries[st->n] = (FdStoreEntry) { .name = copy, .fd = fd, .seq = st->n };
        st->n++;
        st->sorted = false;
        return 0;
}

static int entry_cmp(const void *a, const void *b) {
        const FdStoreEntry *x = a, *y = b;
        int c = strcmp(x->name, y->name);
        return c ? c : x->seq < y->seq ? -1 : x->seq > y->seq;
}

int fdstore_take(FdStore *st, const char *name) {
        size_t lo = 0, hi = st->n;

        if (!st->sorted) {
                if (st->n > 1)
                        qsort(st->entries, st->n, sizeof(*st->entries), entry_cmp);
                st->sorted = true;
        }
        /* The first entry of that name, then the first of them still unclaimed. */
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (strcmp(st->entries[mid].name, name) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        for (; lo < st->n && strcmp(st->entries[lo].name, name) == 0; lo++)
                if (st->entries[lo].fd >= 0) {
                        /* Still in systemd's store; the holder of the next stop needs it too. */
                        if (st != &kept)
                                kept_add(name, st->entries[lo].fd);
                        return TAKE_FD(st->entries[lo].fd);
                }
        return -ENOENT;
}

bool fdstore_has(const FdStore *st, const char *name) {
        for (size_t i = 0; i < st->n; i++)
                if (st->entries[i].fd >= 0 && strcmp(st->entries[i].name, name) == 0)
                        return true;
        return false;
}

size_t fdstore_drop_unclaimed(FdStore *st) {
        size_t n = 0;

        for (size_t i = 0; i < st->n; i++)
                if (st->entries[i].fd >= 0) {
                        st->entries[i].fd = safe_close(st->entries[i].fd);
                        (void) fdstore_remove(st->entries[i].name);
                        n++;
                }
        return n;
}

void fdstore_done(FdStore *st) {
        for (size_t i = 0; i < st->n; i++) {
                safe_close(st->entries[i].fd);
                free(st->entries[i].name);
        }
        free(st->entries);
        *st = (FdStore) {};
}

static int fd_link(int fd, char *buf, size_t size) {
        char path[64];
        ssize_t n;

        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        n = readlink(path, buf, size - 1);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        return 0;
}

int fdstore_check_pidfd_any(int fd, int *ret_pid) {
        int k = fdstore_check_pidfd(fd, ret_pid);
        if (k == -ESRCH) {
                *ret_pid = 0;
                return 0;
        }
        return k;
}

int fdstore_check_tty_master(int fd) {
        struct stat st;
        unsigned n;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISCHR(st.st_mode) || major(st.st_rdev) != 5 || ioctl(fd, TIOCGPTN, &n) < 0)
                return -EBADFD;
        return 0;
}

int fdstore_check_fifo(int fd, int accmode) {
        struct stat st;
        int fl = fcntl(fd, F_GETFL);

        if (fl < 0 || fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISFIFO(st.st_mode) || (fl & O_ACCMODE) != accmode)
                return -EBADFD;
        return 0;
}

int fdstore_check_socket(int fd) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                return -errno;
        return S_ISSOCK(st.st_mode) ? 0 : -EBADFD;
}

int fdstore_check_memfd(int fd, const char *name, unsigned seals, size_t *ret_size) {
        char link[256], want[128];
        struct stat st;
        int have, k;

        if ((k = fd_link(fd, link, sizeof(link))) < 0)
                return k;
        /* "/memfd:NAME (deleted)" */
        snprintf(want, sizeof(want), "/memfd:%s (deleted)", name);
        if (strcmp(link, want) != 0)
                return -EBADFD;
        have = fcntl(fd, F_GET_SEALS);
        if (have < 0 || (unsigned) have != seals || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return -EBADFD;
        *ret_size = (size_t) st.st_size;
        return 0;
}

int fdstore_check_pidfd(int fd, int *ret_pid) {
        return fdstore_check_pidfd_ns(fd, ret_pid, NULL);
}

int fdstore_check_pidfd_ns(int fd, int *ret_pid, int *ret_inner_pid) {
        char path[64], link[64];
        ssize_t n;
        int k;

        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        n = readlink(path, link, sizeof(link) - 1);
        if (n < 0)
                return -errno;
        link[n] = '\0';
        if (strcmp(link, "anon_inode:[pidfd]") != 0)
                return -EBADFD;
        k = pidfd_pids(fd, ret_pid, ret_inner_pid);
        return k == -ESRCH || k == 0 ? k : -EBADFD;
}
