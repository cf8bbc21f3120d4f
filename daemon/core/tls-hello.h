/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The name a client asks for in the first bytes of a TCP connection, as the egress SNI relay
 * (sandbox/egress-sni.h) reads it: the server_name of a TLS ClientHello (RFC 8446 4.1.2, RFC 6066
 * section 3), or the Host header of an HTTP/1 request (RFC 9112 3.2). Pure code over bytes, no
 * I/O (tests/test-tls-hello.c).
 *
 * Strict, since the name decides what a sandbox reaches: a ClientHello whose lengths disagree,
 * that has two server_name extensions or two host_name entries, or that carries Encrypted Client
 * Hello (extension 0xfe0d: the real name is hidden, the server_name is only the outer one) is not
 * taken; nor is an HTTP request with two Host headers, an absolute-form or CONNECT target, a
 * folded header line or a header block past TLS_HELLO_PEEK_MAX. A name is a host name as an allow
 * list has it (letters, digits, '-', '_', dot-separated labels of 1-63, at most 253 characters,
 * no trailing dot), returned in lower case; an HTTP Host's ":PORT" is dropped. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Bytes read of a connection before its name must be known: a ClientHello with post-quantum key
 * shares is about 1.8 KiB, a TLS record at most 16 KiB. */
#define TLS_HELLO_PEEK_MAX 16384
#define TLS_HELLO_NAME_MAX 253

typedef enum TlsHelloKind {
        TLS_HELLO_TLS,
        TLS_HELLO_HTTP,
} TlsHelloKind;

/* Each returns 0 with the name in ret (TLS_HELLO_NAME_MAX + 1 bytes), or:
 *   -EAGAIN  the bytes end before the name is known: read more (up to TLS_HELLO_PEEK_MAX)
 *   -E2BIG   what holds the name is longer than TLS_HELLO_PEEK_MAX
 *   -EBADMSG not the form above
 *   -ENOENT  well formed, but no name (no server_name, no Host)
 *   -EPROTO  a ClientHello with Encrypted Client Hello */
int tls_hello_server_name(const uint8_t *buf, size_t n, char *ret);
int http_request_host(const uint8_t *buf, size_t n, char *ret);
/* Either, by the first byte (0x16, a TLS handshake record, or not): its kind in *ret_kind once
 * n > 0. */
int tls_hello_first_name(const uint8_t *buf, size_t n, TlsHelloKind *ret_kind, char *ret);
