/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The "images" scenario: what a sandbox of an image costs beside one of the host's root, in the
 * same sitting. A tiny image (the host's static busybox) is imported once through libsandbox's
 * sbx_image_import(); then (1) the time to a first command, create + a run of `true`, one after
 * the other, and (2) bursts of 20 creates sent at once on 20 connections, the total of each burst
 * (its median and p99 over the bursts) and the p99 of the single creates, each with the image and
 * with the host root. Where the daemon keeps create pools of at least 20 (run-bench.sh's
 * POOL_CREATE=20 POOL_IMAGES=bench-busybox:20: pool_create, pool_images), the same rows again
 * with creates taken from them ("pooled"; each burst or first command finds its pool full),
 * while the fresh rows ask for a limit of their own (limits.timeout_s 7: the default of a run's
 * timeout, which changes nothing of what a create does) so that no pool serves them. All kinds
 * interleaved, so that a drift of the shared machine weighs on each alike; the load average is
 * in the notes. */
#include "bench.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define IMAGES_NAME "bench-busybox"
#define IMAGES_BURST 20

static int copy_file(const char *src, const char *dst) {
        char buf[65536];
        int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, r = 0;
        ssize_t n;

        if (in < 0)
                return -errno;
        out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
        if (out < 0)
                r = -errno;
        while (r == 0 && (n = read(in, buf, sizeof(buf))) > 0)
                if (write(out, buf, (size_t) n) != n)
                        r = -EIO;
        close(in);
        if (out >= 0)
                close(out);
        return r;
}

/* <dir>/bin/{busybox,sh,true}, <dir>/etc/os-release: a root that runs `true`. */
static int make_rootfs(char *dir) {
        const char *tmp = getenv("TMPDIR");
        char p[4096], q[4096];
        FILE *f;

        snprintf(dir, 4096, "%s/sbx-bench-image.XXXXXX", tmp && *tmp ? tmp : "/var/tmp");
        if (!mkdtemp(dir))
                return -errno;
        snprintf(p, sizeof(p), "%s/bin", dir);
        snprintf(q, sizeof(q), "%s/etc", dir);
        if (mkdir(p, 0755) < 0 || mkdir(q, 0755) < 0)
                return -errno;
        snprintf(p, sizeof(p), "%s/bin/busybox", dir);
        if (copy_file("/bin/busybox", p) < 0)
                return -ENOENT;
        for (const char *const *t = (const char *const[]) { "sh", "true", NULL }; *t; t++) {
                snprintf(p, sizeof(p), "%s/bin/%s", dir, *t);
                if (symlink("busybox", p) < 0)
                        return -errno;
        }
        snprintf(p, sizeof(p), "%s/etc/os-release", dir);
        if (!(f = fopen(p, "w")))
                return -errno;
        fputs("ID=bench\n", f);
        fclose(f);
        return 0;
}

static void remove_rootfs(const char *dir) {
        char cmd[4200];
        snprintf(cmd, sizeof(cmd), "rm -rf --one-file-system '%s'", dir);
        (void) !system(cmd);
}

static int import_image(SbxClient *c, const char *dir) {
        json_object *reply = NULL, *rm = NULL;
        int r;

        (void) sbx_image_remove(c, IMAGES_NAME, &rm); /* an earlier run's */
        json_object_put(rm);
        r = sbx_image_import(c, IMAGES_NAME, dir, NULL, NULL, NULL, &reply);
        if (r >= 0 && !sbx_reply_ok(reply)) {
                fprintf(stderr, "images: image.import: %s: %s\n", sbx_reply_error_code(reply), sbx_reply_error_message(reply));
                r = -EPROTO;
        }
        json_object_put(reply);
        return r;
}

/* What is measured: kind & KIND_IMAGE from the image, else the host's root; & KIND_POOLED from
 * the daemon's create pool, else fresh. */
#define KIND_IMAGE 1
#define KIND_POOLED 2
#define N_KINDS 4

static json_object *create_req(Bench *b, unsigned kind) {
        json_object *req = bench_req("create");
        if (b->best_effort)
                json_object_object_add(req, "best_effort", json_object_new_boolean(true));
        if (kind & KIND_IMAGE)
                json_object_object_add(req, "image", json_object_new_string(IMAGES_NAME));
        if (!(kind & KIND_POOLED)) {
                json_object *l = json_object_new_object();
                json_object_object_add(l, "timeout_s", json_object_new_int(7));
                json_object_object_add(req, "limits", l);
        }
        return req;
}

/* health's capacity.pool.create: its size and how many are ready. */
static int pool_state(SbxClient *c, int64_t *ret_size, int64_t *ret_ready) {
        json_object *reply = NULL, *cap, *pool, *cr, *v;
        int r = bench_call(c, bench_req("health"), &reply);

        if (r < 0)
                return r;
        if (!json_object_object_get_ex(reply, "capacity", &cap) || !json_object_object_get_ex(cap, "pool", &pool) ||
            !json_object_object_get_ex(pool, "create", &cr)) {
                *ret_size = *ret_ready = 0; /* a daemon without create pools */
                json_object_put(reply);
                return 0;
        }
        *ret_size = json_object_object_get_ex(cr, "size", &v) ? json_object_get_int64(v) : 0;
        *ret_ready = json_object_object_get_ex(cr, "ready", &v) ? json_object_get_int64(v) : 0;
        json_object_put(reply);
        return 0;
}

/* Until every pooled sandbox is ready again (at most 30 s), polled every 20 ms. */
static int pool_wait_full(SbxClient *c) {
        struct timespec t0 = now_mono(), t;
        int64_t size, ready;
        int r;

        for (;;) {
                if ((r = pool_state(c, &size, &ready)) < 0)
                        return r;
                t = now_mono();
                if (ready >= size)
                        return 0;
                if (ts_ms(&t0, &t) > 30e3)
                        return -ETIMEDOUT;
                (void) nanosleep(&(struct timespec) { .tv_nsec = 20 * 1000 * 1000 }, NULL);
        }
}

static double load_avg(void) {
        double l = -1;
        FILE *f = fopen("/proc/loadavg", "re");
        if (f) {
                if (fscanf(f, "%lf", &l) != 1)
                        l = -1;
                fclose(f);
        }
        return l;
}

static int create_one(Bench *b, SbxClient *c, unsigned kind, char **ret_id) {
        json_object *reply = NULL, *sbx, *id;
        int r = bench_call(c, create_req(b, kind), &reply);

        if (r < 0)
                return r;
        if (!json_object_object_get_ex(reply, "sandbox", &sbx) || !json_object_object_get_ex(sbx, "id", &id)) {
                json_object_put(reply);
                return -EPROTO;
        }
        *ret_id = strdup(json_object_get_string(id));
        json_object_put(reply);
        return *ret_id ? 0 : -ENOMEM;
}

static int run_true(SbxClient *c, const char *id) {
        json_object *req = bench_req("run"), *argv = json_object_new_array();
        json_object_array_add(argv, json_object_new_string("/bin/true"));
        json_object_object_add(req, "argv", argv);
        json_object_object_add(req, "sandbox", json_object_new_string(id));
        return bench_call(c, req, NULL);
}

/* create + run `true`, timed; the destroy after it is not. */
static int first_command(Bench *b, SbxClient *c, unsigned kind, Samples *s) {
        struct timespec t0, t1;
        char *id = NULL;
        int r = kind & KIND_POOLED ? pool_wait_full(c) : 0;

        if (r < 0)
                return r;
        t0 = now_mono();
        r = create_one(b, c, kind, &id);

        if (r >= 0)
                r = run_true(c, id);
        t1 = now_mono();
        if (r >= 0 && s)
                samples_add(s, ts_ms(&t0, &t1));
        if (id)
                (void) bench_destroy(c, id);
        free(id);
        return r;
}

typedef struct Burst {
        Bench *b;
        SbxClient *c;
        unsigned kind;
        pthread_barrier_t *go;
        struct timespec t0, t1;
        char *id;
        int r;
} Burst;

static void *burst_thread(void *userdata) {
        Burst *w = userdata;
        pthread_barrier_wait(w->go);
        w->t0 = now_mono();
        w->r = create_one(w->b, w->c, w->kind, &w->id);
        w->t1 = now_mono();
        return NULL;
}

/* IMAGES_BURST creates at once, one connection each; the total is the first send to the last reply. */
static int burst(Bench *b, unsigned kind, Samples *s, double *ret_total) {
        Burst w[IMAGES_BURST] = {};
        pthread_t th[IMAGES_BURST];
        pthread_barrier_t go;
        struct timespec first = {}, last = {};
        int r = 0;

        pthread_barrier_init(&go, NULL, IMAGES_BURST);
        for (unsigned i = 0; i < IMAGES_BURST && r >= 0; i++) {
                w[i] = (Burst) { .b = b, .kind = kind, .go = &go };
                r = bench_connect(b, &w[i].c);
        }
        for (unsigned i = 0; i < IMAGES_BURST && r >= 0; i++)
                pthread_create(&th[i], NULL, burst_thread, &w[i]);
        for (unsigned i = 0; i < IMAGES_BURST && r >= 0; i++)
                pthread_join(th[i], NULL);
        for (unsigned i = 0; i < IMAGES_BURST && r >= 0; i++) {
                if (w[i].r < 0)
                        r = w[i].r;
                samples_add(s, ts_ms(&w[i].t0, &w[i].t1));
                if (i == 0 || ts_ms(&w[i].t0, &first) > 0)
                        first = w[i].t0;
                if (i == 0 || ts_ms(&last, &w[i].t1) > 0)
                        last = w[i].t1;
        }
        *ret_total = ts_ms(&first, &last);
        for (unsigned i = 0; i < IMAGES_BURST; i++) {
                if (w[i].id)
                        (void) bench_destroy(w[0].c ? w[0].c : w[i].c, w[i].id);
                free(w[i].id);
        }
        for (unsigned i = 0; i < IMAGES_BURST; i++)
                sbx_client_free(w[i].c);
        pthread_barrier_destroy(&go);
        return r;
}

static const char *kind_name(unsigned kind) {
        static const char *const names[N_KINDS] = { "host root", "image", "host root, pooled", "image, pooled" };
        return names[kind];
}

static void images_rows(Bench *b, unsigned n_kinds, Samples first[], Samples bs[], Samples totals[], const double load[2]) {
        for (unsigned k = 0; k < n_kinds; k++) {
                char name[96];
                snprintf(name, sizeof(name), "create + run true (%s)", kind_name(k));
                bench_row(b, name, &first[k], 0, "one after the other, %zu each, interleaved%s", first[k].n,
                          k & KIND_POOLED ? "; each finds its pool full" : "");
        }
        for (unsigned k = 0; k < n_kinds; k++) {
                char name[96];
                snprintf(name, sizeof(name), "%d creates at once (%s)", IMAGES_BURST, kind_name(k));
                bench_row(b, name, &totals[k], 0,
                          "the total of a burst (first send to last reply) over %zu bursts, %d connections; single "
                          "creates: median %.1f, p99 %.1f ms; load average %.2f before, %.2f after",
                          totals[k].n, IMAGES_BURST, samples_quantile(&bs[k], 0.5), samples_quantile(&bs[k], 0.99), load[0],
                          load[1]);
        }
}

static int images_measure(Bench *b, SbxClient *c) {
        Samples first[N_KINDS] = {}, bs[N_KINDS] = {}, totals[N_KINDS] = {};
        unsigned n = b->runs / 10 > 20 ? b->runs / 10 : 20, bursts = b->runs / 5 > 5 ? b->runs / 5 : 5, n_kinds = 2;
        double load[2] = { load_avg(), 0 };
        int64_t size = 0, ready = 0;
        int r = pool_state(c, &size, &ready);

        if (r >= 0 && size >= 2 * IMAGES_BURST)
                n_kinds = N_KINDS;
        else if (r >= 0 && size > 0)
                fprintf(stderr, "images: the create pools hold %" PRId64 " in all, fewer than the 2 x %d of the pooled rows: "
                        "those are left out (run-bench.sh: POOL_CREATE=%d POOL_IMAGES=%s:%d)\n", size, IMAGES_BURST,
                        IMAGES_BURST, IMAGES_NAME, IMAGES_BURST);
        if (r >= 0 && n_kinds == N_KINDS)
                r = pool_wait_full(c);
        for (unsigned i = 0; r >= 0 && i < n_kinds; i++) /* warm-up, every kind */
                r = first_command(b, c, i, NULL);
        /* Interleaved, so that a drift of the machine weighs on every kind alike. */
        for (unsigned i = 0; r >= 0 && i < n_kinds * n; i++)
                r = first_command(b, c, i % n_kinds, &first[i % n_kinds]);
        for (unsigned i = 0; r >= 0 && i < n_kinds * bursts; i++) {
                unsigned k = i % n_kinds;
                double total = 0;

                if (k & KIND_POOLED)
                        r = pool_wait_full(c);
                bench_settle(2);
                if (r >= 0)
                        r = burst(b, k, &bs[k], &total);
                if (r >= 0)
                        samples_add(&totals[k], total);
        }
        load[1] = load_avg();
        if (r >= 0)
                images_rows(b, n_kinds, first, bs, totals, load);
        for (unsigned k = 0; k < N_KINDS; k++) {
                samples_done(&first[k]);
                samples_done(&bs[k]);
                samples_done(&totals[k]);
        }
        return r;
}

int scenario_images(Bench *b) {
        char dir[4096] = "";
        SbxClient *c = NULL;
        json_object *rm = NULL;
        int r = bench_connect(b, &c);

        if (r >= 0 && (r = make_rootfs(dir)) < 0)
                fprintf(stderr, "images: cannot make a rootfs from /bin/busybox (a static busybox is needed): %s\n", strerror(-r));
        if (r >= 0)
                r = import_image(c, dir);
        if (r >= 0)
                r = images_measure(b, c);
        if (c) {
                (void) sbx_image_remove(c, IMAGES_NAME, &rm);
                json_object_put(rm);
        }
        if (dir[0])
                remove_rootfs(dir);
        sbx_client_free(c);
        return r;
}
