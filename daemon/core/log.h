/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Logging to stderr; under systemd each line carries a "<N>" priority prefix that journald reads
 * (detected from $JOURNAL_STREAM). Only the daemon logs; lib/ never does. */
#pragma once

#include <errno.h>
#include <syslog.h>

extern int log_max_level;

void log_open(void);
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERR, __VA_ARGS__)

/* Logs with %m standing for the error r (a negative errno, or a positive one) and returns it as a
 * negative errno, as systemd's log_*_errno() do: `return log_error_errno(r, "cannot open %s: %m",
 * path);` is the log line and the return in one statement. */
#define log_full_errno(level, r, ...)                          \
        ({                                                     \
                int _r = (r), _e = _r < 0 ? -_r : _r;          \
                errno = _e;                                    \
                log_msg(level, __VA_ARGS__);                   \
                -_e;                                           \
        })
#define log_debug_errno(r, ...) log_full_errno(LOG_DEBUG, r, __VA_ARGS__)
#define log_info_errno(r, ...) log_full_errno(LOG_INFO, r, __VA_ARGS__)
#define log_notice_errno(r, ...) log_full_errno(LOG_NOTICE, r, __VA_ARGS__)
#define log_warning_errno(r, ...) log_full_errno(LOG_WARNING, r, __VA_ARGS__)
#define log_error_errno(r, ...) log_full_errno(LOG_ERR, r, __VA_ARGS__)
