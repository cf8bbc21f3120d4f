/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* OCI content digests ("sha256:<64 hex>", the image-spec's descriptor.digest) and a streaming
 * sha256 over OpenSSL's libcrypto (EVP): bounded memory whatever the blob's size. Used by the
 * daemon for the small blobs it reads (manifests, indexes, configs) and by the import child for
 * layers, hashed block by block as libarchive reads them (image-import.c). No logging. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32

/* 0 with ret set for "sha256:" and 64 lowercase hex digits; -EOPNOTSUPP for a well-formed
 * digest of another algorithm (sha512:, blake3:, ...); -EINVAL for anything malformed. */
int blob_digest_parse(const char *s, uint8_t ret[SHA256_LEN]);

typedef struct BlobHash BlobHash;

BlobHash *blob_hash_new(void); /* NULL: out of memory */
BlobHash *blob_hash_free(BlobHash *h);
int blob_hash_update(BlobHash *h, const void *p, size_t len);
int blob_hash_final(BlobHash *h, uint8_t ret[SHA256_LEN]);

/* The whole of a buffer: 0 or -errno. */
int blob_hash_buf(const void *p, size_t len, uint8_t ret[SHA256_LEN]);
