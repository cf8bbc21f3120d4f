/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* DNS messages for the sandboxes' relay (dns-message.h). */
#include <errno.h>
#include <string.h>

#include "dns-message.h"

#define POINTER_JUMPS_MAX 32

static uint16_t get16(const uint8_t *p) {
        return (uint16_t) (p[0] << 8 | p[1]);
}

static bool label_char(uint8_t c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static char lower(uint8_t c) {
        return (char) (c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
}

/* The name at *pos: its text (lower case, dotted) into text (DNS_NAME_TEXT_MAX + 1 bytes) unless
 * NULL, *pos past it. With pointers (RFC 1035 4.1.4) each must point before the label it stands
 * for, so no chain loops; without, a pointer is malformed. Labels of a query's name are held to
 * label_char(); an answer's names only to their lengths. */
static int read_name(const uint8_t *buf, size_t n, size_t *pos, char *text, bool answer) {
        size_t i = *pos, len = 0, end = 0;
        unsigned jumps = 0;

        for (;;) {
                if (i >= n)
                        return -EBADMSG;
                uint8_t l = buf[i];
                if (l == 0) {
                        if (!end)
                                end = i + 1;
                        break;
                }
                if ((l & 0xc0) == 0xc0) {
                        if (!answer || i + 1 >= n || ++jumps > POINTER_JUMPS_MAX)
                                return -EBADMSG;
                        size_t to = (size_t) (get16(buf + i) & 0x3fff);
                        if (to >= i)
                                return -EBADMSG;
                        if (!end)
                                end = i + 2;
                        i = to;
                        continue;
                }
                if (l & 0xc0 || i + 1 + l > n)
                        return -EBADMSG;
                if (len + (len ? 1 : 0) + l > DNS_NAME_TEXT_MAX)
                        return -EBADMSG;
                if (len && text)
                        text[len] = '.';
                len += len ? 1 : 0;
                for (size_t k = 0; k < l; k++) {
                        uint8_t c = buf[i + 1 + k];
                        if (!answer && !label_char(c))
                                return -EBADMSG;
                        if (text)
                                text[len] = lower(c);
                        len++;
                }
                i += 1 + l;
        }
        if (text)
                text[len] = '\0';
        *pos = end;
        return 0;
}

/* The additional record of a query: an EDNS0 OPT of the root name whose options fill its data
 * exactly; *pos past it. */
static int read_opt(const uint8_t *buf, size_t n, size_t *pos) {
        size_t i = *pos;

        if (i + 11 > n || buf[i] != 0 || get16(buf + i + 1) != DNS_TYPE_OPT)
                return -EBADMSG;
        size_t rdlen = get16(buf + i + 9), at = i + 11, stop = at + rdlen;
        if (stop > n)
                return -EBADMSG;
        while (at < stop) {
                if (at + 4 > stop || at + 4 + get16(buf + at + 2) > stop)
                        return -EBADMSG;
                at += 4 + get16(buf + at + 2);
        }
        *pos = stop;
        return 0;
}

int dns_query_parse(const uint8_t *buf, size_t n, DnsQuestion *ret) {
        size_t i = DNS_HEADER_SIZE;
        uint16_t arcount;

        if (n < DNS_HEADER_SIZE || n > DNS_QUERY_MAX)
                return -EBADMSG;
        /* QR 0, opcode QUERY (0), TC 0; rcode 0. AA, the Z bit, AD and CD are passed as they are. */
        if ((buf[2] & 0xfa) != 0 || (buf[3] & 0x0f) != 0)
                return -EBADMSG;
        arcount = get16(buf + 10);
        if (get16(buf + 4) != 1 || get16(buf + 6) != 0 || get16(buf + 8) != 0 || arcount > 1)
                return -EBADMSG;
        *ret = (DnsQuestion) { .id = get16(buf), .rd = buf[2] & 0x01 };
        if (read_name(buf, n, &i, ret->name, false) < 0 || i + 4 > n)
                return -EBADMSG;
        ret->type = get16(buf + i);
        ret->class = get16(buf + i + 2);
        ret->end = i += 4;
        if (arcount && read_opt(buf, n, &i) < 0)
                return -EBADMSG;
        return i == n ? 0 : -EBADMSG;
}

int dns_reply_empty(const uint8_t *buf, const DnsQuestion *q, uint8_t rcode, uint8_t *out, size_t size) {
        if (size < q->end || q->end < DNS_HEADER_SIZE)
                return -ENOBUFS;
        memmove(out, buf, q->end);
        out[2] = (uint8_t) (0x80 | (q->rd ? 0x01 : 0));
        out[3] = (uint8_t) (0x80 | (rcode & 0x0f));
        out[4] = 0, out[5] = 1;
        memset(out + 6, 0, 6);
        return (int) q->end;
}

int dns_answer_addresses(const uint8_t *buf, size_t n, const DnsQuestion *q, uint8_t *ret_rcode, uint32_t *addrs,
                         uint32_t *ttls, size_t max) {
        char name[DNS_NAME_TEXT_MAX + 1];
        size_t i = DNS_HEADER_SIZE;
        unsigned ancount, found = 0;

        if (n < DNS_HEADER_SIZE || get16(buf) != q->id || !(buf[2] & 0x80) || (buf[2] & 0x78) != 0 ||
            get16(buf + 4) != 1)
                return -EBADMSG;
        *ret_rcode = buf[3] & 0x0f;
        ancount = get16(buf + 6);
        if (read_name(buf, n, &i, name, true) < 0 || i + 4 > n || strcmp(name, q->name) != 0 ||
            get16(buf + i) != q->type || get16(buf + i + 2) != q->class)
                return -EBADMSG;
        i += 4;
        for (unsigned k = 0; k < ancount; k++) {
                if (read_name(buf, n, &i, NULL, true) < 0 || i + 10 > n)
                        return -EBADMSG;
                uint16_t type = get16(buf + i), class = get16(buf + i + 2), rdlen = get16(buf + i + 8);
                uint32_t ttl = (uint32_t) get16(buf + i + 4) << 16 | get16(buf + i + 6);
                if (i + 10 + rdlen > n)
                        return -EBADMSG;
                if (type == DNS_TYPE_A && class == DNS_CLASS_IN) {
                        if (rdlen != 4)
                                return -EBADMSG;
                        if (found < max) {
                                const uint8_t *a = buf + i + 10;
                                addrs[found] = (uint32_t) a[0] << 24 | (uint32_t) a[1] << 16 | (uint32_t) a[2] << 8 | a[3];
                                /* RFC 2181 8: a TTL with the top bit set is 0. */
                                ttls[found] = ttl & 0x80000000u ? 0 : ttl;
                        }
                        found++;
                }
                i += 10 + rdlen;
        }
        return (int) found;
}

bool dns_name_matches(const char *pattern, const char *name) {
        if (pattern[0] == '*' && pattern[1] == '.') {
                size_t pl = strlen(pattern + 1), nl = strlen(name); /* ".example.com" */
                return nl > pl && strcmp(name + nl - pl, pattern + 1) == 0;
        }
        return strcmp(pattern, name) == 0;
}

bool dns_pattern_valid(const char *pattern) {
        const char *p = pattern;
        size_t label = 0, labels = 0;
        bool digits_only = true;

        if (p[0] == '*' && p[1] == '.')
                p += 2;
        if (strlen(p) > DNS_NAME_TEXT_MAX || !*p)
                return false;
        for (;; p++) {
                if (*p == '.' || *p == '\0') {
                        if (label == 0 || label > 63)
                                return false;
                        labels++;
                        if (*p == '\0')
                                break;
                        label = 0;
                        digits_only = true;
                        continue;
                }
                if (!label_char((uint8_t) *p) || (*p >= 'A' && *p <= 'Z'))
                        return false;
                if (*p < '0' || *p > '9')
                        digits_only = false;
                label++;
        }
        /* A top-level domain is never all digits (RFC 3696 2): "1.2.3" is no name. */
        return labels >= 2 && !digits_only;
}
