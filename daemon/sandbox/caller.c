/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <string.h>

#include "caller.h"

const char *caller_mount_root(Context *m, uid_t uid, const char *source, const char **ret_rest) {
        if (uid == 0) {
                *ret_rest = source[1] ? source + 1 : ".";
                return "/";
        }
        for (char **r = m->config.mount_roots; r && *r; r++) {
                size_t n = strlen(*r);
                if (strncmp(source, *r, n) == 0 && (source[n] == '\0' || source[n] == '/')) {
                        *ret_rest = source[n] ? source + n + 1 : ".";
                        return *r;
                }
        }
        return NULL;
}
