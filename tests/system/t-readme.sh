#!/bin/bash
# README.md's "Using it" block, run as written, line by line, against the installed daemon under
# a real systemd that enforces every limit (issue 35: the block works on a full host as on a
# best-effort one, where tests/t-readme.sh runs it): every line succeeds, doctor's included (exit
# 0 here), except those whose comment says "exit 1". Only the sandboxes the block makes are
# destroyed after it.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock
W=$(mktemp -d /tmp/sbx-readme-XXXXXX)

before=$(sandboxctl list -q | sort)
[ "$(jqr .capabilities.cgroup.memory "$(call '{"op":"hello"}')")" = true ]
ok $? "hello: the memory controller is enforced here (a full host)"
n_lines=0
cd "$W" || exit 1
while read -r rc want line; do
	if [ "$rc" = "#" ]; then
		diag "$want $line"
	else
		n_lines=$((n_lines + 1))
		[ "$rc" = "$want" ]
		ok $? "as written: ${line%%  *} (status $rc, want $want)"
	fi
done < <("$here/../readme-using-it.sh" "$here/../../README.md" 0)
cd / || exit 1
[ "$n_lines" -ge 20 ]
ok $? "the README's \"Using it\" block ran ($n_lines command lines)"
for s in $(comm -13 <(printf '%s\n' "$before") <(sandboxctl list -q | sort)); do
	sandboxctl destroy "$s" >/dev/null
done
rm -rf "$W"
done_testing
