/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

/* An archive entry's name made relative and normal: "a//b/./c/" is "a/b/c", "." and "" are ""
 * (the root itself), a leading "/" is dropped. What neither file.put (file-tar.c) nor an image
 * import (image-import.c) may take: a ".." component, a component over NAME_MAX, a result that
 * does not fit. Each caller adds its own rules (file.put refuses absolute names). */
typedef enum {
        ENTRY_NAME_OK,
        ENTRY_NAME_DOTDOT,
        ENTRY_NAME_LONG,
} EntryName;

EntryName entry_name_normalise(const char *raw, char *out, size_t size);
