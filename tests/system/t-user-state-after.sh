#!/bin/bash
# Runs last: the sandboxes t-user-state-before.sh made as a user would are all still there, with
# their names, their files and the snapshot, whatever the scripts between them did; then they go.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock
rec=/run/sandboxd-vmtest-user-state
if [ ! -s "$rec/sandboxes" ]; then
	echo "1..0 # SKIP t-user-state-before.sh did not run first"
	exit 0
fi

while read -r id name; do
	r=$(call '{"op":"inspect","sandbox":"'"$id"'"}')
	[ "$(jqr .sandbox.id "$r")" = "$id" ] && [ "$(jqr '.sandbox.name // "-"' "$r")" = "$name" ]
	ok $? "the user's sandbox $id ($name) is still there, with its name"
	r=$(call '{"op":"run","sandbox":"'"$id"'","argv":["cat","/work/mine"]}')
	[ "$(jqr .stdout "$r")" = "$id" ]
	ok $? "...and its file"
done <"$rec/sandboxes"
id=$(head -n 1 "$rec/sandboxes" | cut -d' ' -f1)
r=$(call '{"op":"snapshot.list","sandbox":"'"$id"'"}')
[ "$(jqr '[.snapshots[] | select(.label == "users") | .id] | join(",")' "$r")" = "$(cat "$rec/snapshot")" ]
ok $? "...and the snapshot of the first"
while read -r id name; do
	call '{"op":"destroy","sandbox":"'"$id"'"}' >/dev/null
done <"$rec/sandboxes"
rm -rf "$rec"
done_testing
