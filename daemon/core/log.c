/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

int log_max_level = LOG_INFO;
static bool log_prefix;
static char log_buf[4096];

/* $JOURNAL_STREAM is "device:inode" of the stream journald gave us as stderr. */
void log_open(void) {
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (e && sscanf(e, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0 &&
            (unsigned long long) st.st_dev == dev && (unsigned long long) st.st_ino == ino)
                log_prefix = true;
        /* A buffer of its own: with none, glibc's stderr stays unbuffered and a line took one
         * write(2) per piece (nine for "sandbox ... restored", 9,000 at a restart of 1,000). */
        setvbuf(stderr, log_buf, _IOLBF, sizeof(log_buf));
}

void log_msg(int level, const char *fmt, ...) {
        int saved = errno;
        va_list ap;

        if (level > log_max_level)
                return;
        if (log_prefix)
                fprintf(stderr, "<%d>", level);
        else
                fputs("sandboxd: ", stderr);
        va_start(ap, fmt);
        errno = saved;
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        errno = saved;
}
