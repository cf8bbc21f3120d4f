/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl top: the caller's sandboxes with what they use, refreshed. One `list` with usage per
 * refresh over one connection; CPU % from the growth of each sandbox's cpu_s between two refreshes.
 * On a terminal the screen is redrawn and keys change the order; elsewhere (or with --once / -n)
 * each refresh is printed after the previous one, for scripts. Plain ANSI sequences, no curses. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "sandboxctl.h"
#include "util.h"

static int verb_top_run(int argc, char *argv[]);

const Verb verb_top = {
        .name = "top",
        .args = "[--sort KEY] [--interval DURATION] [--once | -n COUNT]",
        .summary = "Show your sandboxes' memory, processes, CPU and disk, refreshed",
        .help = "Options:\n"
                "     --sort KEY          Order by mem, pids, cpu, disk (highest first) or name\n"
                "  -d --interval DURATION Time between refreshes (default 2s)\n"
                "     --once              Print one refresh and exit\n"
                "  -n --iterations COUNT  Print COUNT refreshes and exit\n"
                "\n"
                "Keys while running on a terminal: m, p, c, d, n sort by memory, processes,\n"
                "CPU, disk, name; q quits. CPU% is the share of one core used since the previous\n"
                "refresh (since creation on the first). MEMORY and PIDS are '-' where the host\n"
                "cannot account them (their cgroup controller is not available to sandboxd).\n"
                "DISK is the workspace and snapshots as the last sweep measured them ('-' before\n"
                "the first), over its limit ('none' without one). CONNS is the connections the\n"
                "kernel tracks of a sandbox with egress ('-' without). With --json prints each\n"
                "refresh as one JSON line.\n",
        .failure_status = EXIT_FAILURE,
        .run = verb_top_run,
};

typedef enum { SORT_MEM, SORT_PIDS, SORT_CPU, SORT_NAME, SORT_DISK } SortKey;
static const char *const sort_names[] = { "mem", "pids", "cpu", "name", "disk" };

typedef struct TopArgs {
        SortKey sort;
        uint64_t interval_usec;
        long iterations; /* 0: until q or a signal */
} TopArgs;

/* One sandbox of one refresh. Amounts < 0 are unknown. */
typedef struct Row {
        const char *id, *name, *state; /* point into Top.reply */
        double mem, mem_limit, pids, pids_limit, cpu_s, cpu_pct, disk, disk_limit, conns;
        int64_t runs;
} Row;

/* cpu_s of a sandbox at the previous refresh, for the CPU % of this one. */
typedef struct Sample {
        char id[32];
        double cpu_s;
} Sample;

typedef struct Top {
        TopArgs args;
        SbxClient *client;
        json_object *reply; /* the latest list */
        Row *rows;
        size_t n_rows;
        Sample *prev;
        size_t n_prev;
        uint64_t prev_usec;
        long refreshes; /* done so far, this one included */
        bool interactive;
} Top;

/* ---- The terminal ------------------------------------------------------------------------ */

static struct termios saved_termios;
static bool termios_saved;
static volatile sig_atomic_t quit_signal, suspend_requested, in_request;

/* Called on every way out: the normal return, exit() (atexit), and after a signal ended the loop. */
static void terminal_restore(void) {
        if (!termios_saved)
                return;
        fputs("\033[?25h\033[?1049l", stdout); /* cursor back, alternate screen off */
        fflush(stdout);
        (void) tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_termios);
        termios_saved = false;
}

/* Between refreshes the loop sees quit_signal and returns. During a request (a daemon that is slow
 * or stuck to answer list) nothing would look at it, as the client library retries its read on
 * EINTR: there the terminal is given back here, with async-signal-safe calls only, and the signal
 * ends the process as it would have without a handler, so Ctrl-C and SIGTERM always quit top. */
static void on_quit_signal(int sig) {
        static const char screen_off[] = "\033[?25h\033[?1049l";

        quit_signal = sig;
        if (!in_request)
                return;
        if (termios_saved) {
                (void) !write(STDOUT_FILENO, screen_off, sizeof(screen_off) - 1);
                (void) tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_termios);
        }
        (void) signal(sig, SIG_DFL);
        (void) raise(sig);
}

static void on_suspend_signal(int sig) {
        suspend_requested = 1;
}

/* No SA_RESTART: the signal ends the poll() that waits for the next refresh, and the loop returns
 * through terminal_restore(). Ctrl-Z (SIGTSTP) gives the shell a sane terminal before stopping
 * and takes raw mode back on fg. SIGPIPE keeps its default: `top | head` ends like any filter. */
static void catch_signals(void) {
        static const int signals[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM };
        struct sigaction sa = { .sa_handler = on_quit_signal }, tstp = { .sa_handler = on_suspend_signal };

        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < ELEMENTSOF(signals); i++)
                (void) sigaction(signals[i], &sa, NULL);
        sigemptyset(&tstp.sa_mask);
        (void) sigaction(SIGTSTP, &tstp, NULL);
}

/* Keys without Enter and without echo; the alternate screen keeps the shell's scrollback. */
static int terminal_raw(void) {
        static bool atexit_done;
        struct termios t;

        if (tcgetattr(STDIN_FILENO, &saved_termios) < 0)
                return -errno;
        t = saved_termios;
        t.c_lflag &= ~(tcflag_t) (ICANON | ECHO);
        t.c_cc[VMIN] = 0;
        t.c_cc[VTIME] = 0;
        termios_saved = true;
        if (!atexit_done)
                atexit(terminal_restore);
        atexit_done = true;
        if (tcsetattr(STDIN_FILENO, TCSANOW, &t) < 0)
                return -errno;
        fputs("\033[?1049h\033[?25l", stdout);
        return 0;
}

/* ---- Options ----------------------------------------------------------------------------- */

static int parse_sort(const char *s, SortKey *ret) {
        for (size_t i = 0; i < ELEMENTSOF(sort_names); i++)
                if (strcmp(s, sort_names[i]) == 0 || (i == SORT_MEM && strcmp(s, "memory") == 0)) {
                        *ret = (SortKey) i;
                        return 0;
                }
        return log_error("invalid --sort '%s' (mem, pids, cpu, disk or name)", s);
}

static int parse_iterations(const char *s, long *ret) {
        char *end;
        long v;

        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || end == s || *end || v <= 0)
                return log_error("invalid -n '%s' (a positive number of refreshes)", s);
        *ret = v;
        return 0;
}

static int parse_interval(const char *s, uint64_t *ret) {
        if (parse_duration(s, ret) < 0 || *ret < USEC_PER_SEC / 10)
                return log_error("invalid --interval '%s' (at least 100ms, e.g. 1s, 500ms)", s);
        return 0;
}

static int top_parse(int argc, char *argv[], TopArgs *a) {
        enum { ARG_SORT = ARG_VERB_FIRST, ARG_ONCE };
        static const struct option options[] = {
                COMMON_OPTIONS,
                { "sort", required_argument, NULL, ARG_SORT },
                { "interval", required_argument, NULL, 'd' },
                { "once", no_argument, NULL, ARG_ONCE },
                { "iterations", required_argument, NULL, 'n' },
                {},
        };
        int c, r;

        *a = (TopArgs) { .sort = SORT_CPU, .interval_usec = 2 * USEC_PER_SEC };
        optind = 0;
        while ((c = getopt_long(argc, argv, "hd:n:", options, NULL)) >= 0) {
                switch (c) {
                case ARG_SORT: r = parse_sort(optarg, &a->sort); break;
                case ARG_ONCE: a->iterations = 1; r = 0; break;
                case 'n': r = parse_iterations(optarg, &a->iterations); break;
                case 'd': r = parse_interval(optarg, &a->interval_usec); break;
                default:
                        r = common_option(&verb_top, c);
                        if (r <= 0)
                                return r;
                        r = 0;
                }
                if (r < 0)
                        return r;
        }
        return check_arg_count(&verb_top, argc, argv, 0, 0);
}

/* ---- One refresh ------------------------------------------------------------------------- */

static double number_or(json_object *o, const char *key, double unknown) {
        double d;
        return json_number(o, key, &d) && d >= 0 ? d : unknown;
}

static double prev_cpu(const Top *t, const char *id) {
        for (size_t i = 0; i < t->n_prev; i++)
                if (strcmp(t->prev[i].id, id) == 0)
                        return t->prev[i].cpu_s;
        return -1;
}

/* Seconds since "2026-11-30T05:00:00Z", or -1. */
static double age_s(const char *created) {
        struct tm tm = {};
        const char *end = created ? strptime(created, "%Y-%m-%dT%H:%M:%SZ", &tm) : NULL;
        time_t t;

        if (!end || *end)
                return -1;
        t = timegm(&tm);
        return t == (time_t) -1 ? -1 : difftime(time(NULL), t);
}

static double cpu_percent(const Top *t, const Row *r, const char *created, uint64_t now) {
        double before = t->prev_usec ? prev_cpu(t, r->id) : -1, age;

        if (r->cpu_s < 0)
                return -1;
        if (before >= 0 && now > t->prev_usec)
                return (r->cpu_s - before) * 100.0 * (double) USEC_PER_SEC / (double) (now - t->prev_usec);
        /* "created" has whole seconds: a sandbox made within the last one counts as 1 s old. */
        age = age_s(created);
        return age >= 0 ? r->cpu_s * 100.0 / (age < 1 ? 1 : age) : -1;
}

static void row_fill(const Top *t, json_object *sbx, uint64_t now, Row *r) {
        json_object *usage = json_child(sbx, "usage"), *limits = json_child(sbx, "limits");
        int64_t runs = 0;

        *r = (Row) {
                .id = json_str(sbx, "id") ?: "-",
                .name = json_str(sbx, "name"),
                .state = json_str(sbx, "state") ?: "-",
                .mem = number_or(usage, "memory_bytes", -1),
                .mem_limit = number_or(limits, "memory", -1),
                .pids = number_or(usage, "pids", -1),
                .pids_limit = number_or(limits, "pids", -1),
                .cpu_s = number_or(usage, "cpu_s", -1),
                .disk = number_or(sbx, "disk_bytes", -1),
                .disk_limit = number_or(limits, "disk", -1),
                .conns = number_or(usage, "connections", -1),
        };
        r->cpu_pct = cpu_percent(t, r, json_str(sbx, "created"), now);
        r->runs = json_int(sbx, "runs_in_flight", &runs) ? runs : 0;
}

/* Keeps this refresh's cpu_s for the next one. */
static int remember(Top *t, uint64_t now) {
        Sample *s = t->n_rows ? calloc(t->n_rows, sizeof(Sample)) : NULL;

        if (t->n_rows && !s)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_rows; i++) {
                snprintf(s[i].id, sizeof(s[i].id), "%s", t->rows[i].id);
                s[i].cpu_s = t->rows[i].cpu_s;
        }
        free(t->prev);
        t->prev = s;
        t->n_prev = t->n_rows;
        t->prev_usec = now;
        return 0;
}

/* Takes reply; its sandboxes become the rows. */
static int top_take(Top *t, json_object *reply, json_object *sandboxes, uint64_t now) {
        size_t n = json_object_array_length(sandboxes);
        Row *rows = n ? calloc(n, sizeof(Row)) : NULL;

        if (n && !rows) {
                json_object_put(reply);
                return log_error_errno(-ENOMEM, "%m");
        }
        for (size_t i = 0; i < n; i++)
                row_fill(t, json_object_array_get_idx(sandboxes, i), now, &rows[i]);
        free(t->rows);
        json_object_put(t->reply);
        t->rows = rows;
        t->n_rows = n;
        t->reply = reply;
        return remember(t, now) < 0 ? log_error_errno(-ENOMEM, "%m") : 0;
}

/* ---- Output ------------------------------------------------------------------------------ */

static SortKey sort_key; /* for row_compare(), which qsort() gives no userdata */

static int cmp_desc(double a, double b) {
        return a < b ? 1 : a > b ? -1 : 0;
}

static int row_compare(const void *x, const void *y) {
        const Row *a = x, *b = y;
        int r = 0;

        switch (sort_key) {
        case SORT_MEM: r = cmp_desc(a->mem, b->mem); break;
        case SORT_PIDS: r = cmp_desc(a->pids, b->pids); break;
        case SORT_CPU: r = cmp_desc(a->cpu_pct, b->cpu_pct); break;
        case SORT_NAME: r = strcmp(a->name ?: a->id, b->name ?: b->id); break;
        case SORT_DISK: r = cmp_desc(a->disk, b->disk); break;
        }
        return r ?: strcmp(a->id, b->id);
}

static const char *fmt_amount(char *buf, size_t len, double v, bool size) {
        if (size)
                return format_size(buf, len, (uint64_t) v);
        snprintf(buf, len, "%.0f", v);
        return buf;
}

/* "12M/256M", "3/512", "-" when the usage is unknown; unlimited is what stands for no limit
 * ("max" as cgroup files say it, "none" for disk as inspect does). */
static const char *fmt_used(char buf[static FIELD_BUF], double used, double limit, bool size, const char *unlimited) {
        char u[FIELD_BUF / 2], l[FIELD_BUF / 2 - 2];

        if (used < 0)
                return "-";
        snprintf(buf, FIELD_BUF, "%s/%s", fmt_amount(u, sizeof(u), used, size),
                 limit > 0 ? fmt_amount(l, sizeof(l), limit, size) : unlimited);
        return buf;
}

static const char *fmt_percent(char buf[static FIELD_BUF], double v) {
        if (v < 0)
                return "-";
        snprintf(buf, FIELD_BUF, "%.1f", v);
        return buf;
}

static const char *fmt_cpu_time(char buf[static FIELD_BUF], double s) {
        return s < 0 ? "-" : format_duration(buf, FIELD_BUF, (uint64_t) (s * 1e6));
}

static const char *fmt_count(char buf[static FIELD_BUF], double v) {
        if (v < 0)
                return "-";
        snprintf(buf, FIELD_BUF, "%.0f", v);
        return buf;
}

static int table_add_sandbox(Table *tab, const Row *r) {
        char m[FIELD_BUF], p[FIELD_BUF], c[FIELD_BUF], s[FIELD_BUF], d[FIELD_BUF], n[FIELD_BUF], k[FIELD_BUF];
        const char *cells[] = {
                r->id,
                r->name ?: "-",
                r->state,
                fmt_used(m, r->mem, r->mem_limit, true, "max"),
                fmt_used(p, r->pids, r->pids_limit, false, "max"),
                fmt_percent(c, r->cpu_pct),
                fmt_cpu_time(s, r->cpu_s),
                fmt_used(d, r->disk, r->disk_limit, true, "none"),
                fmt_count(n, r->conns),
                k,
        };

        snprintf(k, sizeof(k), "%" PRIi64, r->runs);
        return table_add_row(tab, cells);
}

static int print_table(const Top *t) {
        static const char *const headers[] = { "ID", "NAME", "STATE", "MEMORY", "PIDS", "CPU%", "CPU TIME", "DISK", "CONNS", "RUNS" };
        _cleanup_table_ Table *tab = table_new(ELEMENTSOF(headers), headers);

        if (!tab)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_rows; i++)
                if (table_add_sandbox(tab, &t->rows[i]) < 0)
                        return -ENOMEM;
        table_print(tab);
        return 0;
}

/* " - every 2s", " - 2 of 3, every 2s" with -n, nothing for a single refresh. */
static const char *fmt_refreshes(char *buf, size_t len, const Top *t) {
        double every = (double) t->args.interval_usec / 1e6;

        if (t->args.iterations == 1)
                return "";
        if (t->args.iterations > 1)
                snprintf(buf, len, " - %ld of %ld, every %gs", t->refreshes, t->args.iterations, every);
        else
                snprintf(buf, len, " - every %gs", every);
        return buf;
}

static void print_header(const Top *t) {
        char now[32], refreshes[64];
        time_t tt = time(NULL);
        struct tm tm;

        strftime(now, sizeof(now), "%H:%M:%S", localtime_r(&tt, &tm));
        printf("sandboxctl top - %s - %zu sandbox%s - sorted by %s%s%s\n\n", now, t->n_rows, t->n_rows == 1 ? "" : "es",
               sort_names[t->args.sort], fmt_refreshes(refreshes, sizeof(refreshes), t),
               t->interactive ? " - keys: m p c d n sort, q quit" : "");
}

static json_object *json_amount(double v) {
        return v < 0 ? NULL : json_object_new_int64((int64_t) v);
}

/* Seconds rounded to microseconds, as the daemon writes them (proto_seconds()). */
static json_object *json_seconds(double s) {
        return s < 0 ? NULL : proto_seconds((uint64_t) (s * 1e6 + 0.5));
}

/* A percentage to two decimals ("12.35"), not the 17 digits of a double. */
static json_object *json_percent(double v) {
        char buf[32];

        if (v < 0)
                return NULL;
        snprintf(buf, sizeof(buf), "%.2f", v);
        return json_object_new_double_s(strtod(buf, NULL), buf);
}

static json_object *row_to_json(const Row *r) {
        json_object *o = json_object_new_object();

        json_object_object_add(o, "id", json_object_new_string(r->id));
        json_object_object_add(o, "name", r->name ? json_object_new_string(r->name) : NULL);
        json_object_object_add(o, "state", json_object_new_string(r->state));
        json_object_object_add(o, "memory_bytes", json_amount(r->mem));
        json_object_object_add(o, "pids", json_amount(r->pids));
        json_object_object_add(o, "cpu_s", json_seconds(r->cpu_s));
        json_object_object_add(o, "cpu_percent", json_percent(r->cpu_pct));
        json_object_object_add(o, "disk_bytes", json_amount(r->disk));
        json_object_object_add(o, "connections", json_amount(r->conns));
        json_object_object_add(o, "runs_in_flight", json_object_new_int64(r->runs));
        return o;
}

static void print_json_rows(const Top *t) {
        _cleanup_json_ json_object *o = json_object_new_object();
        json_object *arr = json_object_new_array();

        for (size_t i = 0; i < t->n_rows; i++)
                json_object_array_add(arr, row_to_json(&t->rows[i]));
        json_object_object_add(o, "sort", json_object_new_string(sort_names[t->args.sort]));
        json_object_object_add(o, "sandboxes", arr);
        print_json(o);
}

/* Sorts and prints the latest refresh. */
static int top_draw(Top *t) {
        int r = 0;

        sort_key = t->args.sort;
        if (t->n_rows)
                qsort(t->rows, t->n_rows, sizeof(Row), row_compare);
        if (arg.json) {
                print_json_rows(t);
                return 0;
        }
        if (t->interactive)
                fputs("\033[H\033[2J", stdout);
        print_header(t);
        if (t->n_rows)
                r = print_table(t);
        else
                printf("No sandboxes.\n");
        if (r < 0)
                return log_error_errno(r, "%m");
        if (!t->interactive && t->args.iterations != 1)
                putchar('\n');
        fflush(stdout);
        return 0;
}

static int top_refresh(Top *t) {
        _cleanup_json_ json_object *req = request_new("list"), *reply = NULL;
        json_object *sandboxes;
        int r;

        json_object_object_add(req, "usage", json_object_new_boolean(1));
        in_request = 1;
        if (quit_signal) { /* came before in_request was set */
                in_request = 0;
                return 0;
        }
        r = daemon_call(t->client, TAKE_PTR(req), &reply);
        in_request = 0;
        if (r < 0)
                return r;
        r = reply_check(reply);
        if (r < 0)
                return r;
        sandboxes = json_child(reply, "sandboxes");
        if (!json_object_is_type(sandboxes, json_type_array))
                return log_error("the reply to list has no sandboxes array");
        t->refreshes++;
        r = top_take(t, TAKE_PTR(reply), sandboxes, now_usec(CLOCK_MONOTONIC));
        return r < 0 ? r : top_draw(t);
}

/* ---- The loop ---------------------------------------------------------------------------- */

/* 1 to quit, 2 for a new order, 0 for any other key. */
static int top_key(Top *t, char key) {
        switch (key) {
        case 'q': case 'Q': return 1;
        case 'm': case 'M': t->args.sort = SORT_MEM; return 2;
        case 'p': case 'P': t->args.sort = SORT_PIDS; return 2;
        case 'c': case 'C': t->args.sort = SORT_CPU; return 2;
        case 'n': case 'N': t->args.sort = SORT_NAME; return 2;
        case 'd': case 'D': t->args.sort = SORT_DISK; return 2;
        default: return 0;
        }
}

/* Stops like Ctrl-Z would, with the terminal as the shell wants it meanwhile. */
static void top_suspend(Top *t) {
        suspend_requested = 0;
        terminal_restore();
        (void) raise(SIGSTOP);
        /* Continued (fg): raw mode again, or plain output if the terminal is gone. */
        if (t->interactive && terminal_raw() < 0) {
                terminal_restore();
                t->interactive = false;
        }
}

/* Waits the interval, reading keys on a terminal: 0 when it is time, 1 to quit, 2 to redraw. */
static int top_wait(Top *t) {
        uint64_t until = now_usec(CLOCK_MONOTONIC) + t->args.interval_usec;
        struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };

        for (;;) {
                uint64_t now = now_usec(CLOCK_MONOTONIC);
                char key;
                int r;

                if (quit_signal)
                        return 1;
                if (suspend_requested) {
                        top_suspend(t);
                        return 2;
                }
                if (now >= until)
                        return 0;
                r = poll(&p, t->interactive ? 1 : 0, (int) ((until - now + 999) / 1000));
                if (r < 0 && errno != EINTR)
                        return -errno;
                if (r > 0 && read(STDIN_FILENO, &key, 1) == 1 && (r = top_key(t, key)) != 0)
                        return r;
        }
}

static int top_loop(Top *t) {
        for (long i = 1;; i++) {
                int r = top_refresh(t);
                if (r < 0)
                        return r;
                if (t->args.iterations && i >= t->args.iterations)
                        return 0;
                /* A new order (or a return from Ctrl-Z) shows the same figures again, at once. */
                while ((r = top_wait(t)) == 2)
                        if ((r = top_draw(t)) < 0)
                                return r;
                if (r < 0)
                        return log_error_errno(r, "waiting for keys: %m");
                if (r == 1)
                        return 0;
        }
}

static int verb_top_run(int argc, char *argv[]) {
        Top t = {};
        int r = top_parse(argc, argv, &t.args);

        if (r <= 0)
                return r;
        t.interactive = !arg.json && t.args.iterations == 0 && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
        r = daemon_connect(&t.client);
        if (r < 0)
                return r;
        catch_signals();
        if (t.interactive && terminal_raw() < 0) {
                terminal_restore();
                t.interactive = false;
        }
        r = top_loop(&t);
        terminal_restore();
        sbx_client_free(t.client);
        json_object_put(t.reply);
        free(t.rows);
        free(t.prev);
        return r;
}
