/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <limits.h>
#include <string.h>

#include "entry-name.h"

EntryName entry_name_normalise(const char *raw, char *out, size_t size) {
        size_t n = 0;

        for (const char *p = raw; *p;) {
                size_t len = strcspn(p, "/");
                if (len == 2 && p[0] == '.' && p[1] == '.')
                        return ENTRY_NAME_DOTDOT;
                if (len > NAME_MAX)
                        return ENTRY_NAME_LONG;
                if (len > 0 && !(len == 1 && p[0] == '.')) {
                        if (n + len + 2 > size)
                                return ENTRY_NAME_LONG;
                        if (n)
                                out[n++] = '/';
                        memcpy(out + n, p, len);
                        n += len;
                }
                p += len;
                while (*p == '/')
                        p++;
        }
        out[n] = '\0';
        return ENTRY_NAME_OK;
}
