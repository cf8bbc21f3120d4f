/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Egress for sandboxes (egress.h). */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child-job.h"
#include "egress-dns.h"
#include "egress-rules.h"
#include "egress-sni.h"
#include "egress-spec.h"
#include "egress-internal.h"
#include "log.h"
#include "macro.h"
#include "mount-compat.h"
#include "conntrack.h"
#include "nft-listing.h"
#include "nftables.h"
#include "spawn.h"
#include "util.h"
#include "veth.h"

#define EGRESS_SLOTS_MAX 65536u
#define EGRESS_RESOLV "egress-resolv.conf"
/* How long a name's address stays in its set after its answer (EGRESS_NAME_ADDRS_MAX of them at
 * most): its TTL, within these bounds (a TTL of 0 would make every connect race the set; a week's
 * would keep an address long after the name moved). A connection open to an address goes on when
 * it leaves the set. */
#define EGRESS_NAME_TTL_MIN 30u
#define EGRESS_NAME_TTL_MAX 3600u

static int set_reason(Egress *e, const char *fmt, ...) _printf_(2, 3);
static int set_reason(Egress *e, const char *fmt, ...) {
        va_list ap;

        free(e->reason);
        free(e->sni_reason);
        va_start(ap, fmt);
        if (vasprintf(&e->reason, fmt, ap) < 0)
                e->reason = NULL;
        va_end(ap);
        e->available = false;
        log_info("no egress for sandboxes: %s", e->reason ? e->reason : "?");
        return 0;
}

/* "a/b c/d" (checked by conf.c) into rules. */
static void parse_prefixes(const char *value, EgressRule *rules, unsigned max, unsigned *ret_n) {
        unsigned n = 0;

        *ret_n = 0;
        if (!value || strcmp(value, "none") == 0)
                return;
        for (const char *s = value + strspn(value, " \t"); *s && n < max; s += strspn(s, " \t")) {
                size_t len = strcspn(s, " \t");
                uint32_t addr;
                unsigned plen;
                if (ipv4_prefix_parse(s, len, &addr, &plen) == 0)
                        rules[n++] = (EgressRule) { .addr = addr, .len = (uint8_t) plen };
                s += len;
        }
        *ret_n = n;
}

/* The first IPv4 nameserver of the host's /etc/resolv.conf. */
static int host_nameserver(struct in_addr *ret) {
        FILE *f = fopen("/etc/resolv.conf", "re");
        char line[256];
        int r = -ENOENT;

        if (!f)
                return -errno;
        while (r < 0 && fgets(line, sizeof(line), f)) {
                char addr[64];
                if (sscanf(line, " nameserver %63s", addr) == 1 && inet_pton(AF_INET, addr, ret) == 1)
                        r = 0;
        }
        fclose(f);
        return r;
}

/* The /etc/resolv.conf of every sandbox with egress, written at the first (the state directory
 * is made after egress_init()). */
static int write_resolv(Egress *e, const char *state_dir) {
        static const char text[] = "# sandboxd: this sandbox's resolver, a relay of the daemon to the host's (egress)\n"
                                   "nameserver " DNS_RELAY_ADDR "\n";
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *path = NULL, *tmp = NULL;

        if (e->resolv_path)
                return 0;
        if (asprintf(&path, "%s/" EGRESS_RESOLV, state_dir) < 0 || asprintf(&tmp, "%s.tmp", path) < 0)
                return -ENOMEM;
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        if (write_all(fd, text, sizeof(text) - 1) < 0 || fchmod(fd, 0644) < 0 || rename(tmp, path) < 0)
                return -errno;
        e->resolv_path = TAKE_PTR(path);
        return 0;
}

static void setup_range_and_dns(Context *m, Egress *e) {
        struct in_addr ns;
        uint64_t slots;

        if (ipv4_prefix_parse(m->config.egress_range, strlen(m->config.egress_range), &e->range_addr, &e->range_len) < 0) {
                e->range_addr = 0x0ac80000; /* conf.c refuses anything else: never here */
                e->range_len = 16;
        }
        slots = UINT64_C(1) << (30 - e->range_len);
        e->n_slots = slots > EGRESS_SLOTS_MAX ? EGRESS_SLOTS_MAX : (unsigned) slots;
        parse_prefixes(m->config.egress_deny, e->deny, ELEMENTSOF(e->deny) - 1, &e->n_deny);
        /* The other sandboxes (and the host's ends): never reached from a sandbox. */
        e->deny[e->n_deny++] = (EgressRule) { .addr = e->range_addr, .len = (uint8_t) e->range_len };
        if (m->config.egress_dns ? inet_pton(AF_INET, m->config.egress_dns, &ns) == 1 : host_nameserver(&ns) >= 0)
                e->dns = (struct sockaddr_in) { .sin_family = AF_INET, .sin_port = htons(53), .sin_addr = ns };
}

static int take_lock(Egress *e) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return -errno;
        memcpy(sa.sun_path + 1, EGRESS_LOCK_NAME, strlen(EGRESS_LOCK_NAME));
        if (bind(fd, (struct sockaddr *) &sa, offsetof(struct sockaddr_un, sun_path) + 1 + strlen(EGRESS_LOCK_NAME)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        e->lock_fd = fd;
        return 0;
}

/* The slot an earlier daemon's interface was addressed from, if it was from our range. */
static bool found_slot(const Egress *e, const VethFound *f, unsigned *ret) {
        uint32_t off = f->host_addr - e->range_addr;

        if (!f->host_addr || off % 4 != 1 || off / 4 >= e->n_slots)
                return false;
        *ret = off / 4;
        return true;
}

static VethFound *found_get(Egress *e, const char *ifname) {
        for (size_t i = 0; i < e->n_found; i++)
                if (!e->found[i].claimed && strcmp(e->found[i].name, ifname) == 0)
                        return &e->found[i];
        return NULL;
}

/* An earlier daemon's interface no sandbox claims: removed, its slot given back. */
static void found_remove(Egress *e, VethFound *f) {
        unsigned slot;

        f->claimed = true; /* dealt with */
        if (veth_remove(f->name) < 0)
                log_warning("egress: cannot remove the interface %s an earlier daemon left", f->name);
        if (found_slot(e, f, &slot))
                egress_give_slot(e, slot);
}

int egress_init(Context *m) {
        Egress *e = calloc(1, sizeof(*e));
        _cleanup_free_ char *msg = NULL;
        char *listing = NULL;
        int r;

        if (!e)
                return -ENOMEM;
        e->home_fd = e->lock_fd = -EBADF;
        m->egress = e;
        setup_range_and_dns(m, e);
        dns_relay_set_budget(m->config.egress_dns_queries > DNS_RELAY_INFLIGHT_TOTAL_MAX ? DNS_RELAY_INFLIGHT_TOTAL_MAX
                                                                                 : (unsigned) m->config.egress_dns_queries);
        e->slots = calloc(e->n_slots, 1);
        if (!e->slots)
                return -ENOMEM;
        e->available = true;
        r = take_lock(e);
        if (r == -EADDRINUSE)
                return set_reason(e, "another sandboxd gives egress in this network namespace (another state "
                                     "directory: its interfaces and table are its own)");
        if (r < 0)
                return set_reason(e, "cannot bind the abstract socket @" EGRESS_LOCK_NAME ": %s", strerror(-r));
        /* An earlier daemon's interfaces: kept for the sandboxes taken back running (their slots
         * taken now), removed at egress_restored() otherwise (their peers go with them). */
        r = veth_list(&e->found, &e->n_found);
        if (r < 0)
                log_warning_errno(r, "egress: cannot list the interfaces an earlier daemon left: %m");
        for (size_t i = 0; i < e->n_found; i++) {
                unsigned slot;
                if (found_slot(e, &e->found[i], &slot))
                        e->slots[slot] = 1, e->n_taken++;
        }
        r = nftables_new(&e->nft);
        if (r == -EOPNOTSUPP)
                return set_reason(e, "sandboxd was built without libnftables");
        if (r < 0)
                return set_reason(e, "cannot use nftables: %s", strerror(-r));
        /* An earlier daemon's table, whatever it held: it stays in force (for the sandboxes still
         * running) until ours replaces it in one commit, at the first egress or at
         * egress_restored(). A read answers at once, and tells whether nftables is ours to use. */
        r = nftables_list(e->nft, "list table " EGRESS_TABLE "\n", &listing, &msg);
        if (r >= 0) {
                free(listing);
                e->old_table = true;
        } else if (r == -ENOENT)
                r = 0;
        if (r < 0)
                return set_reason(e, "nftables refused a table of sandboxd's (%s): the nf_tables module, or "
                                     "CAP_NET_ADMIN, is missing",
                                  msg ? msg : "no message");
        if (m->run_helper_fd < 0)
                return set_reason(e, "no sandboxd-run-helper: without it a sandbox makes its own network namespace, "
                                     "whose interfaces root inside could change");
        e->home_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (e->home_fd < 0)
                return set_reason(e, "cannot open the daemon's network namespace: %m");
        r = egress_sni_new(m, e->nft, &e->sni);
        if (r < 0) {
                if (asprintf(&e->sni_reason, "netfilter queue %u or the table " EGRESS_SNI_TABLE " cannot be made (%s): "
                                             "nfnetlink_queue, nft_compat or xt_NFQUEUE missing, or another process holds "
                                             "the queue", EGRESS_SNI_QUEUE, strerror(-r)) < 0)
                        e->sni_reason = NULL;
                log_warning("egress: no SNI matching (allow entries with \"match\": \"sni\" are refused): %s",
                            e->sni_reason ? e->sni_reason : strerror(-r));
        }
        return 0;
}

void egress_done(Context *m) {
        Egress *e = m->egress;

        if (!e)
                return;
        egress_teardowns_wait(e); /* before the table goes: they delete from it */
        e->sni = egress_sni_free(e->sni);
        /* Sandboxes left running keep their rules for the next daemon, which replaces them (and
         * their admitted connections go on). */
        if (e->table_made && e->nft && !e->n_kept)
                (void) nftables_run(e->nft, "delete table " EGRESS_TABLE "\n", NULL);
        nftables_free(e->nft);
        safe_close(e->home_fd);
        safe_close(e->lock_fd);
        free(e->found);
        free(e->pending);
        free(e->reason);
        free(e->sni_reason);
        free(e->resolv_path);
        free(e->slots);
        free(e->conn_counts);
        free(e);
        m->egress = NULL;
}

/* The host's interfaces that forward (net.ipv4.conf.<if>.forwarding = 1), ours aside: the way
 * back of a sandbox's replies comes in on one of them and must be forwarded to its veth. */
static int forwarding_interfaces(json_object **ret_names) {
        _cleanup_json_ json_object *names = json_object_new_array();
        DIR *d = opendir("/proc/sys/net/ipv4/conf");
        struct dirent *de;

        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                char path[300], v[8];
                if (de->d_name[0] == '.' || strcmp(de->d_name, "all") == 0 || strcmp(de->d_name, "default") == 0 ||
                    strcmp(de->d_name, "lo") == 0 || strncmp(de->d_name, VETH_PREFIX, strlen(VETH_PREFIX)) == 0)
                        continue;
                snprintf(path, sizeof(path), "/proc/sys/net/ipv4/conf/%s/forwarding", de->d_name);
                if (read_small_file(AT_FDCWD, path, true, v, sizeof(v)) >= 0 && v[0] == '1')
                        json_object_array_add(names, json_object_new_string(de->d_name));
        }
        closedir(d);
        *ret_names = TAKE_PTR(names);
        return 0;
}

int egress_check(Context *m, ProtoError *err) {
        Egress *e = m->egress;
        _cleanup_json_ json_object *fwd = NULL;

        if (!e || !e->available)
                return proto_error_set(err, SBX_E_LIMIT_UNENFORCEABLE, "network",
                                       "egress cannot be given on this host: %s (sandboxctl doctor)",
                                       e && e->reason ? e->reason : "not set up");
        if (forwarding_interfaces(&fwd) < 0 || json_object_array_length(fwd) == 0)
                return proto_error_set(err, SBX_E_LIMIT_UNENFORCEABLE, "network",
                                       "egress cannot be given on this host: no interface of it forwards, so no reply "
                                       "could come back to a sandbox; set net.ipv4.conf.<uplink>.forwarding=1 on the "
                                       "interface toward the outside (sandboxctl doctor)");
        if (e->n_taken >= e->n_slots)
                return proto_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "network",
                                       "every address of egress_range (%s, %u sandboxes) is taken", m->config.egress_range,
                                       e->n_slots);
        return 0;
}

json_object *egress_capability_json(Context *m) {
        Egress *e = m->egress;
        json_object *o = json_object_new_object(), *fwd = NULL;
        char dns[INET_ADDRSTRLEN];

        if (!e) {
                json_object_object_add(o, "available", json_object_new_boolean(false));
                return o;
        }
        (void) forwarding_interfaces(&fwd);
        json_object_object_add(o, "available", json_object_new_boolean(e->available && fwd && json_object_array_length(fwd) > 0));
        json_object_object_add(o, "reason", e->available ? NULL : json_object_new_string(e->reason ? e->reason : "?"));
        json_object_object_add(o, "nftables", json_object_new_boolean(e->nft != NULL));
        json_object_object_add(o, "forwarding", fwd ? fwd : json_object_new_array());
        json_object_object_add(o, "range", json_object_new_string(m->config.egress_range));
        json_object_object_add(o, "deny", json_object_new_string(m->config.egress_deny));
        json_object_object_add(o, "dns", e->dns.sin_family
                                                 ? json_object_new_string(inet_ntop(AF_INET, &e->dns.sin_addr, dns, sizeof(dns)))
                                                 : NULL);
        json_object_object_add(o, "sandboxes", json_object_new_int((int) e->n_taken));
        json_object_object_add(o, "sni", json_object_new_boolean(e->sni != NULL));
        json_object_object_add(o, "sni_reason", e->sni || !e->sni_reason ? NULL : json_object_new_string(e->sni_reason));
        return o;
}

/* ---- "network" of a request ---- */

int egress_parse(Context *m, json_object *v, SandboxNet *ret, ProtoError *err) {
        Egress *e = m->egress;
        EgressSpecLimits lim = { .available = e != NULL, .sni = e && e->sni, .deny = e ? e->deny : NULL,
                                 .n_deny = e ? e->n_deny : 0 };

        return egress_spec_parse(&lim, v, ret, err);
}

json_object *egress_state_json(const SandboxNet *n) {
        json_object *o = egress_spec_json(n);
        char a[32];

        if (!n->egress || !n->attached)
                return o;
        json_object_object_add(o, "interface", json_object_new_string(n->ifname));
        json_object_object_add(o, "address", json_object_new_string(ipv4_prefix_format(a, sizeof(a), n->addr, 30)));
        json_object_object_add(o, "gateway", json_object_new_string(ipv4_prefix_format(a, sizeof(a), n->host_addr, 32)));
        json_object_object_add(o, "dns", n->dns ? json_object_new_string(DNS_RELAY_ADDR) : NULL);
        if (n->dns) {
                DnsRelayCounts c = dns_relay_counts(n->dns);
                json_object *q = json_object_new_object();
                json_object_object_add(q, "relayed", json_object_new_int64((int64_t) c.relayed));
                json_object_object_add(q, "answered", json_object_new_int64((int64_t) c.answered));
                json_object_object_add(q, "refused", json_object_new_int64((int64_t) c.refused));
                json_object_object_add(q, "dropped", json_object_new_int64((int64_t) c.dropped));
                json_object_object_add(o, "dns_queries", q);
        }
        json_object *sni = egress_sni_state_json(n->eg ? n->eg->sni : NULL, n);
        if (sni)
                json_object_object_add(o, "sni", sni);
        return o;
}

/* Every slot's connections, in one dump, at most once an iteration of the loop: a list with
 * usage, or a scrape, asks for one sandbox after the other. */
static int connections_counted(Context *m, Egress *e) {
        uint64_t iteration = 0;

        if (m->event && sd_event_get_iteration(m->event, &iteration) >= 0 && e->conn_counted && iteration == e->conn_iteration)
                return e->conn_r;
        if (!e->conn_counts && !(e->conn_counts = calloc(e->n_slots, sizeof(unsigned))))
                return -ENOMEM;
        e->conn_r = conntrack_count_by_mark(EGRESS_CT_MARK, ~((EGRESS_SLOTS_MAX - 1) | EGRESS_CT_FLAGS), EGRESS_SLOTS_MAX - 1,
                                            e->conn_counts, e->n_slots);
        e->conn_iteration = iteration;
        e->conn_counted = m->event != NULL;
        return e->conn_r;
}

int egress_connections(Context *m, const SandboxNet *n) {
        Egress *e = m->egress;
        int r;

        if (!e || !n->egress || !n->attached || n->eg != e || n->slot >= e->n_slots)
                return -ENOTCONN;
        r = connections_counted(m, e);
        return r < 0 ? r : (int) e->conn_counts[n->slot];
}

static json_object *name_resolved_json(const DnsRelayName *rn) {
        json_object *o = json_object_new_object(), *addrs = json_object_new_array();
        char a[32];

        for (unsigned k = 0; k < rn->n_addrs; k++)
                json_object_array_add(addrs, json_object_new_string(ipv4_prefix_format(a, sizeof(a), rn->addrs[k], 32)));
        json_object_object_add(o, "name", json_object_new_string(rn->name));
        json_object_object_add(o, "addresses", addrs);
        json_object_object_add(o, "at", json_object_new_int64((int64_t) rn->at));
        return o;
}

json_object *egress_live_json(Context *m, const SandboxNet *n) {
        json_object *o = egress_state_json(n), *names;
        const DnsRelayName *rn;
        int k;

        if (!n->egress || !n->attached)
                return o;
        k = egress_connections(m, n);
        json_object_object_add(o, "connections", k < 0 ? NULL : json_object_new_int(k));
        names = json_object_new_array();
        for (size_t i = 0; (rn = dns_relay_name(n->dns, i)); i++)
                json_object_array_add(names, name_resolved_json(rn));
        json_object_object_add(o, "names_resolved", names);
        return o;
}

/* ---- the rules ---- */

EgressRulesConfig egress_rules_config(Context *m) {
        const Egress *e = m->egress;

        return (EgressRulesConfig) { .range_addr = e->range_addr, .range_len = e->range_len, .deny = e->deny,
                                     .n_deny = e->n_deny, .connections = m->config.egress_connections,
                                     .connection_rate = m->config.egress_connection_rate };
}

/* Every IPv4 address of the host's interfaces, ours aside (they are in egress_range). */
static void host_addresses_text(NftText *t) {
        struct ifaddrs *ifa = NULL;
        unsigned n = 0;

        nft_text_add(t, "flush set " EGRESS_TABLE " host\n");
        if (getifaddrs(&ifa) < 0)
                return;
        for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
                char a[INET_ADDRSTRLEN];
                if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
                    strncmp(i->ifa_name, VETH_PREFIX, strlen(VETH_PREFIX)) == 0)
                        continue;
                inet_ntop(AF_INET, &((struct sockaddr_in *) i->ifa_addr)->sin_addr, a, sizeof(a));
                nft_text_add(t, "%s%s", n++ ? ", " : "add element " EGRESS_TABLE " host { ", a);
        }
        if (n)
                nft_text_add(t, " }\n");
        freeifaddrs(ifa);
}

/* The host's end of the sandbox's veth pair: sx-<id without "sbx-">. */
static void ifname_of(char buf[static IFNAMSIZ], const char *id) {
        snprintf(buf, IFNAMSIZ, VETH_PREFIX "%s", id + 4);
}

static void chain_name(char *buf, size_t size, const char *id) {
        snprintf(buf, size, "sx_%s", id + 4);
}

int egress_nft_apply(Egress *e, NftText *t, char **ret_error) {
        _cleanup_free_ char *msg = NULL;
        int r;

        if (t->failed)
                return -ENOMEM;
        r = nftables_run(e->nft, t->data, &msg);
        if (r < 0) {
                /* A batch is all or nothing. One that met another commit (a teardown's, in its
                 * child: the kernel takes them one at a time) may have found the ruleset changed
                 * under it; once more, then the error is the answer. */
                free(msg);
                msg = NULL;
                r = nftables_run(e->nft, t->data, &msg);
        }
        if (r < 0 && ret_error)
                *ret_error = msg ? strdup(msg) : NULL;
        return r;
}

static int take_slot(Egress *e, unsigned *ret) {
        for (unsigned i = 0; i < e->n_slots; i++)
                if (!e->slots[i]) {
                        e->slots[i] = 1;
                        e->n_taken++;
                        *ret = i;
                        return 0;
                }
        return -EADDRNOTAVAIL;
}

void egress_give_slot(Egress *e, unsigned slot) {
        if (slot < e->n_slots && e->slots[slot]) {
                e->slots[slot] = 0;
                e->n_taken--;
        }
}

int egress_attach_fail(char **ret_error, int r, const char *fmt, ...) {
        va_list ap;

        if (ret_error && !*ret_error) {
                va_start(ap, fmt);
                if (vasprintf(ret_error, fmt, ap) < 0)
                        *ret_error = NULL;
                va_end(ap);
        }
        return r;
}

/* The addresses a set of ours holds now (what the relay answered for its name), each with the
 * time it has left: how many, at most max; 0 when there is no such set. */
size_t egress_set_elements(Egress *e, const char *chain, unsigned i, NftElement *out, size_t max) {
        _cleanup_free_ char *listing = NULL, *msg = NULL;
        char cmd[96];

        snprintf(cmd, sizeof(cmd), "list set " EGRESS_TABLE " %s_%u\n", chain, i);
        if (nftables_list(e->nft, cmd, &listing, &msg) < 0)
                return 0;
        return nft_set_elements_parse(listing, out, max);
}

/* What an earlier daemon's set of a name held (the addresses its relay had answered), each with
 * the time it had left, as elements of our table's set of it: a sandbox taken back running keeps
 * reaching what it resolved, as its open connections go on. Nothing when there is no such set. */
static void kept_elements_text(Egress *e, NftText *t, const char *chain, unsigned i) {
        _cleanup_free_ NftElement *el = calloc(EGRESS_NAME_ADDRS_MAX, sizeof(NftElement));

        if (el)
                egress_rules_elements(t, chain, i, el, egress_set_elements(e, chain, i, el, EGRESS_NAME_ADDRS_MAX));
}

/* Our table when it is not made yet (it replaces an earlier daemon's in the same commit), the
 * host's addresses, and the chains of the sandboxes taken back running that it lacks, with what
 * the earlier table's sets of their names held. */
static void rules_text(Context *m, NftText *t) {
        Egress *e = m->egress;

        EgressRulesConfig c = egress_rules_config(m);

        if (!e->table_made)
                egress_rules_table(t, &c);
        host_addresses_text(t);
        for (size_t i = 0; i < e->n_pending; i++) {
                const SandboxNet *n = e->pending[i].net;
                char chain[32];

                chain_name(chain, sizeof(chain), e->pending[i].id);
                egress_rules_sandbox(t, &c, n, chain);
                for (unsigned k = 0; k < n->n_allow; k++)
                        if (n->allow[k].name && !e->table_made)
                                kept_elements_text(e, t, chain, k);
        }
}

static int attach_rules(Egress *e, Context *m, SandboxNet *n, const char *id, char **ret_error) {
        _cleanup_free_ char *msg = NULL;
        EgressRulesConfig c = egress_rules_config(m);
        NftText t = {};
        int r;

        rules_text(m, &t);
        egress_rules_sandbox(&t, &c, n, n->chain);
        r = egress_nft_apply(e, &t, &msg);
        free(t.data);
        if (r < 0)
                return egress_attach_fail(ret_error, r, "nftables refused the sandbox's rules: %s", msg ? msg : strerror(-r));
        e->table_made = true;
        e->n_pending = 0;
        return 0;
}

/* The relay's policy for a sandbox whose list names hosts: is the question's name on it. */
static bool relay_listed(void *userdata, const DnsQuestion *q) {
        const SandboxNet *n = userdata;

        for (unsigned i = 0; i < n->n_allow; i++)
                if (n->allow[i].name && dns_name_matches(n->names[i], q->name))
                        return true;
        return false;
}

static uint32_t ttl_clamp(uint32_t ttl) {
        return ttl < EGRESS_NAME_TTL_MIN ? EGRESS_NAME_TTL_MIN : ttl > EGRESS_NAME_TTL_MAX ? EGRESS_NAME_TTL_MAX : ttl;
}

/* Whether the relay's last commit of addr into set i keeps it there until at least until, within
 * a TTL's unit (a second: a resolver that counts a TTL down gives whole seconds, rounded down). */
static bool learned_holds(const SandboxNet *n, unsigned i, uint32_t addr, uint64_t until) {
        for (unsigned k = 0; k < n->n_learned; k++)
                if (n->learned[k].set == i && n->learned[k].addr == addr)
                        return n->learned[k].until + UINT64_C(1000000) >= until;
        return false;
}

/* Committed: remembered (the entry of the same address and set replaced, else the one that ends
 * first when full). */
static void learned_put(SandboxNet *n, unsigned i, uint32_t addr, uint64_t until) {
        unsigned at = n->n_learned;

        for (unsigned k = 0; k < n->n_learned; k++)
                if (n->learned[k].set == i && n->learned[k].addr == addr) {
                        at = k;
                        break;
                }
        if (at == EGRESS_LEARNED_MAX) {
                at = 0;
                for (unsigned k = 1; k < n->n_learned; k++)
                        if (n->learned[k].until < n->learned[at].until)
                                at = k;
        } else if (at == n->n_learned)
                n->n_learned++;
        n->learned[at] = (EgressLearned) { .until = until, .addr = addr, .set = (uint8_t) i };
}

/* An answer's addresses into the sets of every name on the list that the question matches,
 * before the relay lets the answer go; one that our last commit keeps there for as long as the
 * answer's TTL (clamped) or longer is left as it is (a caching resolver counts a TTL down, so a
 * name asked again is most often one of these): no commit at all when none is new. What is
 * committed is remembered as it is written; a commit that fails forgets all of it (the next
 * answers commit again). */
static int relay_learn(void *userdata, const DnsQuestion *q, const uint32_t *addrs, const uint32_t *ttls, size_t count) {
        SandboxNet *n = userdata;
        _cleanup_free_ char *msg = NULL;
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        NftText t = {};
        int r;

        for (unsigned i = 0; i < n->n_allow; i++)
                if (n->allow[i].name && dns_name_matches(n->names[i], q->name))
                        for (size_t k = 0; k < count; k++) {
                                uint32_t ttl = ttl_clamp(ttls[k]);
                                uint64_t until = now + ttl * UINT64_C(1000000);
                                if (learned_holds(n, i, addrs[k], until))
                                        continue;
                                egress_rules_learn(&t, n->chain, i, addrs[k], ttl);
                                learned_put(n, i, addrs[k], until);
                        }
        if (!t.data)
                return 0;
        r = egress_nft_apply(n->eg, &t, &msg);
        free(t.data);
        if (r < 0) {
                n->n_learned = 0;
                log_warning("egress: %s: cannot add the addresses of %s to its sets (%s): answered SERVFAIL", n->ifname,
                            q->name, msg ? msg : strerror(-r));
        }
        return r;
}

/* Every name is relayed for "all" or a list of addresses only (a name may resolve; reaching it
 * is the list's); with names on the list, or an empty list, only the listed names are. */
DnsRelayPolicy egress_relay_policy(SandboxNet *n) {
        if (n->all || (n->n_allow > 0 && n->n_names == 0))
                return (DnsRelayPolicy) { .uid = n->uid };
        return (DnsRelayPolicy) { .uid = n->uid, .listed = relay_listed, .learn = relay_learn, .userdata = n };
}

static int attach_dns(Context *m, Egress *e, SandboxNet *n, int netns_fd) {
        DnsRelayPolicy policy = egress_relay_policy(n);
        int fd, r;

        if (!e->dns.sin_family)
                return 0; /* no resolver known: names do not resolve, addresses still work */
        r = veth_udp_socket_in(netns_fd, e->home_fd, inet_addr(DNS_RELAY_ADDR), htons(53), &fd);
        if (r < 0)
                return r;
        return dns_relay_new(m->event, fd, &e->dns, &policy, &n->dns);
}

int egress_attach(Context *m, SandboxNet *n, const char *id, int netns_fd, char **ret_error) {
        Egress *e = m->egress;
        uint32_t net;
        int r;

        if (ret_error)
                *ret_error = NULL;
        if (!e || !e->available)
                return egress_attach_fail(ret_error, -EOPNOTSUPP, "egress cannot be given on this host: %s",
                                   e && e->reason ? e->reason : "not set up");
        if ((r = write_resolv(e, m->config.state_dir)) < 0)
                return egress_attach_fail(ret_error, r, "cannot write %s/" EGRESS_RESOLV ": %s", m->config.state_dir, strerror(-r));
        if ((r = take_slot(e, &n->slot)) < 0)
                return egress_attach_fail(ret_error, r, "every address of egress_range is taken");
        net = e->range_addr + 4 * n->slot;
        n->host_addr = net + 1;
        n->addr = net + 2;
        ifname_of(n->ifname, id);
        chain_name(n->chain, sizeof(n->chain), id);
        n->eg = e;
        /* An earlier daemon's interface of the same name (its sandbox's init is new): removed. */
        VethFound *f = found_get(e, n->ifname);
        if (f)
                found_remove(e, f);
        n->attached = true; /* from here egress_detach() undoes what was done */
        /* The table its rules send to, before them. */
        if (egress_spec_has_sni(n) && (r = egress_sni_watch(e->sni, n)) < 0) {
                egress_attach_fail(ret_error, r, "cannot make the table " EGRESS_SNI_TABLE " that checks names on SNI: %s",
                            strerror(-r));
                goto fail;
        }
        if ((r = attach_rules(e, m, n, id, ret_error)) < 0)
                goto fail;
        r = veth_create(&(VethSpec) { .host_name = n->ifname, .netns_fd = netns_fd, .home_fd = e->home_fd,
                                      .host_addr = htonl(n->host_addr), .sandbox_addr = htonl(n->addr), .prefix_len = 30 });
        if (r < 0) {
                egress_attach_fail(ret_error, r, "cannot make the sandbox's interface (veth %s): %s%s", n->ifname, strerror(-r),
                            r == -EOPNOTSUPP ? " (is the veth module loaded?)" : "");
                egress_detach_now(m, n);
                return r;
        }
        if ((r = attach_dns(m, e, n, netns_fd)) < 0) {
                egress_attach_fail(ret_error, r, "cannot set up the sandbox's resolver: %s", strerror(-r));
                goto fail;
        }
        return 0;
fail:
        egress_detach_now(m, n);
        return r;
}

/* The init's network namespace, checked to be its (the pid was not reused) through its pidfd. */
static int init_netns(pid_t pid, int pidfd) {
        char path[64];
        int fd;

        snprintf(path, sizeof(path), "/proc/%d/ns/net", (int) pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0) {
                close(fd);
                return -ESRCH;
        }
        return fd;
}

int egress_adopt(Context *m, SandboxNet *n, const char *id, pid_t init_pid, int init_pidfd, char **ret_error) {
        Egress *e = m->egress;
        _cleanup_close_ int netns_fd = -EBADF;
        char ifname[IFNAMSIZ];
        struct Pending *p;
        VethFound *f;
        unsigned slot;
        int r;

        if (ret_error)
                *ret_error = NULL;
        if (!e || !e->available)
                return egress_attach_fail(ret_error, -EOPNOTSUPP, "egress cannot be given on this host: %s",
                                   e && e->reason ? e->reason : "not set up");
        netns_fd = init_netns(init_pid, init_pidfd);
        if (netns_fd < 0)
                return egress_attach_fail(ret_error, netns_fd, "cannot open its init's network namespace: %s", strerror(-netns_fd));
        ifname_of(ifname, id);
        f = found_get(e, ifname);
        if (!f || !found_slot(e, f, &slot))
                /* Gone, or from another egress_range: a new one, into the same namespace. */
                return egress_attach(m, n, id, netns_fd, ret_error);
        p = realloc(e->pending, (e->n_pending + 1) * sizeof(*p));
        if (!p)
                return egress_attach_fail(ret_error, -ENOMEM, "out of memory");
        e->pending = p;
        f->claimed = true; /* its slot was taken at the start */
        n->slot = slot;
        n->host_addr = f->host_addr;
        n->addr = f->host_addr + 1;
        memcpy(n->ifname, ifname, sizeof(ifname));
        chain_name(n->chain, sizeof(n->chain), id);
        n->eg = e;
        n->attached = true;
        p = &e->pending[e->n_pending++];
        p->net = n;
        snprintf(p->id, sizeof(p->id), "%s", id);
        /* The earlier daemon's resolver socket went with it. */
        r = attach_dns(m, e, n, netns_fd);
        if (r < 0)
                log_warning_errno(r, "egress: sandbox %s: cannot bind its resolver again: %m; names do not resolve in it", id);
        if (egress_spec_has_sni(n) && egress_sni_watch(e->sni, n) < 0)
                log_warning("egress: sandbox %s: its names matched on SNI are not reached (out of memory, or the table "
                            EGRESS_SNI_TABLE " cannot be made)", id);
        return 0;
}

void egress_restored(Context *m) {
        Egress *e = m->egress;
        _cleanup_free_ char *msg = NULL;
        unsigned removed = 0;
        NftText t = {};
        int r = 0;

        if (!e)
                return;
        if (e->n_pending && e->available) {
                rules_text(m, &t);
                r = egress_nft_apply(e, &t, &msg);
                free(t.data);
                if (r >= 0) {
                        e->table_made = true;
                        log_info("egress: %zu sandbox(es) taken back running have their interfaces and rules", e->n_pending);
                } else
                        for (size_t i = 0; i < e->n_pending; i++) {
                                log_warning("egress: sandbox %s: nftables refused its rules again (%s): it has no way "
                                            "out until its init is restarted", e->pending[i].id, msg ? msg : strerror(-r));
                                egress_detach_now(m, e->pending[i].net);
                        }
                e->n_pending = 0;
        } else if (e->old_table && !e->table_made && e->nft) {
                r = nftables_run(e->nft, "delete table " EGRESS_TABLE "\n", NULL);
                if (r >= 0)
                        log_info("egress: removed the nftables table an earlier daemon left");
        }
        e->old_table = false;
        for (size_t i = 0; i < e->n_found; i++)
                if (!e->found[i].claimed) {
                        found_remove(e, &e->found[i]);
                        removed++;
                }
        if (removed)
                log_info("egress: removed %u interface(s) an earlier daemon left", removed);
        free(e->found);
        e->found = NULL;
        e->n_found = 0;
        egress_sni_restored(e->sni);
}

void egress_keep(Context *m, SandboxNet *n) {
        Egress *e = m->egress;

        if (!n->attached || !e)
                return;
        n->dns = dns_relay_free(n->dns);
        egress_sni_keep(e->sni, n);
        n->attached = false;
        e->n_kept++;
}

int egress_resolv_tree(Context *m) {
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC };
        int fd;

        if (!m->egress || !m->egress->resolv_path)
                return -ENOENT;
        fd = open_tree(AT_FDCWD, m->egress->resolv_path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}
