#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# tests/readme-using-it.sh README DOCTOR_STATUS: README's "Using it" block, run as written, line
# by line, in the current directory, against the daemon sandboxctl (first in PATH) reaches. For
# each command line it prints "RC WANT LINE" (WANT: 1 for a line whose comment says "exit 1",
# DOCTOR_STATUS for `sandboxctl doctor`, else 0), and after a line whose status is not WANT its
# output's last lines, each as "# ...". `sandboxctl top` is interactive (q quits): it is stopped
# after 3 s, which counts as 0 (a top that ignores SIGTERM is killed 5 s later: status 137).
# Shared by tests/t-readme.sh (a best-effort host) and
# tests/system/t-readme.sh (the VM: every limit enforced).
readme=${1:?usage: readme-using-it.sh README DOCTOR_STATUS}
doctor=${2:?usage: readme-using-it.sh README DOCTOR_STATUS}
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT

block=$(awk '/^## Using it/ { u = 1 } u && /^```sh$/ { b = 1; next } b && /^```$/ { exit } b { print }' "$readme")
while IFS= read -r line; do
	case $line in "" | " "*"#"* | "#"*) continue ;; esac
	want=0
	case $line in *"# exit 1"*) want=1 ;; esac
	case $line in "sandboxctl doctor"*) want=$doctor ;; esac
	if [[ $line == "sandboxctl top"* ]]; then
		eval "timeout -k 5 3 $line" >"$out" 2>&1 </dev/null
		rc=$?
		[ "$rc" = 124 ] && rc=0
	else
		eval "$line" >"$out" 2>&1 </dev/null
		rc=$?
	fi
	echo "$rc $want $line"
	[ "$rc" = "$want" ] || tail -n 5 "$out" | sed 's/^/# /'
done <<<"$block"
