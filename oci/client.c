/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "oci.h"

int oci_connect(SbxClient **ret) {
        return sbx_client_connect(oci_arg.socket, ret);
}

int oci_call(SbxClient *c, json_object *request, const int *fds, size_t n_fds, json_object **ret_reply,
             char **ret_error) {
        _cleanup_json_ json_object *reply = NULL;
        json_object *e, *f;
        int r = sbx_client_call_fds(c, request, fds, n_fds, NULL, NULL, &reply);

        if (r < 0)
                return r;
        if (!sbx_reply_ok(reply)) {
                const char *code = sbx_reply_error_code(reply), *msg = sbx_reply_error_message(reply);
                const char *field = json_object_object_get_ex(reply, "error", &e) &&
                                                    json_object_object_get_ex(e, "field", &f)
                                            ? json_object_get_string(f)
                                            : NULL;
                if (ret_error && asprintf(ret_error, "%s: %s%s%s%s", code ? code : "error", msg ? msg : "?",
                                          field ? " (field " : "", field ? field : "", field ? ")" : "") < 0)
                        *ret_error = NULL;
                if (ret_reply)
                        *ret_reply = TAKE_PTR(reply);
                return -EPROTO;
        }
        if (ret_reply)
                *ret_reply = TAKE_PTR(reply);
        return 0;
}

int oci_call_simple(json_object *request, const char *what, json_object **ret_reply) {
        _cleanup_(sbx_client_freep) SbxClient *c = NULL;
        _cleanup_free_ char *err = NULL;
        int r = oci_connect(&c);

        if (r < 0) {
                json_object_put(request);
                return oci_error("%s: cannot reach sandboxd: %s", what, strerror(-r));
        }
        r = oci_call(c, request, NULL, 0, ret_reply, &err);
        if (r == -EPROTO)
                return oci_error("%s: %s", what, err ? err : "sandboxd refused");
        if (r < 0)
                return oci_error("%s: %s", what, strerror(-r));
        return 0;
}

int oci_write_pid_file(const char *path, pid_t pid) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -EBADF;
        char buf[32];
        int n = snprintf(buf, sizeof(buf), "%d", (int) pid);

        if (asprintf(&tmp, "%s.tmp.%d", path, (int) getpid()) < 0)
                return -ENOMEM;
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        if (write(fd, buf, (size_t) n) != n || close(TAKE_FD(fd)) < 0 || rename(tmp, path) < 0) {
                int e = errno ? errno : EIO;
                unlink(tmp);
                return -e;
        }
        return 0;
}
