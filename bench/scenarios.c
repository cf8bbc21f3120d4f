/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The measured scenarios. Each prints its rows through bench_row(). */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define GIB (UINT64_C(1) << 30)

static json_object *run_req(Bench *b, const char *sandbox, const char *const *argv) {
        json_object *req = bench_req("run"), *a = json_object_new_array();

        for (size_t i = 0; argv[i]; i++)
                json_object_array_add(a, json_object_new_string(argv[i]));
        json_object_object_add(req, "argv", a);
        if (sandbox)
                json_object_object_add(req, "sandbox", json_object_new_string(sandbox));
        else if (b->best_effort)
                json_object_object_add(req, "best_effort", json_object_new_boolean(true));
        return req;
}

/* A run that did not exit 0 would measure something else than the happy path. */
static int run_checked_ev(SbxClient *c, json_object *req, sbx_event_fn on_event, void *userdata,
                          json_object **ret_reply) {
        json_object *reply = NULL, *code;
        int r = bench_call_ev(c, req, on_event, userdata, &reply);

        if (r < 0)
                return r;
        if (!json_object_object_get_ex(reply, "exit_code", &code) || json_object_get_int(code) != 0) {
                fprintf(stderr, "sandboxd-bench: run did not exit 0: %s\n", json_object_to_json_string(reply));
                json_object_put(reply);
                return -EPROTO;
        }
        if (ret_reply)
                *ret_reply = reply;
        else
                json_object_put(reply);
        return 0;
}

static int run_checked(SbxClient *c, json_object *req, json_object **ret_reply) {
        return run_checked_ev(c, req, NULL, NULL, ret_reply);
}

static const char *const argv_true[] = { "/bin/true", NULL };

/* Splits a run's latency: until the "started" event (the command has been exec'd) and after. */
static int on_run_event(json_object *event, void *userdata) {
        Worker *w = userdata;
        json_object *kind;
        struct timespec t;

        if (!w->measuring || !json_object_object_get_ex(event, "event", &kind) ||
            strcmp(json_object_get_string(kind), "started") != 0)
                return 0;
        t = now_mono();
        return samples_add(&w->started, ts_ms(&w->t0, &t));
}

static int op_run(Worker *w) {
        return run_checked_ev(w->client, run_req(w->bench, w->sandbox, argv_true), on_run_event, w, NULL);
}

/* posix_spawnp + waitpid: 0 when it exited 0. */
static int spawn_wait(const char *const *argv) {
        pid_t pid;
        int st, r = posix_spawnp(&pid, argv[0], NULL, NULL, (char *const *) argv, environ);

        if (r != 0)
                return -r;
        if (waitpid(pid, &st, 0) < 0)
                return -errno;
        return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EPROTO;
}

static int op_floor(Worker *w) {
        (void) w;
        return spawn_wait(argv_true);
}

/* The peer the throwaway target is set against, spawned the way an application would: its own
 * exec, setup and teardown, beside the throwaway rows in the same program run. */
static const char *const argv_bwrap[] = { "bwrap", "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev",
                                          "--proc", "/proc", "/bin/true", NULL };

static int op_bwrap(Worker *w) {
        (void) w;
        return spawn_wait(argv_bwrap);
}

/* One row per client count of --clients. */
static int concurrent_rows(Bench *b, const char *what, worker_fn fn, const char *sandbox, bool connect) {
        for (size_t i = 0; i < b->n_clients; i++) {
                unsigned k = b->clients[i];
                Samples s = {}, st = {};
                double wall, cpu;
                char name[128];
                CpuMeter m;
                int r;

                bench_cpu_start(&m);
                r = bench_concurrent(b, fn, sandbox, connect, k, b->runs, &s, &st, &wall);
                cpu = bench_cpu_busy_ms(&m);

                if (r < 0) {
                        samples_done(&s);
                        samples_done(&st);
                        return r;
                }
                snprintf(name, sizeof(name), "%s, %u client%s", what, k, k == 1 ? "" : "s");
                if (st.n)
                        bench_row(b, name, &s, (double) s.n * 1e3 / wall,
                                  "%zu runs; `started` event after %.3f ms (median); machine CPU %.2f ms per run", s.n,
                                  samples_quantile(&st, 0.5), s.n ? cpu / (double) s.n : 0.0);
                else
                        bench_row(b, name, &s, (double) s.n * 1e3 / wall, "%zu runs; machine CPU %.2f ms per run", s.n,
                                  s.n ? cpu / (double) s.n : 0.0);
                samples_done(&s);
                samples_done(&st);
        }
        return 0;
}

int scenario_floor(Bench *b) {
        return concurrent_rows(b, "floor: posix_spawn+waitpid /bin/true", op_floor, NULL, false);
}

/* Skipped (with a line on stderr) where bwrap is not installed or cannot run here. */
int scenario_bwrap(Bench *b) {
        Worker w = {};

        if (op_bwrap(&w) < 0) {
                fprintf(stderr, "sandboxd-bench: bwrap --unshare-all ... /bin/true does not run here; no bwrap rows\n");
                return 0;
        }
        return concurrent_rows(b, "peer: bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc /bin/true", op_bwrap,
                               NULL, false);
}

int scenario_run(Bench *b) {
        SbxClient *c = NULL;
        char *id = NULL;
        int r;

        r = bench_connect(b, &c);
        if (r >= 0)
                r = bench_create(b, c, &id);
        if (r >= 0)
                r = concurrent_rows(b, "run /bin/true in an existing sandbox", op_run, id, true);
        if (id && bench_destroy(c, id) < 0 && r >= 0)
                r = -EIO;
        free(id);
        sbx_client_free(c);
        return r;
}

int scenario_throwaway(Bench *b) {
        return concurrent_rows(b, "throwaway run /bin/true (create+run+destroy)", op_run, NULL, true);
}

static int create_destroy_once(Bench *b, SbxClient *c, Samples *cre, Samples *des, Samples *both) {
        struct timespec t0 = now_mono(), t1, t2;
        char *id = NULL;
        int r = bench_create(b, c, &id);

        if (r < 0)
                return r;
        t1 = now_mono();
        r = bench_destroy(c, id);
        t2 = now_mono();
        free(id);
        if (r >= 0 && cre) {
                samples_add(cre, ts_ms(&t0, &t1));
                samples_add(des, ts_ms(&t1, &t2));
                samples_add(both, ts_ms(&t0, &t2));
        }
        return r;
}

int scenario_create(Bench *b) {
        Samples cre = {}, des = {}, both = {};
        SbxClient *c = NULL;
        struct timespec t0, t1;
        CpuMeter m;
        double cpu;
        int r = bench_connect(b, &c);

        for (unsigned i = 0; r >= 0 && i < b->runs / 10 + 3; i++)
                r = create_destroy_once(b, c, NULL, NULL, NULL);
        bench_cpu_start(&m);
        t0 = now_mono();
        for (unsigned i = 0; r >= 0 && i < b->runs; i++)
                r = create_destroy_once(b, c, &cre, &des, &both);
        t1 = now_mono();
        cpu = bench_cpu_busy_ms(&m);
        if (r >= 0) {
                double rate = (double) both.n * 1e3 / ts_ms(&t0, &t1);
                bench_row(b, "create + destroy a persistent sandbox", &both, rate, "pairs/s; %zu pairs; machine CPU %.2f ms per pair",
                          both.n, both.n ? cpu / (double) both.n : 0.0);
                bench_row(b, "  create alone", &cre, 0, "same loop");
                bench_row(b, "  destroy alone", &des, 0, "same loop");
        }
        samples_done(&cre);
        samples_done(&des);
        samples_done(&both);
        sbx_client_free(c);
        return r;
}

/* ---- N sandboxes alive at once ----------------------------------------------------------- */

static int many_create(Bench *b, SbxClient *c, char **ids, Samples *s, double *ret_wall) {
        struct timespec t0 = now_mono(), t1;
        int r = 0;

        for (unsigned i = 0; r >= 0 && i < b->sandboxes; i++) {
                struct timespec a = now_mono(), z;
                r = bench_create(b, c, &ids[i]);
                z = now_mono();
                samples_add(s, ts_ms(&a, &z));
        }
        t1 = now_mono();
        *ret_wall = ts_ms(&t0, &t1);
        return r;
}

/* Runs round-robin over all the sandboxes, so every one of them is touched. */
/* Runs round-robin over ids[0..n). */
static int many_runs(Bench *b, SbxClient *c, char **ids, unsigned n, Samples *s, double *ret_wall) {
        struct timespec t0, t1;
        int r = 0;

        for (unsigned i = 0; r >= 0 && i < b->runs / 10 + 3; i++)
                r = run_checked(c, run_req(b, ids[i % n], argv_true), NULL);
        t0 = now_mono();
        for (unsigned i = 0; r >= 0 && i < b->runs; i++) {
                struct timespec a = now_mono(), z;
                r = run_checked(c, run_req(b, ids[i % n], argv_true), NULL);
                z = now_mono();
                samples_add(s, ts_ms(&a, &z));
        }
        t1 = now_mono();
        *ret_wall = ts_ms(&t0, &t1);
        return r;
}

/* ids[from..] */
static int many_destroy(Bench *b, SbxClient *c, char **ids, unsigned from, Samples *s, double *ret_wall) {
        struct timespec t0 = now_mono(), t1;
        int r = 0;

        for (unsigned i = from; i < b->sandboxes && ids[i]; i++) {
                struct timespec a = now_mono(), z;
                int q = bench_destroy(c, ids[i]);
                z = now_mono();
                if (q < 0 && r >= 0)
                        r = q;
                samples_add(s, ts_ms(&a, &z));
        }
        t1 = now_mono();
        *ret_wall = ts_ms(&t0, &t1);
        return r;
}

/* Creates b->sandboxes sandboxes and keeps them; runs round-robin over all of them; destroys all
 * but the first; runs in that one alone. Both run rows come after the machine has settled
 * (bench_settle), in the same scenario, so that their ratio is what having the others alive
 * costs, not what the kernel still owes for making or destroying them. */
int scenario_many(Bench *b) {
        Samples cre = {}, run = {}, one = {}, des = {};
        char **ids = calloc(b->sandboxes, sizeof(char *));
        char *first = NULL;
        SbxClient *c = NULL;
        double w_cre = 0, w_run = 0, w_one = 0, w_des = 0, settle_many = 0, settle_one = 0;
        long rss0, rss1, rss2, avail0, avail1, pss = 0, priv = 0;
        unsigned n_inits = 0;
        char name[128];
        int r = ids ? bench_connect(b, &c) : -ENOMEM;

        if (r < 0) {
                free(ids);
                return r;
        }
        rss0 = bench_daemon_kb(b, "VmRSS");
        avail0 = bench_mem_available_kb();
        r = many_create(b, c, ids, &cre, &w_cre);
        rss1 = bench_daemon_kb(b, "VmRSS");
        avail1 = bench_mem_available_kb();
        (void) bench_inits_kb(b, &n_inits, &pss, &priv);
        if (r >= 0) {
                settle_many = bench_settle(30);
                r = many_runs(b, c, ids, b->sandboxes, &run, &w_run);
        }
        int q = many_destroy(b, c, ids, 1, &des, &w_des);
        rss2 = bench_daemon_kb(b, "VmRSS");
        if (r >= 0)
                r = q;
        if (r >= 0 && ids[0]) {
                settle_one = bench_settle(30);
                r = many_runs(b, c, ids, 1, &one, &w_one);
        }
        first = ids[0];
        if (first && (q = bench_destroy(c, first)) < 0 && r >= 0)
                r = q;
        if (r >= 0) {
                double m_many = samples_quantile(&run, 0.5), m_one = samples_quantile(&one, 0.5);
                snprintf(name, sizeof(name), "create %u sandboxes, kept alive", b->sandboxes);
                bench_row(b, name, &cre, (double) cre.n * 1e3 / w_cre,
                          "all %u in %.0f ms; daemon RSS %ld -> %ld KiB = %.1f KiB per sandbox; %u inits: Pss %.0f KiB, "
                          "private %.0f KiB each; host MemAvailable -%.0f KiB per sandbox (kernel included, noisy)",
                          b->sandboxes, w_cre, rss0, rss1, (double) (rss1 - rss0) / b->sandboxes, n_inits,
                          n_inits ? (double) pss / n_inits : 0.0, n_inits ? (double) priv / n_inits : 0.0,
                          (double) (avail0 - avail1) / b->sandboxes);
                snprintf(name, sizeof(name), "run /bin/true with %u sandboxes alive, 1 client", b->sandboxes);
                bench_row(b, name, &run, (double) run.n * 1e3 / w_run,
                          "round-robin over the %u, after %.1f s for the machine to settle; %.2fx the row below", b->sandboxes,
                          settle_many, m_one > 0 ? m_many / m_one : 0.0);
                snprintf(name, sizeof(name), "destroy %u of them", b->sandboxes - 1);
                bench_row(b, name, &des, (double) des.n * 1e3 / w_des, "all in %.0f ms; daemon RSS after: %ld KiB", w_des,
                          rss2);
                bench_row(b, "run /bin/true in the one left alive, 1 client", &one, (double) one.n * 1e3 / w_one,
                          "after %.1f s for the machine to settle", settle_one);
        }
        for (unsigned i = 0; i < b->sandboxes; i++)
                free(ids[i]);
        free(ids);
        samples_done(&cre);
        samples_done(&run);
        samples_done(&one);
        samples_done(&des);
        sbx_client_free(c);
        return r;
}

/* ---- 1 GiB of stdout --------------------------------------------------------------------- */

static const char *const argv_gib[] = { "head", "-c", "1073741824", "/dev/zero", NULL };

static int bigout_once(Bench *b, SbxClient *c, const char *id, Samples *s) {
        json_object *req = run_req(b, id, argv_gib), *reply = NULL, *bytes;
        struct timespec t0, t1;
        int r;

        json_object_object_add(req, "output_bytes", json_object_new_string("1M"));
        json_object_object_add(req, "timeout_s", json_object_new_int(600));
        t0 = now_mono();
        r = run_checked(c, req, &reply);
        t1 = now_mono();
        if (r < 0)
                return r;
        if (!json_object_object_get_ex(reply, "stdout_bytes", &bytes) || (uint64_t) json_object_get_int64(bytes) != GIB) {
                fprintf(stderr, "sandboxd-bench: 1 GiB run counted %s bytes\n", json_object_to_json_string(bytes));
                r = -EPROTO;
        }
        json_object_put(reply);
        samples_add(s, ts_ms(&t0, &t1));
        return r;
}

/* The same 1 GiB through a pipe into this process, which throws it away: the floor. */
static int bigout_floor_once(Samples *s) {
        static char buf[1 << 16];
        posix_spawn_file_actions_t fa;
        struct timespec t0 = now_mono(), t1;
        int p[2], st, r;
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
        r = posix_spawnp(&pid, argv_gib[0], &fa, NULL, (char *const *) argv_gib, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(p[1]);
        if (r == 0)
                while (read(p[0], buf, sizeof(buf)) > 0)
                        ;
        close(p[0]);
        if (r != 0)
                return -r;
        waitpid(pid, &st, 0);
        t1 = now_mono();
        samples_add(s, ts_ms(&t0, &t1));
        return 0;
}

int scenario_bigout(Bench *b) {
        Samples s = {}, f = {};
        SbxClient *c = NULL;
        char *id = NULL;
        long rss0, hwm = -1;
        const unsigned reps = 5;
        int r = bench_connect(b, &c);

        if (r >= 0)
                r = bench_create(b, c, &id);
        rss0 = bench_daemon_kb(b, "VmRSS");
        if (r >= 0 && bench_daemon_reset_hwm(b) < 0)
                fprintf(stderr, "sandboxd-bench: cannot reset the daemon's VmHWM; it is its peak since start\n");
        /* Interleaved, so that a burst of load on a noisy host hits both alike. */
        for (unsigned i = 0; r >= 0 && i < reps; i++) {
                r = bigout_floor_once(&f);
                if (r >= 0)
                        r = bigout_once(b, c, id, &s);
        }
        hwm = bench_daemon_kb(b, "VmHWM");
        if (r >= 0) {
                bench_row(b, "1 GiB to stdout, output cap 1M", &s, 0,
                          "%.0f MiB/s (median); daemon VmRSS before %ld KiB, VmHWM during %ld KiB; %u runs",
                          1024.0 * 1e3 / samples_quantile(&s, 0.5), rss0, hwm, reps);
                bench_row(b, "floor: 1 GiB through a pipe to this process", &f, 0, "%.0f MiB/s (median); %u runs",
                          1024.0 * 1e3 / samples_quantile(&f, 0.5), reps);
        }
        if (id && bench_destroy(c, id) < 0 && r >= 0)
                r = -EIO;
        free(id);
        samples_done(&s);
        samples_done(&f);
        sbx_client_free(c);
        return r;
}
