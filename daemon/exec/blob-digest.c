/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "blob-digest.h"

struct BlobHash {
        EVP_MD_CTX *ctx;
};

static int hex_value(char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The image-spec's grammar: algorithm = component (separator component)*, component =
 * [a-z0-9]+, separator = [+._-]; encoded = [a-zA-Z0-9=_-]+. */
static bool digest_well_formed(const char *s, const char *colon) {
        bool need_component = true;
        if (colon == s || !colon[1])
                return false;
        for (const char *p = s; p < colon; p++) {
                bool alnum = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9');
                if (!alnum && (need_component || !strchr("+._-", *p)))
                        return false;
                need_component = !alnum;
        }
        return !need_component && strspn(colon + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789=_-") ==
                                          strlen(colon + 1);
}

int blob_digest_parse(const char *s, uint8_t ret[SHA256_LEN]) {
        const char *colon = s ? strchr(s, ':') : NULL;

        if (!colon || !digest_well_formed(s, colon))
                return -EINVAL;
        if ((size_t) (colon - s) != 6 || strncmp(s, "sha256", 6) != 0)
                return -EOPNOTSUPP;
        if (strlen(colon + 1) != 2 * SHA256_LEN)
                return -EINVAL;
        for (size_t i = 0; i < SHA256_LEN; i++) {
                int hi = hex_value(colon[1 + 2 * i]), lo = hex_value(colon[2 + 2 * i]);
                if (hi < 0 || lo < 0) /* the spec: sha256 is lowercase hex only */
                        return -EINVAL;
                ret[i] = (uint8_t) (hi << 4 | lo);
        }
        return 0;
}

BlobHash *blob_hash_new(void) {
        BlobHash *h = calloc(1, sizeof(*h));
        if (!h)
                return NULL;
        h->ctx = EVP_MD_CTX_new();
        if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1)
                return blob_hash_free(h);
        return h;
}

BlobHash *blob_hash_free(BlobHash *h) {
        if (!h)
                return NULL;
        EVP_MD_CTX_free(h->ctx);
        free(h);
        return NULL;
}

int blob_hash_update(BlobHash *h, const void *p, size_t len) {
        return EVP_DigestUpdate(h->ctx, p, len) == 1 ? 0 : -EIO;
}

int blob_hash_final(BlobHash *h, uint8_t ret[SHA256_LEN]) {
        unsigned n = 0;
        return EVP_DigestFinal_ex(h->ctx, ret, &n) == 1 && n == SHA256_LEN ? 0 : -EIO;
}

int blob_hash_buf(const void *p, size_t len, uint8_t ret[SHA256_LEN]) {
        unsigned n = 0;
        return EVP_Digest(p, len, ret, &n, EVP_sha256(), NULL) == 1 && n == SHA256_LEN ? 0 : -EIO;
}
