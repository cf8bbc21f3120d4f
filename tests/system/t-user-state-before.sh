#!/bin/bash
# Runs first: what a user made before the system tests, through the packaged daemon as anyone
# would: sandboxes named as the tests name theirs (and two without a name), each with a file of
# its own, one with a snapshot. The scripts after this one must neither count nor touch them;
# t-user-state-after.sh, run last, checks that every one is still there as it was.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock
rec=/run/sandboxd-vmtest-user-state
rm -rf "$rec" && mkdir -m 0700 "$rec"

for name in durable snapvm snapfork top-vm clock "" ""; do
	req='{"op":"create"'${name:+',"name":"'"$name"'"'}'}'
	r=$(call "$req")
	id=$(jqr .sandbox.id "$r")
	[ "$(jqr .ok "$r")" = true ]
	ok $? "a user's sandbox ${name:-without a name} ($id)"
	r=$(call '{"op":"run","sandbox":"'"$id"'","command":"echo '"$id"' > /work/mine"}')
	[ "$(jqr .exit_code "$r")" = 0 ]
	ok $? "...with a file of its own"
	printf '%s %s\n' "$id" "${name:--}" >>"$rec/sandboxes"
done
id=$(head -n 1 "$rec/sandboxes" | cut -d' ' -f1)
r=$(call '{"op":"snapshot","sandbox":"'"$id"'","label":"users"}')
[ "$(jqr .ok "$r")" = true ] && jqr .snapshot.id "$r" >"$rec/snapshot"
ok $? "a snapshot of the first ($(cat "$rec/snapshot"))"
# As the machine was before: the socket listening, the service not started yet (t-systemd.sh
# checks that the first connection starts it).
systemctl stop sandboxd.service
! systemctl is-active -q sandboxd.service
ok $? "sandboxd.service stopped again; the sandboxes stay recorded"
done_testing
