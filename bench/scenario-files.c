/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The files scenario: 1 GiB in and out of a sandbox through the file API (a passed fd, and the
 * JSON path of file.chunk lines and data events), a tree of 10,000 small files as a tar stream
 * both ways, and beside them, in the same sitting, what a user would do without the file API
 * (sandboxctl run with stdin and --stream) and the host's own floor (a file copy, tar | tar). */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define FILES_BIG (UINT64_C(1) << 30)
#define FILES_CHUNK (1u << 20)
/* A run's stdin is capped (max_stdin_bytes, 3 MiB by default) and binary goes as base64 in a
 * request line of at most max_line_bytes (4 MiB): 2 MiB of random bytes fit both. */
#define FILES_STDIN (2u << 20)
#define TREE_DIRS 100
#define TREE_FILES_PER_DIR 100
#define TREE_FILE_BYTES 4096

typedef struct Files {
        Bench *bench;
        SbxClient *c;
        char *id;
        char dir[64];   /* the host's side: sources and copies */
        char src[96];   /* 1 GiB of pseudo-random bytes */
        char dst[96];   /* where reads land */
        char small[96]; /* FILES_STDIN bytes, for a run's stdin */
        char tree[96];  /* the tree of 10,000 files */
        const char *ctl;
} Files;

static double mib_s(uint64_t bytes, Samples *s) {
        return (double) bytes / (1 << 20) * 1e3 / samples_quantile(s, 0.5);
}

/* xorshift64: the bytes must not compress or dedupe, and need no entropy. */
static void fill_random(char *buf, size_t n, uint64_t *state) {
        for (size_t i = 0; i + 8 <= n; i += 8) {
                uint64_t x = *state;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *state = x;
                memcpy(buf + i, &x, 8);
        }
}

static int write_random_file(const char *path, uint64_t size) {
        static char buf[FILES_CHUNK];
        uint64_t state = 0x9e3779b97f4a7c15u;
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), r = 0;

        if (fd < 0)
                return -errno;
        for (uint64_t done = 0; r == 0 && done < size; done += sizeof(buf)) {
                size_t n = size - done < sizeof(buf) ? (size_t) (size - done) : sizeof(buf);
                fill_random(buf, n, &state);
                if (write(fd, buf, n) != (ssize_t) n)
                        r = errno ? -errno : -EIO;
        }
        if (close(fd) < 0 && r == 0)
                r = -errno;
        return r;
}

static int make_tree(const char *root) {
        char path[256], buf[TREE_FILE_BYTES];
        uint64_t state = 42;

        if (mkdir(root, 0755) < 0)
                return -errno;
        for (unsigned d = 0; d < TREE_DIRS; d++) {
                snprintf(path, sizeof(path), "%s/d%03u", root, d);
                if (mkdir(path, 0755) < 0)
                        return -errno;
                for (unsigned f = 0; f < TREE_FILES_PER_DIR; f++) {
                        snprintf(path, sizeof(path), "%s/d%03u/f%03u", root, d, f);
                        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                        if (fd < 0)
                                return -errno;
                        fill_random(buf, sizeof(buf), &state);
                        ssize_t n = write(fd, buf, sizeof(buf));
                        close(fd);
                        if (n != (ssize_t) sizeof(buf))
                                return -EIO;
                }
        }
        return 0;
}

/* Whether two files hold the same bytes (the timed copies are checked once each, untimed). */
static int same_file(const char *a, const char *b) {
        int fa = open(a, O_RDONLY | O_CLOEXEC), fb = open(b, O_RDONLY | O_CLOEXEC), r = -EIO;
        struct stat sa, sb;

        if (fa >= 0 && fb >= 0 && fstat(fa, &sa) == 0 && fstat(fb, &sb) == 0 && sa.st_size == sb.st_size) {
                void *ma = sa.st_size ? mmap(NULL, (size_t) sa.st_size, PROT_READ, MAP_PRIVATE, fa, 0) : NULL;
                void *mb = sb.st_size ? mmap(NULL, (size_t) sb.st_size, PROT_READ, MAP_PRIVATE, fb, 0) : NULL;
                if (ma != MAP_FAILED && mb != MAP_FAILED)
                        r = (sa.st_size == 0 || memcmp(ma, mb, (size_t) sa.st_size) == 0) ? 0 : -EIO;
                if (ma && ma != MAP_FAILED)
                        munmap(ma, (size_t) sa.st_size);
                if (mb && mb != MAP_FAILED)
                        munmap(mb, (size_t) sb.st_size);
        }
        if (fa >= 0)
                close(fa);
        if (fb >= 0)
                close(fb);
        if (r < 0)
                fprintf(stderr, "sandboxd-bench: %s and %s differ\n", a, b);
        return r;
}

static int reply_checked(int r, json_object *reply, const char *what) {
        if (r < 0) {
                fprintf(stderr, "sandboxd-bench: %s: %s\n", what, strerror(-r));
                return r;
        }
        if (!sbx_reply_ok(reply)) {
                fprintf(stderr, "sandboxd-bench: %s: %s: %s\n", what, sbx_reply_error_code(reply) ?: "?",
                        sbx_reply_error_message(reply) ?: "?");
                r = -EPROTO;
        }
        json_object_put(reply);
        return r;
}

/* Spawns argv with stdin and stdout from the given fds (-1: leave as they are). */
static int spawn_io(const char *const *argv, int in_fd, int out_fd, pid_t *ret_pid) {
        posix_spawn_file_actions_t fa;
        int r;

        posix_spawn_file_actions_init(&fa);
        if (in_fd >= 0)
                posix_spawn_file_actions_adddup2(&fa, in_fd, STDIN_FILENO);
        if (out_fd >= 0)
                posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
        r = posix_spawnp(ret_pid, argv[0], &fa, NULL, (char *const *) argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        return -r;
}

static int wait_ok(pid_t pid, const char *what) {
        int st;
        if (waitpid(pid, &st, 0) < 0)
                return -errno;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                fprintf(stderr, "sandboxd-bench: %s failed (status %d)\n", what, st);
                return -EIO;
        }
        return 0;
}

/* ---- 1 GiB ------------------------------------------------------------------------------- */

static int big_write_fd(Files *f, Samples *s) {
        json_object *reply = NULL;
        int fd = open(f->src, O_RDONLY | O_CLOEXEC), r;
        struct timespec t0, t1;

        if (fd < 0)
                return -errno;
        t0 = now_mono();
        r = sbx_file_write_fd(f->c, f->id, "/work/big", fd, FILES_BIG, SBX_FILE_MODE_DEFAULT, 0, NULL, NULL, &reply);
        t1 = now_mono();
        close(fd);
        r = reply_checked(r, reply, "file.write of 1 GiB by fd");
        if (r >= 0)
                samples_add(s, ts_ms(&t0, &t1));
        return r;
}

static int big_write_chunks(Files *f, Samples *s) {
        json_object *reply = NULL;
        int fd = open(f->src, O_RDONLY | O_CLOEXEC), r;
        struct timespec t0, t1;
        void *map;

        if (fd < 0)
                return -errno;
        map = mmap(NULL, FILES_BIG, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
        close(fd);
        if (map == MAP_FAILED)
                return -errno;
        t0 = now_mono();
        r = sbx_file_write(f->c, f->id, "/work/big-chunks", map, FILES_BIG, SBX_FILE_MODE_DEFAULT, 0, NULL, NULL, &reply);
        t1 = now_mono();
        munmap(map, FILES_BIG);
        r = reply_checked(r, reply, "file.write of 1 GiB by chunks");
        if (r >= 0)
                samples_add(s, ts_ms(&t0, &t1));
        return r;
}

static int big_read(Files *f, const char *path, bool by_fd, Samples *s) {
        json_object *reply = NULL;
        int fd = open(f->dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), r;
        struct timespec t0, t1;

        if (fd < 0)
                return -errno;
        t0 = now_mono();
        r = (by_fd ? sbx_file_read_fd : sbx_file_read)(f->c, f->id, path, 0, UINT64_MAX, fd, 0, NULL, NULL, &reply);
        t1 = now_mono();
        close(fd);
        r = reply_checked(r, reply, by_fd ? "file.read of 1 GiB by fd" : "file.read of 1 GiB by data events");
        if (r >= 0)
                samples_add(s, ts_ms(&t0, &t1));
        return r;
}

/* Without the file API: `sandboxctl run --stream -- cat /work/big > out`. */
static int big_read_run(Files *f, Samples *s) {
        const char *argv[] = { f->ctl, "--socket", f->bench->socket, "run", "--sandbox", f->id, "--stream", "--",
                               "cat", "/work/big", NULL };
        int fd = open(f->dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), r;
        struct timespec t0 = now_mono(), t1;
        pid_t pid;

        if (fd < 0)
                return -errno;
        r = spawn_io(argv, -1, fd, &pid);
        close(fd);
        if (r >= 0)
                r = wait_ok(pid, "sandboxctl run --stream -- cat /work/big");
        t1 = now_mono();
        if (r >= 0)
                samples_add(s, ts_ms(&t0, &t1));
        return r;
}

/* Without the file API, in: a run's stdin, which is capped (FILES_STDIN):
 * `sandboxctl run --stdin-file F -- sh -c 'cat > /work/f'`. */
static int small_write_run(Files *f, Samples *s) {
        const char *argv[] = { f->ctl, "--socket", f->bench->socket, "run", "--sandbox", f->id, "--stdin-file",
                               f->small, "--", "sh", "-c", "cat > /work/small", NULL };
        struct timespec t0 = now_mono(), t1;
        pid_t pid;
        int r = spawn_io(argv, -1, -1, &pid);

        if (r >= 0)
                r = wait_ok(pid, "sandboxctl run --stdin-file -- sh -c 'cat > f'");
        t1 = now_mono();
        if (r >= 0)
                samples_add(s, ts_ms(&t0, &t1));
        return r;
}

static int small_write_fd(Files *f, Samples *s) {
        json_object *reply = NULL;
        int fd = open(f->small, O_RDONLY | O_CLOEXEC), r;
        struct timespec t0, t1;

        if (fd < 0)
                return -errno;
        t0 = now_mono();
        r = sbx_file_write_fd(f->c, f->id, "/work/small", fd, FILES_STDIN, SBX_FILE_MODE_DEFAULT, 0, NULL, NULL, &reply);
        t1 = now_mono();
        close(fd);
        r = reply_checked(r, reply, "file.write of 2 MiB by fd");
        if (r >= 0)
                samples_add(s, ts_ms(&t0, &t1));
        return r;
}

/* The host's floor: the same bytes copied from file to file by read and write. */
static int big_copy_floor(Files *f, Samples *s) {
        static char buf[FILES_CHUNK];
        int in = open(f->src, O_RDONLY | O_CLOEXEC), out = open(f->dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        struct timespec t0 = now_mono(), t1;
        ssize_t n = 0;
        int r = in < 0 || out < 0 ? -errno : 0;

        while (r == 0 && (n = read(in, buf, sizeof(buf))) > 0)
                if (write(out, buf, (size_t) n) != n)
                        r = -EIO;
        if (n < 0)
                r = -errno;
        if (in >= 0)
                close(in);
        if (out >= 0 && close(out) < 0 && r == 0)
                r = -errno;
        t1 = now_mono();
        if (r == 0)
                samples_add(s, ts_ms(&t0, &t1));
        return r;
}

/* ---- A tree of 10,000 files -------------------------------------------------------------- */

/* file.put of `tar -c -C tree .` into /work/tree-N, by a pipe passed to the daemon. */
static int tree_put(Files *f, unsigned n, Samples *s) {
        const char *tar[] = { "tar", "-c", "-C", f->tree, ".", NULL };
        json_object *reply = NULL;
        struct timespec t0 = now_mono(), t1;
        char path[64];
        int p[2], r;
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        r = spawn_io(tar, -1, p[1], &pid);
        close(p[1]);
        snprintf(path, sizeof(path), "/work/tree-%u", n);
        if (r >= 0) {
                r = sbx_file_put_fd(f->c, f->id, path, p[0], SBX_FILE_PARENTS, NULL, NULL, &reply);
                r = reply_checked(r, reply, "file.put of 10,000 files");
        }
        close(p[0]);
        if (r >= 0)
                r = wait_ok(pid, "tar -c");
        t1 = now_mono();
        if (r >= 0)
                samples_add(s, ts_ms(&t0, &t1));
        return r;
}

/* file.get of /work/tree-0/. into `tar -x -C DIR`, by a pipe passed to the daemon. */
static int tree_get(Files *f, unsigned n, Samples *s) {
        char out[128];
        const char *tar[] = { "tar", "-x", "-C", out, NULL };
        json_object *reply = NULL;
        struct timespec t0, t1;
        int p[2], r;
        pid_t pid;

        snprintf(out, sizeof(out), "%s/got-%u", f->dir, n);
        if (mkdir(out, 0755) < 0)
                return -errno;
        t0 = now_mono();
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        r = spawn_io(tar, p[0], -1, &pid);
        close(p[0]);
        if (r >= 0) {
                r = sbx_file_get_fd(f->c, f->id, "/work/tree-0/.", p[1], 0, NULL, NULL, &reply);
                r = reply_checked(r, reply, "file.get of 10,000 files");
        }
        close(p[1]);
        if (r >= 0)
                r = wait_ok(pid, "tar -x");
        t1 = now_mono();
        if (r >= 0)
                samples_add(s, ts_ms(&t0, &t1));
        return r;
}

/* The host's floor: tar -c | tar -x through a pipe. */
static int tree_floor(Files *f, unsigned n, Samples *s) {
        char out[128];
        const char *c[] = { "tar", "-c", "-C", f->tree, ".", NULL }, *x[] = { "tar", "-x", "-C", out, NULL };
        struct timespec t0, t1;
        pid_t pc = 0, px = 0;
        int p[2], r;

        snprintf(out, sizeof(out), "%s/floor-%u", f->dir, n);
        if (mkdir(out, 0755) < 0)
                return -errno;
        t0 = now_mono();
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        r = spawn_io(c, -1, p[1], &pc);
        if (r >= 0)
                r = spawn_io(x, p[0], -1, &px);
        close(p[0]);
        close(p[1]);
        if (pc > 0 && wait_ok(pc, "tar -c") < 0)
                r = -EIO;
        if (px > 0 && wait_ok(px, "tar -x") < 0)
                r = -EIO;
        t1 = now_mono();
        if (r >= 0)
                samples_add(s, ts_ms(&t0, &t1));
        return r;
}

static int files_setup(Files *f) {
        const char *tmp = getenv("TMPDIR");
        int r;

        snprintf(f->dir, sizeof(f->dir), "%s/sandboxd-bench-files.XXXXXX", tmp && *tmp ? tmp : "/var/tmp");
        if (!mkdtemp(f->dir))
                return -errno;
        snprintf(f->src, sizeof(f->src), "%s/big", f->dir);
        snprintf(f->dst, sizeof(f->dst), "%s/copy", f->dir);
        snprintf(f->small, sizeof(f->small), "%s/small", f->dir);
        snprintf(f->tree, sizeof(f->tree), "%s/tree", f->dir);
        r = write_random_file(f->src, FILES_BIG);
        if (r >= 0)
                r = write_random_file(f->small, FILES_STDIN);
        if (r >= 0)
                r = make_tree(f->tree);
        if (r < 0)
                fprintf(stderr, "sandboxd-bench: cannot make the files' sources in %s: %s\n", f->dir, strerror(-r));
        return r;
}

static void files_cleanup(Files *f) {
        const char *argv[] = { "rm", "-rf", "--one-file-system", f->dir, NULL };
        pid_t pid;

        if (f->dir[0] && spawn_io(argv, -1, -1, &pid) >= 0)
                (void) wait_ok(pid, "rm -rf");
}

int scenario_files(Bench *b) {
        Files f = { .bench = b, .ctl = getenv("SANDBOXD_BENCH_CTL") };
        Samples wfd = {}, wch = {}, rfd = {}, rev = {}, rrun = {}, floor = {}, srun = {}, sfd = {};
        Samples put = {}, get = {}, tfloor = {};
        const unsigned reps = 3, small_reps = 10;
        long rss0 = -1, hwm = -1;
        int r;

        if (!f.ctl)
                f.ctl = "sandboxctl";
        r = bench_connect(b, &f.c);
        if (r >= 0)
                r = files_setup(&f);
        if (r >= 0)
                r = bench_create(b, f.c, &f.id);
        rss0 = bench_daemon_kb(b, "VmRSS");
        if (r >= 0 && bench_daemon_reset_hwm(b) < 0)
                fprintf(stderr, "sandboxd-bench: cannot reset the daemon's VmHWM; it is its peak since start\n");
        /* Interleaved, so that a burst of load on a noisy host hits every row alike. */
        for (unsigned i = 0; r >= 0 && i < reps; i++) {
                r = big_copy_floor(&f, &floor);
                if (r >= 0)
                        r = big_write_fd(&f, &wfd);
                if (r >= 0)
                        r = big_read(&f, "/work/big", true, &rfd);
                if (r >= 0 && i == 0)
                        r = same_file(f.src, f.dst);
                if (r >= 0)
                        r = big_write_chunks(&f, &wch);
                if (r >= 0)
                        r = big_read(&f, "/work/big-chunks", false, &rev);
                if (r >= 0 && i == 0)
                        r = same_file(f.src, f.dst);
                if (r >= 0)
                        r = big_read_run(&f, &rrun);
                if (r >= 0 && i == 0)
                        r = same_file(f.src, f.dst);
        }
        for (unsigned i = 0; r >= 0 && i < small_reps; i++) {
                r = small_write_run(&f, &srun);
                if (r >= 0)
                        r = small_write_fd(&f, &sfd);
        }
        for (unsigned i = 0; r >= 0 && i < reps; i++) {
                r = tree_floor(&f, i, &tfloor);
                if (r >= 0)
                        r = tree_put(&f, i, &put);
                if (r >= 0)
                        r = tree_get(&f, i, &get);
        }
        hwm = bench_daemon_kb(b, "VmHWM");
        if (r >= 0) {
                bench_row(b, "file.write 1 GiB by fd", &wfd, 0, "%.0f MiB/s (median); %u runs", mib_s(FILES_BIG, &wfd), reps);
                bench_row(b, "file.read 1 GiB by fd", &rfd, 0, "%.0f MiB/s (median); %u runs", mib_s(FILES_BIG, &rfd), reps);
                bench_row(b, "file.write 1 GiB by file.chunk lines", &wch, 0, "%.0f MiB/s (median); %u runs",
                          mib_s(FILES_BIG, &wch), reps);
                bench_row(b, "file.read 1 GiB by data events", &rev, 0, "%.0f MiB/s (median); %u runs",
                          mib_s(FILES_BIG, &rev), reps);
                bench_row(b, "beside: sandboxctl run --stream -- cat 1 GiB", &rrun, 0, "%.0f MiB/s (median); %u runs",
                          mib_s(FILES_BIG, &rrun), reps);
                bench_row(b, "floor: 1 GiB file to file on the host", &floor, 0, "%.0f MiB/s (median); %u runs",
                          mib_s(FILES_BIG, &floor), reps);
                bench_row(b, "file.write 2 MiB by fd", &sfd, 0, "%.0f MiB/s (median); %u runs", mib_s(FILES_STDIN, &sfd),
                          small_reps);
                bench_row(b, "beside: sandboxctl run --stdin-file 2 MiB -- sh -c 'cat > f'", &srun, 0,
                          "%.0f MiB/s (median); a run's stdin is capped (max_stdin_bytes 3 MiB, base64 in a 4 MiB line); %u runs",
                          mib_s(FILES_STDIN, &srun), small_reps);
                bench_row(b, "file.put 10,000 files of 4 KiB (tar by fd)", &put, 0, "%.0f files/s (median); %u runs",
                          TREE_DIRS * TREE_FILES_PER_DIR * 1e3 / samples_quantile(&put, 0.5), reps);
                bench_row(b, "file.get 10,000 files of 4 KiB (tar by fd)", &get, 0, "%.0f files/s (median); %u runs",
                          TREE_DIRS * TREE_FILES_PER_DIR * 1e3 / samples_quantile(&get, 0.5), reps);
                bench_row(b, "floor: tar -c piped into tar -x on the host", &tfloor, 0,
                          "%.0f files/s (median); daemon VmRSS before %ld KiB, VmHWM during the scenario %ld KiB; %u runs",
                          TREE_DIRS * TREE_FILES_PER_DIR * 1e3 / samples_quantile(&tfloor, 0.5), rss0, hwm, reps);
        }
        if (f.id && bench_destroy(f.c, f.id) < 0 && r >= 0)
                r = -EIO;
        files_cleanup(&f);
        free(f.id);
        samples_done(&wfd);
        samples_done(&wch);
        samples_done(&rfd);
        samples_done(&rev);
        samples_done(&rrun);
        samples_done(&floor);
        samples_done(&srun);
        samples_done(&sfd);
        samples_done(&put);
        samples_done(&get);
        samples_done(&tfloor);
        sbx_client_free(f.c);
        return r;
}
