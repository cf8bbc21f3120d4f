/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nftables through libnftables: a batch of commands in nft's own syntax, run as one transaction
 * (all or nothing) in the daemon's network namespace. What the rules are is egress.c's. */
#pragma once

typedef struct Nftables Nftables;

/* -EOPNOTSUPP when sandboxd was built without libnftables. */
int nftables_new(Nftables **ret);
Nftables *nftables_free(Nftables *n);
/* Runs cmds; on failure -EINVAL (or -ENOMEM), with what nft said in *ret_error (malloc'ed; NULL
 * when it said nothing). */
int nftables_run(Nftables *n, const char *cmds, char **ret_error);
/* What nft lists of cmds ("list table inet sandboxd"), malloc'ed in *ret: a read, no commit
 * (a commit waits for RCU grace periods: tens of ms). -ENOENT when nft says it is not there;
 * -EINVAL otherwise, with what it said in *ret_error (malloc'ed, or NULL). */
int nftables_list(Nftables *n, const char *cmds, char **ret, char **ret_error);
