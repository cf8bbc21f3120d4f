/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libsandbox's file calls against a stand-in daemon (a forked child on a socket in a temporary
 * directory, speaking docs/design/files.md with lib/'s own fdpass and file-proto): a chunked
 * write that keeps to the window and chunk size the daemon announces, a write by fd whose fd
 * arrives with its line, reads into a file (holes kept) and into a pipe (holes as zeros). The
 * real daemon is tests/t-files-chunks.sh's (with tests/file-write-tool); this pins down the wire. */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fdpass.h"
#include "file-proto.h"
#include "macro.h"
#include "sandbox.h"
#include "tap.h"
#include "util.h"

#define FAKE_CHUNK 65536u /* smaller than the client's own: it must follow the daemon's */
#define FAKE_WINDOW 2u

typedef struct Fake {
        int fd;
        LineBuffer in;
        SbxFdQueue fds;
        bool last_canonical; /* the last line was a file.chunk line in the canonical form */
} Fake;

static uint64_t checksum(const unsigned char *p, size_t n) {
        uint64_t h = 1469598103934665603u;
        for (size_t i = 0; i < n; i++)
                h = (h ^ p[i]) * 1099511628211u;
        return h;
}

static void fake_send(Fake *f, json_object *o) {
        size_t n;
        _cleanup_free_ char *s = proto_serialize(o, &n);
        json_object_put(o);
        if (!s || write_all(f->fd, s, n) < 0)
                _exit(3);
}

/* The next line (and the fds that came with what was read so far). */
static json_object *fake_line(Fake *f) {
        for (;;) {
                char *line, *p;
                size_t len, avail, n_fds = 0;
                int fds[SBX_FDS_PER_MESSAGE];
                ProtoError err;
                json_object *o = NULL;
                if (line_buffer_next(&f->in, &line, &len) > 0) {
                        int64_t id;
                        FileChunk c;
                        f->last_canonical = file_chunk_scan(line, len, &id, &c) == 1;
                        if (proto_parse_line(line, len, SBX_MAX_DEPTH, &o, &err) < 0)
                                _exit(4);
                        return o;
                }
                if (line_buffer_reserve(&f->in, 65536, &p, &avail) < 0)
                        _exit(5);
                ssize_t k = sbx_fds_recv(f->fd, p, avail, 0, fds, SBX_FDS_PER_MESSAGE, &n_fds);
                if (k <= 0)
                        return NULL;
                line_buffer_commit(&f->in, (size_t) k);
                if (n_fds > 0 && sbx_fd_queue_push(&f->fds, fds, n_fds, f->in.committed - 1) < 0)
                        _exit(6);
        }
}

static json_object *reply_ok(json_object *req) {
        json_object *id;
        (void) json_object_object_get_ex(req, "id", &id);
        return proto_reply_ok(id);
}

static json_object *reply_error(json_object *req, const ProtoError *e) {
        json_object *id;
        (void) json_object_object_get_ex(req, "id", &id);
        return proto_reply_error(id, e);
}

static void fake_write_chunks(Fake *f, json_object *req) {
        json_object *id, *sz;
        unsigned char *buf = malloc(FAKE_CHUNK), *all = NULL;
        size_t total = 0, canonical = 0, holes = 0;
        FileWindow w;
        ProtoError err = {};

        (void) json_object_object_get_ex(req, "id", &id);
        file_window_init(&w, FAKE_WINDOW, json_object_object_get_ex(req, "size", &sz) ? (uint64_t) json_object_get_int64(sz) : UINT64_MAX);
        json_object *ready = proto_event(id, "ready");
        json_object_object_add(ready, "chunk_bytes", json_object_new_int(FAKE_CHUNK));
        json_object_object_add(ready, "window", json_object_new_int(FAKE_WINDOW));
        fake_send(f, ready);
        /* Reads a whole window before acking anything, so a client that sent more than the
         * window would be caught by file_window_take(). */
        while (!w.eof) {
                FileChunk c;
                size_t n;
                uint64_t first = w.next_seq;
                for (unsigned i = 0; i < FAKE_WINDOW && !w.eof; i++) {
                        _cleanup_json_ json_object *line = fake_line(f);
                        if (!line || file_chunk_parse(line, &c, &err) < 0 ||
                            file_chunk_decode(&c, buf, FAKE_CHUNK, &n, &err) < 0 || file_window_take(&w, &c, n + c.zeros, &err) < 0) {
                                fake_send(f, reply_error(req, &err));
                                free(buf);
                                free(all);
                                return;
                        }
                        canonical += f->last_canonical;
                        holes += c.zeros > 0;
                        all = realloc(all, total + n + c.zeros + 1);
                        memcpy(all + total, buf, n);
                        memset(all + total + n, 0, c.zeros);
                        total += n + c.zeros;
                }
                /* A full window and no ack yet: a client that keeps to the window sends nothing
                 * more now (it waits for the acks). Anything readable is a chunk too many. */
                if (!w.eof && (line_buffer_has_partial(&f->in) || poll(&(struct pollfd) { .fd = f->fd, .events = POLLIN }, 1, 100) != 0)) {
                        proto_error_set(&err, SBX_E_INVALID_REQUEST, "seq", "the client sent beyond the window");
                        fake_send(f, reply_error(req, &err));
                        free(buf);
                        free(all);
                        return;
                }
                for (uint64_t s = first; s < w.next_seq; s++) {
                        json_object *ack = proto_event(id, "ack");
                        json_object_object_add(ack, "seq", json_object_new_int64((int64_t) s));
                        fake_send(f, ack);
                        file_window_ack(&w, s);
                }
        }
        json_object *r = reply_ok(req);
        json_object_object_add(r, "bytes", json_object_new_int64((int64_t) total));
        json_object_object_add(r, "sum", json_object_new_int64((int64_t) checksum(all, total)));
        json_object_object_add(r, "chunks", json_object_new_int64((int64_t) w.next_seq));
        json_object_object_add(r, "canonical", json_object_new_int64((int64_t) canonical));
        json_object_object_add(r, "holes", json_object_new_int64((int64_t) holes));
        if (json_object_object_get_ex(req, "size", &sz))
                json_object_object_add(r, "size", json_object_get(sz));
        fake_send(f, r);
        free(buf);
        free(all);
}

static void fake_write_fd(Fake *f, json_object *req) {
        json_object *v;
        int fd = -EBADF;
        size_t n = 0;
        const char *reason = "none";
        unsigned char buf[65536];
        uint64_t h = 1469598103934665603u, total = 0;

        if (!json_object_object_get_ex(req, "fds", &v) || json_object_get_int(v) != 1 ||
            !json_object_object_get_ex(req, "fd", &v) || json_object_get_int(v) != 0 ||
            sbx_fd_queue_take_line(&f->fds, f->in.line_end, &fd, 1, &n) < 0 || n != 1 ||
            sbx_fd_check(fd, SBX_FD_FILE_SOURCE, &reason) < 0) {
                ProtoError e;
                proto_error_set(&e, SBX_E_INVALID_REQUEST, "fd", "fd %s", reason);
                fake_send(f, reply_error(req, &e));
                safe_close(fd);
                return;
        }
        for (ssize_t k; (k = read(fd, buf, sizeof(buf))) > 0; total += (uint64_t) k)
                for (ssize_t i = 0; i < k; i++)
                        h = (h ^ buf[i]) * 1099511628211u;
        safe_close(fd);
        json_object *r = reply_ok(req);
        json_object_object_add(r, "bytes", json_object_new_int64((int64_t) total));
        json_object_object_add(r, "sum", json_object_new_int64((int64_t) h));
        fake_send(f, r);
}

/* 100 bytes of 'a' at 0, a hole to 70000, 10 bytes of 'b', a hole to the end at 100000. */
static void fake_read(Fake *f, json_object *req) {
        json_object *id;
        unsigned char a[100], b[10];

        (void) json_object_object_get_ex(req, "id", &id);
        memset(a, 'a', sizeof(a));
        memset(b, 'b', sizeof(b));
        json_object *sz = proto_event(id, "size");
        json_object_object_add(sz, "size", json_object_new_int(100000));
        fake_send(f, sz);
        fake_send(f, file_data_event_new(id, 0, 0, a, sizeof(a)));
        /* The second one in the canonical form (the daemon's fast path), the first through json-c. */
        char line[256];
        size_t n = file_data_event_format(line, sizeof(line), json_object_get_int64(id), 1, 70000, b, sizeof(b));
        if (n == 0 || write_all(f->fd, line, n) < 0)
                _exit(7);
        json_object *r = reply_ok(req);
        json_object_object_add(r, "bytes", json_object_new_int(100000));
        json_object_object_add(r, "changed", json_object_new_boolean(false));
        fake_send(f, r);
}

static _noreturn_ void fake_daemon(int listener) {
        Fake f = { .fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC) };

        if (f.fd < 0)
                _exit(2);
        line_buffer_init(&f.in, SBX_DEFAULT_MAX_LINE);
        sbx_fd_queue_init(&f.fds);
        for (;;) {
                _cleanup_json_ json_object *req = fake_line(&f);
                json_object *op, *v;
                if (!req)
                        _exit(0);
                (void) json_object_object_get_ex(req, "op", &op);
                const char *name = json_object_get_string(op);
                if (strcmp(name, "file.write") == 0 && json_object_object_get_ex(req, "fd", &v))
                        fake_write_fd(&f, req);
                else if (strcmp(name, "file.write") == 0 && json_object_object_get_ex(req, "data", &v)) {
                        json_object *r = reply_ok(req);
                        json_object_object_add(r, "inline", json_object_get(v));
                        fake_send(&f, r);
                } else if (strcmp(name, "file.write") == 0)
                        fake_write_chunks(&f, req);
                else if (strcmp(name, "file.read") == 0)
                        fake_read(&f, req);
                else {
                        json_object *r = reply_ok(req);
                        json_object_object_add(r, "request", json_object_get(req));
                        fake_send(&f, r);
                }
        }
}

static int64_t member_int(json_object *o, const char *key) {
        json_object *v;
        return o && json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : -1;
}

static void test_write(SbxClient *c) {
        size_t len = 5 * FAKE_CHUNK + 123;
        unsigned char *data = malloc(len);
        json_object *reply = NULL;

        for (size_t i = 0; i < len; i++)
                data[i] = (unsigned char) (i * 31 + (i >> 8));
        ok(sbx_file_write(c, "s", "/work/big", data, len, 0600, SBX_FILE_PARENTS, NULL, NULL, &reply) == 0 &&
           sbx_reply_ok(reply), "a chunked write of %zu bytes is answered ok", len);
        if (!sbx_reply_ok(reply))
                diag("reply: %s", reply ? json_object_to_json_string(reply) : "(none)");
        is_int(member_int(reply, "bytes"), (long long) len, "every byte arrived");
        is_int(member_int(reply, "sum"), (int64_t) checksum(data, len), "in order, unchanged");
        is_int(member_int(reply, "chunks"), 6, "in chunks of the daemon's 64 KiB, not the client's 1 MiB");
        is_int(member_int(reply, "canonical"), 6, "each a line in the canonical form (written without json-c)");
        json_object_put(reply);
        reply = NULL;

        ok(sbx_file_write(c, "s", "small", "hi\n", 3, SBX_FILE_MODE_DEFAULT, 0, NULL, NULL, &reply) == 0 &&
           sbx_reply_ok(reply), "a small write goes inline");
        json_object *v;
        ok(reply && json_object_object_get_ex(reply, "inline", &v) && strcmp(json_object_get_string(v), "aGkK") == 0,
           "as base64 in the request line");
        json_object_put(reply);
        free(data);
}

static void test_write_fd(SbxClient *c) {
        char tmpl[] = "/tmp/test-client-file.XXXXXX";
        int fd = mkstemp(tmpl);
        json_object *reply = NULL;
        unsigned char data[200000];

        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (unsigned char) (i ^ (i >> 3));
        ok(fd >= 0 && write_all(fd, data, sizeof(data)) == 0 && lseek(fd, 0, SEEK_SET) == 0, "a 200000-byte file");
        int rd = open(tmpl, O_RDONLY | O_CLOEXEC);
        unlink(tmpl);
        ok(sbx_file_write_fd(c, "s", "/work/f", rd, sizeof(data), SBX_FILE_MODE_DEFAULT, 0, NULL, NULL, &reply) == 0 &&
           sbx_reply_ok(reply), "a write by fd is answered ok (the fd came with its line: fds 1, fd 0)");
        if (!sbx_reply_ok(reply))
                diag("reply: %s", reply ? json_object_to_json_string(reply) : "(none)");
        is_int(member_int(reply, "sum"), (int64_t) checksum(data, sizeof(data)), "the daemon read the file's bytes from it");
        ok(fcntl(rd, F_GETFD) >= 0, "the caller keeps its fd");
        json_object_put(reply);
        reply = NULL;

        int wr = open("/dev/null", O_WRONLY | O_CLOEXEC);
        ok(sbx_file_write_fd(c, "s", "/work/f", wr, UINT64_MAX, SBX_FILE_MODE_DEFAULT, 0, NULL, NULL, &reply) == 0 &&
           !sbx_reply_ok(reply) && strcmp(sbx_reply_error_code(reply), "invalid_request") == 0,
           "a character device as the source is refused by the type check");
        json_object_put(reply);
        safe_close(wr);
        safe_close(rd);
        safe_close(fd);
}

/* sbx_file_write_from(): an fd read here and sent by chunks, a regular file's holes as zeros. */
static void test_write_from(SbxClient *c) {
        char tmpl[] = "/tmp/test-client-file.XXXXXX";
        int fd = mkstemp(tmpl), p[2];
        json_object *reply = NULL;
        static unsigned char want[300110];

        unlink(tmpl);
        memset(want, 'x', 100);
        memset(want + 300100, 'y', 10);
        ok(fd >= 0 && write_all(fd, want, 100) == 0 && pwrite(fd, want + 300100, 10, 300100) == 10 &&
           lseek(fd, 0, SEEK_SET) == 0, "a sparse file: 100 bytes, a hole, 10 bytes");
        ok(sbx_file_write_from(c, "s", "/work/sp", fd, SBX_FILE_MODE_DEFAULT, 0, NULL, NULL, &reply) == 0 &&
           sbx_reply_ok(reply), "written from its fd by chunks");
        if (!sbx_reply_ok(reply))
                diag("reply: %s", reply ? json_object_to_json_string(reply) : "(none)");
        is_int(member_int(reply, "size"), (long long) sizeof(want), "the request announced its size");
        is_int(member_int(reply, "sum"), (int64_t) checksum(want, sizeof(want)), "every byte, the hole as zeros");
        ok(member_int(reply, "holes") >= 1, "the hole went as a zeros chunk, not as data (%lld)",
           (long long) member_int(reply, "holes"));
        is_int(lseek(fd, 0, SEEK_CUR), (long long) sizeof(want), "the fd's offset is at its end");
        json_object_put(reply);
        reply = NULL;

        if (pipe2(p, O_CLOEXEC) < 0 || fcntl(p[1], F_SETPIPE_SZ, 1 << 20) < 0 ||
            write_all(p[1], want, sizeof(want)) < 0) {
                ok(false, "a pipe of 1 MiB: %m");
                return;
        }
        safe_close(p[1]);
        ok(sbx_file_write_from(c, "s", "/work/pi", p[0], SBX_FILE_MODE_DEFAULT, 0, NULL, NULL, &reply) == 0 &&
           sbx_reply_ok(reply), "written from a pipe by chunks, to its end");
        is_int(member_int(reply, "size"), -1, "without a size");
        is_int(member_int(reply, "sum"), (int64_t) checksum(want, sizeof(want)), "the pipe's bytes");
        json_object_put(reply);
        safe_close(p[0]);
        safe_close(fd);
}

static void test_read(SbxClient *c) {
        char tmpl[] = "/tmp/test-client-file.XXXXXX";
        int fd = mkstemp(tmpl), p[2];
        json_object *reply = NULL;
        struct stat st;
        static unsigned char want[100000], got[100000];

        memset(want, 0, sizeof(want));
        memset(want, 'a', 100);
        memset(want + 70000, 'b', 10);
        unlink(tmpl);
        ok(sbx_file_read(c, "s", "/work/sparse", 0, UINT64_MAX, fd, 0, NULL, NULL, &reply) == 0 && sbx_reply_ok(reply),
           "a read into a file is answered ok");
        ok(fstat(fd, &st) == 0 && st.st_size == 100000, "the file has the whole length, the trailing hole included");
        ok(pread(fd, got, sizeof(got), 0) == (ssize_t) sizeof(got) && memcmp(got, want, sizeof(got)) == 0,
           "its bytes are the data at their offsets, zeros in the holes");
        ok(st.st_blocks * 512 < 100000, "the holes stayed holes (%lld bytes allocated)", (long long) st.st_blocks * 512);
        is_int(lseek(fd, 0, SEEK_CUR), 70010, "the file position is after the last data written");
        json_object_put(reply);
        reply = NULL;

        if (pipe2(p, O_CLOEXEC) < 0 || fcntl(p[1], F_SETPIPE_SZ, 1 << 20) < 0) {
                ok(false, "a pipe of 1 MiB: %m");
                return;
        }
        ok(sbx_file_read(c, "s", "/work/sparse", 0, UINT64_MAX, p[1], 0, NULL, NULL, &reply) == 0 && sbx_reply_ok(reply),
           "a read into a pipe is answered ok");
        safe_close(p[1]);
        ok(read_full(p[0], got, sizeof(got)) == (ssize_t) sizeof(got) && memcmp(got, want, sizeof(got)) == 0,
           "the pipe gets the same 100000 bytes, the holes as zeros, in order");
        json_object_put(reply);
        safe_close(p[0]);
        safe_close(fd);
}

static void test_requests(SbxClient *c) {
        json_object *reply = NULL, *req, *v;

        ok(sbx_file_remove(c, "s", "/work/tree", SBX_FILE_RECURSIVE | SBX_FILE_AS_ROOT, &reply) == 0 &&
           json_object_object_get_ex(reply, "request", &req), "file.remove is sent");
        ok(json_object_object_get_ex(req, "recursive", &v) && json_object_get_boolean(v) &&
           json_object_object_get_ex(req, "user", &v) && strcmp(json_object_get_string(v), "root") == 0 &&
           json_object_object_get_ex(req, "op", &v) && strcmp(json_object_get_string(v), "file.remove") == 0,
           "with recursive and user root");
        json_object_put(reply);
        reply = NULL;
        ok(sbx_file_mkdir(c, "s", "/work/a/b", 0700, SBX_FILE_PARENTS, &reply) == 0 &&
           json_object_object_get_ex(reply, "request", &req) && member_int(req, "mode") == 0700 &&
           json_object_object_get_ex(req, "parents", &v) && !json_object_object_get_ex(req, "user", &v),
           "file.mkdir carries mode 0700 and parents, and no user unless asked");
        json_object_put(reply);
        reply = NULL;
        ok(sbx_file_stat(c, "s", NULL, 0, &reply) == -ENOMEM || reply == NULL, "a NULL path is refused before sending");
        json_object_put(reply);
        reply = NULL;

        int p[2];
        ok(pipe2(p, O_CLOEXEC) == 0, "a pipe for the tar calls");
        ok(sbx_file_put_fd(c, "s", "/work/t", p[0], SBX_FILE_PARENTS | SBX_FILE_NO_OVERWRITE, NULL, NULL, &reply) == 0 &&
           json_object_object_get_ex(reply, "request", &req) && member_int(req, "fds") == 1 && member_int(req, "fd") == 0 &&
           json_object_object_get_ex(req, "overwrite", &v) && !json_object_get_boolean(v) &&
           json_object_object_get_ex(req, "parents", &v) && json_object_get_boolean(v),
           "file.put carries its fd (fds 1, fd 0), parents and overwrite false");
        json_object_put(reply);
        reply = NULL;
        ok(sbx_file_get_fd(c, "s", "/work/t/.", p[1], SBX_FILE_FOLLOW, NULL, NULL, &reply) == 0 &&
           json_object_object_get_ex(reply, "request", &req) && member_int(req, "fds") == 1 &&
           json_object_object_get_ex(req, "follow", &v) && json_object_get_boolean(v) &&
           !json_object_object_get_ex(req, "overwrite", &v),
           "file.get carries its fd and follow");
        json_object_put(reply);
        safe_close(p[0]);
        safe_close(p[1]);
}

int main(void) {
        char dir[] = "/tmp/test-client-file.XXXXXX", path[64];
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        SbxClient *c = NULL;
        int status;

        signal(SIGPIPE, SIG_IGN);
        if (!mkdtemp(dir))
                skip_all("mkdtemp failed");
        snprintf(path, sizeof(path), "%s/sock", dir);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (l < 0 || bind(l, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(l, 1) < 0)
                skip_all("cannot listen on a Unix socket here");
        pid_t pid = fork();
        if (pid == 0)
                fake_daemon(l);
        safe_close(l);
        ok(sbx_client_connect(path, &c) == 0, "connected to the stand-in daemon");
        if (c) {
                test_write(c);
                test_write_fd(c);
                test_write_from(c);
                test_read(c);
                test_requests(c);
                sbx_client_free(c);
        }
        ok(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "the stand-in daemon saw only well-formed lines and exited cleanly (status %d)", status);
        unlink(path);
        rmdir(dir);
        return done_testing();
}
