/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The "images" scenario: what a sandbox of an image costs beside one of the host's root, in the
 * same sitting. A tiny image (the host's static busybox) is imported once through libsandbox's
 * sbx_image_import(); then (1) the time to a first command, create + a run of `true`, one after
 * the other, and (2) 20 creates sent at once on 20 connections, the total and the p99, each with
 * the image and with the host root. */
#include "bench.h"

#include <errno.h>
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

static json_object *create_req(Bench *b, bool image) {
        json_object *req = bench_req("create");
        if (b->best_effort)
                json_object_object_add(req, "best_effort", json_object_new_boolean(true));
        if (image)
                json_object_object_add(req, "image", json_object_new_string(IMAGES_NAME));
        return req;
}

static int create_one(Bench *b, SbxClient *c, bool image, char **ret_id) {
        json_object *reply = NULL, *sbx, *id;
        int r = bench_call(c, create_req(b, image), &reply);

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
static int first_command(Bench *b, SbxClient *c, bool image, Samples *s) {
        struct timespec t0 = now_mono(), t1;
        char *id = NULL;
        int r = create_one(b, c, image, &id);

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
        bool image;
        pthread_barrier_t *go;
        struct timespec t0, t1;
        char *id;
        int r;
} Burst;

static void *burst_thread(void *userdata) {
        Burst *w = userdata;
        pthread_barrier_wait(w->go);
        w->t0 = now_mono();
        w->r = create_one(w->b, w->c, w->image, &w->id);
        w->t1 = now_mono();
        return NULL;
}

/* IMAGES_BURST creates at once, one connection each; the total is the first send to the last reply. */
static int burst(Bench *b, bool image, Samples *s, double *ret_total) {
        Burst w[IMAGES_BURST] = {};
        pthread_t th[IMAGES_BURST];
        pthread_barrier_t go;
        struct timespec first = {}, last = {};
        int r = 0;

        pthread_barrier_init(&go, NULL, IMAGES_BURST);
        for (unsigned i = 0; i < IMAGES_BURST && r >= 0; i++) {
                w[i] = (Burst) { .b = b, .image = image, .go = &go };
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

static int images_measure(Bench *b, SbxClient *c) {
        static const char *const what[] = { "host root", "image" };
        Samples first[2] = {}, bs[2] = {};
        double total[2] = {};
        unsigned n = b->runs / 10 > 20 ? b->runs / 10 : 20;
        int r = 0;

        for (unsigned i = 0; r >= 0 && i < 3; i++) /* warm-up, both kinds */
                r = first_command(b, c, i % 2, NULL);
        /* Interleaved, so that a drift of the machine weighs on both alike. */
        for (unsigned i = 0; r >= 0 && i < 2 * n; i++)
                r = first_command(b, c, i % 2, &first[i % 2]);
        for (unsigned k = 0; r >= 0 && k < 2; k++) {
                bench_settle(5);
                r = burst(b, k, &bs[k], &total[k]);
        }
        for (unsigned k = 0; r >= 0 && k < 2; k++) {
                char name[96];
                snprintf(name, sizeof(name), "create + run true (%s)", what[k]);
                bench_row(b, name, &first[k], 0, "one after the other, %zu each, interleaved", first[k].n);
                snprintf(name, sizeof(name), "%d creates at once (%s)", IMAGES_BURST, what[k]);
                bench_row(b, name, &bs[k], 0, "total %.1f ms (first send to last reply), %d connections", total[k], IMAGES_BURST);
        }
        for (unsigned k = 0; k < 2; k++) {
                samples_done(&first[k]);
                samples_done(&bs[k]);
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
