/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "context.h"
#include "macro.h"
#include "util.h"

void context_init(Context *ctx, Config *config) {
        *ctx = (Context) {};
        ctx->config = *config;
        *config = (Config) {};
        ctx->state_fd = ctx->run_helper_fd = ctx->file_helper_fd = ctx->self_pidns_fd = -EBADF;
        ctx->netns.host_fd = -EBADF;
        ctx->cg = (CgroupRoot) { .base_fd = -EBADF, .sandboxes_fd = -EBADF, .lock_fd = -EBADF };
        ctx->start_usec = now_usec(CLOCK_MONOTONIC);
}

void context_done(Context *ctx) {
        safe_close(ctx->state_fd);
        safe_close(ctx->run_helper_fd);
        safe_close(ctx->file_helper_fd);
        safe_close(ctx->self_pidns_fd);
        netns_pool_done(&ctx->netns);
        fdstore_done(&ctx->fdstore);
        ctx->scopes = scope_manager_free(ctx->scopes);
        free(ctx->filter.insns);
        cg_root_done(&ctx->cg);
        config_done(&ctx->config);
        free(ctx->dev_dir);
        ctx->event = sd_event_unref(ctx->event);
}
