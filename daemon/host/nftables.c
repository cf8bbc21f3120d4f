/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_LIBNFTABLES
#include <nftables/libnftables.h>
#endif

#include "nftables.h"

#ifdef HAVE_LIBNFTABLES
struct Nftables {
        struct nft_ctx *ctx;
};

int nftables_new(Nftables **ret) {
        Nftables *n = calloc(1, sizeof(*n));

        if (!n)
                return -ENOMEM;
        n->ctx = nft_ctx_new(NFT_CTX_DEFAULT);
        if (!n->ctx) {
                free(n);
                return -ENOMEM;
        }
        /* Its messages are ours to pass on, never printed on our stderr. */
        if (nft_ctx_buffer_error(n->ctx) < 0 || nft_ctx_buffer_output(n->ctx) < 0) {
                nftables_free(n);
                return -ENOMEM;
        }
        *ret = n;
        return 0;
}

Nftables *nftables_free(Nftables *n) {
        if (n) {
                nft_ctx_free(n->ctx);
                free(n);
        }
        return NULL;
}

static char *strip_dup(const char *s) {
        size_t l;
        char *d;

        if (!s || !*s)
                return NULL;
        d = strdup(s);
        if (!d)
                return NULL;
        for (l = strlen(d); l > 0 && (d[l - 1] == '\n' || d[l - 1] == ' '); l--)
                d[l - 1] = '\0';
        return d;
}

int nftables_run(Nftables *n, const char *cmds, char **ret_error) {
        int r = nft_run_cmd_from_buffer(n->ctx, cmds);

        if (ret_error)
                *ret_error = r == 0 ? NULL : strip_dup(nft_ctx_get_error_buffer(n->ctx));
        (void) nft_ctx_get_output_buffer(n->ctx); /* emptied */
        return r == 0 ? 0 : -EINVAL;
}

int nftables_list(Nftables *n, const char *cmds, char **ret, char **ret_error) {
        const char *out;

        *ret_error = NULL;
        if (nft_run_cmd_from_buffer(n->ctx, cmds) != 0) {
                const char *e = nft_ctx_get_error_buffer(n->ctx);
                if (e && strstr(e, "No such file or directory"))
                        return -ENOENT;
                *ret_error = strip_dup(e);
                return -EINVAL;
        }
        out = nft_ctx_get_output_buffer(n->ctx);
        *ret = strdup(out ? out : "");
        return *ret ? 0 : -ENOMEM;
}
#else
int nftables_new(Nftables **ret) {
        return -EOPNOTSUPP;
}

Nftables *nftables_free(Nftables *n) {
        return NULL;
}

int nftables_run(Nftables *n, const char *cmds, char **ret_error) {
        if (ret_error)
                *ret_error = NULL;
        return -EOPNOTSUPP;
}

int nftables_list(Nftables *n, const char *cmds, char **ret, char **ret_error) {
        *ret_error = NULL;
        return -EOPNOTSUPP;
}
#endif
