/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The metrics endpoint (docs/metrics.md): `GET /metrics` over HTTP/1.x on sockets of its own
 * (sandboxd-metrics.socket, FileDescriptorName=metrics, or --metrics-listen), answered with
 * metrics-text.c's body. It reads what the Manager and its Context hold and changes nothing. */
#pragma once

#include <stdint.h>

#include "manager.h"

#define METRICS_MAX_LISTEN 4
#define METRICS_MAX_CONNECTIONS 16
#define METRICS_REQUEST_MAX 4096                 /* request line and headers */
#define METRICS_TIMEOUT_USEC (5 * USEC_PER_SEC)  /* a connection's whole life */

typedef struct MetricsServer MetricsServer;

/* What a request asks, once its head is read whole. */
typedef enum MetricsRoute {
        METRICS_INCOMPLETE,  /* no empty line yet, and fewer than cap bytes */
        METRICS_GET,         /* GET /metrics (a query string is ignored) */
        METRICS_HEAD,
        METRICS_BAD_REQUEST, /* not "METHOD /PATH HTTP/1.0|1.1", or cap bytes without an end: 400 */
        METRICS_NOT_FOUND,   /* another path: 404 */
        METRICS_BAD_METHOD,  /* another method: 405 */
} MetricsRoute;

/* buf[0..n) is what a client sent so far; *scanned (0 at first) is how much of it was looked at
 * before, so that reads of one byte each cost no more than one read of all. */
MetricsRoute metrics_http_route(const char *buf, size_t n, size_t cap, size_t *scanned);

int metrics_server_new(MetricsServer **ret, Manager *m);
/* Takes a listening fd (from sd_listen_fds, or --metrics-listen's). */
int metrics_server_add_listener(MetricsServer *srv, int fd);
/* Its Unix sockets' paths into the Context's masked paths (as manager_setup() does). */
void metrics_server_setup(MetricsServer *srv);
unsigned metrics_server_listeners(const MetricsServer *srv);
/* Closes its connections and listeners. */
MetricsServer *metrics_server_free(MetricsServer *srv);
