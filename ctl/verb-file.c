/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl cp, cat, ls, rm: files in and out of a sandbox (docs/design/files.md). cp has docker
 * cp's shape; the host side of a tree is the caller's own tar(1), run with the caller's rights,
 * and every fd goes to the daemon whole (SCM_RIGHTS): no byte of a file passes through here. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "file-proto.h"
#include "sandboxctl.h"
#include "util.h"

static int verb_cp_run(int argc, char *argv[]);
static int verb_cat_run(int argc, char *argv[]);
static int verb_ls_run(int argc, char *argv[]);
static int verb_rm_run(int argc, char *argv[]);

const Verb verb_cp = {
        .name = "cp",
        .args = "[-L] [-q] SRC DST",
        .summary = "Copy files or trees between the host and a sandbox (docker cp's shape)",
        .help = "Options:\n"
                "  -L --follow-link       Follow a symlink given as SRC (else it is copied as a link)\n"
                "  -q --quiet             No progress bar\n"
                "\nOne of SRC and DST is SANDBOX:PATH (a sandbox by id or name; PATH absolute, or\n"
                "relative to /work), the other a local path, or - for a tar stream on stdin (SRC)\n"
                "or stdout (DST). A local path with a ':' is written ./a:b or /abs/a:b. - as SRC\n"
                "is a tar stream only into a DST that is an existing directory or ends in /; into\n"
                "any other DST it is that one file's content.\n"
                "  cp ./src SBX:/work/src     a tree in (made when missing, else copied into it)\n"
                "  cp SBX:/work/out .         a file or tree out, into the current directory\n"
                "  cp ./src/. SBX:/work/dst   the contents of a directory, not the directory\n"
                "  tar cf - . | sandboxctl cp - SBX:/work/dst/    (a tar stream in; dst/ is made)\n"
                "  make report | sandboxctl cp - SBX:/work/report.txt   (one file from stdin)\n"
                "  sandboxctl cp SBX:/work/dst - | tar tf -       (a tar stream out)\n"
                "Another DST that ends in / must be an existing directory. A progress bar is\n"
                "drawn on a terminal (stderr). Trees go through tar(1) on the host side. Out of a\n"
                "sandbox, no setuid, setgid or sticky bit is kept, holes stay holes, and no\n"
                "symlink on the host side (DST, a directory on the way, a name in the tree) is\n"
                "followed.\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_cp_run,
};

const Verb verb_cat = {
        .name = "cat",
        .args = "SANDBOX PATH...",
        .summary = "Print files of a sandbox",
        .help = "Options:\n"
                "     --offset SIZE       Start this far into each file\n"
                "     --length SIZE       Print at most this much of each file\n"
                "\nBytes are written as they are. To a file or a pipe the daemon writes them itself\n"
                "(the fd is passed to it); to a terminal they come as the daemon's data events.\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_cat_run,
};

const Verb verb_ls = {
        .name = "ls",
        .args = "SANDBOX [PATH]",
        .summary = "List a directory of a sandbox (default /work)",
        .help = "Options:\n"
                "  -l --long              Type, mode, size, modification time\n"
                "  -R --recursive         The whole tree (at most 10000 entries)\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_ls_run,
};

const Verb verb_rm = {
        .name = "rm",
        .args = "[-r] [-f] SANDBOX PATH...",
        .summary = "Remove files or trees of a sandbox",
        .help = "Options:\n"
                "  -r --recursive         Remove a directory and everything in it (never following a\n"
                "                         symlink, never crossing a mount)\n"
                "  -f --force             A path that does not exist is not an error\n"
                "\nWithout -r: a file, a symlink (the link, not its target) or an empty directory.\n"
                "PATH is absolute, or relative to /work; /work itself is never removed. It works\n"
                "when runs are refused (a sandbox over its disk limit): remove, then run again;\n"
                "rm has such a sandbox measured again and says whether its runs are taken.\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_rm_run,
};

/* ---- SRC and DST ------------------------------------------------------------------------- */

typedef struct Endpoint {
        char *sandbox; /* NULL: the local side */
        const char *path;
        bool stream;   /* "-" */
} Endpoint;

static void endpoint_done(Endpoint *e) {
        free(e->sandbox);
}

/* [A-Za-z0-9._-] with at most one '/' (UID/NAME or USER/NAME): what may name a sandbox. */
static bool is_sandbox_ref(const char *s, size_t n) {
        size_t slashes = 0;

        if (n == 0 || n > 128)
                return false;
        for (size_t i = 0; i < n; i++) {
                if (s[i] == '/') {
                        if (++slashes > 1 || i == 0 || i == n - 1)
                                return false;
                } else if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-", s[i]))
                        return false;
        }
        return true;
}

/* docker cp's rule: SANDBOX:PATH unless the argument starts with / or . (a local path may hold
 * a colon then), or has no colon at all. */
static int endpoint_parse(const char *word, Endpoint *ret) {
        const char *colon = strchr(word, ':');
        Endpoint e = { .path = word };

        if (word[0] == '\0')
                return log_error("cp: an empty path");
        if (strcmp(word, "-") == 0)
                e.stream = true;
        else if (word[0] != '/' && word[0] != '.' && colon) {
                if (!is_sandbox_ref(word, (size_t) (colon - word)))
                        return log_error("cp: '%s': '%.*s' is not a sandbox id or name (a local path with ':' is "
                                         "written ./%s)",
                                         esc(word), (int) (colon - word), esc(word), esc(word));
                if (colon[1] == '\0')
                        return log_error("cp: '%s': the path in the sandbox is missing (SANDBOX:PATH)", esc(word));
                e.sandbox = strndup(word, (size_t) (colon - word));
                if (!e.sandbox)
                        return log_error_errno(-ENOMEM, "%m");
                e.path = colon + 1;
        }
        *ret = e;
        return 0;
}

static bool ends_with(const char *s, const char *suffix) {
        size_t n = strlen(s), m = strlen(suffix);
        return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The last component of a path ("a/b/" is "b"); malloc'd. */
static char *base_name(const char *path) {
        size_t n = strlen(path);
        while (n > 1 && path[n - 1] == '/')
                n--;
        const char *s = path + n;
        while (s > path && s[-1] != '/')
                s--;
        return strndup(s, (size_t) (path + n - s));
}

static char *dir_name(const char *path) {
        _cleanup_free_ char *copy = strdup(path);
        if (!copy)
                return NULL;
        size_t n = strlen(copy);
        while (n > 1 && copy[n - 1] == '/')
                copy[--n] = '\0';
        char *slash = strrchr(copy, '/');
        if (!slash)
                return strdup(".");
        if (slash == copy)
                return strdup("/");
        *slash = '\0';
        return strdup(copy);
}

static char *path_join(const char *dir, const char *name) {
        char *out;
        return asprintf(&out, "%s%s%s", dir, ends_with(dir, "/") ? "" : "/", name) < 0 ? NULL : out;
}

/* ---- Talking to the daemon --------------------------------------------------------------- */

typedef struct Progress {
        bool show;
        bool shown;
} Progress;

static int on_progress(json_object *ev, void *userdata) {
        Progress *p = userdata;
        char size[FIELD_BUF];
        int64_t bytes = 0, total = 0;
        const char *what = json_str(ev, "event");

        if (!p->show || !what || strcmp(what, "progress") != 0)
                return 0;
        (void) json_int(ev, "bytes", &bytes);
        fmt_size(size, ev, "bytes");
        if (json_int(ev, "total", &total) && total > 0)
                progress_bar(bytes, total, size);
        else
                fprintf(stderr, "\r%s copied   ", esc(size));
        p->shown = true;
        return 0;
}

/* The end of a call: the transport error, or the reply (printed with --json) checked. */
static int finish_call(int r, json_object **reply, Progress *p) {
        if (p && p->shown)
                progress_clear();
        if (r < 0)
                return log_transport_error(r);
        if (arg.json)
                print_json(*reply);
        return reply_check(*reply);
}

/* "dir", "file", ... of a path in the sandbox; NULL and 0 when it does not exist; < 0 for any
 * other failure (logged). */
static int remote_type(SbxClient *c, const char *sandbox, const char *path, unsigned flags, char **ret_type,
                       json_object **ret_stat) {
        _cleanup_json_ json_object *reply = NULL;
        int r = sbx_file_stat(c, sandbox, path, flags, &reply);

        *ret_type = NULL;
        if (r < 0)
                return log_transport_error(r);
        if (!sbx_reply_ok(reply)) {
                const char *code = sbx_reply_error_code(reply), *field = json_str(json_child(reply, "error"), "field");
                /* A sandbox that does not exist is not a path that does not: the daemon's words. */
                if (code && strcmp(code, "not_found") == 0 && !(field && strcmp(field, "sandbox") == 0))
                        return 0;
                return reply_check(reply);
        }
        json_object *st = json_child(reply, "stat");
        const char *type = json_str(st, "type");
        if (!type)
                return log_error("sandboxd's file.stat reply has no type");
        *ret_type = strdup(type);
        if (!*ret_type)
                return log_error_errno(-ENOMEM, "%m");
        if (ret_stat)
                *ret_stat = json_object_get(st);
        return 1;
}

/* Runs tar with the given fd as its stdin (in) or stdout (out), in the directory cwd_fd (an
 * O_PATH handle, or -1: ours); returns its pid. */
static pid_t spawn_tar(char *const argv[], int in, int out, int cwd_fd) {
        pid_t pid = fork();

        if (pid < 0)
                return log_error_errno(negative_errno(), "fork: %m");
        if (pid == 0) {
                if ((in >= 0 && dup2(in, STDIN_FILENO) < 0) || (out >= 0 && dup2(out, STDOUT_FILENO) < 0) ||
                    (cwd_fd >= 0 && fchdir(cwd_fd) < 0))
                        _exit(126);
                execvp(argv[0], argv);
                fprintf(stderr, "sandboxctl: cannot run tar: %s\n", strerror(errno));
                _exit(127);
        }
        return pid;
}

static int wait_tar(pid_t pid) {
        int status;

        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return log_error_errno(negative_errno(), "waitpid: %m");
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return 0;
        if (WIFEXITED(status))
                return log_error("tar exited with status %d", WEXITSTATUS(status));
        return log_error("tar was killed by signal %d", WTERMSIG(status));
}

/* ---- cp: into the sandbox ---------------------------------------------------------------- */

static int cp_file_in(SbxClient *c, const char *src, const struct stat *st, const char *sandbox, const char *dst,
                      Progress *p) {
        _cleanup_close_ int fd = open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        json_object *reply = NULL;
        int r;

        if (fd < 0)
                return log_error_errno(negative_errno(), "cannot open %s: %m", esc(src));
        r = sbx_file_write_fd(c, sandbox, dst, fd, (uint64_t) st->st_size, (int) (st->st_mode & 0777), 0, on_progress,
                              p, &reply);
        r = finish_call(r, &reply, p);
        json_object_put(reply);
        return r;
}

/* tar -c -C DIR NAME into a pipe whose other end the daemon reads, unpacked into dst. */
static int cp_tree_in(SbxClient *c, const char *dir, const char *name, const char *sandbox, const char *dst,
                      Progress *p) {
        char *argv[] = { (char *) "tar", (char *) "-c", (char *) "-f", (char *) "-", (char *) "-C", (char *) dir,
                         (char *) "--", (char *) name, NULL };
        int pipefd[2];
        json_object *reply = NULL;
        int r;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return log_error_errno(negative_errno(), "pipe: %m");
        pid_t pid = spawn_tar(argv, -1, pipefd[1], -1);
        safe_close(pipefd[1]);
        if (pid < 0) {
                safe_close(pipefd[0]);
                return (int) pid;
        }
        r = sbx_file_put_fd(c, sandbox, dst, pipefd[0], 0, on_progress, p, &reply);
        /* Closed before the wait: a tar still writing (the daemon refused) gets EPIPE and ends. */
        safe_close(pipefd[0]);
        r = finish_call(r, &reply, p);
        json_object_put(reply);
        int t = wait_tar(pid);
        return r < 0 ? r : t;
}

/* Our stdin as the content of one file: a file or a pipe is handed to the daemon; anything
 * else (a terminal, a socket) is read here and sent by chunks. */
static int cp_stdin_file(SbxClient *c, const char *sandbox, const char *dst, Progress *p) {
        json_object *reply = NULL;
        struct stat st;
        int r;

        if (fstat(STDIN_FILENO, &st) == 0 && (S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode)))
                r = sbx_file_write_fd(c, sandbox, dst, STDIN_FILENO, UINT64_MAX, SBX_FILE_MODE_DEFAULT, 0, on_progress, p,
                                      &reply);
        else
                r = sbx_file_write_from(c, sandbox, dst, STDIN_FILENO, SBX_FILE_MODE_DEFAULT, 0, on_progress, p, &reply);
        r = finish_call(r, &reply, p);
        json_object_put(reply);
        return r;
}

/* Our stdin: a tar stream into an existing directory (or a DST ending in /), else the content
 * of the one file DST. The stream goes to the daemon as it is. */
static int cp_stream_in(SbxClient *c, const char *sandbox, const char *dst, Progress *p) {
        _cleanup_free_ char *type = NULL;
        json_object *reply = NULL;
        int r;

        if (!ends_with(dst, "/")) {
                if ((r = remote_type(c, sandbox, dst, SBX_FILE_FOLLOW, &type, NULL)) < 0)
                        return r;
                if (!type || strcmp(type, "dir") != 0)
                        return cp_stdin_file(c, sandbox, dst, p);
        }
        if (isatty(STDIN_FILENO))
                return log_error("cp: refusing to read a tar stream from a terminal (pipe one into '-')");
        r = sbx_file_put_fd(c, sandbox, dst, STDIN_FILENO, 0, on_progress, p, &reply);
        r = finish_call(r, &reply, p);
        json_object_put(reply);
        return r;
}

static int cp_in(SbxClient *c, const Endpoint *src, const Endpoint *dst, bool follow, Progress *p) {
        _cleanup_free_ char *type = NULL, *base = NULL, *dir = NULL, *target = NULL;
        bool contents = ends_with(src->path, "/.") || strcmp(src->path, ".") == 0;
        struct stat st;
        int r;

        if (src->stream)
                return cp_stream_in(c, dst->sandbox, dst->path, p);
        if ((follow ? stat(src->path, &st) : lstat(src->path, &st)) < 0)
                return log_error_errno(negative_errno(), "cannot copy %s: %m", esc(src->path));
        r = remote_type(c, dst->sandbox, dst->path, SBX_FILE_FOLLOW, &type, NULL);
        if (r < 0)
                return r;
        bool dst_dir = type && strcmp(type, "dir") == 0;
        if (ends_with(dst->path, "/") && !dst_dir)
                return log_error("cp: %s:%s is not an existing directory", esc(dst->sandbox), esc(dst->path));
        base = base_name(src->path);
        dir = dir_name(src->path);
        if (!base || !dir)
                return log_error_errno(-ENOMEM, "%m");

        if (S_ISREG(st.st_mode)) {
                target = dst_dir ? path_join(dst->path, base) : strdup(dst->path);
                if (!target)
                        return log_error_errno(-ENOMEM, "%m");
                return cp_file_in(c, src->path, &st, dst->sandbox, target, p);
        }
        if (S_ISDIR(st.st_mode)) {
                if (type && !dst_dir)
                        return log_error("cp: cannot copy a directory onto %s:%s, which is not a directory",
                                         esc(dst->sandbox), esc(dst->path));
                /* Into an existing directory: the directory itself (its name first); to a new
                 * path, or with "/.": its contents. */
                if (dst_dir && !contents)
                        return cp_tree_in(c, dir, base, dst->sandbox, dst->path, p);
                return cp_tree_in(c, src->path, ".", dst->sandbox, dst->path, p);
        }
        if (S_ISLNK(st.st_mode)) {
                if (!dst_dir)
                        return log_error("cp: %s is a symlink: it can be copied into an existing directory as a link, "
                                         "or what it points to with -L", esc(src->path));
                return cp_tree_in(c, dir, base, dst->sandbox, dst->path, p);
        }
        return log_error("cp: %s is not a regular file, a directory or a symlink", esc(src->path));
}

/* ---- cp: out of the sandbox -------------------------------------------------------------- */

/* The host side of a copy out never follows a symlink (docs/man/sandboxctl.1): any link on
 * the way to DST, or at DST, may be one an earlier copy-out left there, and following it would
 * let the sandbox choose where on the host its bytes land. Every component is resolved with
 * RESOLVE_NO_SYMLINKS; what is written is opened or made beneath that fd, O_NOFOLLOW, and tar
 * runs in it (fchdir), so nothing is looked up again by path. */
static int open_local(int dir_fd, const char *path, int flags) {
        struct open_how how = { .flags = (uint64_t) (flags | O_CLOEXEC),
                                .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        int fd = (int) syscall(SYS_openat2, dir_fd, path, &how, sizeof(how));
        return fd < 0 ? negative_errno() : fd;
}

static int log_local_error(int r, const char *path) {
        if (r == -ELOOP)
                return log_error("cp: %s is or goes through a symlink: a copy out of a sandbox never follows a link "
                                 "on the host (an earlier copy may have left it); name the real directory "
                                 "(realpath)",
                                 esc(path));
        return log_error_errno(r, "cp: %s: %m", esc(path));
}

/* The regular file name beneath dir_fd, made (mode & 0777) or truncated; never a link, a FIFO
 * or a device, and no setuid, setgid or sticky bit left on it. */
static int open_file_out(int dir_fd, const char *name, const char *shown, int64_t mode, bool *ret_made) {
        _cleanup_close_ int fd = -1;
        struct stat st;

        /* Looked at first: opening a device (or a FIFO) for writing is already an action. */
        *ret_made = fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
        if (!*ret_made && !S_ISREG(st.st_mode))
                return S_ISLNK(st.st_mode) ? log_local_error(-ELOOP, shown)
                                           : log_error("cp: %s exists and is not a regular file", esc(shown));
        fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
                    (mode_t) (mode & 0777));
        if (fd < 0)
                return log_local_error(negative_errno(), shown);
        if (fstat(fd, &st) < 0)
                return log_error_errno(negative_errno(), "cp: %s: %m", esc(shown));
        if (!S_ISREG(st.st_mode))
                return log_error("cp: %s exists and is not a regular file", esc(shown));
        if (ftruncate(fd, 0) < 0 || ((st.st_mode & 07000) && fchmod(fd, st.st_mode & 0777) < 0) ||
            fcntl(fd, F_SETFL, 0) < 0) /* O_NONBLOCK off: the daemon writes it as any file */
                return log_error_errno(negative_errno(), "cp: %s: %m", esc(shown));
        return TAKE_FD(fd);
}

/* A symlink as src is read through only with follow (-L), resolved in the sandbox; a file this
 * copy made and could not fill is removed again. */
static int cp_file_out(SbxClient *c, const char *sandbox, const char *src, json_object *st, bool follow, int dir_fd,
                       const char *name, const char *shown, Progress *p) {
        int64_t mode = 0644;
        json_object *reply = NULL;
        bool made = false;
        int r;

        (void) json_int(st, "mode", &mode);
        _cleanup_close_ int fd = open_file_out(dir_fd, name, shown, mode, &made);
        if (fd < 0)
                return fd;
        r = sbx_file_read_fd(c, sandbox, src, 0, UINT64_MAX, fd, follow ? 0 : SBX_FILE_NOFOLLOW, on_progress, p, &reply);
        r = finish_call(r, &reply, p);
        json_object_put(reply);
        if (r < 0 && made)
                (void) unlinkat(dir_fd, name, 0);
        return r;
}

/* file.get into a pipe that tar -x reads, in the directory dir_fd; strip drops the top name (a
 * copy to a new name). As root, GNU tar would keep setuid bits and existing directories' modes
 * would take the sandbox's: --no-same-permissions and --no-overwrite-dir. A directory entry
 * meeting a symlink replaces it (never --keep-directory-symlink); a sparse entry stays sparse. */
static int cp_tree_out(SbxClient *c, const char *sandbox, const char *src, unsigned flags, int dir_fd, bool strip,
                       Progress *p) {
        char *argv[] = { (char *) "tar", (char *) "-x", (char *) "-f", (char *) "-", (char *) "--no-same-owner",
                         (char *) "--no-same-permissions", (char *) "--no-overwrite-dir",
                         strip ? (char *) "--strip-components=1" : NULL, NULL };
        int pipefd[2];
        json_object *reply = NULL;
        int r;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return log_error_errno(negative_errno(), "pipe: %m");
        pid_t pid = spawn_tar(argv, pipefd[0], -1, dir_fd);
        safe_close(pipefd[0]);
        if (pid < 0) {
                safe_close(pipefd[1]);
                return (int) pid;
        }
        r = sbx_file_get_fd(c, sandbox, src, pipefd[1], flags, on_progress, p, &reply);
        safe_close(pipefd[1]); /* tar's EOF */
        r = finish_call(r, &reply, p);
        json_object_put(reply);
        int t = wait_tar(pid);
        return r < 0 ? r : t;
}

/* DST that does not exist: its parent, opened as above (base: its last component). */
static int open_local_parent(const char *path, char **ret_base) {
        _cleanup_free_ char *dir = dir_name(path), *base = base_name(path);
        int fd;

        if (!dir || !base)
                return log_error_errno(-ENOMEM, "%m");
        if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0 || strcmp(base, "/") == 0)
                return log_error("cp: %s: no such directory", esc(path));
        fd = open_local(AT_FDCWD, dir, O_PATH | O_DIRECTORY);
        if (fd < 0)
                return log_local_error(fd, dir);
        *ret_base = TAKE_PTR(base);
        return fd;
}

/* A symlink (without -L), a FIFO, a device: copied out only into an existing directory, by tar. */
static int log_not_into_dir(const Endpoint *src, const char *type) {
        if (strcmp(type, "symlink") == 0)
                return log_error("cp: %s:%s is a symlink: it can be copied into an existing directory as a link, "
                                 "or what it points to with -L", esc(src->sandbox), esc(src->path));
        return log_error("cp: %s:%s is a %s: it can be copied into an existing directory", esc(src->sandbox),
                         esc(src->path), esc(type));
}

static int cp_out_new(SbxClient *c, const Endpoint *src, const Endpoint *dst, const char *type, json_object *st,
                      unsigned flags, Progress *p) {
        _cleanup_free_ char *name = NULL;
        _cleanup_close_ int parent = open_local_parent(dst->path, &name), fd = -1;
        bool contents = ends_with(src->path, "/.");

        if (parent < 0)
                return parent;
        if (strcmp(type, "file") == 0)
                return cp_file_out(c, src->sandbox, src->path, st, flags & SBX_FILE_FOLLOW, parent, name, dst->path, p);
        /* A new name: made here, and the tree's own top name dropped (or "./" of "/."). */
        if (strcmp(type, "dir") != 0)
                return log_not_into_dir(src, type);
        if (mkdirat(parent, name, 0777) < 0)
                return log_error_errno(negative_errno(), "cannot create %s: %m", esc(dst->path));
        fd = openat(parent, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return log_local_error(negative_errno(), dst->path);
        return cp_tree_out(c, src->sandbox, src->path, flags, fd, !contents, p);
}

static int cp_out(SbxClient *c, const Endpoint *src, const Endpoint *dst, bool follow, Progress *p) {
        _cleanup_free_ char *type = NULL, *base = NULL, *parent_name = NULL;
        _cleanup_json_ json_object *st = NULL;
        _cleanup_close_ int local = -1, parent = -1;
        unsigned flags = follow ? SBX_FILE_FOLLOW : 0;
        struct stat lst;
        int r;

        if (dst->stream) {
                json_object *reply = NULL;
                if (isatty(STDOUT_FILENO))
                        return log_error("cp: refusing to write a tar stream to a terminal (pipe '-' into tar)");
                r = sbx_file_get_fd(c, src->sandbox, src->path, STDOUT_FILENO, flags, on_progress, p, &reply);
                r = finish_call(r, &reply, p);
                json_object_put(reply);
                return r;
        }
        r = remote_type(c, src->sandbox, src->path, flags, &type, &st);
        if (r < 0)
                return r;
        if (r == 0)
                return log_error("cp: %s:%s: no such file or directory", esc(src->sandbox), esc(src->path));
        local = open_local(AT_FDCWD, dst->path, O_PATH);
        if (local == -ENOENT && !ends_with(dst->path, "/"))
                return cp_out_new(c, src, dst, type, st, flags, p);
        if (local == -ENOENT || local == -ENOTDIR)
                return log_error("cp: %s is not an existing directory", esc(dst->path));
        if (local < 0)
                return log_local_error(local, dst->path);
        if (fstat(local, &lst) < 0)
                return log_error_errno(negative_errno(), "cp: %s: %m", esc(dst->path));
        bool local_dir = S_ISDIR(lst.st_mode);
        if (ends_with(dst->path, "/") && !local_dir)
                return log_error("cp: %s is not an existing directory", esc(dst->path));
        base = base_name(src->path);
        if (!base)
                return log_error_errno(-ENOMEM, "%m");

        if (strcmp(type, "file") == 0) {
                if (local_dir) {
                        _cleanup_free_ char *shown = path_join(dst->path, base);
                        return cp_file_out(c, src->sandbox, src->path, st, follow, local, base, shown ?: base, p);
                }
                parent = open_local_parent(dst->path, &parent_name);
                if (parent < 0)
                        return parent;
                return cp_file_out(c, src->sandbox, src->path, st, follow, parent, parent_name, dst->path, p);
        }
        if (strcmp(type, "dir") == 0 && !local_dir)
                return log_error("cp: cannot copy a directory onto %s, which is not a directory", esc(dst->path));
        if (!local_dir)
                return log_not_into_dir(src, type);
        return cp_tree_out(c, src->sandbox, src->path, flags, local, false, p);
}

/* ---- cp ---------------------------------------------------------------------------------- */

static int cp_parse(const char *src_arg, const char *dst_arg, Endpoint *src, Endpoint *dst) {
        int r;

        if ((r = endpoint_parse(src_arg, src)) < 0)
                return r;
        if ((r = endpoint_parse(dst_arg, dst)) < 0)
                return r;
        if (src->stream && dst->stream)
                return log_error("cp: '-' on both sides: one of SRC and DST is SANDBOX:PATH");
        if (!src->sandbox && !dst->sandbox)
                return log_error("cp: both paths are local: one of SRC and DST is SANDBOX:PATH");
        if (src->sandbox && dst->sandbox)
                return log_error("cp: both paths are in sandboxes: copy through the host (SANDBOX:PATH on one side)");
        return 0;
}

static int resolve_owner(Endpoint *e) {
        char *ref;
        int r;

        if (!e->sandbox)
                return 0;
        if ((r = sandbox_ref_for_daemon(e->sandbox, &ref)) < 0)
                return r;
        free(e->sandbox);
        e->sandbox = ref;
        return 0;
}

static int verb_cp_run(int argc, char *argv[]) {
        _cleanup_(sbx_client_freep) SbxClient *c = NULL;
        bool follow = false, quiet = false;
        const VerbOption opts[] = {
                { "follow-link", 'L', NULL, &follow },
                { "quiet", 'q', NULL, &quiet },
                {},
        };
        Endpoint src = {}, dst = {};
        int r = parse_verb_options(&verb_cp, argc, argv, "hLq", opts, 2, 2);

        if (r <= 0)
                return r;
        r = cp_parse(argv[optind], argv[optind + 1], &src, &dst);
        if (r >= 0)
                r = resolve_owner(src.sandbox ? &src : &dst);
        if (r >= 0)
                r = daemon_connect(&c);
        if (r >= 0) {
                Progress p = { .show = !quiet && !arg.json && isatty(STDERR_FILENO) };
                r = src.sandbox ? cp_out(c, &src, &dst, follow, &p) : cp_in(c, &src, &dst, follow, &p);
        }
        endpoint_done(&src);
        endpoint_done(&dst);
        return r;
}

/* ---- cat --------------------------------------------------------------------------------- */

static int cat_one(SbxClient *c, const char *sandbox, const char *path, uint64_t offset, uint64_t length) {
        json_object *reply = NULL;
        struct stat st;
        int r;

        fflush(stdout);
        /* A file or a pipe is handed to the daemon; a terminal (never passed: it is a
         * character device) gets the data events written by libsandbox. */
        if (fstat(STDOUT_FILENO, &st) == 0 && (S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode)))
                r = sbx_file_read_fd(c, sandbox, path, offset, length, STDOUT_FILENO, 0, NULL, NULL, &reply);
        else
                r = sbx_file_read(c, sandbox, path, offset, length, STDOUT_FILENO, 0, NULL, NULL, &reply);
        if (r < 0)
                return log_transport_error(r);
        r = reply_check(reply);
        json_object_put(reply);
        return r;
}

static int parse_size_option(const char *opt, const char *value, uint64_t *ret) {
        if (value && parse_size(value, ret) < 0)
                return log_error("cat: %s: invalid size '%s'", opt, esc(value));
        return 0;
}

static int verb_cat_run(int argc, char *argv[]) {
        enum { ARG_OFFSET = ARG_VERB_FIRST, ARG_LENGTH };
        _cleanup_(sbx_client_freep) SbxClient *c = NULL;
        _cleanup_free_ char *sandbox = NULL;
        const char *offset_s = NULL, *length_s = NULL;
        uint64_t offset = 0, length = UINT64_MAX;
        const VerbOption opts[] = {
                { "offset", ARG_OFFSET, &offset_s, NULL },
                { "length", ARG_LENGTH, &length_s, NULL },
                {},
        };
        int r = parse_verb_options(&verb_cat, argc, argv, "h", opts, 2, -1);

        if (r <= 0)
                return r;
        if (arg.json)
                return log_error("cat: --json does not apply (the bytes are the output)");
        if ((r = parse_size_option("--offset", offset_s, &offset)) < 0 ||
            (r = parse_size_option("--length", length_s, &length)) < 0)
                return r;
        if ((r = sandbox_ref_for_daemon(argv[optind], &sandbox)) < 0 || (r = daemon_connect(&c)) < 0)
                return r;
        for (int i = optind + 1; i < argc; i++) {
                int k = cat_one(c, sandbox, argv[i], offset, length);
                if (k < 0)
                        r = k;
        }
        return r;
}

/* ---- ls ---------------------------------------------------------------------------------- */

static void mode_string(char buf[static 11], const char *type, int64_t mode) {
        static const char *const types[][2] = {
                { "dir", "d" }, { "symlink", "l" }, { "fifo", "p" }, { "socket", "s" }, { "char", "c" }, { "block", "b" },
        };
        buf[0] = '-';
        for (size_t i = 0; type && i < ELEMENTSOF(types); i++)
                if (strcmp(type, types[i][0]) == 0)
                        buf[0] = types[i][1][0];
        for (int i = 0; i < 9; i++)
                buf[1 + i] = mode & (0400 >> i) ? "rwxrwxrwx"[i] : '-';
        buf[10] = '\0';
}

typedef struct Listing {
        bool long_format, recursive;
} Listing;

static void print_entry(const Listing *l, json_object *e) {
        const char *name = json_str(e, l->recursive ? "path" : "name") ?: json_str(e, "name");
        char mode[11], size[FIELD_BUF];
        int64_t m = 0;

        if (!l->long_format) {
                printf("%s\n", esc(name ?: "?"));
                return;
        }
        (void) json_int(e, "mode", &m);
        mode_string(mode, json_str(e, "type"), m);
        printf("%s %8s  %s", mode, fmt_size(size, e, "size"), esc(name ?: "?"));
        if (json_str(e, "target"))
                printf(" -> %s", esc(json_str(e, "target")));
        putchar('\n');
}

static int on_entries(json_object *ev, void *userdata) {
        json_object *entries = json_child(ev, "entries");
        const char *what = json_str(ev, "event");

        if (!what || strcmp(what, "entries") != 0 || !json_object_is_type(entries, json_type_array))
                return 0;
        if (arg.json) {
                print_json(ev);
                return 0;
        }
        for (size_t i = 0; i < json_object_array_length(entries); i++)
                print_entry(userdata, json_object_array_get_idx(entries, i));
        return 0;
}

/* file.list of a path that is there and no directory: invalid_request about the path (a
 * missing one is not_found). */
static bool ls_not_a_directory(json_object *reply) {
        const char *code = sbx_reply_error_code(reply), *field = json_str(json_child(reply, "error"), "field");
        return code && strcmp(code, "invalid_request") == 0 && field && strcmp(field, "path") == 0;
}

static int verb_ls_run(int argc, char *argv[]) {
        _cleanup_(sbx_client_freep) SbxClient *c = NULL;
        _cleanup_free_ char *sandbox = NULL;
        json_object *reply = NULL;
        Listing l = {};
        const VerbOption opts[] = {
                { "long", 'l', NULL, &l.long_format },
                { "recursive", 'R', NULL, &l.recursive },
                {},
        };
        int r = parse_verb_options(&verb_ls, argc, argv, "hlR", opts, 1, 2);

        if (r <= 0)
                return r;
        const char *path = optind + 1 < argc ? argv[optind + 1] : SBX_FILE_WORKDIR;
        if ((r = sandbox_ref_for_daemon(argv[optind], &sandbox)) < 0 || (r = daemon_connect(&c)) < 0)
                return r;
        r = sbx_file_list(c, sandbox, path, l.recursive ? SBX_FILE_RECURSIVE : 0, on_entries, &l, &reply);
        /* ls(1) of a file lists that file: a path that is not a directory is stat'ed instead. */
        if (r >= 0 && ls_not_a_directory(reply)) {
                json_object_put(reply);
                reply = NULL;
                r = sbx_file_stat(c, sandbox, path, 0, &reply);
                if (r >= 0 && sbx_reply_ok(reply) && !arg.json) {
                        json_object *st = json_child(reply, "stat");
                        json_object_object_add(st, "name", json_object_new_string(path));
                        print_entry(&l, st);
                }
        }
        r = finish_call(r, &reply, NULL);
        int64_t n = 0;
        if (r >= 0 && !arg.json && json_true(reply, "truncated") && json_int(reply, "entries", &n))
                fprintf(stderr, "sandboxctl: ls: the listing was cut at %" PRId64 " entries\n", n);
        json_object_put(reply);
        return r;
}

/* ---- rm ---------------------------------------------------------------------------------- */

/* Runs refused for the disk limit are taken again once a sweep finds the sandbox back under:
 * measured now, so that "remove, then run again" works at the first try, and said. */
static void rm_remeasure(SbxClient *c, const char *sandbox) {
        _cleanup_json_ json_object *info = NULL, *sweep = NULL;
        json_object *req = json_object_new_object();

        json_object_object_add(req, "op", json_object_new_string("inspect"));
        json_object_object_add(req, "sandbox", json_object_new_string(sandbox));
        if (sbx_client_call(c, req, NULL, NULL, &info) < 0 || !json_true(json_child(info, "sandbox"), "disk_refused"))
                return;
        req = json_object_new_object();
        json_object_object_add(req, "op", json_object_new_string("sweep"));
        json_object_object_add(req, "sandbox", json_object_new_string(sandbox));
        if (sbx_client_call(c, req, NULL, NULL, &sweep) < 0 || !sbx_reply_ok(sweep))
                return;
        json_object *sb = json_object_array_get_idx(json_child(sweep, "sandboxes"), 0);
        if (sb && !json_true(sb, "runs_refused"))
                log_info("%s is back under its disk limit: its runs are taken again", sandbox);
        else
                log_info("%s is still over its disk limit: its runs stay refused (sandboxctl sweep %s shows what it holds)",
                         sandbox, sandbox);
}

static int verb_rm_run(int argc, char *argv[]) {
        _cleanup_(sbx_client_freep) SbxClient *c = NULL;
        _cleanup_free_ char *sandbox = NULL;
        bool recursive = false, force = false;
        const VerbOption opts[] = {
                { "recursive", 'r', NULL, &recursive },
                { "force", 'f', NULL, &force },
                {},
        };
        int r = parse_verb_options(&verb_rm, argc, argv, "hrf", opts, 2, -1);

        if (r <= 0)
                return r;
        if ((r = sandbox_ref_for_daemon(argv[optind], &sandbox)) < 0 || (r = daemon_connect(&c)) < 0)
                return r;
        bool removed = false;
        for (int i = optind + 1; i < argc; i++) {
                json_object *reply = NULL;
                int k = sbx_file_remove(c, sandbox, argv[i], recursive ? SBX_FILE_RECURSIVE : 0, &reply);
                removed |= k >= 0 && sbx_reply_ok(reply);
                const char *code = k >= 0 ? sbx_reply_error_code(reply) : NULL,
                           *field = k >= 0 ? json_str(json_child(reply, "error"), "field") : NULL;

                /* -f: a missing path is fine; a missing sandbox is still an error. */
                if (force && code && strcmp(code, "not_found") == 0 && !(field && strcmp(field, "sandbox") == 0))
                        k = 0;
                else
                        k = finish_call(k, &reply, NULL);
                json_object_put(reply);
                if (k < 0)
                        r = k;
        }
        if (removed)
                rm_remeasure(c, sandbox);
        return r;
}
