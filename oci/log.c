/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Errors as the engines read them: podman and containerd's shim show the last JSON line of
 * --log (runc's logrus format), not stderr. */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "oci.h"
#include "util.h"

static int log_fd = -EBADF;

int oci_log_open(void) {
        if (!oci_arg.log || log_fd >= 0)
                return 0;
        log_fd = open(oci_arg.log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
        return log_fd < 0 ? -errno : 0;
}

int oci_log_fd(void) {
        return log_fd;
}

static void log_line(const char *level, const char *msg) {
        char t[64];
        struct timespec ts;
        struct tm tm;

        if (log_fd < 0)
                return;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        size_t n = strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(t + n, sizeof(t) - n, ".%09ldZ", ts.tv_nsec);
        if (oci_arg.log_json) {
                _cleanup_json_ json_object *o = json_object_new_object();
                json_object_object_add(o, "level", json_object_new_string(level));
                json_object_object_add(o, "msg", json_object_new_string(msg));
                json_object_object_add(o, "time", json_object_new_string(t));
                const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
                dprintf(log_fd, "%s\n", s);
        } else {
                _cleanup_json_ json_object *m = json_object_new_string(msg);
                dprintf(log_fd, "time=\"%s\" level=%s msg=%s\n", t, level,
                        json_object_to_json_string_ext(m, JSON_C_TO_STRING_NOSLASHESCAPE));
        }
}

static void vlog(const char *level, bool to_stderr, const char *fmt, va_list ap) {
        char buf[4096];

        vsnprintf(buf, sizeof(buf), fmt, ap);
        log_line(level, buf);
        if (to_stderr)
                fprintf(stderr, "%s%s\n", strcmp(level, "error") == 0 ? "" : "sandboxd-oci: ", buf);
}

int oci_error(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vlog("error", true, fmt, ap);
        va_end(ap);
        return 1;
}

void oci_warn(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vlog("warning", true, fmt, ap);
        va_end(ap);
}

void oci_info(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vlog("info", oci_arg.debug, fmt, ap);
        va_end(ap);
}

void oci_log_notes(json_object *notes) {
        size_t n = json_object_is_type(notes, json_type_array) ? json_object_array_length(notes) : 0;
        for (size_t i = 0; i < n; i++)
                oci_info("%s", json_object_get_string(json_object_array_get_idx(notes, i)));
}
