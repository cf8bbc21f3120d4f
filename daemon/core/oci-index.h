/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An OCI image layout's index.json, image indexes and manifests, read for what an import needs:
 * which manifest (by tag, the only one, or the host's platform in a nested index) and its
 * layers' descriptors, in order. Pure code over parsed JSON, no I/O (tests/test-oci-index.c);
 * sandbox/image.c reads and checks the blobs. Errors are invalid_request or not_found replies
 * whose field is "source" or "tag". */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "image-import.h"
#include "proto.h"

#define OCI_LAYERS_MAX 256

/* An image index (OCI's, or Docker's manifest list), not a manifest. */
bool oci_media_is_index(const char *media_type);
/* This host's architecture as OCI spells it ("amd64", "arm64"; "" elsewhere). */
const char *oci_host_arch(void);
/* A descriptor's blob (what names it in messages): sha256 only, a size; its path beneath the layout. */
int oci_descriptor_parse(json_object *d, const char *what, ImageBlob *ret, ProtoError *err);
/* The descriptor of index to follow (borrowed from it), or NULL with err set: not nested, the one
 * tagged tag (org.opencontainers.image.ref.name), or without a tag the only one; nested (an index
 * a manifest pointed to), the one for linux/arch, or the only one. */
json_object *oci_index_pick(json_object *index, const char *tag, bool nested, const char *arch, ProtoError *err);
/* A manifest's config descriptor (borrowed, in *ret_config) and its layers (1 to OCI_LAYERS_MAX),
 * malloc'ed in *ret_layers. */
int oci_manifest_layers(json_object *manifest, json_object **ret_config, ImageBlob **ret_layers, size_t *ret_n,
                        ProtoError *err);
