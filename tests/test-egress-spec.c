/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A request's "network" (daemon/sandbox/egress-spec.c), without a daemon: what each form parses
 * to, what is given back (and parses again to the same), and each refusal naming its field. */
#include <json-c/json.h>
#include <netinet/in.h>
#include <string.h>

#include "egress-spec.h"
#include "tap.h"

static const EgressRule deny[] = {
        { .addr = 0x0a000000, .len = 8 },   /* 10.0.0.0/8 */
        { .addr = 0xa9fe0000, .len = 16 },  /* 169.254.0.0/16 */
};
static const EgressSpecLimits lim = { .available = true, .sni = true, .deny = deny, .n_deny = 2 };

static int parse_text(const EgressSpecLimits *l, const char *text, SandboxNet *n, ProtoError *err) {
        json_object *v = text ? json_tokener_parse(text) : NULL;
        int r;

        memset(err, 0, sizeof(*err));
        r = egress_spec_parse(l, v, n, err);
        json_object_put(v);
        return r;
}

/* The refusal of text: its code and field, and a word of its message. */
static void refused(const EgressSpecLimits *l, const char *text, SbxErrorCode code, const char *field, const char *word) {
        static SandboxNet n;
        ProtoError err;

        ok(parse_text(l, text, &n, &err) < 0, "refused: %s", text);
        is_int(err.code, code, "... with code %d", code);
        is_str(err.field, field, "... naming %s", field);
        ok(strstr(err.message, word) != NULL, "... saying '%s' (%s)", word, err.message);
}

int main(void) {
        static SandboxNet n, again;
        ProtoError err;
        json_object *back;

        /* None. */
        is_int(parse_text(&lim, NULL, &n, &err), 0, "no network: parsed");
        ok(!n.egress, "... to none");
        is_int(parse_text(&lim, "\"none\"", &n, &err), 0, "\"none\": parsed");
        ok(!n.egress, "... to none");
        back = egress_spec_json(&n);
        is_str(json_object_to_json_string(back), "\"none\"", "... and given back as \"none\"");
        json_object_put(back);

        /* All. */
        is_int(parse_text(&lim, "{\"egress\":\"all\"}", &n, &err), 0, "{\"egress\":\"all\"}: parsed");
        ok(n.egress && n.all && n.n_allow == 0, "... to every destination");

        /* A list of every kind of entry. */
        const char *list = "{\"egress\":{\"allow\":[\"203.0.113.0/24\",\"198.51.100.7:443/tcp\",\"198.51.100.8:53/udp\","
                           "\"Pypi.ORG\",\"*.github.com:443\",{\"name\":\"Good.test\",\"match\":\"sni\"},"
                           "{\"name\":\"cdn.test\",\"port\":8443,\"match\":\"sni\"},{\"name\":\"other.test\",\"port\":8080,\"proto\":\"tcp\"}]}}";
        is_int(parse_text(&lim, list, &n, &err), 0, "a list of addresses, ports, names, wildcards and match-sni entries");
        is_int(n.n_allow, 8, "... 8 entries");
        is_int(n.n_names, 5, "... 5 of them names");
        ok(!n.allow[0].name && n.allow[0].addr == 0xcb007100 && n.allow[0].len == 24 && !n.allow[0].port,
           "... 203.0.113.0/24: a prefix, every port");
        ok(n.allow[1].addr == 0xc6336407 && n.allow[1].len == 32 && n.allow[1].port == 443 && n.allow[1].proto == IPPROTO_TCP,
           "... 198.51.100.7:443/tcp: one address, one port, TCP");
        ok(n.allow[2].proto == IPPROTO_UDP && n.allow[2].port == 53, "... :53/udp: UDP");
        ok(n.allow[3].name && !n.allow[3].port, "... a name, every port");
        is_str(n.names[3], "pypi.org", "... in lower case");
        is_str(n.names[4], "*.github.com", "... a wildcard");
        ok(n.allow[4].port == 443 && !n.allow[4].proto, "... :443 without a protocol: TCP and UDP");
        ok(n.allow[5].sni && n.allow[5].proto == IPPROTO_TCP && !n.allow[5].port, "... match sni: TCP, 80 and 443");
        ok(n.allow[6].sni && n.allow[6].port == 8443, "... match sni on a port of its own");
        ok(!n.allow[7].sni && n.allow[7].port == 8080 && n.allow[7].proto == IPPROTO_TCP, "... an object without match");
        ok(egress_spec_has_sni(&n), "... has an entry matched on SNI");
        back = egress_spec_json(&n);
        is_str(json_object_to_json_string_ext(back, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
               "{\"egress\":{\"allow\":[\"203.0.113.0/24\",\"198.51.100.7:443/tcp\",\"198.51.100.8:53/udp\",\"pypi.org\","
               "\"*.github.com:443\",{\"name\":\"good.test\",\"match\":\"sni\"},{\"name\":\"cdn.test\",\"port\":8443,"
               "\"match\":\"sni\"},\"other.test:8080/tcp\"]}}",
               "given back: strings, and objects for match sni only");
        is_int(parse_text(&lim, json_object_to_json_string(back), &again, &err), 0, "... which parses again");
        ok(memcmp(again.allow, n.allow, sizeof(n.allow)) == 0 && memcmp(again.names, n.names, sizeof(n.names)) == 0 &&
           again.n_allow == n.n_allow && again.n_names == n.n_names, "... to the same spec");
        json_object_put(back);
        is_int(parse_text(&lim, "{\"egress\":{\"allow\":[]}}", &n, &err), 0, "an empty list: parsed");
        ok(n.egress && !n.all && n.n_allow == 0 && !egress_spec_has_sni(&n), "... to nothing but the sandbox's own relay");

        /* Refusals. */
        refused(&lim, "\"all\"", SBX_E_INVALID_REQUEST, "network", "must be");
        refused(&lim, "{\"egress\":\"all\",\"x\":1}", SBX_E_INVALID_REQUEST, "network", "unknown field");
        refused(&lim, "{\"egress\":7}", SBX_E_INVALID_REQUEST, "network.egress", "must be");
        refused(&lim, "{\"egress\":{\"allow\":[],\"deny\":[]}}", SBX_E_INVALID_REQUEST, "network.egress", "unknown field");
        refused(&lim, "{\"egress\":{\"allow\":\"1.2.3.4\"}}", SBX_E_INVALID_REQUEST, "network.egress.allow", "array");
        refused(&lim, "{\"egress\":{\"allow\":[\"2001:db8::1\"]}}", SBX_E_INVALID_REQUEST, "network.egress.allow[0]", "IPv6");
        refused(&lim, "{\"egress\":{\"allow\":[\"1.2.3.4\",\"203.0.113.1/24\"]}}", SBX_E_INVALID_REQUEST,
                "network.egress.allow[1]", "below its prefix");
        refused(&lim, "{\"egress\":{\"allow\":[\"1.2.3.4:0\"]}}", SBX_E_INVALID_REQUEST, "network.egress.allow[0]", "1-65535");
        refused(&lim, "{\"egress\":{\"allow\":[\"1.2.3.4:53/sctp\"]}}", SBX_E_INVALID_REQUEST, "network.egress.allow[0]", "/udp");
        refused(&lim, "{\"egress\":{\"allow\":[\"1.2.3\"]}}", SBX_E_INVALID_REQUEST, "network.egress.allow[0]", "IPv4");
        refused(&lim, "{\"egress\":{\"allow\":[\"10.1.0.0/16\"]}}", SBX_E_PERMISSION_DENIED, "network.egress.allow[0]",
                "10.0.0.0/8");
        refused(&lim, "{\"egress\":{\"allow\":[\"169.254.169.254:80\"]}}", SBX_E_PERMISSION_DENIED, "network.egress.allow[0]",
                "169.254.0.0/16");
        refused(&lim, "{\"egress\":{\"allow\":[\"localhost\"]}}", SBX_E_INVALID_REQUEST, "network.egress.allow[0]",
                "not a host name");
        refused(&lim, "{\"egress\":{\"allow\":[\"\"]}}", SBX_E_INVALID_REQUEST, "network.egress.allow[0]", "1-64");
        refused(&lim, "{\"egress\":{\"allow\":[{\"name\":\"a.test\",\"match\":\"dns\"}]}}", SBX_E_INVALID_REQUEST,
                "network.egress.allow[0].match", "\"sni\"");
        refused(&lim, "{\"egress\":{\"allow\":[{\"name\":\"a.test\",\"match\":\"sni\",\"proto\":\"udp\"}]}}",
                SBX_E_INVALID_REQUEST, "network.egress.allow[0].proto", "TCP");
        refused(&lim, "{\"egress\":{\"allow\":[{\"name\":\"a.test\",\"via\":1}]}}", SBX_E_INVALID_REQUEST,
                "network.egress.allow[0].via", "unknown field");
        char many[4096];
        size_t k = (size_t) snprintf(many, sizeof(many), "{\"egress\":{\"allow\":[");
        for (int i = 0; i <= EGRESS_ALLOW_MAX; i++)
                k += (size_t) snprintf(many + k, sizeof(many) - k, "%s\"198.51.100.%d\"", i ? "," : "", i % 250 + 1);
        snprintf(many + k, sizeof(many) - k, "]}}");
        refused(&lim, many, SBX_E_INVALID_REQUEST, "network.egress.allow", "at most");

        /* What this daemon cannot give. */
        EgressSpecLimits no_sni = lim;
        no_sni.sni = false;
        refused(&no_sni, "{\"egress\":{\"allow\":[{\"name\":\"a.test\",\"match\":\"sni\"}]}}", SBX_E_LIMIT_UNENFORCEABLE,
                "network.egress.allow[0]", "cannot check names");
        is_int(parse_text(&no_sni, "{\"egress\":{\"allow\":[\"a.test\"]}}", &n, &err), 0,
               "... a name without match is taken all the same");
        EgressSpecLimits none = { 0 };
        refused(&none, "{\"egress\":\"all\"}", SBX_E_LIMIT_UNENFORCEABLE, "network", "not set up");
        is_int(parse_text(&none, "\"none\"", &n, &err), 0, "... \"none\" is");
        return done_testing();
}
