/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The import process of an image (image-internal.h): runs in a child of the daemon
 * (child-job.h), never on the loop. */
#include <dirent.h>
#include <grp.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "copy-tree.h"
#include "image-internal.h"
#include "util.h"

/* ---- The import's child --------------------------------------------------------------------- */

typedef struct ImportChild {
        int out;
        uint64_t last_usec;
        uint32_t layer, n_layers;
        const ImageCaps *caps;
        bool as_caller; /* the real ids are the caller's: every source read checked with them */
} ImportChild;

/* The caller's ids as the child's real ids (and groups), root's kept as the effective ones:
 * the child writes the image as root, and faccessat() without AT_EACCESS asks the kernel
 * whether the caller (real ids, no capabilities) may read what it is about to read. Not
 * dumpable, so that the caller cannot ptrace what now has its real uid. */
static int child_take_caller(const SandboxCaller *who) {
        if (who->uid == 0)
                return 0;
        if (prctl(PR_SET_DUMPABLE, 0) < 0 || setgroups(who->n_groups, who->groups) < 0 || setresgid(who->gid, 0, 0) < 0 ||
            setresuid(who->uid, 0, 0) < 0)
                return -errno;
        return 1;
}

/* The source entry path_fd may be read by the caller: the kernel's own check, on the real ids. */
static int child_may_read(int path_fd, bool dir) {
        return faccessat(path_fd, "", R_OK | (dir ? X_OK : 0), AT_EMPTY_PATH) < 0 ? -errno : 0;
}

static void child_emit(ImportChild *c, uint32_t kind, const ImageCounts *counts, const ImageFail *f) {
        ImportRecord rec = { .kind = kind, .layer = c->layer, .n_layers = c->n_layers, .counts = *counts };
        if (f) {
                rec.err = f->err;
                rec.reason = f->reason;
                snprintf(rec.name, sizeof(rec.name), "%s", f->name);
        }
        (void) !write(c->out, &rec, sizeof(rec));
}

static void child_progress(const ImageCounts *counts, void *userdata) {
        ImportChild *c = userdata;
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        if (now - c->last_usec < 100 * USEC_PER_MSEC)
                return;
        c->last_usec = now;
        child_emit(c, RECORD_PROGRESS, counts, NULL);
}

typedef struct DirCopy {
        ImportChild *child;
        ImageCounts *counts;
        char refused[512]; /* the entry the caller may not read */
} DirCopy;

static int dir_copy_may_read(int path_fd, const struct stat *st, void *userdata) {
        DirCopy *d = userdata;
        char proc[64];
        ssize_t n;
        int r = child_may_read(path_fd, S_ISDIR(st->st_mode));

        if (r < 0) {
                snprintf(proc, sizeof(proc), "/proc/self/fd/%d", path_fd);
                n = readlink(proc, d->refused, sizeof(d->refused) - 1);
                d->refused[n > 0 ? n : 0] = '\0';
        }
        return r;
}

static int dir_copy_progress(const CopyStats *s, void *userdata) {
        DirCopy *d = userdata;
        d->counts->bytes = s->bytes;
        d->counts->files = s->files + s->dirs + s->links;
        d->counts->skipped = s->skipped;
        d->counts->entries = d->counts->files + s->skipped;
        if (s->bytes > d->child->caps->max_bytes)
                return -E2BIG;
        /* What was left out counts too (image-import.h: every entry read). */
        if (d->counts->entries > d->child->caps->max_files)
                return -EMLINK; /* told apart from the size below */
        if (d->child->caps->deadline_usec && now_usec(CLOCK_MONOTONIC) > d->child->caps->deadline_usec)
                return -ETIMEDOUT;
        child_progress(d->counts, d->child);
        return 0;
}

static int child_copy_dir(ImportChild *c, int src_fd, int root_fd, ImageCounts *counts, ImageFail *f) {
        DirCopy d = { .child = c, .counts = counts };
        CopyOptions o = { .progress = dir_copy_progress, .userdata = &d, .progress_usec = 0,
                          .may_read = c->as_caller ? dir_copy_may_read : NULL };
        CopyStats s;
        int r = copy_tree(src_fd, root_fd, &o, &s);

        if (r >= 0)
                r = dir_copy_progress(&s, &d);
        if (r < 0) {
                *f = (ImageFail) { .err = r == -EMLINK ? E2BIG : -r,
                                   .reason = r == -E2BIG       ? IMAGE_REASON_TOO_BIG
                                             : r == -EMLINK    ? IMAGE_REASON_TOO_MANY
                                             : r == -ETIMEDOUT ? IMAGE_REASON_TOO_SLOW
                                             : d.refused[0]    ? IMAGE_REASON_UNREADABLE
                                                               : IMAGE_REASON_ENTRY };
                snprintf(f->name, sizeof(f->name), "%s", d.refused);
                return -f->err;
        }
        return 0;
}

static int open_layer(int dir_fd, const char *path) {
        struct open_how how = { .flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        struct stat st;
        int fd = (int) syscall(SYS_openat2, dir_fd, path, &how, sizeof(how));
        if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
                close(fd);
                errno = EINVAL;
                return -1;
        }
        return fd;
}

static int child_apply_layers(ImportChild *c, int src_fd, const ImageBlob *layers, size_t n, int root_fd, ImageCounts *counts,
                              ImageFail *f) {
        c->n_layers = (uint32_t) n;
        for (size_t i = 0; i < n; i++) {
                _cleanup_close_ int fd = open_layer(src_fd, layers[i].path);
                int r;
                c->layer = (uint32_t) i + 1;
                if (fd >= 0 && c->as_caller && (r = child_may_read(fd, false)) < 0) {
                        *f = (ImageFail) { .err = -r, .reason = IMAGE_REASON_UNREADABLE };
                        snprintf(f->name, sizeof(f->name), "%s", layers[i].path);
                        return r;
                }
                if (fd < 0) {
                        *f = (ImageFail) { .err = errno, .reason = IMAGE_REASON_ENTRY };
                        snprintf(f->name, sizeof(f->name), "%s", layers[i].path);
                        return -f->err;
                }
                r = image_layer_apply(fd, &layers[i], root_fd, true, c->caps, counts, child_progress, c, f);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Builds <images>/<tmp>/rootfs; the daemon renames the whole only once it said done. */
_noreturn_ static void image_import_child(int images_fd, const char *tmp, const char *kind, int src_fd, const ImageBlob *layers,
                                    size_t n_layers, const ImageCaps *caps, const SandboxCaller *who, int out) {
        ImportChild c = { .out = out, .caps = caps };
        ImageCounts counts = {};
        ImageFail f = {};
        _cleanup_close_ int tmp_fd = -EBADF, root_fd = -EBADF;
        int r;

        (void) setpriority(PRIO_PROCESS, 0, 10);
        /* The backstop of caps->deadline_usec, for a read that never returns. */
        (void) alarm((unsigned) (IMPORT_MAX_USEC / USEC_PER_SEC) + 60);
        umask(022);
        r = child_take_caller(who);
        c.as_caller = r > 0;
        if (r < 0) {
                f = (ImageFail) { .err = -r, .reason = IMAGE_REASON_ENTRY };
                snprintf(f.name, sizeof(f.name), "(taking uid %u's ids)", (unsigned) who->uid);
        } else if ((tmp_fd = openat(images_fd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
            mkdirat(tmp_fd, "rootfs", 0755) < 0 ||
            (root_fd = openat(tmp_fd, "rootfs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
                f = (ImageFail) { .err = errno, .reason = IMAGE_REASON_ENTRY };
                r = -1;
        } else if (strcmp(kind, "directory") == 0)
                r = child_copy_dir(&c, src_fd, root_fd, &counts, &f);
        else if (strcmp(kind, "tar") == 0) {
                c.n_layers = c.layer = 1;
                r = image_layer_apply(src_fd, NULL, root_fd, false, caps, &counts, child_progress, &c, &f);
        } else
                r = child_apply_layers(&c, src_fd, layers, n_layers, root_fd, &counts, &f);
        if (r >= 0 && (r = image_root_finish(root_fd)) < 0)
                f = (ImageFail) { .err = -r, .reason = IMAGE_REASON_ENTRY };
        child_emit(&c, r < 0 ? RECORD_FAILED : RECORD_DONE, &counts, r < 0 ? &f : NULL);
        _exit(r < 0 ? 1 : 0);
}

int image_import_main(void *arg, int out) {
        const ImportArgs *a = arg;

        image_import_child(a->images_fd, a->tmp, a->kind, a->src_fd, a->layers, a->n_layers, &a->caps, a->caller, out);
}
