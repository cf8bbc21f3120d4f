/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The names of a directory, sorted: file.list and file.get walk trees in this order, so two
 * listings (or two archives) of one tree are the same. */
#pragma once

#include <stddef.h>

/* The names in the directory dir_fd (not "." and ".."), sorted by strcmp(), each and the array
 * malloc'd (an empty directory: an array with no names). NULL with errno set when the directory
 * cannot be read or memory runs out: never a part of the names. */
char **dir_names_sorted(int dir_fd, size_t *ret_n);
