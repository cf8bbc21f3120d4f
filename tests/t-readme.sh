#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# README.md's "Using it" block, run as written, line by line, against a private daemon (through
# $SANDBOXD_SOCKET, which sandboxctl reads) in an empty directory: every line succeeds, except
# those whose comment says "exit 1", and doctor's, which exits 1 on a best-effort host (this kind
# of host: no cgroup v2 memory controller). sandboxctl top is interactive (q quits): here it is
# stopped after a few refreshes. On a host that enforces everything the same lines run with
# doctor exiting 0: tests/system/t-readme.sh, in the VM. Both through tests/readme-using-it.sh.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

command -v jq >/dev/null || skip_all "jq is not installed"
start_daemon || exit 0
export SANDBOXD_SOCKET=$SOCK
mkdir -p "$T/bin" "$T/work"
ln -sf "$SANDBOXCTL" "$T/bin/sandboxctl"
export PATH=$T/bin:$PATH

n_lines=$(awk '/^## Using it/ { u = 1 } u && /^```sh$/ { b = 1; next } b && /^```$/ { exit } b && /./ { n++ } END { print n + 0 }' \
	"$top_srcdir/README.md")
check "the README's \"Using it\" block is found ($n_lines lines)" [ "$n_lines" -ge 20 ]
best_effort=0
[ "$(jget "$(rpc '{"op":"hello"}')" .capabilities.cgroup.memory)" = true ] || best_effort=1

cd "$T/work" || exit 1
while read -r rc want line; do
	if [ "$rc" = "#" ]; then
		diag "$want $line"
	else
		is "$rc" "$want" "as written: ${line%%  *}"
	fi
done < <("$top_srcdir/tests/readme-using-it.sh" "$top_srcdir/README.md" "$best_effort")
cd / || exit 1
check "the fork of the snapshot took its source's best_effort: the block left sandboxes to list" [ -n "$(ctl list -q)" ]
