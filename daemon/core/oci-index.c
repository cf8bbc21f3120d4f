/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob-digest.h"
#include "oci-index.h"

static const char *str_of(json_object *o, const char *key) {
        json_object *v;
        return o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
                       ? json_object_get_string(v) : NULL;
}

bool oci_media_is_index(const char *t) {
        return t && (strcmp(t, "application/vnd.oci.image.index.v1+json") == 0 ||
                     strcmp(t, "application/vnd.docker.distribution.manifest.list.v2+json") == 0);
}

const char *oci_host_arch(void) {
#if defined(__x86_64__)
        return "amd64";
#elif defined(__aarch64__)
        return "arm64";
#else
        return "";
#endif
}

int oci_descriptor_parse(json_object *d, const char *what, ImageBlob *ret, ProtoError *err) {
        const char *digest = str_of(d, "digest");
        json_object *v;
        int r = blob_digest_parse(digest, ret->sha256);

        if (r == -EOPNOTSUPP)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "source",
                                       "%s: digest '%.80s' is not sha256, the only algorithm taken", what, digest);
        if (r < 0)
                return digest ? proto_error_set(err, SBX_E_INVALID_REQUEST, "source", "%s: malformed digest '%.80s'", what, digest)
                              : proto_error_set(err, SBX_E_INVALID_REQUEST, "source", "%s has no digest", what);
        if (!json_object_object_get_ex(d, "size", &v) || !json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "source", "%s has no size", what);
        ret->size = (uint64_t) json_object_get_int64(v);
        snprintf(ret->path, sizeof(ret->path), "blobs/sha256/%s", digest + 7);
        return 0;
}

static bool platform_is(json_object *d, const char *arch) {
        json_object *plat;
        const char *os, *a;

        return json_object_object_get_ex(d, "platform", &plat) && (os = str_of(plat, "os")) && strcmp(os, "linux") == 0 &&
               (a = str_of(plat, "architecture")) && strcmp(a, arch) == 0;
}

json_object *oci_index_pick(json_object *index, const char *tag, bool nested, const char *arch, ProtoError *err) {
        json_object *m = json_object_object_get(index, "manifests");
        size_t n = m && json_object_is_type(m, json_type_array) ? json_object_array_length(m) : 0;

        for (size_t i = 0; i < n; i++) {
                json_object *d = json_object_array_get_idx(m, i), *ann;
                const char *ref = json_object_object_get_ex(d, "annotations", &ann) ? str_of(ann, "org.opencontainers.image.ref.name")
                                                                                      : NULL;
                if (!nested && tag && ref && strcmp(ref, tag) == 0)
                        return d;
                if (nested && platform_is(d, arch))
                        return d;
        }
        if ((!tag || nested) && n == 1)
                return json_object_array_get_idx(m, 0);
        if (tag && !nested)
                proto_error_set(err, SBX_E_NOT_FOUND, "tag", "index.json has no manifest tagged '%.64s'", tag);
        else if (n == 0)
                proto_error_set(err, SBX_E_INVALID_REQUEST, "source", "the layout's index lists no manifest");
        else if (nested)
                proto_error_set(err, SBX_E_NOT_FOUND, "source", "the image index has no manifest for linux/%s", arch);
        else
                proto_error_set(err, SBX_E_INVALID_REQUEST, "tag", "index.json lists %zu manifests: say which with 'tag'", n);
        return NULL;
}

int oci_manifest_layers(json_object *manifest, json_object **ret_config, ImageBlob **ret_layers, size_t *ret_n,
                        ProtoError *err) {
        json_object *layers = json_object_object_get(manifest, "layers"), *config;
        size_t n = layers && json_object_is_type(layers, json_type_array) ? json_object_array_length(layers) : 0;
        ImageBlob *b;

        if (n == 0 || n > OCI_LAYERS_MAX)
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "source", "the manifest has %zu layers (1 to %d are taken)", n,
                                       OCI_LAYERS_MAX);
        config = json_object_object_get(manifest, "config");
        if (!config || !json_object_is_type(config, json_type_object))
                return proto_error_set(err, SBX_E_INVALID_REQUEST, "source", "the manifest has no config descriptor");
        b = calloc(n, sizeof(ImageBlob));
        if (!b)
                return proto_error_set(err, SBX_E_INTERNAL, NULL, "out of memory");
        for (size_t i = 0; i < n; i++) {
                char what[48];
                snprintf(what, sizeof(what), "layer %zu of the manifest", i + 1);
                if (oci_descriptor_parse(json_object_array_get_idx(layers, i), what, &b[i], err) < 0) {
                        free(b);
                        return -EINVAL;
                }
        }
        *ret_config = config;
        *ret_layers = b;
        *ret_n = n;
        return 0;
}
