/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A request's "network", parsed and given back (egress-spec.h). */
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dns-message.h"
#include "egress-spec.h"
#include "util.h"

bool egress_spec_has_sni(const SandboxNet *n) {
        for (unsigned i = 0; i < n->n_allow; i++)
                if (n->allow[i].sni)
                        return true;
        return false;
}

/* ---- an entry given as an object (match sni) ---- */

static int entry_name(json_object *v, const char *field, char *name, ProtoError *err) {
        size_t len = v && json_object_is_type(v, json_type_string) ? (size_t) json_object_get_string_len(v) : 0;
        const char *s = len ? json_object_get_string(v) : NULL;

        if (!s || len > EGRESS_ENTRY_MAX || strlen(s) != len)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field, "'%s' must be a host name of 1-%d characters",
                                       field, EGRESS_ENTRY_MAX);
        for (size_t i = 0; i <= len; i++)
                name[i] = (char) tolower((unsigned char) s[i]);
        if (!dns_pattern_valid(name))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                       "'%s' is not a host name (letters, digits, '-', '_'; two labels at least) or "
                                       "'*.' and one (every name below it, not itself); addresses are given as strings", s);
        return 0;
}

static int entry_field(json_object *v, const char *key, const char *field, EgressRule *r, ProtoError *err) {
        char f[64];

        snprintf(f, sizeof(f), "%s.%s", field, key);
        if (strcmp(key, "port") == 0) {
                int64_t p = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : 0;
                if (p < 1 || p > 65535)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, f, "'%s' must be a number 1-65535", f);
                r->port = (uint16_t) p;
        } else if (strcmp(key, "proto") == 0) {
                const char *p = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
                if (strcmp(p, "tcp") != 0 && strcmp(p, "udp") != 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, f, "'%s' must be \"tcp\" or \"udp\"", f);
                r->proto = p[0] == 't' ? IPPROTO_TCP : IPPROTO_UDP;
        } else if (strcmp(key, "match") == 0) {
                const char *p = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
                if (strcmp(p, "sni") != 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, f,
                                               "'%s' must be \"sni\" (the name a TLS ClientHello or HTTP/1 Host asks "
                                               "for), or left out", f);
                r->sni = true;
        } else if (strcmp(key, "name") != 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, f,
                                       "unknown field '%s' (an entry has 'name', 'port', 'proto', 'match')", f);
        return 0;
}

/* An allow entry given as an object: {"name": NAME, "port": N, "proto": "tcp"|"udp", "match":
 * "sni"}, name required. Errors name the field (network.egress.allow[2].match). */
static int sni_entry_parse(json_object *v, const char *field, EgressRule *r, char *name, ProtoError *err) {
        char f[64];
        int k;

        *r = (EgressRule) { .name = true };
        snprintf(f, sizeof(f), "%s.name", field);
        if ((k = entry_name(json_object_object_get(v, "name"), f, name, err)) < 0)
                return k;
        json_object_object_foreach(v, key, val)
                if ((k = entry_field(val, key, field, r, err)) < 0)
                        return k;
        snprintf(f, sizeof(f), "%s.proto", field);
        if (r->sni && r->proto == IPPROTO_UDP)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, f,
                                       "'%s' is \"udp\", but match \"sni\" is for TCP (QUIC's name is encrypted)", f);
        if (r->proto && !r->port)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, f, "'%s' needs a 'port'", f);
        if (r->sni)
                r->proto = IPPROTO_TCP;
        return 0;
}

/* An entry as egress_spec_json() gives it back: the object form, for match sni. */
static json_object *sni_entry_json(const EgressRule *r, const char *name) {
        json_object *o = json_object_new_object();

        json_object_object_add(o, "name", json_object_new_string(name));
        if (r->port)
                json_object_object_add(o, "port", json_object_new_int(r->port));
        json_object_object_add(o, "match", json_object_new_string("sni"));
        return o;
}

/* ---- "network" ---- */

static bool rule_within(const EgressRule *r, const EgressRule *d) {
        return r->len >= d->len && ((r->addr ^ d->addr) & ipv4_mask(d->len)) == 0;
}

/* "PORT" or "PORT/tcp" or "PORT/udp". */
static int parse_port(const char *s, EgressRule *r) {
        unsigned long v;
        char *end;

        if (!isdigit((unsigned char) s[0]) || (s[0] == '0'))
                return -EINVAL;
        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno || v == 0 || v > 65535)
                return -EINVAL;
        r->port = (uint16_t) v;
        if (*end == '\0')
                return 0;
        if (strcmp(end, "/tcp") == 0)
                r->proto = IPPROTO_TCP;
        else if (strcmp(end, "/udp") == 0)
                r->proto = IPPROTO_UDP;
        else
                return -EINVAL;
        return 0;
}

/* A name, or "*." and a name, with the port part as for an address, into r and name (lower case). */
static int parse_name_entry(const char *s, size_t nlen, const char *colon, const char *field, EgressRule *r, char *name,
                            ProtoError *err) {
        for (size_t i = 0; i < nlen; i++)
                name[i] = (char) tolower((unsigned char) s[i]);
        name[nlen] = '\0';
        if (!dns_pattern_valid(name))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                       "'%s' is not a host name (letters, digits, '-', '_'; two labels at least) or "
                                       "'*.' and one (every name below it, not itself)", s);
        r->name = true;
        if (colon && parse_port(colon + 1, r) < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field, "'%s': the port must be 1-65535, optionally "
                                       "followed by /tcp or /udp", s);
        return 0;
}

static int parse_entry(const EgressSpecLimits *lim, const char *s, const char *field, EgressRule *r, char *name, ProtoError *err) {
        const char *colon = strchr(s, ':');
        size_t alen = colon ? (size_t) (colon - s) : strlen(s);
        unsigned len;
        int k;

        *r = (EgressRule) {};
        if (colon && strchr(colon + 1, ':'))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                       "'%s' is IPv6 (or malformed): a sandbox's way out is IPv4 only", s);
        for (size_t i = 0; i < alen; i++)
                if (isalpha((unsigned char) s[i]) || s[i] == '*' || s[i] == '_')
                        return parse_name_entry(s, alen, colon, field, r, name, err);
        k = ipv4_prefix_parse(s, alen, &r->addr, &len);
        if (k == -EDOM)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                       "'%s' has bits set below its prefix length (the prefix is %.*s's network)", s,
                                       (int) alen, s);
        if (k < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field,
                                       "'%s' is not ADDRESS[/LEN][:PORT[/tcp|/udp]] (an IPv4 address, dotted quad)", s);
        r->len = (uint8_t) len;
        if (colon && parse_port(colon + 1, r) < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, field, "'%s': the port must be 1-65535, optionally "
                                       "followed by /tcp or /udp", s);
        for (unsigned i = 0; i < lim->n_deny; i++)
                if (rule_within(r, &lim->deny[i])) {
                        char p[32];
                        return proto_error_set(err, SBX_E_PERMISSION_DENIED, field,
                                               "'%s' is within %s, which no sandbox reaches (egress_deny, egress_range)", s,
                                               ipv4_prefix_format(p, sizeof(p), lim->deny[i].addr, lim->deny[i].len));
                }
        return 0;
}

/* {"name": ..., "match": "sni", ...} (egress-sni.h). */
static int parse_object_entry(const EgressSpecLimits *lim, json_object *v, const char *field, SandboxNet *n, ProtoError *err) {
        EgressRule *r = &n->allow[n->n_allow];
        int k;

        k = sni_entry_parse(v, field, r, n->names[n->n_allow], err);
        if (k < 0)
                return k;
        if (r->sni && !lim->sni)
                return proto_error_set(err, SBX_E_LIMIT_UNENFORCEABLE, field,
                                       "'%s' asks for \"match\": \"sni\", but this daemon cannot check names (hello's "
                                       "capabilities.egress.sni_reason says why)", field);
        n->n_names++;
        n->n_allow++;
        return 0;
}

static int parse_allow(const EgressSpecLimits *lim, json_object *allow, SandboxNet *n, ProtoError *err) {
        size_t count;

        if (!allow || !json_object_is_type(allow, json_type_array))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "network.egress.allow",
                                       "'network.egress.allow' must be an array of \"CIDR[:PORT]\" strings");
        count = json_object_array_length(allow);
        if (count > EGRESS_ALLOW_MAX)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "network.egress.allow",
                                       "'network.egress.allow' must have at most %d entries", EGRESS_ALLOW_MAX);
        for (size_t i = 0; i < count; i++) {
                json_object *v = json_object_array_get_idx(allow, i);
                char field[48];
                const char *s;
                int r;

                snprintf(field, sizeof(field), "network.egress.allow[%zu]", i);
                if (json_object_is_type(v, json_type_object)) {
                        if ((r = parse_object_entry(lim, v, field, n, err)) < 0)
                                return r;
                        continue;
                }
                if (!json_object_is_type(v, json_type_string) || json_object_get_string_len(v) == 0 ||
                    json_object_get_string_len(v) > EGRESS_ENTRY_MAX)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, field, "'%s' must be a string of 1-%d characters",
                                               field, EGRESS_ENTRY_MAX);
                s = json_object_get_string(v);
                if (strlen(s) != (size_t) json_object_get_string_len(v))
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, field, "'%s' holds a NUL", field);
                if ((r = parse_entry(lim, s, field, &n->allow[n->n_allow], n->names[n->n_allow], err)) < 0)
                        return r;
                n->n_names += n->allow[n->n_allow].name;
                n->n_allow++;
        }
        return 0;
}

static int only_key(json_object *o, const char *key, const char *prefix, ProtoError *err) {
        json_object_object_foreach(o, k, v) {
                (void) v;
                if (strcmp(k, key) != 0)
                        return proto_error_set(err, SBX_E_INVALID_REQUEST, prefix, "unknown field '%s.%.64s' (only '%s')",
                                               prefix, k, key);
        }
        return 0;
}

int egress_spec_parse(const EgressSpecLimits *lim, json_object *v, SandboxNet *ret, ProtoError *err) {
        json_object *eg;
        int r;

        *ret = (SandboxNet) {};
        if (!v || json_object_is_type(v, json_type_null) ||
            (json_object_is_type(v, json_type_string) && strcmp(json_object_get_string(v), "none") == 0))
                return 0;
        if (!json_object_is_type(v, json_type_object) || !json_object_object_get_ex(v, "egress", &eg))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "network",
                                       "'network' must be \"none\" (loopback only, the default), {\"egress\": \"all\"} "
                                       "or {\"egress\": {\"allow\": [\"CIDR[:PORT]\", ...]}}");
        if ((r = only_key(v, "egress", "network", err)) < 0)
                return r;
        if (!lim->available)
                return proto_error_set(err, SBX_E_LIMIT_UNENFORCEABLE, "network", "egress is not set up in this daemon");
        ret->egress = true;
        if (json_object_is_type(eg, json_type_string) && strcmp(json_object_get_string(eg), "all") == 0) {
                ret->all = true;
                return 0;
        }
        if (!json_object_is_type(eg, json_type_object))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "network.egress",
                                       "'network.egress' must be \"all\" or {\"allow\": [...]}");
        if ((r = only_key(eg, "allow", "network.egress", err)) < 0)
                return r;
        return parse_allow(lim, json_object_object_get(eg, "allow"), ret, err);
}

static const char *rule_format(char *buf, size_t size, const EgressRule *r, const char *name) {
        char p[32];
        const char *host = r->name ? name : ipv4_prefix_format(p, sizeof(p), r->addr, r->len);

        if (!r->port)
                snprintf(buf, size, "%s", host);
        else
                snprintf(buf, size, "%s:%u%s", host, r->port, r->proto == IPPROTO_TCP ? "/tcp" : r->proto == IPPROTO_UDP ? "/udp" : "");
        return buf;
}

json_object *egress_spec_json(const SandboxNet *n) {
        json_object *o, *allow;

        if (!n->egress)
                return json_object_new_string("none");
        o = json_object_new_object();
        if (n->all) {
                json_object_object_add(o, "egress", json_object_new_string("all"));
                return o;
        }
        allow = json_object_new_array();
        for (unsigned i = 0; i < n->n_allow; i++) {
                char b[EGRESS_ENTRY_MAX + 16];
                json_object_array_add(allow, n->allow[i].sni ? sni_entry_json(&n->allow[i], n->names[i])
                                                             : json_object_new_string(rule_format(b, sizeof(b), &n->allow[i], n->names[i])));
        }
        json_object *eg = json_object_new_object();
        json_object_object_add(eg, "allow", allow);
        json_object_object_add(o, "egress", eg);
        return o;
}

