/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one place the Prometheus text (format 0.0.4) is made: the counters of core/metrics.c, the
 * sandboxes as the registry has them now, a few reads of their cgroups, and the daemon's own
 * process. Every series is in docs/metrics.md. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "egress-dns.h"
#include "egress.h"
#include "macro.h"
#include "manager.h"
#include "metrics-text.h"
#include "metrics.h"
#include "sandbox.h"
#include "session.h"
#include "util.h"

/* The sum of the sandboxes beyond metrics_max_sandboxes: a label value no sandbox id can be. */
#define OTHER_LABEL "_other"

static void family(FILE *f, const char *name, const char *type, const char *help) {
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample(FILE *f, const char *name, uint64_t v) {
        fprintf(f, "%s %" PRIu64 "\n", name, v);
}

static void one(FILE *f, const char *name, const char *type, const char *help, uint64_t v) {
        family(f, name, type, help);
        sample(f, name, v);
}

/* A label value: backslash, double quote and newline escaped, as the format says. */
static void label_value(FILE *f, const char *v) {
        for (; *v; v++)
                if (*v == '\\' || *v == '"')
                        fprintf(f, "\\%c", *v);
                else if (*v == '\n')
                        fputs("\\n", f);
                else
                        fputc(*v, f);
}

/* ---- Sandboxes ------------------------------------------------------------------------------ */

typedef struct SandboxSample {
        Sandbox *s;
        CgUsage usage;          /* CG_USAGE_UNKNOWN where not readable (or not read) */
        uint64_t memory_peak;
        uint64_t disk_bytes;    /* at the last whole sweep, or CG_USAGE_UNKNOWN */
        uint64_t connections;   /* tracked by the kernel, or CG_USAGE_UNKNOWN (no egress) */
} SandboxSample;

/* Highest memory first (unknown last), then by id: the biggest users keep their own series. */
static int cmp_sample(const void *a, const void *b) {
        const SandboxSample *x = a, *y = b;
        if (x->usage.memory_bytes != y->usage.memory_bytes) {
                if (x->usage.memory_bytes == CG_USAGE_UNKNOWN || y->usage.memory_bytes == CG_USAGE_UNKNOWN)
                        return x->usage.memory_bytes == CG_USAGE_UNKNOWN ? 1 : -1;
                return x->usage.memory_bytes > y->usage.memory_bytes ? -1 : 1;
        }
        return strcmp(x->s->id, y->s->id);
}

/* One conntrack dump for all (egress.c counts every slot at once, once an iteration). */
static uint64_t read_connections(Sandbox *s) {
        int k = s->join_netns_fd >= 0 ? -ENOTCONN : egress_connections(s->ctx, &s->net);
        return k < 0 ? CG_USAGE_UNKNOWN : (uint64_t) k;
}

static void read_sample(SandboxSample *v) {
        Sandbox *s = v->s;

        cg_read_usage(s->cg_fd, s->enforced, &v->usage);
        v->connections = read_connections(s);
        if ((s->enforced & CG_MEMORY) && s->ctx->cg.has_memory_peak && cg_read_u64(s->cg_fd, "memory.peak", &v->memory_peak) < 0)
                v->memory_peak = CG_USAGE_UNKNOWN;
}

static uint64_t minus(uint64_t total, uint64_t part) {
        return total == CG_USAGE_UNKNOWN ? total : total > part ? total - part : 0;
}

/* What has no series of its own: all of sandboxes/ (read once, however many sandboxes there
 * are: the pooled ones in it too, and for CPU the sandboxes gone, so that it stays a counter)
 * less the labelled ones; disk, which no cgroup holds, is added up. */
static void rest_sample(Context *m, const SandboxSample *v, size_t n, size_t labelled, SandboxSample *ret) {
        *ret = (SandboxSample) { .memory_peak = CG_USAGE_UNKNOWN, .disk_bytes = 0, .connections = CG_USAGE_UNKNOWN };
        int slice = m->scopes ? scope_open_slice(m->scopes) : -ENOENT;

        /* Placement "scope": the sandboxes are all below sandboxd.slice instead. */
        cg_read_usage(slice >= 0 ? slice : m->cg.sandboxes_fd, m->cg.enforceable, &ret->usage);
        safe_close(slice);
        for (size_t i = 0; i < labelled; i++) {
                ret->usage.memory_bytes = minus(ret->usage.memory_bytes, v[i].usage.memory_bytes == CG_USAGE_UNKNOWN ? 0 : v[i].usage.memory_bytes);
                ret->usage.pids = minus(ret->usage.pids, v[i].usage.pids == CG_USAGE_UNKNOWN ? 0 : v[i].usage.pids);
                ret->usage.cpu_usec = minus(ret->usage.cpu_usec, v[i].usage.cpu_usec == CG_USAGE_UNKNOWN ? 0 : v[i].usage.cpu_usec);
        }
        for (size_t i = labelled; i < n; i++) {
                uint64_t k = read_connections(v[i].s);
                ret->disk_bytes += v[i].disk_bytes == CG_USAGE_UNKNOWN ? 0 : v[i].disk_bytes;
                if (k != CG_USAGE_UNKNOWN)
                        ret->connections = (ret->connections == CG_USAGE_UNKNOWN ? 0 : ret->connections) + k;
        }
}

typedef uint64_t (*sample_get_t)(const SandboxSample *x);
static uint64_t get_memory(const SandboxSample *x) { return x->usage.memory_bytes; }
static uint64_t get_peak(const SandboxSample *x) { return x->memory_peak; }
static uint64_t get_pids(const SandboxSample *x) { return x->usage.pids; }
static uint64_t get_cpu(const SandboxSample *x) { return x->usage.cpu_usec; }
static uint64_t get_disk(const SandboxSample *x) { return x->disk_bytes; }
static uint64_t get_connections(const SandboxSample *x) { return x->connections; }

static void value(FILE *f, uint64_t x, bool seconds) {
        if (seconds)
                fprintf(f, " %" PRIu64 ".%06" PRIu64 "\n", x / USEC_PER_SEC, x % USEC_PER_SEC);
        else
                fprintf(f, " %" PRIu64 "\n", x);
}

/* One family: a sample per labelled sandbox that has the value, then the rest (rest NULL: none)
 * under sandbox="_other". */
static void sandbox_family(FILE *f, const char *name, const char *type, const char *help, const SandboxSample *v,
                           size_t labelled, const SandboxSample *rest, sample_get_t get, bool seconds) {
        family(f, name, type, help);
        for (size_t i = 0; i < labelled; i++) {
                if (get(&v[i]) == CG_USAGE_UNKNOWN)
                        continue;
                fprintf(f, "%s{sandbox=\"", name);
                label_value(f, v[i].s->id);
                fputs("\"}", f);
                value(f, get(&v[i]), seconds);
        }
        if (rest && get(rest) != CG_USAGE_UNKNOWN) {
                fprintf(f, "%s{sandbox=\"" OTHER_LABEL "\"}", name);
                value(f, get(rest), seconds);
        }
}

/* What each labelled sandbox's DNS relay made of its queries (no "_other": a sum of counters of
 * sandboxes that come and go would not be a counter). */
static void render_dns_queries(FILE *f, const SandboxSample *v, size_t labelled) {
        family(f, "sandboxd_sandbox_dns_queries_total", "counter",
               "Queries to the sandbox's DNS relay by what became of them: answered by the resolver, refused (a name "
               "not on its list), dropped (malformed, over a bound, unanswered).");
        for (size_t i = 0; i < labelled; i++) {
                const DnsRelay *d = v[i].s->net.attached ? v[i].s->net.dns : NULL;
                DnsRelayCounts c = dns_relay_counts(d);
                const struct { const char *name; uint64_t n; } results[] = {
                        { "answered", c.answered }, { "refused", c.refused }, { "dropped", c.dropped },
                };
                if (!d)
                        continue;
                for (size_t k = 0; k < ELEMENTSOF(results); k++) {
                        fputs("sandboxd_sandbox_dns_queries_total{sandbox=\"", f);
                        label_value(f, v[i].s->id);
                        fprintf(f, "\",result=\"%s\"} %" PRIu64 "\n", results[k].name, results[k].n);
                }
        }
}

static void render_sandbox_states(FILE *f, Context *m) {
        static const char *const names[] = {
                [SANDBOX_CREATING] = "creating", [SANDBOX_READY] = "ready",
                [SANDBOX_DESTROYING] = "destroying", [SANDBOX_FAILED] = "failed",
        };
        uint64_t n[ELEMENTSOF(names)] = {};

        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry))
                if (!s->pooled && (unsigned) s->state < ELEMENTSOF(names))
                        n[s->state]++;
        family(f, "sandboxd_sandboxes", "gauge", "Sandboxes by state (pooled ones not counted).");
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                fprintf(f, "sandboxd_sandboxes{state=\"%s\"} %" PRIu64 "\n", names[i], n[i]);
        one(f, "sandboxd_sandboxes_max", "gauge", "The configured max_sandboxes.", m->config.max_sandboxes);
}

/* Only memory.current of every sandbox is read (to pick the labelled ones, where there are more
 * than metrics_max_sandboxes and memory is known); the rest of the labelled ones' files, and the
 * sandboxes/ cgroup's once: a scrape reads about one small file per sandbox. */
static int render_sandboxes(FILE *f, Context *m) {
        _cleanup_free_ SandboxSample *v = NULL;
        SandboxSample rest;
        size_t n = 0, labelled;
        bool fold;

        v = calloc(registry_count(m->registry) + 1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry))
                if (!s->pooled && s->cg_fd >= 0)
                        v[n++] = (SandboxSample) {
                                .s = s,
                                .usage = { CG_USAGE_UNKNOWN, CG_USAGE_UNKNOWN, CG_USAGE_UNKNOWN },
                                .memory_peak = CG_USAGE_UNKNOWN,
                                .disk_bytes = s->disk_measured ? s->disk_bytes : CG_USAGE_UNKNOWN,
                                .connections = CG_USAGE_UNKNOWN,
                        };
        fold = n > m->config.metrics_max_sandboxes;
        labelled = fold ? (size_t) m->config.metrics_max_sandboxes : n;
        for (size_t i = 0; fold && i < n; i++)
                if ((v[i].s->enforced & CG_MEMORY) && cg_read_u64(v[i].s->cg_fd, "memory.current", &v[i].usage.memory_bytes) < 0)
                        v[i].usage.memory_bytes = CG_USAGE_UNKNOWN;
        qsort(v, n, sizeof(*v), cmp_sample);
        for (size_t i = 0; i < labelled; i++)
                read_sample(&v[i]);
        if (fold)
                rest_sample(m, v, n, labelled, &rest);
        render_sandbox_states(f, m);
        sandbox_family(f, "sandboxd_sandbox_memory_bytes", "gauge", "memory.current of the sandbox's cgroup.", v, labelled,
                       fold ? &rest : NULL, get_memory, false);
        sandbox_family(f, "sandboxd_sandbox_memory_peak_bytes", "gauge", "memory.peak of the sandbox's cgroup.", v, labelled,
                       NULL, get_peak, false);
        sandbox_family(f, "sandboxd_sandbox_pids", "gauge", "pids.current of the sandbox's cgroup.", v, labelled,
                       fold ? &rest : NULL, get_pids, false);
        sandbox_family(f, "sandboxd_sandbox_cpu_seconds_total", "counter",
                       "CPU time of the sandbox's cgroup (cpu.stat usage_usec).", v, labelled, fold ? &rest : NULL, get_cpu, true);
        sandbox_family(f, "sandboxd_sandbox_disk_bytes", "gauge", "Workspace and snapshots of the sandbox at the last whole sweep.",
                       v, labelled, fold ? &rest : NULL, get_disk, false);
        sandbox_family(f, "sandboxd_sandbox_connections", "gauge",
                       "Connections the kernel tracks of the sandbox's egress (sandboxes with egress only).", v, labelled,
                       fold ? &rest : NULL, get_connections, false);
        render_dns_queries(f, v, labelled);
        one(f, "sandboxd_sandbox_series_folded", "gauge",
            "Sandboxes beyond metrics_max_sandboxes, summed into sandbox=\"" OTHER_LABEL "\".", n - labelled);
        return 0;
}

/* ---- Runs, pool, sweeps, sessions, errors --------------------------------------------------- */

static void render_runs(FILE *f, Context *m) {
        uint64_t cum = 0;

        one(f, "sandboxd_runs_started_total", "counter", "Runs started.", metrics.runs_started);
        one(f, "sandboxd_runs_in_flight", "gauge", "Runs in flight.", sandbox_count_runs(m));
        family(f, "sandboxd_runs_ended_total", "counter", "Runs ended, by the reason their reply gives (error: answered with an error).");
        for (unsigned i = 0; i < METRICS_RUN_REASONS; i++)
                fprintf(f, "sandboxd_runs_ended_total{reason=\"%s\"} %" PRIu64 "\n", metrics_run_reasons[i], metrics.runs_ended[i]);
        family(f, "sandboxd_run_duration_seconds", "histogram", "How long runs took, from their start to their end.");
        for (unsigned b = 0; b < METRICS_RUN_BUCKETS; b++) {
                cum += metrics.run_duration_buckets[b];
                fprintf(f, "sandboxd_run_duration_seconds_bucket{le=\"%g\"} %" PRIu64 "\n", metrics_run_buckets[b], cum);
        }
        fprintf(f, "sandboxd_run_duration_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n", metrics.run_duration_count);
        fprintf(f, "sandboxd_run_duration_seconds_sum %.6f\n", metrics.run_duration_sum);
        sample(f, "sandboxd_run_duration_seconds_count", metrics.run_duration_count);
}

static void render_pool(FILE *f, Context *m) {
        uint64_t pooled = 0, ready = 0;

        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry))
                if (s->pooled && s->ephemeral) { /* the create pools: sandboxd_pool_create_* */
                        pooled++;
                        ready += s->state == SANDBOX_READY;
                }
        one(f, "sandboxd_pool_size", "gauge", "The configured pool_size.", m->config.pool_size);
        one(f, "sandboxd_pool_sandboxes", "gauge", "Sandboxes in the pool, ready or being made.", pooled);
        one(f, "sandboxd_pool_ready", "gauge", "Sandboxes in the pool ready for a throwaway run.", ready);
        one(f, "sandboxd_pool_hits_total", "counter", "Throwaway runs given a pooled sandbox.", metrics.pool_hits);
        one(f, "sandboxd_pool_misses_total", "counter", "Throwaway runs that found the pool empty.", metrics.pool_misses);
        one(f, "sandboxd_pool_create_hits_total", "counter", "Creates given a pooled sandbox (pool_create, pool_images).",
            metrics.pool_create_hits);
        one(f, "sandboxd_pool_create_misses_total", "counter", "Creates with a pool of their kind that found it empty.",
            metrics.pool_create_misses);
}

static void render_others(FILE *f, Context *m, Manager *mgr) {
        uint64_t sessions = 0;

        one(f, "sandboxd_sweeps_total", "counter", "Disk sweeps done.", metrics.sweeps);
        one(f, "sandboxd_sweep_freed_bytes_total", "counter", "Bytes of snapshots evicted and sandboxes expired by sweeps.",
            metrics.sweep_freed_bytes);
        one(f, "sandboxd_sweep_destroyed_total", "counter", "Sandboxes destroyed by sweeps (ttl or idle).", metrics.sweep_destroyed);
        for (Sandbox *s = registry_first(m->registry); s; s = registry_next(&s->entry))
                for (Session *p = s->sessions; p; p = p->next)
                        sessions++;
        one(f, "sandboxd_sessions_open", "gauge", "Interactive sessions open.", sessions);
        one(f, "sandboxd_sessions_opened_total", "counter", "Interactive sessions opened.", metrics.sessions_opened);
        one(f, "sandboxd_connections", "gauge", "Client connections on the control socket.", mgr->conns.n);
        family(f, "sandboxd_errors_total", "counter", "Error replies sent, by the protocol's error code.");
        for (unsigned c = SBX_OK + 1; c < _SBX_E_MAX; c++)
                fprintf(f, "sandboxd_errors_total{code=\"%s\"} %" PRIu64 "\n", sbx_error_code_to_string(c), metrics.errors[c]);
}

/* ---- The process ---------------------------------------------------------------------------- */

static uint64_t open_fds(void) {
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        uint64_t n = 0;

        if (!d)
                return 0;
        while ((de = readdir(d)))
                n += de->d_name[0] != '.';
        closedir(d);
        return n - 1; /* the directory's own fd */
}

static uint64_t resident_bytes(void) {
        char buf[128];
        unsigned long long size, rss;

        if (read_small_file(AT_FDCWD, "/proc/self/statm", false, buf, sizeof(buf)) <= 0 ||
            sscanf(buf, "%llu %llu", &size, &rss) != 2)
                return 0;
        return (uint64_t) rss * (uint64_t) sysconf(_SC_PAGESIZE);
}

static void render_process(FILE *f, Context *m) {
        uint64_t up = now_usec(CLOCK_MONOTONIC) - m->start_usec, start = now_usec(CLOCK_REALTIME) - up;
        struct rusage ru = {};
        struct rlimit rl = {};

        (void) getrusage(RUSAGE_SELF, &ru);
        (void) getrlimit(RLIMIT_NOFILE, &rl);
        family(f, "process_cpu_seconds_total", "counter", "User and system CPU time of the daemon itself.");
        fprintf(f, "process_cpu_seconds_total %.6f\n",
                (double) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double) (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
        one(f, "process_resident_memory_bytes", "gauge", "Resident memory of the daemon.", resident_bytes());
        one(f, "process_open_fds", "gauge", "Open file descriptors of the daemon.", open_fds());
        one(f, "process_max_fds", "gauge", "RLIMIT_NOFILE of the daemon.", rl.rlim_cur == RLIM_INFINITY ? 0 : rl.rlim_cur);
        family(f, "process_start_time_seconds", "gauge", "When the daemon started, in seconds since the epoch.");
        fprintf(f, "process_start_time_seconds %" PRIu64 ".%06" PRIu64 "\n", start / USEC_PER_SEC, start % USEC_PER_SEC);
        family(f, "sandboxd_build_info", "gauge", "Always 1; the version is the label.");
        fputs("sandboxd_build_info{version=\"", f);
        label_value(f, PACKAGE_VERSION);
        fprintf(f, "\",protocol=\"%d\"} 1\n", SBX_PROTOCOL_VERSION);
}

int metrics_render(Manager *mgr, char **ret, size_t *ret_size) {
        Context *m = mgr->ctx;
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        int r;

        if (!f)
                return -errno;
        r = render_sandboxes(f, m);
        if (r >= 0) {
                render_runs(f, m);
                render_pool(f, m);
                render_others(f, m, mgr);
                render_process(f, m);
        }
        if (fclose(f) != 0 && r >= 0)
                r = -ENOMEM;
        if (r < 0) {
                free(buf);
                return r;
        }
        *ret = buf;
        *ret_size = size;
        return 0;
}
