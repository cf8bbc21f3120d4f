/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Logging to stderr; under systemd each line carries a "<N>" priority prefix that journald reads
 * (detected from $JOURNAL_STREAM). Only the daemon logs; lib/ never does. */
#pragma once

#include <syslog.h>

extern int log_max_level;

void log_open(void);
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERR, __VA_ARGS__)
