/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "util.h"

/* Parses a decimal with an optional fraction ("1.25") into whole units times scale, exactly
 * (fractions are rounded down to the unit). */
static int parse_decimal_scaled(const char **p, uint64_t scale, uint64_t *ret) {
        const char *s = *p;
        uint64_t whole = 0, frac = 0, frac_div = 1, r;

        if (!isdigit((unsigned char) *s))
                return -EINVAL;
        for (; isdigit((unsigned char) *s); s++)
                if (__builtin_mul_overflow(whole, 10, &whole) || __builtin_add_overflow(whole, (uint64_t) (*s - '0'), &whole))
                        return -ERANGE;
        if (*s == '.') {
                s++;
                if (!isdigit((unsigned char) *s))
                        return -EINVAL;
                for (; isdigit((unsigned char) *s); s++)
                        if (frac_div < UINT64_C(1000000000000000000)) {
                                frac = frac * 10 + (uint64_t) (*s - '0');
                                frac_div *= 10;
                        }
        }
        if (__builtin_mul_overflow(whole, scale, &r))
                return -ERANGE;
        /* frac < frac_div <= 1e18 and scale < 2^64: the product fits in 128 bits. */
        uint64_t f = (uint64_t) ((unsigned __int128) frac * scale / frac_div);
        /* Every value goes out again as a JSON int64 (replies, meta.json): past INT64_MAX it
         * would come back negative, -1 reading as "no limit". */
        if (__builtin_add_overflow(r, f, &r) || r > (uint64_t) INT64_MAX)
                return -ERANGE;
        *ret = r;
        *p = s;
        return 0;
}

int parse_size(const char *s, uint64_t *ret) {
        static const struct {
                const char *suffix;
                uint64_t factor;
        } table[] = {
                { "",    1 },
                { "B",   1 },
                { "K",   UINT64_C(1) << 10 }, { "KB", UINT64_C(1) << 10 }, { "KiB", UINT64_C(1) << 10 },
                { "M",   UINT64_C(1) << 20 }, { "MB", UINT64_C(1) << 20 }, { "MiB", UINT64_C(1) << 20 },
                { "G",   UINT64_C(1) << 30 }, { "GB", UINT64_C(1) << 30 }, { "GiB", UINT64_C(1) << 30 },
                { "T",   UINT64_C(1) << 40 }, { "TB", UINT64_C(1) << 40 }, { "TiB", UINT64_C(1) << 40 },
        };
        const char *end = s;

        if (!s)
                return -EINVAL;
        while (isdigit((unsigned char) *end) || *end == '.')
                end++;
        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                if (strcasecmp(end, table[i].suffix) != 0)
                        continue;
                const char *p = s;
                uint64_t v;
                int r = parse_decimal_scaled(&p, table[i].factor, &v);
                if (r < 0)
                        return r;
                if (p != end)
                        return -EINVAL;
                *ret = v;
                return 0;
        }
        return -EINVAL;
}

int parse_duration(const char *s, uint64_t *ret_usec) {
        static const struct {
                const char *suffix;
                uint64_t factor;
        } table[] = {
                { "",    USEC_PER_SEC },
                { "us",  1 },
                { "ms",  USEC_PER_MSEC },
                { "s",   USEC_PER_SEC },
                { "sec", USEC_PER_SEC },
                { "m",   60 * USEC_PER_SEC },
                { "min", 60 * USEC_PER_SEC },
                { "h",   3600 * USEC_PER_SEC },
        };
        const char *end = s;

        if (!s)
                return -EINVAL;
        while (isdigit((unsigned char) *end) || *end == '.')
                end++;
        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                if (strcmp(end, table[i].suffix) != 0)
                        continue;
                const char *p = s;
                uint64_t v;
                int r = parse_decimal_scaled(&p, table[i].factor, &v);
                if (r < 0)
                        return r;
                if (p != end)
                        return -EINVAL;
                *ret_usec = v;
                return 0;
        }
        return -EINVAL;
}

int parse_cpus(const char *s, uint64_t *ret_millicpus) {
        const char *p = s;
        uint64_t v;
        int r;

        if (!s)
                return -EINVAL;
        r = parse_decimal_scaled(&p, 1000, &v);
        if (r < 0)
                return r;
        if (*p != '\0')
                return -EINVAL;
        if (v == 0)
                return -ERANGE;
        *ret_millicpus = v;
        return 0;
}

const char *format_size(char *buf, size_t len, uint64_t bytes) {
        static const char units[] = "BKMGTPE";
        unsigned u = 0;
        uint64_t whole = bytes, rem = 0;

        while (whole >= 1024 && u < sizeof(units) - 2) {
                rem = whole % 1024;
                whole /= 1024;
                u++;
        }
        if (u == 0)
                snprintf(buf, len, "%" PRIu64 "B", bytes);
        else if (whole < 10 && rem * 10 / 1024 > 0)
                snprintf(buf, len, "%" PRIu64 ".%" PRIu64 "%c", whole, rem * 10 / 1024, units[u]);
        else
                snprintf(buf, len, "%" PRIu64 "%c", whole, units[u]);
        return buf;
}

const char *format_duration(char *buf, size_t len, uint64_t usec) {
        if (usec < USEC_PER_MSEC)
                snprintf(buf, len, "%" PRIu64 "us", usec);
        else if (usec < USEC_PER_SEC)
                snprintf(buf, len, "%" PRIu64 ".%01" PRIu64 "ms", usec / USEC_PER_MSEC, usec % USEC_PER_MSEC / 100);
        else
                snprintf(buf, len, "%" PRIu64 ".%03" PRIu64 "s", usec / USEC_PER_SEC, usec % USEC_PER_SEC / USEC_PER_MSEC);
        return buf;
}

bool path_is_normal(const char *p, size_t max) {
        if (p[0] != '/' || strlen(p) >= max)
                return false;
        for (const char *c = p + 1; *c;) {
                size_t n = strcspn(c, "/");
                if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                c += n;
                if (*c == '/' && !*++c)
                        return false;
        }
        return true;
}

bool path_is_below(const char *path, const char *dir) {
        size_t n = strlen(dir);
        if (strcmp(dir, "/") == 0)
                return true;
        return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

bool sysctl_name_valid(const char *name) {
        size_t n = strlen(name), comp = 0;

        if (n == 0 || n > 128)
                return false;
        for (const char *c = name; *c; c++) {
                if (*c == '.') {
                        if (comp == 0)
                                return false;
                        comp = 0;
                } else if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                           *c == '_' || *c == '-')
                        comp++;
                else
                        return false;
        }
        return comp > 0;
}

bool sysctl_name_namespaced(const char *name) {
        static const char *const ipc[] = { "kernel.shmmax", "kernel.shmall", "kernel.shmmni", "kernel.shm_rmid_forced",
                                           "kernel.msgmax", "kernel.msgmnb", "kernel.msgmni", "kernel.sem" };

        if (!sysctl_name_valid(name))
                return false;
        if ((strncmp(name, "net.", 4) == 0 && name[4]) || (strncmp(name, "fs.mqueue.", 10) == 0 && name[10]))
                return true;
        for (size_t i = 0; i < sizeof(ipc) / sizeof(ipc[0]); i++)
                if (strcmp(name, ipc[i]) == 0)
                        return true;
        return false;
}

bool sysctl_value_valid(const char *value, size_t len) {
        if (len == 0 || len > 256)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!(value[i] == '\t' || (value[i] >= 0x20 && value[i] < 0x7f)))
                        return false;
        return true;
}

/* RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF. */
bool utf8_is_valid(const char *str, size_t len) {
        const unsigned char *s = (const unsigned char *) str;
        size_t i = 0;

        while (i < len) {
                unsigned char c = s[i];
                size_t n;
                uint32_t cp;

                if (c < 0x80) {
                        i++;
                        continue;
                } else if (c >= 0xC2 && c <= 0xDF) {
                        n = 1;
                        cp = c & 0x1F;
                } else if (c >= 0xE0 && c <= 0xEF) {
                        n = 2;
                        cp = c & 0x0F;
                } else if (c >= 0xF0 && c <= 0xF4) {
                        n = 3;
                        cp = c & 0x07;
                } else
                        return false;
                if (len - i <= n)
                        return false;
                for (size_t k = 1; k <= n; k++) {
                        if ((s[i + k] & 0xC0) != 0x80)
                                return false;
                        cp = (cp << 6) | (s[i + k] & 0x3F);
                }
                if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10FFFF ||
                    (cp >= 0xD800 && cp <= 0xDFFF))
                        return false;
                i += n + 1;
        }
        return true;
}

static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encode_into(const void *data, size_t len, char *out) {
        const unsigned char *in = data;
        char *o = out;
        size_t i = 0;

        /* Whole groups of three without a test per byte; the tail after. */
        for (; i + 3 <= len; i += 3) {
                uint32_t v = (uint32_t) in[i] << 16 | (uint32_t) in[i + 1] << 8 | in[i + 2];
                o[0] = b64_alphabet[v >> 18];
                o[1] = b64_alphabet[(v >> 12) & 63];
                o[2] = b64_alphabet[(v >> 6) & 63];
                o[3] = b64_alphabet[v & 63];
                o += 4;
        }
        if (i < len) {
                uint32_t v = (uint32_t) in[i] << 16 | (i + 1 < len ? (uint32_t) in[i + 1] << 8 : 0);
                o[0] = b64_alphabet[v >> 18];
                o[1] = b64_alphabet[(v >> 12) & 63];
                o[2] = i + 1 < len ? b64_alphabet[(v >> 6) & 63] : '=';
                o[3] = '=';
                o += 4;
        }
        return (size_t) (o - out);
}

char *base64_encode(const void *data, size_t len) {
        char *out = malloc((len + 2) / 3 * 4 + 1);

        if (!out)
                return NULL;
        out[base64_encode_into(data, len, out)] = '\0';
        return out;
}

/* The value of each byte in the alphabet, -1 for every other byte ('=' included). A table:
 * a file transfer decodes megabytes, and branches on random bytes mispredict (four range tests
 * a character decoded at 43 MB/s, the table at several hundred). */
static const int8_t b64_values[256] = {
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 62, -1, -1, -1, 63,
        52, 53, 54, 55, 56, 57, 58, 59, 60, 61, -1, -1, -1, -1, -1, -1,
        -1,  0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14,
        15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, -1, -1, -1, -1, -1,
        -1, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
        41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
};

size_t base64_decoded_max(size_t len) {
        return len / 4 * 3;
}

/* The last group of four, which may hold padding. */
static int b64_decode_last(const unsigned char *in, unsigned char *out, size_t room, size_t *ret_n) {
        int v[4];

        for (int k = 0; k < 4; k++) {
                v[k] = b64_values[in[k]];
                if (v[k] < 0 && !(k >= 2 && in[k] == '='))
                        return -EINVAL;
        }
        if (v[2] < 0 && v[3] >= 0)
                return -EINVAL;
        /* Canonical only (RFC 4648 3.5): the bits the padding drops must be zero, so that one
         * byte string has one encoding (a chunk cannot smuggle two readings). */
        if ((v[2] < 0 && (v[1] & 0x0f)) || (v[2] >= 0 && v[3] < 0 && (v[2] & 0x03)))
                return -EINVAL;
        size_t k = v[2] < 0 ? 1 : v[3] < 0 ? 2 : 3;
        if (k > room)
                return -ENOBUFS;
        uint32_t x = (uint32_t) v[0] << 18 | (uint32_t) v[1] << 12 | (uint32_t) (v[2] < 0 ? 0 : v[2]) << 6 |
                     (uint32_t) (v[3] < 0 ? 0 : v[3]);
        out[0] = (unsigned char) (x >> 16);
        if (k >= 2)
                out[1] = (unsigned char) (x >> 8);
        if (k == 3)
                out[2] = (unsigned char) x;
        *ret_n = k;
        return 0;
}

int base64_decode_into(const char *s, size_t len, void *buf, size_t size, size_t *ret_len) {
        const unsigned char *in = (const unsigned char *) s;
        unsigned char *out = buf;
        size_t n = 0, k;

        if (len % 4 != 0)
                return -EINVAL;
        if (len == 0) {
                *ret_len = 0;
                return 0;
        }
        /* Every group but the last has no padding: one test for all four bytes. */
        for (size_t i = 0; i + 4 < len; i += 4) {
                int a = b64_values[in[i]], b = b64_values[in[i + 1]], c = b64_values[in[i + 2]],
                    d = b64_values[in[i + 3]];
                if ((a | b | c | d) < 0)
                        return -EINVAL;
                if (size - n < 3)
                        return -ENOBUFS;
                uint32_t x = (uint32_t) a << 18 | (uint32_t) b << 12 | (uint32_t) c << 6 | (uint32_t) d;
                out[n] = (unsigned char) (x >> 16);
                out[n + 1] = (unsigned char) (x >> 8);
                out[n + 2] = (unsigned char) x;
                n += 3;
        }
        int r = b64_decode_last(in + len - 4, out + n, size - n, &k);
        if (r < 0)
                return r;
        *ret_len = n + k;
        return 0;
}

int base64_decode(const char *s, size_t len, void **ret, size_t *ret_len) {
        if (len % 4 != 0)
                return -EINVAL;
        _cleanup_free_ unsigned char *out = malloc(base64_decoded_max(len) + 1);
        size_t n;

        if (!out)
                return -ENOMEM;
        int r = base64_decode_into(s, len, out, base64_decoded_max(len), &n);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(out);
        *ret_len = n;
        return 0;
}

static const char *const signal_names[] = {
        [SIGHUP] = "HUP",   [SIGINT] = "INT",     [SIGQUIT] = "QUIT", [SIGILL] = "ILL",
        [SIGTRAP] = "TRAP", [SIGABRT] = "ABRT",   [SIGBUS] = "BUS",   [SIGFPE] = "FPE",
        [SIGKILL] = "KILL", [SIGUSR1] = "USR1",   [SIGSEGV] = "SEGV", [SIGUSR2] = "USR2",
        [SIGPIPE] = "PIPE", [SIGALRM] = "ALRM",   [SIGTERM] = "TERM", [SIGSTKFLT] = "STKFLT",
        [SIGCHLD] = "CHLD", [SIGCONT] = "CONT",   [SIGSTOP] = "STOP", [SIGTSTP] = "TSTP",
        [SIGTTIN] = "TTIN", [SIGTTOU] = "TTOU",   [SIGURG] = "URG",   [SIGXCPU] = "XCPU",
        [SIGXFSZ] = "XFSZ", [SIGVTALRM] = "VTALRM", [SIGPROF] = "PROF", [SIGWINCH] = "WINCH",
        [SIGIO] = "IO",     [SIGPWR] = "PWR",     [SIGSYS] = "SYS",
};

/* Real-time signals by glibc's numbering, as bash's and procps' `kill -l` print them: SIGRTMIN
 * is 34 there (the kernel's 32 and 33 are the C library's own, for thread cancellation and
 * setxid), RTMIN+1..RTMIN+15, then RTMAX-14..RTMAX (64). */
#define RT_FIRST 34
#define RT_LAST 64
static const char *const rt_names[RT_LAST - RT_FIRST + 1] = {
        "RTMIN",    "RTMIN+1",  "RTMIN+2",  "RTMIN+3",  "RTMIN+4",  "RTMIN+5",  "RTMIN+6",  "RTMIN+7",
        "RTMIN+8",  "RTMIN+9",  "RTMIN+10", "RTMIN+11", "RTMIN+12", "RTMIN+13", "RTMIN+14", "RTMIN+15",
        "RTMAX-14", "RTMAX-13", "RTMAX-12", "RTMAX-11", "RTMAX-10", "RTMAX-9",  "RTMAX-8",  "RTMAX-7",
        "RTMAX-6",  "RTMAX-5",  "RTMAX-4",  "RTMAX-3",  "RTMAX-2",  "RTMAX-1",  "RTMAX",
};

const char *signal_to_name(int sig) {
        if (sig >= RT_FIRST && sig <= RT_LAST)
                return rt_names[sig - RT_FIRST];
        if (sig <= 0 || (size_t) sig >= ELEMENTSOF(signal_names))
                return NULL;
        return signal_names[sig];
}

const char *signal_to_string(int sig, char buf[static 12]) {
        const char *name = signal_to_name(sig);
        if (name || sig <= 0)
                return name;
        snprintf(buf, 12, "%d", sig);
        return buf;
}

static bool signal_sendable(long v) {
        return v > 0 && v <= RT_LAST && (v < RT_FIRST - 2 || v >= RT_FIRST);
}

static int parse_small_decimal(const char *s, long *ret) {
        long v = 0;
        if (!isdigit((unsigned char) *s))
                return -EINVAL;
        for (; isdigit((unsigned char) *s); s++)
                if ((v = v * 10 + (*s - '0')) > 1000)
                        return -ERANGE;
        if (*s)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* "RTMIN", "RTMIN+N", "RTMAX", "RTMAX-N", any N that stays within 34..64. */
static int signal_rt_from_string(const char *s) {
        long base, n = 0;

        if (strncasecmp(s, "RTMIN", 5) == 0)
                base = RT_FIRST;
        else if (strncasecmp(s, "RTMAX", 5) == 0)
                base = RT_LAST;
        else
                return -EINVAL;
        s += 5;
        if (*s) {
                if ((base == RT_FIRST && *s != '+') || (base == RT_LAST && *s != '-') ||
                    parse_small_decimal(s + 1, &n) < 0)
                        return -EINVAL;
                n = base == RT_FIRST ? n : -n;
        }
        return base + n >= RT_FIRST && base + n <= RT_LAST ? (int) (base + n) : -EINVAL;
}

int signal_from_string(const char *s) {
        long v;

        if (!s || !*s)
                return -EINVAL;
        if (isdigit((unsigned char) s[0]))
                return parse_small_decimal(s, &v) == 0 && signal_sendable(v) ? (int) v : -EINVAL;
        if (strncasecmp(s, "SIG", 3) == 0)
                s += 3;
        for (size_t i = 1; i < ELEMENTSOF(signal_names); i++)
                if (signal_names[i] && strcasecmp(s, signal_names[i]) == 0)
                        return (int) i;
        return signal_rt_from_string(s);
}

int read_small_file(int dir_fd, const char *path, bool nofollow, char *buf, size_t size) {
        _cleanup_close_ int fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
        ssize_t k;

        if (fd < 0)
                return -errno;
        k = read(fd, buf, size - 1);
        if (k < 0)
                return -errno;
        buf[k] = '\0';
        return (int) k;
}

uint64_t now_usec(int clock) {
        struct timespec ts;
        clock_gettime(clock, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

const char *format_utc(char buf[static UTC_TIME_MAX], uint64_t usec) {
        time_t t = (time_t) (usec / USEC_PER_SEC);
        struct tm tm;
        if (!gmtime_r(&t, &tm) || strftime(buf, UTC_TIME_MAX, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                buf[0] = '\0';
        return buf;
}

size_t utf8_incomplete_tail(const char *buf, size_t n) {
        for (size_t k = 1; k <= 3 && k <= n; k++) {
                unsigned char c = (unsigned char) buf[n - k];
                if ((c & 0xC0) == 0x80)
                        continue; /* a continuation byte: look further back */
                size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
                return need > k ? k : 0;
        }
        return 0;
}

size_t utf8_valid_prefix(const char *s, size_t len) {
        size_t good = 0;
        for (size_t i = 0; i < len;) {
                unsigned char c = (unsigned char) s[i];
                size_t n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
                if (i + n > len || !utf8_is_valid(s + i, n))
                        break;
                i += n;
                good = i;
        }
        return good;
}

ssize_t read_full(int fd, void *buf, size_t size) {
        size_t n = 0;

        while (n < size) {
                ssize_t k = read(fd, (char *) buf + n, size - n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        return (ssize_t) n;
}

int write_all(int fd, const void *data, size_t len) {
        const char *p = data;

        while (len > 0) {
                ssize_t k = write(fd, p, len);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += k;
                len -= (size_t) k;
        }
        return 0;
}

int mountinfo_find(const char *fstype, char **ret_mountpoint) {
        _cleanup_free_ char *line = NULL;
        size_t alloc = 0;
        FILE *f = fopen("/proc/self/mountinfo", "re");
        int r = -ENOENT;

        if (!f)
                return -errno;
        /* "36 25 0:31 / /sys/fs/cgroup rw,... - cgroup2 cgroup2 rw": match the fs type after " - ". */
        while (getline(&line, &alloc, f) >= 0) {
                char mnt[PATH_MAX], type[64];
                const char *sep = strstr(line, " - ");
                if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 || sscanf(sep + 3, "%63s", type) != 1 ||
                    strcmp(type, fstype) != 0)
                        continue;
                r = 0;
                if (ret_mountpoint && !(*ret_mountpoint = strdup(mnt)))
                        r = -ENOMEM;
                break;
        }
        fclose(f);
        return r;
}

int ipv4_prefix_parse(const char *s, size_t n, uint32_t *ret_addr, unsigned *ret_len) {
        char a[16];
        const char *slash = memchr(s, '/', n);
        size_t alen = slash ? (size_t) (slash - s) : n;
        unsigned len = 32;
        struct in_addr in;
        uint32_t addr;

        if (alen == 0 || alen >= sizeof(a))
                return -EINVAL;
        memcpy(a, s, alen);
        a[alen] = '\0';
        /* inet_pton() takes the dotted quad only: no octal, hex or short forms. */
        if (inet_pton(AF_INET, a, &in) != 1)
                return -EINVAL;
        if (slash) {
                size_t l = n - alen - 1;
                if (l == 0 || l > 2 || !isdigit((unsigned char) slash[1]) || (l == 2 && !isdigit((unsigned char) slash[2])) ||
                    (l == 2 && slash[1] == '0'))
                        return -EINVAL;
                len = (unsigned) (slash[1] - '0');
                if (l == 2)
                        len = len * 10 + (unsigned) (slash[2] - '0');
                if (len > 32)
                        return -EINVAL;
        }
        addr = ntohl(in.s_addr);
        if (addr & ~ipv4_mask(len))
                return -EDOM;
        *ret_addr = addr;
        *ret_len = len;
        return 0;
}

const char *ipv4_prefix_format(char *buf, size_t size, uint32_t addr, unsigned len) {
        struct in_addr in = { .s_addr = htonl(addr) };
        char a[INET_ADDRSTRLEN];

        inet_ntop(AF_INET, &in, a, sizeof(a));
        if (len == 32)
                snprintf(buf, size, "%s", a);
        else
                snprintf(buf, size, "%s/%u", a, len);
        return buf;
}

int flock_wait(int fd, unsigned tries) {
        for (unsigned i = 0; i < tries; i++) {
                if (flock(fd, LOCK_EX | LOCK_NB) == 0)
                        return 0;
                if (errno != EWOULDBLOCK)
                        return -errno;
                (void) usleep(100 * 1000);
        }
        return -EBUSY;
}
