/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What egress_attach() made, removed: in a child off the loop, or here (egress.h,
 * egress_detach()). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "conntrack.h"
#include "egress-internal.h"
#include "log.h"
#include "util.h"

static void teardown_log(const char *ifname, int failed) {
        if (failed & TEARDOWN_VETH)
                log_warning("egress: cannot remove interface %s (removed at the next start)", ifname);
        if (failed & TEARDOWN_RULES)
                log_warning("egress: cannot remove the rules of %s (left in table sandboxd until the next start)", ifname);
        if (failed & TEARDOWN_CONNTRACK)
                log_debug("egress: cannot forget the connections of %s", ifname);
}

static void teardown_report(const Teardown *t, const siginfo_t *si) {
        if (si->si_code == CLD_EXITED)
                teardown_log(t->ifname, si->si_status);
        else
                log_warning("egress: the teardown of %s was killed (signal %d): what it left goes at the next start",
                            t->ifname, si->si_status);
}

static void teardown_free(Teardown *t) {
        Egress *e = t->egress;

        if (t->prev)
                t->prev->next = t->next;
        else
                e->teardowns = t->next;
        if (t->next)
                t->next->prev = t->prev;
        egress_give_slot(e, t->slot);
        child_job_free(t->job); /* kills and reaps a child still running */
        free(t);
}

static void on_teardown_exit(ChildJob *j, const siginfo_t *si, void *userdata) {
        teardown_report(userdata, si);
        teardown_free(userdata);
}

/* The teardown of n in a child, watched by the loop: each of its steps waits for RCU grace
 * periods in the kernel (35-50 ms a destroy, hundreds under load), which the loop must not. */
static int teardown_start(Context *m, Egress *e, const SandboxNet *n) {
        Teardown *t = calloc(1, sizeof(*t));
        int r;

        if (!t)
                return -ENOMEM;
        *t = (Teardown) { .egress = e, .slot = n->slot };
        memcpy(t->ifname, n->ifname, sizeof(t->ifname));
        r = child_job_start(m->event, &(ChildJobSpec) { .name = "sandboxd-net", .fn = egress_teardown_child, .arg = t,
                                                        .on_exit = on_teardown_exit, .userdata = t }, &t->job);
        if (r < 0) {
                free(t);
                return r;
        }
        t->next = e->teardowns;
        if (t->next)
                t->next->prev = t;
        e->teardowns = t;
        return 0;
}

/* At stop: each teardown still running gets until the deadline, then is killed. */
void egress_teardowns_wait(Egress *e) {
        uint64_t deadline = now_usec(CLOCK_MONOTONIC) + EGRESS_TEARDOWN_WAIT_MS * UINT64_C(1000);

        while (e->teardowns) {
                Teardown *t = e->teardowns;
                siginfo_t si = {};

                if (child_job_wait(t->job, deadline, &si) == 0)
                        teardown_report(t, &si);
                else
                        log_warning("egress: the teardown of %s did not end in time: killed (the next start removes "
                                    "what it left)", t->ifname);
                teardown_free(t);
        }
}

void egress_detach_now(Context *m, SandboxNet *n) {
        Egress *e = m->egress;

        if (!n->attached || !e)
                return;
        n->dns = dns_relay_free(n->dns);
        egress_sni_forget(e->sni, n);
        teardown_log(n->ifname, egress_teardown_run(e->nft, n->ifname, n->slot));
        egress_give_slot(e, n->slot);
        n->attached = false;
}

void egress_detach(Context *m, SandboxNet *n) {
        Egress *e = m->egress;
        int r;

        if (!n->attached || !e)
                return;
        n->dns = dns_relay_free(n->dns);
        egress_sni_forget(e->sni, n);
        r = m->event ? teardown_start(m, e, n) : -ENOTCONN;
        if (r < 0) {
                log_debug_errno(r, "egress: no child for the teardown of %s, done here: %m", n->ifname);
                teardown_log(n->ifname, egress_teardown_run(e->nft, n->ifname, n->slot));
                egress_give_slot(e, n->slot);
        }
        n->attached = false;
}
