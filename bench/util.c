/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Helpers of the scenarios: requests, client threads, the daemon's memory, result rows. */
#include "bench.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

json_object *bench_req(const char *op) {
        json_object *req = json_object_new_object();
        json_object_object_add(req, "op", json_object_new_string(op));
        return req;
}

int bench_call(SbxClient *c, json_object *req, json_object **ret_reply) {
        return bench_call_ev(c, req, NULL, NULL, ret_reply);
}

int bench_call_ev(SbxClient *c, json_object *req, sbx_event_fn on_event, void *userdata, json_object **ret_reply) {
        json_object *reply = NULL;
        int r = sbx_client_call(c, req, on_event, userdata, &reply);

        if (r < 0) {
                fprintf(stderr, "sandboxd-bench: request failed: %s\n", strerror(-r));
                return r;
        }
        if (!sbx_reply_ok(reply)) {
                fprintf(stderr, "sandboxd-bench: %s: %s\n", sbx_reply_error_code(reply) ?: "?",
                        sbx_reply_error_message(reply) ?: "?");
                json_object_put(reply);
                return -EPROTO;
        }
        if (ret_reply)
                *ret_reply = reply;
        else
                json_object_put(reply);
        return 0;
}

int bench_connect(Bench *b, SbxClient **ret) {
        int r = sbx_client_connect(b->socket, ret);
        if (r < 0)
                fprintf(stderr, "sandboxd-bench: connect to %s: %s\n", b->socket ?: "(default socket)", strerror(-r));
        return r;
}

int bench_create(Bench *b, SbxClient *c, char **ret_id) {
        json_object *req = bench_req("create"), *reply = NULL, *sbx, *id;
        int r;

        if (b->best_effort)
                json_object_object_add(req, "best_effort", json_object_new_boolean(true));
        r = bench_call(c, req, &reply);
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

int bench_destroy(SbxClient *c, const char *id) {
        json_object *req = bench_req("destroy");
        json_object_object_add(req, "sandbox", json_object_new_string(id));
        return bench_call(c, req, NULL);
}

/* ---- client threads ---------------------------------------------------------------------- */

typedef struct Shared {
        pthread_barrier_t ready, go;
} Shared;

typedef struct Thread {
        Worker w;
        Shared *shared;
        pthread_t tid;
} Thread;

static void *worker_main(void *arg) {
        Thread *t = arg;
        Worker *w = &t->w;

        for (unsigned i = 0; i < w->warmup && !w->error; i++)
                w->error = w->fn(w);
        pthread_barrier_wait(&t->shared->ready);
        pthread_barrier_wait(&t->shared->go);
        w->measuring = true;
        for (unsigned i = 0; i < w->n && !w->error; i++) {
                struct timespec t1;
                w->t0 = now_mono();
                w->error = w->fn(w);
                t1 = now_mono();
                if (!w->error)
                        w->error = samples_add(&w->samples, ts_ms(&w->t0, &t1));
        }
        return NULL;
}

static int threads_start(Bench *b, Thread *th, unsigned k, worker_fn fn, const char *sandbox, bool connect,
                         unsigned runs, Shared *sh) {
        for (unsigned i = 0; i < k; i++) {
                th[i] = (Thread) { .shared = sh };
                th[i].w = (Worker) { .bench = b, .fn = fn, .sandbox = sandbox };
                th[i].w.n = runs / k + (i < runs % k);
                th[i].w.warmup = th[i].w.n / 10 + 3;
                if (connect && bench_connect(b, &th[i].w.client) < 0)
                        return -EIO;
        }
        for (unsigned i = 0; i < k; i++)
                if (pthread_create(&th[i].tid, NULL, worker_main, &th[i]) != 0)
                        abort(); /* the barriers would hang; nothing sane to unwind */
        return 0;
}

int bench_concurrent(Bench *b, worker_fn fn, const char *sandbox, bool connect, unsigned k, unsigned runs,
                     Samples *ret_samples, Samples *ret_started, double *ret_wall_ms) {
        Thread th[BENCH_MAX_CLIENTS] = {};
        Shared sh;
        struct timespec t0, t1;
        int r;

        if (k < 1 || k > BENCH_MAX_CLIENTS)
                return -EINVAL;
        pthread_barrier_init(&sh.ready, NULL, k + 1);
        pthread_barrier_init(&sh.go, NULL, k + 1);
        r = threads_start(b, th, k, fn, sandbox, connect, runs, &sh);
        if (r < 0) {
                for (unsigned i = 0; i < k; i++)
                        sbx_client_free(th[i].w.client);
                pthread_barrier_destroy(&sh.ready);
                pthread_barrier_destroy(&sh.go);
                return r;
        }
        pthread_barrier_wait(&sh.ready);
        t0 = now_mono();
        pthread_barrier_wait(&sh.go);
        for (unsigned i = 0; i < k; i++)
                pthread_join(th[i].tid, NULL);
        t1 = now_mono();
        for (unsigned i = 0; i < k; i++) {
                if (th[i].w.error && r >= 0)
                        r = th[i].w.error;
                samples_merge(ret_samples, &th[i].w.samples);
                if (ret_started)
                        samples_merge(ret_started, &th[i].w.started);
                samples_done(&th[i].w.samples);
                samples_done(&th[i].w.started);
                sbx_client_free(th[i].w.client);
        }
        pthread_barrier_destroy(&sh.ready);
        pthread_barrier_destroy(&sh.go);
        *ret_wall_ms = ts_ms(&t0, &t1);
        return r;
}

/* ---- the daemon's memory ----------------------------------------------------------------- */

static bool pid_is_sandboxd(pid_t pid) {
        char path[64], comm[64] = "";
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/comm", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return false;
        if (!fgets(comm, sizeof(comm), f))
                comm[0] = '\0';
        fclose(f);
        comm[strcspn(comm, "\n")] = '\0';
        return strcmp(comm, "sandboxd") == 0;
}

/* The only process named sandboxd, or 0 when there are none or several. */
static pid_t scan_for_sandboxd(void) {
        DIR *d = opendir("/proc");
        struct dirent *de;
        pid_t found = 0;
        int n = 0;

        if (!d)
                return 0;
        while ((de = readdir(d)))
                if (isdigit((unsigned char) de->d_name[0]) && pid_is_sandboxd(atoi(de->d_name))) {
                        found = atoi(de->d_name);
                        n++;
                }
        closedir(d);
        return n == 1 ? found : 0;
}

int bench_find_daemon(Bench *b, SbxClient *c) {
        struct ucred cred;
        socklen_t len = sizeof(cred);

        if (b->daemon_pid > 0)
                return 0;
        /* The listener's credentials: the daemon itself, unless systemd opened the socket. */
        if (getsockopt(sbx_client_fd(c), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && pid_is_sandboxd(cred.pid)) {
                b->daemon_pid = cred.pid;
                return 0;
        }
        b->daemon_pid = scan_for_sandboxd();
        return b->daemon_pid > 0 ? 0 : -ESRCH;
}

long bench_daemon_kb(Bench *b, const char *field) {
        char path[64], line[256];
        size_t fl = strlen(field);
        long kb = -1;
        FILE *f;

        if (b->daemon_pid <= 0)
                return -1;
        snprintf(path, sizeof(path), "/proc/%d/status", (int) b->daemon_pid);
        f = fopen(path, "re");
        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, field, fl) == 0 && line[fl] == ':') {
                        kb = strtol(line + fl + 1, NULL, 10);
                        break;
                }
        fclose(f);
        return kb;
}

static long smaps_kb(pid_t pid, const char *field) {
        char path[64], line[256];
        size_t fl = strlen(field);
        long kb = 0;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, field, fl) == 0 && line[fl] == ':')
                        kb += strtol(line + fl + 1, NULL, 10);
        fclose(f);
        return kb;
}

/* "pid (comm) state ppid ...": the daemon's children named sandbox-init. */
static bool is_daemon_init(pid_t daemon, pid_t pid) {
        char path[64], buf[512], *p;
        FILE *f;
        int ppid = -1;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return false;
        if (!fgets(buf, sizeof(buf), f))
                buf[0] = '\0';
        fclose(f);
        p = strrchr(buf, ')');
        if (!p || !strstr(buf, "(sandbox-init)") || sscanf(p + 1, " %*c %d", &ppid) != 1)
                return false;
        return ppid == daemon;
}

int bench_inits_kb(Bench *b, unsigned *ret_n, long *ret_pss, long *ret_private) {
        DIR *d = opendir("/proc");
        struct dirent *de;

        *ret_n = 0;
        *ret_pss = *ret_private = 0;
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                pid_t pid = (pid_t) atoi(de->d_name);
                if (pid <= 0 || !is_daemon_init(b->daemon_pid, pid))
                        continue;
                (*ret_n)++;
                *ret_pss += smaps_kb(pid, "Pss");
                *ret_private += smaps_kb(pid, "Private_Clean") + smaps_kb(pid, "Private_Dirty");
        }
        closedir(d);
        return 0;
}

/* The machine's busy time and total time so far, in clock ticks (the first line of /proc/stat). */
static int cpu_ticks(unsigned long long *busy, unsigned long long *total) {
        unsigned long long v[8] = {};
        FILE *f = fopen("/proc/stat", "re");
        int n;

        if (!f)
                return -errno;
        n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                   &v[7]);
        fclose(f);
        if (n != 8)
                return -EBADMSG;
        *busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
        *total = *busy + v[3] + v[4];
        return 0;
}

void bench_cpu_start(CpuMeter *m) {
        if (cpu_ticks(&m->busy, &m->total) < 0)
                m->busy = m->total = 0;
}

double bench_cpu_busy_ms(const CpuMeter *m) {
        unsigned long long busy, total;
        if (!m->total || cpu_ticks(&busy, &total) < 0)
                return -1;
        return (double) (busy - m->busy) * 1e3 / (double) sysconf(_SC_CLK_TCK);
}

double bench_settle(double max_s) {
        struct timespec t0 = now_mono(), t;
        unsigned quiet = 0;

        for (;;) {
                unsigned long long b0, t0_, b1, t1_;
                if (cpu_ticks(&b0, &t0_) < 0)
                        return -1;
                (void) nanosleep(&(struct timespec) { .tv_nsec = 250 * 1000 * 1000 }, NULL);
                if (cpu_ticks(&b1, &t1_) < 0)
                        return -1;
                quiet = t1_ > t0_ && (double) (b1 - b0) / (double) (t1_ - t0_) < 0.10 ? quiet + 1 : 0;
                t = now_mono();
                if (quiet >= 2 || ts_ms(&t0, &t) > max_s * 1e3)
                        return ts_ms(&t0, &t) / 1e3;
        }
}

long bench_mem_available_kb(void) {
        char line[256];
        long kb = -1;
        FILE *f = fopen("/proc/meminfo", "re");

        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, "MemAvailable:", 13) == 0)
                        kb = strtol(line + 13, NULL, 10);
        fclose(f);
        return kb;
}

/* "5" to clear_refs resets VmHWM to the current RSS (root or the process's owner only). */
int bench_daemon_reset_hwm(Bench *b) {
        char path[64];
        FILE *f;
        int r = 0;

        snprintf(path, sizeof(path), "/proc/%d/clear_refs", (int) b->daemon_pid);
        f = fopen(path, "we");
        if (!f)
                return -errno;
        if (fputs("5", f) < 0)
                r = -EIO;
        if (fclose(f) != 0 && r == 0)
                r = -errno;
        return r;
}

/* ---- results ----------------------------------------------------------------------------- */

void bench_row(Bench *b, const char *scenario, Samples *s, double runs_per_s, const char *fmt, ...) {
        json_object *row = json_object_new_object();
        char notes[512] = "";
        va_list ap;

        if (fmt) {
                va_start(ap, fmt);
                vsnprintf(notes, sizeof(notes), fmt, ap);
                va_end(ap);
        }
        json_object_object_add(row, "scenario", json_object_new_string(scenario));
        json_object_object_add(row, "samples", json_object_new_int64((int64_t) (s ? s->n : 0)));
        if (s && s->n) {
                json_object_object_add(row, "median_ms", json_object_new_double(samples_quantile(s, 0.5)));
                json_object_object_add(row, "p99_ms", json_object_new_double(samples_quantile(s, 0.99)));
        }
        if (runs_per_s > 0)
                json_object_object_add(row, "runs_per_s", json_object_new_double(runs_per_s));
        json_object_object_add(row, "notes", json_object_new_string(notes));
        json_object_array_add(b->rows, row);
        if (b->json)
                return;
        printf("| %s | ", scenario);
        if (s && s->n)
                printf("%.3f | %.3f | ", samples_quantile(s, 0.5), samples_quantile(s, 0.99));
        else
                printf("- | - | ");
        if (runs_per_s > 0)
                printf("%.0f | ", runs_per_s);
        else
                printf("- | ");
        printf("%s |\n", notes);
        fflush(stdout);
}
