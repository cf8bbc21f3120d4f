/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The image store: root filesystems a sandbox may run in ("image" on create and run), kept in
 * <state_dir>/images/NAME/{rootfs/, image.json}, shared read-only by every sandbox that uses one
 * (through an idmapped mount: sandbox-init.c, sandbox_open_root()).
 *
 * An import (image.import) runs in a child process off the event loop: the source (a directory,
 * a tar archive plain or compressed, or an OCI image layout whose layers are applied in order,
 * whiteouts included) is made into <images>/.tmp-NAME-RANDOM, which is renamed to NAME only
 * when it is complete; a failed or killed import leaves nothing, and the store removes every
 * .tmp-* it finds when the daemon starts. Progress comes as events of the request. A sandbox
 * that uses an image holds it (Image.users): image.remove is refused while any does. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "proto.h"
#include "reply.h"

typedef struct Context Context;
typedef struct ImageJob ImageJob;
typedef struct SandboxCaller SandboxCaller;

#define IMAGE_NAME_MAX 64

typedef struct Image {
        char *name;
        char *kind;           /* "directory", "tar", "oci" */
        char *source;         /* as given to image.import */
        char *digest;         /* OCI: the manifest's ("sha256:..."); else NULL */
        uint64_t bytes, files;
        uint64_t imported_usec; /* CLOCK_REALTIME */
        unsigned users;       /* sandboxes made from it that exist */
        /* Only its importer (and root and admin_group) may make sandboxes of it: uid 0 of an
         * image is root in every sandbox of it, so its root-only files are every user's. */
        bool owner_only;
        uid_t importer;
        struct Image *next;
} Image;

typedef struct ImageStore {
        Context *ctx;
        int dir_fd;           /* <state_dir>/images */
        char *dir;
        Image *images;
        ImageJob *jobs;       /* imports in flight */
        /* Whether the store's filesystem can be idmapped (probed at start: the kernel may have
         * idmapped mounts and this filesystem not, tmpfs before Linux 6.3); else the errno. */
        bool idmap;
        int idmap_error;
        /* An image was imported (its pool_images entry fills: pool.c, wired by lifecycle.c). */
        void (*imported)(Context *ctx);
} ImageStore;

/* Opens (makes) the store, removes what unfinished imports left, reads every image.json. */
int image_store_open(ImageStore *st, Context *ctx);
void image_store_done(ImageStore *st);

/* {"idmap", "error", "images"}: what hello and doctor say of images on this host. */
json_object *image_store_capabilities(const ImageStore *st);

bool image_name_valid(const char *name);
Image *image_find(ImageStore *st, const char *name);
/* A sandbox takes or leaves an image. */
/* Whether path (absolute, normal) is a directory of image name's tree, reached through no
 * symlink: 0, -ENOENT, -ENOTDIR, -ELOOP (through a symlink) or another -errno. */
int image_dir_exists(ImageStore *st, const char *name, const char *path);
void image_hold(Image *img);
void image_release(ImageStore *st, const char *name);

/* Whether uid (admin: root or admin_group's) may make a sandbox of img. */
bool image_usable_by(const Image *img, uid_t uid, bool admin);

/* {name, kind, source, digest, size, files, imported_at, owner_only, users}; users: the count
 * the caller may see (a negative: all of img->users); used_by (taken, or NULL) added. */
json_object *image_to_json(const Image *img, long users, json_object *used_by);

typedef struct ImageImportRequest {
        const char *name;
        const char *source; /* absolute path on the host */
        const char *tag;    /* OCI: which manifest of index.json (org.opencontainers.image.ref.name); NULL: the only one */
        bool owner_only;    /* Image.owner_only */
        uid_t importer;     /* the caller's uid */
        /* Who asked: the source is opened and read with these ids' rights (never root's for
         * another uid), beneath a mount_roots entry unless uid 0, no symlink followed. */
        const SandboxCaller *caller;
} ImageImportRequest;

/* Starts an import answered on reply (progress events, then the image or an error). */
int image_import_start(ImageStore *st, const ImageImportRequest *rq, Reply *reply, ProtoError *err);
/* Whether an import of that name is in flight. */
bool image_importing(ImageStore *st, const char *name);
/* Removes an image no sandbox uses: -EBUSY while one does, -ENOENT without it. */
int image_remove(ImageStore *st, const char *name);
