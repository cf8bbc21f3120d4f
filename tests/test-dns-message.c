/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The relay's DNS message code (daemon/core/dns-message.c): which queries it takes, its own
 * replies, the addresses it learns from an answer, and name patterns. */
#include <errno.h>

#include "dns-message.h"
#include "tap.h"

typedef struct Msg {
        uint8_t b[2048];
        size_t n;
} Msg;

static void put8(Msg *m, uint8_t v) {
        m->b[m->n++] = v;
}

static void put16(Msg *m, uint16_t v) {
        put8(m, (uint8_t) (v >> 8));
        put8(m, (uint8_t) v);
}

static void put32(Msg *m, uint32_t v) {
        put16(m, (uint16_t) (v >> 16));
        put16(m, (uint16_t) v);
}

static void put_name(Msg *m, const char *dotted) {
        while (*dotted) {
                const char *dot = strchr(dotted, '.');
                size_t l = dot ? (size_t) (dot - dotted) : strlen(dotted);
                put8(m, (uint8_t) l);
                memcpy(m->b + m->n, dotted, l);
                m->n += l;
                dotted += l + (dot ? 1 : 0);
        }
        put8(m, 0);
}

/* A query as glibc's stub sends it: id 0x1234, RD, one question, optionally an EDNS0 OPT. */
static Msg query(const char *name, uint16_t type, bool opt) {
        Msg m = {};
        put16(&m, 0x1234);
        put16(&m, 0x0100);
        put16(&m, 1), put16(&m, 0), put16(&m, 0), put16(&m, opt ? 1 : 0);
        put_name(&m, name);
        put16(&m, type), put16(&m, DNS_CLASS_IN);
        if (opt) {
                put8(&m, 0), put16(&m, DNS_TYPE_OPT), put16(&m, 1232), put32(&m, 0);
                put16(&m, 12);                                          /* rdlen: one cookie option */
                put16(&m, 10), put16(&m, 8), put32(&m, 0xdeadbeef), put32(&m, 0x01020304);
        }
        return m;
}

static int parse(const Msg *m, DnsQuestion *q) {
        return dns_query_parse(m->b, m->n, q);
}

static void test_queries(void) {
        DnsQuestion q;
        Msg m = query("PyPI.org", DNS_TYPE_A, false);

        ok(parse(&m, &q) == 0, "a plain A query is taken");
        is_str(q.name, "pypi.org", "its name, in lower case");
        ok(q.type == DNS_TYPE_A && q.class == DNS_CLASS_IN && q.id == 0x1234 && q.rd, "its type, class, id and RD");
        ok(q.end == m.n, "the question ends the message");

        m = query("files.pythonhosted.org", DNS_TYPE_AAAA, true);
        ok(parse(&m, &q) == 0 && q.type == DNS_TYPE_AAAA && q.end < m.n, "an AAAA query with an EDNS0 OPT (a cookie) is taken");
        m = query("_http._tcp.example.com", 33, false);
        ok(parse(&m, &q) == 0, "underscores (SRV names) are taken");

        m = query("pypi.org", DNS_TYPE_A, false);
        m.b[2] |= 0x80;
        ok(parse(&m, &q) == -EBADMSG, "QR 1 (an answer) is not a query");
        m = query("pypi.org", DNS_TYPE_A, false);
        m.b[2] |= 0x10;
        ok(parse(&m, &q) == -EBADMSG, "opcode 2 (STATUS) is refused");
        m = query("pypi.org", DNS_TYPE_A, false);
        m.b[2] |= 0x02;
        ok(parse(&m, &q) == -EBADMSG, "TC 1 is refused");
        m = query("pypi.org", DNS_TYPE_A, false);
        m.b[5] = 2;
        ok(parse(&m, &q) == -EBADMSG, "two questions are refused");
        m = query("pypi.org", DNS_TYPE_A, false);
        m.b[7] = 1;
        ok(parse(&m, &q) == -EBADMSG, "an answer record in a query is refused");
        m = query("pypi.org", DNS_TYPE_A, false);
        put8(&m, 0);
        ok(parse(&m, &q) == -EBADMSG, "a byte after the question is refused");
        m = query("pypi.org", DNS_TYPE_A, true);
        m.n--;
        ok(parse(&m, &q) == -EBADMSG, "an OPT whose data is cut short is refused");
        m = query("pypi.org", DNS_TYPE_A, false);
        m.n -= 2;
        ok(parse(&m, &q) == -EBADMSG, "a question without its class is refused");
        m = query("bad name.org", DNS_TYPE_A, false);
        ok(parse(&m, &q) == -EBADMSG, "a label with a space is refused");
        m = query("pypi.org", DNS_TYPE_A, false);
        m.b[12] = 0xc0, m.b[13] = 12;
        ok(parse(&m, &q) == -EBADMSG, "a name pointer in a query is refused");

        char label[64];
        memset(label, 'a', 63);
        label[63] = '\0';
        char big[300];
        snprintf(big, sizeof(big), "%s.%s.%s.%s", label, label, label, label);  /* 255 characters */
        m = query(big, DNS_TYPE_A, false);
        ok(parse(&m, &q) == -EBADMSG, "a name of 255 characters is refused (253 at most)");
        big[251] = '\0';
        m = query(big, DNS_TYPE_A, false);
        ok(parse(&m, &q) == 0 && strlen(q.name) == 251, "one of 251 is taken");

        /* What the relay's old check let through: a flags byte of 0 and anything after it. */
        Msg junk = {};
        memcpy(junk.b, "AB\x00\x00NOT-DNS-AT-ALL-PAYLOAD", 27);
        junk.n = 1604;
        ok(parse(&junk, &q) == -EBADMSG, "a 1,604-byte datagram whose flags byte looks like a query's is refused");
        junk.n = 27;
        ok(parse(&junk, &q) == -EBADMSG, "... and a short one");
}

static void test_reply(void) {
        Msg m = query("evil.example", DNS_TYPE_A, true);
        DnsQuestion q;
        uint8_t out[2048];
        int n;

        ok(parse(&m, &q) == 0, "a query to refuse");
        n = dns_reply_empty(m.b, &q, DNS_RCODE_REFUSED, out, sizeof(out));
        ok(n == (int) q.end, "the refusal is the header and the question, no OPT");
        ok(out[0] == 0x12 && out[1] == 0x34 && out[2] == 0x81 && out[3] == 0x85, "same id, QR 1, RD kept, RA 1, REFUSED");
        ok(out[5] == 1 && out[7] == 0 && out[9] == 0 && out[11] == 0, "one question, no record");
        ok(dns_reply_empty(m.b, &q, DNS_RCODE_REFUSED, out, q.end - 1) == -ENOBUFS, "too small a buffer is said");
}

/* An answer: the question, then a CNAME and two A records, names compressed. */
static Msg answer(const char *name, uint16_t id) {
        Msg m = {};
        put16(&m, id);
        put16(&m, 0x8180);
        put16(&m, 1), put16(&m, 3), put16(&m, 0), put16(&m, 0);
        put_name(&m, name);
        put16(&m, DNS_TYPE_A), put16(&m, DNS_CLASS_IN);
        put16(&m, 0xc00c), put16(&m, DNS_TYPE_CNAME), put16(&m, DNS_CLASS_IN), put32(&m, 300);
        size_t cname_at = m.n + 2;
        put16(&m, 12);
        put_name(&m, "cdn.example.net");          /* 1 + 3 + 1 + 7 + 1 + 3 + 1 = 17: rdlen fixed below */
        m.b[cname_at - 2] = 0, m.b[cname_at - 1] = (uint8_t) (m.n - cname_at);
        put16(&m, (uint16_t) (0xc000 | cname_at)), put16(&m, DNS_TYPE_A), put16(&m, DNS_CLASS_IN), put32(&m, 20);
        put16(&m, 4), put32(&m, 0xc6336407);      /* 198.51.100.7 */
        put16(&m, (uint16_t) (0xc000 | cname_at)), put16(&m, DNS_TYPE_A), put16(&m, DNS_CLASS_IN), put32(&m, 0x80000001);
        put16(&m, 4), put32(&m, 0xc6336408);
        return m;
}

static void test_answers(void) {
        Msg qm = query("pypi.org", DNS_TYPE_A, false), am = answer("PYPI.org", 0x1234);
        DnsQuestion q;
        uint32_t addrs[4], ttls[4];
        uint8_t rcode = 99;

        ok(parse(&qm, &q) == 0, "the query");
        ok(dns_answer_addresses(am.b, am.n, &q, &rcode, addrs, ttls, 4) == 2, "two A records at the end of a CNAME chain");
        ok(rcode == 0, "rcode NOERROR");
        ok(addrs[0] == 0xc6336407 && ttls[0] == 20, "the first, with its TTL");
        ok(addrs[1] == 0xc6336408 && ttls[1] == 0, "the second; a TTL with the top bit set is 0");
        ok(dns_answer_addresses(am.b, am.n, &q, &rcode, addrs, ttls, 1) == 2 && addrs[0] == 0xc6336407,
           "at most max are stored, all are counted");

        Msg other = answer("pypi.org", 0x9999);
        ok(dns_answer_addresses(other.b, other.n, &q, &rcode, addrs, ttls, 4) == -EBADMSG, "another id: refused");
        Msg wrong = answer("evil.example", 0x1234);
        ok(dns_answer_addresses(wrong.b, wrong.n, &q, &rcode, addrs, ttls, 4) == -EBADMSG,
           "an answer to another question: refused");
        Msg cut = am;
        cut.n -= 3;
        ok(dns_answer_addresses(cut.b, cut.n, &q, &rcode, addrs, ttls, 4) == -EBADMSG, "a record cut short: refused");
        Msg loop = am;
        size_t at = q.end; /* the first record's name: a pointer to itself */
        loop.b[at] = 0xc0, loop.b[at + 1] = (uint8_t) at;
        ok(dns_answer_addresses(loop.b, loop.n, &q, &rcode, addrs, ttls, 4) == -EBADMSG, "a pointer loop: refused");
}

static void test_patterns(void) {
        ok(dns_name_matches("pypi.org", "pypi.org"), "a name matches itself");
        ok(!dns_name_matches("pypi.org", "www.pypi.org"), "... and not a name below it");
        ok(!dns_name_matches("pypi.org", "xpypi.org"), "... nor one that ends like it");
        ok(dns_name_matches("*.github.com", "api.github.com"), "a wildcard matches one label below");
        ok(dns_name_matches("*.github.com", "a.b.github.com"), "... and any depth below");
        ok(!dns_name_matches("*.github.com", "github.com"), "... not the apex");
        ok(!dns_name_matches("*.github.com", "evilgithub.com"), "... nor a name that ends like it");

        ok(dns_pattern_valid("pypi.org") && dns_pattern_valid("*.pythonhosted.org") && dns_pattern_valid("a-b_c.d9.io"),
           "names and wildcards are valid patterns");
        ok(!dns_pattern_valid("localhost") && !dns_pattern_valid("*.com"), "a single label (or all of a TLD) is not");
        ok(!dns_pattern_valid("a..b") && !dns_pattern_valid(".a.b") && !dns_pattern_valid("a.b."), "empty labels are not");
        ok(!dns_pattern_valid("*a.b.c") && !dns_pattern_valid("a.*.c") && !dns_pattern_valid("**.b.c"),
           "a '*' anywhere but a leading '*.' is not");
        ok(!dns_pattern_valid("Pypi.org"), "upper case is not (callers lower it)");
        ok(!dns_pattern_valid("1.2.3"), "an all-digit top label is not");
}

int main(void) {
        test_queries();
        test_reply();
        test_answers();
        test_patterns();
        return done_testing();
}
