/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stddef.h>

/* Keys per object, in order of the objects' opening braces. */
typedef struct JsonKeyCounts {
        unsigned *v;
        size_t n, alloc;
} JsonKeyCounts;

/* 0 when s[0..len) is exactly one RFC 8259 value; -EINVAL with a reason otherwise. */
int json_check(const char *s, size_t len, unsigned max_depth, JsonKeyCounts *counts, const char **ret_why);
/* -EEXIST when the parsed tree has fewer keys somewhere than the text had: a duplicate key. */
int json_check_no_duplicates(json_object *o, const JsonKeyCounts *counts);
