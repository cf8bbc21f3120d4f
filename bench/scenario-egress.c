/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The "egress" scenario: the extra cost of a sandbox with egress ("network": {"egress": ...}:
 * a new network namespace instead of a pooled one, a veth pair, its addresses and route, one
 * nftables transaction, the DNS relay's socket, and on destroy their removal and a conntrack
 * flush) against the same create and destroy without it, in the same sitting, interleaved so that
 * a burst of load on a noisy host hits both alike. Needs a daemon that can give egress (hello's
 * capabilities.egress.available): docs/performance.md says how it was run. */
#include "bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Kind {
        const char *name;
        const char *network; /* JSON of "network", or NULL */
        Samples create, destroy;
} Kind;

static int egress_available(SbxClient *c) {
        json_object *reply = NULL, *caps, *e, *v;
        int r = bench_call(c, bench_req("hello"), &reply);

        if (r < 0)
                return r;
        r = json_object_object_get_ex(reply, "capabilities", &caps) && json_object_object_get_ex(caps, "egress", &e) &&
                            json_object_object_get_ex(e, "available", &v) && json_object_get_boolean(v)
                    ? 0
                    : -EOPNOTSUPP;
        json_object_put(reply);
        return r;
}

static int create_destroy(Bench *b, SbxClient *c, Kind *k, bool measure) {
        json_object *req = bench_req("create"), *reply = NULL, *sbx, *id;
        struct timespec t0, t1, t2;
        char *sid = NULL;
        int r;

        if (b->best_effort)
                json_object_object_add(req, "best_effort", json_object_new_boolean(true));
        if (k->network)
                json_object_object_add(req, "network", json_tokener_parse(k->network));
        t0 = now_mono();
        r = bench_call(c, req, &reply);
        t1 = now_mono();
        if (r < 0)
                return r;
        if (json_object_object_get_ex(reply, "sandbox", &sbx) && json_object_object_get_ex(sbx, "id", &id))
                sid = strdup(json_object_get_string(id));
        json_object_put(reply);
        if (!sid)
                return -EPROTO;
        r = bench_destroy(c, sid);
        t2 = now_mono();
        free(sid);
        if (r >= 0 && measure) {
                samples_add(&k->create, ts_ms(&t0, &t1));
                samples_add(&k->destroy, ts_ms(&t1, &t2));
        }
        return r;
}

int scenario_egress(Bench *b) {
        Kind k[] = {
                { .name = "network none (a pooled namespace)" },
                { .name = "egress all" },
                { .name = "egress allow (4 entries)",
                  .network = "{\"egress\":{\"allow\":[\"203.0.113.0/24\",\"198.51.100.7:443/tcp\",\"198.51.100.8:53/udp\","
                             "\"192.0.2.0/25:80\"]}}" },
        };
        unsigned n = b->runs < 20 ? 20 : b->runs > 300 ? 300 : b->runs;
        SbxClient *c = NULL;
        int r = bench_connect(b, &c);

        k[1].network = "{\"egress\":\"all\"}";
        if (r >= 0 && (r = egress_available(c)) < 0)
                fprintf(stderr, "egress: this daemon cannot give egress (hello's capabilities.egress): skipped\n");
        for (unsigned i = 0; r >= 0 && i < 3; i++)
                for (size_t j = 0; r >= 0 && j < (sizeof(k) / sizeof(k[0])); j++)
                        r = create_destroy(b, c, &k[j], false);
        for (unsigned i = 0; r >= 0 && i < n; i++)
                for (size_t j = 0; r >= 0 && j < (sizeof(k) / sizeof(k[0])); j++)
                        r = create_destroy(b, c, &k[j], true);
        for (size_t j = 0; r >= 0 && j < (sizeof(k) / sizeof(k[0])); j++) {
                char name[128];
                snprintf(name, sizeof(name), "egress: create, %s", k[j].name);
                bench_row(b, name, &k[j].create, 0, "%zu creates, interleaved with the other kinds", k[j].create.n);
                snprintf(name, sizeof(name), "egress: destroy, %s", k[j].name);
                bench_row(b, name, &k[j].destroy, 0, "same loop");
        }
        for (size_t j = 0; j < (sizeof(k) / sizeof(k[0])); j++) {
                samples_done(&k[j].create);
                samples_done(&k[j].destroy);
        }
        sbx_client_free(c);
        return r == -EOPNOTSUPP ? 0 : r;
}
