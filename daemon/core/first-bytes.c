/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A connection's first bytes from its segments (first-bytes.h). */
#include <errno.h>

#include "first-bytes.h"

static bool held(const FirstBytes *f, size_t i) {
        return f->have[i / 8] & (1u << (i % 8));
}

int first_bytes_add(FirstBytes *f, size_t off, const uint8_t *data, size_t len) {
        size_t end = off < FIRST_BYTES_MAX ? (len < FIRST_BYTES_MAX - off ? off + len : FIRST_BYTES_MAX) : off;
        bool added = false;

        /* Checked whole before anything is kept: a conflicting segment leaves no trace. */
        for (size_t i = off; i < end; i++)
                if (held(f, i) && f->bytes[i] != data[i - off])
                        return -EILSEQ;
        for (size_t i = off; i < end; i++)
                if (!held(f, i)) {
                        f->bytes[i] = data[i - off];
                        f->have[i / 8] |= (uint8_t) (1u << (i % 8));
                        added = true;
                }
        while (f->contiguous < FIRST_BYTES_MAX && held(f, f->contiguous))
                f->contiguous++;
        return added;
}
