/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The metrics endpoint's body: every series (docs/metrics.md) in the Prometheus text format
 * 0.0.4, made when a scrape asks. */
#pragma once

#include <stddef.h>

typedef struct Manager Manager;

/* The text into *ret (malloc'ed, *ret_size bytes). */
int metrics_render(Manager *m, char **ret, size_t *ret_size);
