/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd-bench: shared state of the scenarios and the helpers they use. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <sys/types.h>

#include "sandbox.h"
#include "stats.h"

#define BENCH_MAX_CLIENTS 64

typedef struct Bench {
        const char *socket;
        unsigned runs;
        unsigned clients[16];
        size_t n_clients;
        unsigned sandboxes;
        bool best_effort;
        const char *only;
        bool json;
        pid_t daemon_pid;
        json_object *rows; /* array of {scenario, median_ms, p99_ms, runs_per_s, notes} */
} Bench;

/* One client thread's work: fn is called n times, each call timed on its own. */
typedef struct Worker Worker;
typedef int (*worker_fn)(Worker *w);
struct Worker {
        Bench *bench;
        SbxClient *client; /* own connection, NULL for the floor */
        const char *sandbox;
        worker_fn fn;
        unsigned warmup, n;
        bool measuring;
        struct timespec t0;  /* start of the request in flight */
        Samples samples;
        Samples started;     /* request -> its "started" event (runs only) */
        int error;
};

/* Runs fn on k threads (each with its own connection when connect), runs calls in all after a
 * warm-up; adds the latencies to *ret_samples and returns the wall time of the measured part. */
int bench_concurrent(Bench *b, worker_fn fn, const char *sandbox, bool connect, unsigned k, unsigned runs,
                     Samples *ret_samples, Samples *ret_started, double *ret_wall_ms);

/* Sends req (taken) and fails unless the final reply is ok. */
int bench_call(SbxClient *c, json_object *req, json_object **ret_reply);
int bench_call_ev(SbxClient *c, json_object *req, sbx_event_fn on_event, void *userdata, json_object **ret_reply);
json_object *bench_req(const char *op);
int bench_create(Bench *b, SbxClient *c, char **ret_id);
int bench_destroy(SbxClient *c, const char *id);
int bench_connect(Bench *b, SbxClient **ret);

/* The daemon's /proc/<pid>/status field (VmRSS, VmHWM) in KiB. */
long bench_daemon_kb(Bench *b, const char *field);
int bench_daemon_reset_hwm(Bench *b);
/* The daemon's children named sandbox-init: how many, their Pss and their private memory. */
int bench_inits_kb(Bench *b, unsigned *ret_n, long *ret_pss, long *ret_private);
/* The host's MemAvailable (everything the sandboxes cost, the kernel's share included). */
long bench_mem_available_kb(void);
/* The whole machine's busy CPU time (every CPU, the kernel's threads included, from /proc/stat at
 * the clock tick's resolution) since bench_cpu_start(): what a scenario costs in CPU, which is
 * what bounds its rate on a machine with few CPUs. -1 when /proc/stat cannot be read. */
typedef struct CpuMeter {
        unsigned long long busy, total;
} CpuMeter;
void bench_cpu_start(CpuMeter *m);
double bench_cpu_busy_ms(const CpuMeter *m);

/* Waits until the machine is quiet (under 10% busy over two 250 ms windows in a row), at most
 * max_s seconds: what a burst of creations or destructions leaves to the kernel (RCU callbacks,
 * namespace cleanup in kworkers) is not measured as the cost of what comes next. Returns the
 * seconds waited. */
double bench_settle(double max_s);
int bench_find_daemon(Bench *b, SbxClient *c);

void bench_row(Bench *b, const char *scenario, Samples *s, double runs_per_s, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));

/* The scenarios (scenarios.c). */
int scenario_floor(Bench *b);
int scenario_run(Bench *b);
int scenario_throwaway(Bench *b);
int scenario_bwrap(Bench *b);
int scenario_create(Bench *b);
int scenario_many(Bench *b);
int scenario_bigout(Bench *b);
int scenario_files(Bench *b); /* scenario-files.c */
int scenario_ports(Bench *b); /* scenario-ports.c */
int scenario_images(Bench *b); /* scenario-images.c */
int scenario_egress(Bench *b); /* scenario-egress.c */
