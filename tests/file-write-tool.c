/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libsandbox's chunked writes against the real daemon, for tests/t-files-chunks.sh:
 *   file-write-tool SOCKET SANDBOX PATH buffer   stdin read whole, then sbx_file_write()
 *   file-write-tool SOCKET SANDBOX PATH from     sbx_file_write_from() on stdin
 * prints the reply and exits 0 when it is ok. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox.h"

static unsigned char *read_stdin(size_t *ret_len) {
        size_t len = 0, size = 1 << 20;
        unsigned char *buf = malloc(size);

        while (buf) {
                ssize_t k = read(STDIN_FILENO, buf + len, size - len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                len += (size_t) k;
                if (len == size) {
                        unsigned char *b = realloc(buf, size *= 2);
                        if (!b)
                                free(buf);
                        buf = b;
                }
        }
        *ret_len = len;
        return buf;
}

int main(int argc, char *argv[]) {
        SbxClient *c = NULL;
        json_object *reply = NULL;
        size_t len = 0;
        unsigned char *buf = NULL;
        int r;

        if (argc != 5 || (strcmp(argv[4], "buffer") != 0 && strcmp(argv[4], "from") != 0)) {
                fprintf(stderr, "usage: %s SOCKET SANDBOX PATH buffer|from\n", argv[0]);
                return 2;
        }
        if ((r = sbx_client_connect(argv[1], &c)) < 0) {
                fprintf(stderr, "connect: %s\n", strerror(-r));
                return 1;
        }
        if (strcmp(argv[4], "buffer") == 0) {
                buf = read_stdin(&len);
                r = buf ? sbx_file_write(c, argv[2], argv[3], buf, len, SBX_FILE_MODE_DEFAULT, 0, NULL, NULL, &reply) : -ENOMEM;
        } else
                r = sbx_file_write_from(c, argv[2], argv[3], STDIN_FILENO, SBX_FILE_MODE_DEFAULT, 0, NULL, NULL, &reply);
        if (r < 0)
                fprintf(stderr, "write: %s\n", strerror(-r));
        else
                printf("%s\n", json_object_to_json_string_ext(reply, JSON_C_TO_STRING_PLAIN));
        r = r >= 0 && sbx_reply_ok(reply) ? 0 : 1;
        json_object_put(reply);
        free(buf);
        sbx_client_free(c);
        return r;
}
