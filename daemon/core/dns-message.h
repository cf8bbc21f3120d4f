/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* DNS messages as the sandboxes' relay (sandbox/egress-dns.h) reads and writes them: pure code
 * over bytes, no I/O (tests/test-dns-message.c).
 *
 * A query is taken only in the form a stub resolver sends (RFC 1035 4.1, RFC 6891 for EDNS0):
 * QR 0, opcode QUERY, TC 0, one question, no answer or authority record, at most one additional
 * record and that one an OPT of the root name; the question's name uncompressed, each label 1-63
 * bytes of letters, digits, '-' and '_', the name at most 253 characters dotted; nothing after
 * the last record. Anything else is not a query the relay forwards (dns_query_parse() < 0). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DNS_HEADER_SIZE 12
#define DNS_QUERY_MAX 1232      /* bytes of a query we take: the EDNS0 buffer size DNS flag day 2020 set */
#define DNS_NAME_TEXT_MAX 253   /* characters of a name, dotted, no trailing dot */

#define DNS_TYPE_A 1
#define DNS_TYPE_CNAME 5
#define DNS_TYPE_AAAA 28
#define DNS_TYPE_SVCB 64
#define DNS_TYPE_HTTPS 65
#define DNS_TYPE_OPT 41
#define DNS_CLASS_IN 1

#define DNS_RCODE_NOERROR 0
#define DNS_RCODE_SERVFAIL 2
#define DNS_RCODE_REFUSED 5

typedef struct DnsQuestion {
        char name[DNS_NAME_TEXT_MAX + 1]; /* lower case, dotted, no trailing dot; "" is the root */
        uint16_t id, type, class;
        bool rd;                          /* recursion desired, echoed in a reply of ours */
        size_t end;                       /* offset just past the question */
} DnsQuestion;

/* buf[0..n) as a query (the form above) into *ret; -EBADMSG otherwise. */
int dns_query_parse(const uint8_t *buf, size_t n, DnsQuestion *ret);

/* The relay's own answer to the query buf (parsed into q): its id and question, QR 1, RA 1, RD as
 * asked, the rcode, no record. Into out; returns its length (q->end), or -ENOBUFS. */
int dns_reply_empty(const uint8_t *buf, const DnsQuestion *q, uint8_t rcode, uint8_t *out, size_t size);

/* An answer to q (id, QR 1, the same question, in any case): its rcode in *ret_rcode and the
 * IPv4 addresses of its answer section's A records of class IN with their TTLs (at most max;
 * the rest are counted in the return value but not stored): how many there are. CNAME records
 * (and any other) are passed over: the addresses at the end of the chain a resolver answers for
 * an allowed question are that question's (docs/protocol.md "Names"). -EBADMSG for anything
 * malformed (a name pointer that does not point back, a record past the end, ...). */
int dns_answer_addresses(const uint8_t *buf, size_t n, const DnsQuestion *q, uint8_t *ret_rcode, uint32_t *addrs,
                         uint32_t *ttls, size_t max);

/* A name (lower case, dotted) against an allow-list pattern: "example.com" is that name alone;
 * "*.example.com" is every name below it, at any depth, not example.com itself. */
bool dns_name_matches(const char *pattern, const char *name);

/* A pattern as an allow list takes it (lower case already): a name of at least two labels, each
 * as in a query, or "*." and such a name. */
bool dns_pattern_valid(const char *pattern);
