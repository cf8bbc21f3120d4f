/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An OCI layout's index and manifests as an import reads them (daemon/core/oci-index.c): which
 * manifest is followed (by tag, the only one, the host's platform in a nested index), what each
 * refusal says and names, and a manifest's layers and config. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "oci-index.h"
#include "tap.h"

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define D3 "sha256:3333333333333333333333333333333333333333333333333333333333333333"

/* An index.json as skopeo and podman write a layout of two tags. */
static const char two_tags[] =
        "{\"schemaVersion\":2,\"manifests\":["
        "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"" D1 "\",\"size\":406,"
        "\"annotations\":{\"org.opencontainers.image.ref.name\":\"3.19\"}},"
        "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"" D2 "\",\"size\":407,"
        "\"annotations\":{\"org.opencontainers.image.ref.name\":\"latest\"}}]}";

/* A nested image index of two platforms (what an index.json's one entry may point to). */
static const char platforms[] =
        "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":["
        "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"" D1 "\",\"size\":500,"
        "\"platform\":{\"architecture\":\"arm64\",\"os\":\"linux\"}},"
        "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"" D2 "\",\"size\":501,"
        "\"platform\":{\"architecture\":\"amd64\",\"os\":\"linux\"}}]}";

static const char manifest[] =
        "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
        "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"" D3 "\",\"size\":581},"
        "\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"" D1 "\",\"size\":3408729},"
        "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"" D2 "\",\"size\":32}]}";

static const char *picked_digest(const char *json, const char *tag, bool nested, const char *arch, ProtoError *err) {
        static char buf[128];
        json_object *o = json_tokener_parse(json), *d;

        *err = (ProtoError) {};
        d = oci_index_pick(o, tag, nested, arch, err);
        snprintf(buf, sizeof(buf), "%s", d ? json_object_get_string(json_object_object_get(d, "digest")) : "none");
        json_object_put(o);
        return buf;
}

static void test_pick(void) {
        ProtoError err;

        is_str(picked_digest(two_tags, "latest", false, "amd64", &err), D2, "the manifest tagged 'latest'");
        is_str(picked_digest(two_tags, "3.19", false, "amd64", &err), D1, "the one tagged '3.19'");
        is_str(picked_digest(two_tags, "edge", false, "amd64", &err), "none", "no manifest tagged 'edge'");
        is_int(err.code, SBX_E_NOT_FOUND, "... is not_found");
        is_str(err.field, "tag", "... naming 'tag'");
        is_str(picked_digest(two_tags, NULL, false, "amd64", &err), "none", "two manifests and no tag");
        is_str(err.field, "tag", "... asks for a tag");
        ok(strstr(err.message, "lists 2 manifests") != NULL, "... saying how many: %s", err.message);
        is_str(picked_digest("{\"manifests\":[{\"digest\":\"" D3 "\",\"size\":1}]}", NULL, false, "amd64", &err), D3,
               "one manifest and no tag: that one");
        is_str(picked_digest("{\"manifests\":[]}", NULL, false, "amd64", &err), "none", "an index of none");
        ok(strstr(err.message, "lists no manifest") != NULL, "... says so");
        is_str(picked_digest("{\"manifests\":7}", NULL, false, "amd64", &err), "none", "manifests not an array: none");
        is_str(picked_digest(platforms, NULL, true, "amd64", &err), D2, "nested: the linux/amd64 manifest");
        is_str(picked_digest(platforms, NULL, true, "arm64", &err), D1, "nested: the linux/arm64 one on arm64");
        is_str(picked_digest(platforms, NULL, true, "riscv64", &err), "none", "nested: none for riscv64");
        ok(strstr(err.message, "no manifest for linux/riscv64") != NULL, "... naming the platform: %s", err.message);
        is_str(picked_digest(platforms, "latest", true, "amd64", &err), D2, "nested: a tag plays no part");
        ok(oci_media_is_index("application/vnd.oci.image.index.v1+json"), "an OCI image index is an index");
        ok(oci_media_is_index("application/vnd.docker.distribution.manifest.list.v2+json"), "so is Docker's manifest list");
        ok(!oci_media_is_index("application/vnd.oci.image.manifest.v1+json") && !oci_media_is_index(NULL),
           "a manifest, or no media type, is not");
}

static int descriptor(const char *json, ImageBlob *b, ProtoError *err) {
        json_object *o = json_tokener_parse(json);
        int r;

        *err = (ProtoError) {};
        r = oci_descriptor_parse(o, "the thing", b, err);
        json_object_put(o);
        return r;
}

static void test_descriptors(void) {
        ProtoError err;
        ImageBlob b;

        is_int(descriptor("{\"digest\":\"" D1 "\",\"size\":42}", &b, &err), 0, "a sha256 descriptor");
        is_str(b.path, "blobs/sha256/1111111111111111111111111111111111111111111111111111111111111111", "... its blob's path");
        is_uint64(b.size, 42, "... its size");
        is_int(b.sha256[0], 0x11, "... its digest's bytes");
        ok(descriptor("{\"digest\":\"sha512:abcd\",\"size\":1}", &b, &err) < 0 && strstr(err.message, "not sha256"),
           "sha512: refused, not sha256 (%s)", err.message);
        ok(descriptor("{\"digest\":\"sha256:12\",\"size\":1}", &b, &err) < 0 && strstr(err.message, "malformed digest"),
           "a short digest: malformed");
        ok(descriptor("{\"digest\":\"sha256:../../../../etc/passwd000000000000000000000000000000000000000000\",\"size\":1}", &b,
                      &err) < 0, "a digest that is a path is refused");
        ok(descriptor("{\"size\":1}", &b, &err) < 0 && strstr(err.message, "has no digest"), "no digest");
        ok(descriptor("{\"digest\":\"" D1 "\"}", &b, &err) < 0 && strstr(err.message, "has no size"), "no size");
        ok(descriptor("{\"digest\":\"" D1 "\",\"size\":-1}", &b, &err) < 0, "a negative size");
        ok(descriptor("{\"digest\":\"" D1 "\",\"size\":\"42\"}", &b, &err) < 0, "a size that is a string");
        is_str(err.field, "source", "descriptors' errors name 'source'");
}

static int layers(const char *json, ImageBlob **ret, size_t *n, const char **config_digest, ProtoError *err) {
        static char cfg[128];
        json_object *o = json_tokener_parse(json), *config = NULL;
        int r;

        *err = (ProtoError) {};
        *ret = NULL;
        *n = 0;
        r = oci_manifest_layers(o, &config, ret, n, err);
        snprintf(cfg, sizeof(cfg), "%s", config ? json_object_get_string(json_object_object_get(config, "digest")) : "none");
        *config_digest = cfg;
        json_object_put(o);
        return r;
}

static void test_manifests(void) {
        const char *cfg;
        ProtoError err;
        ImageBlob *l;
        size_t n;
        char *many;

        is_int(layers(manifest, &l, &n, &cfg, &err), 0, "a manifest of two layers");
        is_int((long long) n, 2, "... two");
        ok(l && l[0].size == 3408729 && l[1].size == 32, "... in order, with their sizes");
        is_str(cfg, D3, "... and its config descriptor");
        free(l);
        ok(layers("{\"config\":{\"digest\":\"" D3 "\",\"size\":1},\"layers\":[]}", &l, &n, &cfg, &err) < 0 &&
           strstr(err.message, "has 0 layers"), "no layer: refused (%s)", err.message);
        ok(layers("{\"layers\":[{\"digest\":\"" D1 "\",\"size\":1}]}", &l, &n, &cfg, &err) < 0 &&
           strstr(err.message, "no config descriptor"), "no config: refused");
        ok(layers("{\"config\":{\"digest\":\"" D3 "\",\"size\":1},\"layers\":[{\"digest\":\"" D1 "\",\"size\":1},{\"size\":1}]}",
                  &l, &n, &cfg, &err) < 0 && strstr(err.message, "layer 2 of the manifest has no digest"),
           "a bad second layer: refused, naming it (%s)", err.message);
        ok(l == NULL && n == 0, "... and nothing is handed back");
        many = malloc(128 * (OCI_LAYERS_MAX + 2) + 256);
        strcpy(many, "{\"config\":{\"digest\":\"" D3 "\",\"size\":1},\"layers\":[");
        for (int i = 0; i <= OCI_LAYERS_MAX; i++)
                strcat(many, i ? ",{\"digest\":\"" D1 "\",\"size\":1}" : "{\"digest\":\"" D1 "\",\"size\":1}");
        strcat(many, "]}");
        ok(layers(many, &l, &n, &cfg, &err) < 0 && strstr(err.message, "has 257 layers (1 to 256"), "257 layers: refused (%s)",
           err.message);
        free(many);
}

int main(void) {
        test_pick();
        test_descriptors();
        test_manifests();
        return done_testing();
}
