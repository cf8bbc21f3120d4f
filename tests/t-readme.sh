#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# README.md's "Using it" block, run as written, line by line, against a private daemon (through
# $SANDBOXD_SOCKET, which sandboxctl reads) in an empty directory: every line succeeds, except
# those whose comment says "exit 1", and doctor's, which exits 1 on a best-effort host (this kind
# of host: no cgroup v2 memory controller). sandboxctl top is interactive (q quits): here it is
# stopped after a few refreshes. (On a host that enforces everything the same lines run with
# doctor exiting 0; no test here runs them there yet.)
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

command -v jq >/dev/null || skip_all "jq is not installed"
start_daemon || exit 0
export SANDBOXD_SOCKET=$SOCK
mkdir -p "$T/bin" "$T/work"
ln -sf "$SANDBOXCTL" "$T/bin/sandboxctl"
export PATH=$T/bin:$PATH

block=$(awk '/^## Using it/ { u = 1 } u && /^```sh$/ { b = 1; next } b && /^```$/ { exit } b { print }' "$top_srcdir/README.md")
n_lines=$(printf '%s\n' "$block" | grep -c .)
check "the README's \"Using it\" block is found ($n_lines lines)" [ "$n_lines" -ge 20 ]
best_effort=0
[ "$(jget "$(rpc '{"op":"hello"}')" .capabilities.cgroup.memory)" = true ] || best_effort=1

cd "$T/work" || exit 1
while IFS= read -r line; do
        case $line in "" | " "*"#"* | "#"*) continue ;; esac
        want=0
        case $line in *"# exit 1"*) want=1 ;; esac
        case $line in "sandboxctl doctor"*) want=$best_effort ;; esac
        if [[ $line == "sandboxctl top"* ]]; then
                eval "timeout 3 $line" >"$T/line.out" 2>&1 </dev/null
                rc=$?
                [ "$rc" = 124 ] && rc=0
        else
                eval "$line" >"$T/line.out" 2>&1 </dev/null
                rc=$?
        fi
        is "$rc" "$want" "as written: ${line%%  *}"
        [ "$rc" = "$want" ] || diag "$(tail -n 5 "$T/line.out")"
done <<<"$block"
cd / || exit 1
check "the fork of the snapshot took its source's best_effort: the block left sandboxes to list" [ -n "$(ctl list -q)" ]
