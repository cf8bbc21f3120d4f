/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The SNI relay's parser of a connection's first bytes (daemon/core/tls-hello.h) on any bytes:
 * no read past them (the input is copied into a buffer of its exact size, for ASan), only the
 * documented results, a name only in the documented form, and a name that does not change when
 * more bytes follow (the relay may read past the first message). Abort otherwise: a crash to
 * libFuzzer and a "not ok" to the replay. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "tls-hello.h"

#define CHECK(x)                  \
        do {                      \
                if (!(x))         \
                        abort();  \
        } while (0)

static void check_name(const char *name) {
        size_t len = strlen(name);

        CHECK(len >= 1 && len <= TLS_HELLO_NAME_MAX);
        CHECK(name[0] != '.' && name[len - 1] != '.' && !strstr(name, ".."));
        for (size_t i = 0; i < len; i++)
                CHECK((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') || name[i] == '-' ||
                      name[i] == '_' || name[i] == '.');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char name[TLS_HELLO_NAME_MAX + 1], again[TLS_HELLO_NAME_MAX + 1];
        TlsHelloKind kind, kind2;
        uint8_t *exact, *more;
        int r, r2;

        if (size > 2 * TLS_HELLO_PEEK_MAX)
                return 0;
        exact = malloc(size ? size : 1);
        more = malloc(size + 64);
        CHECK(exact && more);
        memcpy(exact, data, size);
        r = tls_hello_first_name(exact, size, &kind, name);
        CHECK(r == 0 || r == -EAGAIN || r == -E2BIG || r == -EBADMSG || r == -ENOENT || r == -EPROTO);
        if (r == 0) {
                check_name(name);
                memcpy(more, data, size);
                memset(more + size, 'x', 64);
                r2 = tls_hello_first_name(more, size + 64, &kind2, again);
                CHECK(r2 == 0 && kind2 == kind && strcmp(name, again) == 0);
        }
        free(exact);
        free(more);
        return 0;
}
