#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# No oracle for other users' sandboxes (THREATS PRO-09): every reply another user gets about a
# sandbox, a snapshot, a session or a run of A's is byte for byte the reply to an id that never
# existed (the request id and the echoed key aside); destroy's already_gone is for the owner
# (and admins) only; names are unique per owner, so B may have a sandbox of A's name, and root
# addresses either as UID/NAME (sandboxctl also as USER/NAME); health counts a non-admin's own.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

A=65534 B=65533 ADMIN=65532 ADMIN_GROUP=users
mkdir -p "$T"
printf 'admin_group = %s\n' "$ADMIN_GROUP" >"$T/sandboxd.conf"
start_daemon --config "$T/sandboxd.conf" || exit 0
chmod 0755 "$T" && chmod 0666 "$SOCK"
# The checkout may sit below a directory other users cannot enter (/root): a copy they can read.
cp "$TESTS_DIR/client.py" "$T/client.py" && chmod 0644 "$T/client.py"

as() { # UID [GROUP] -- command...
	local uid=$1 groups=--clear-groups
	shift
	[ "$1" != -- ] && groups=--groups=$(getent group "$1" | cut -d: -f3) && shift
	shift
	(cd "$T" && setpriv --reuid="$uid" --regid="$uid" "$groups" "$@")
}
rpc_as() { # UID [GROUP] JSON: the final reply, parsed and printed again
	local json=${*: -1}
	as "${@:1:$#-1}" -- timeout 35 python3 "$T/client.py" "$SOCK" call "$json" --timeout 30
}
raw_as() { # UID JSON: the first line the daemon answers, exactly as it came
	printf '%s\n' "$2" | as "$1" -- timeout 35 python3 "$T/client.py" "$SOCK" raw --count 1 --timeout 30
}

# same_as_unknown UID TEMPLATE FOREIGN UNKNOWN DESC: TEMPLATE with @ replaced by FOREIGN (something
# of another user's) and by UNKNOWN (of the same length, never made) gets the same bytes back,
# once each key is replaced by @ in its own reply; and that reply is an error.
same_as_unknown() {
	local uid=$1 tpl=$2 foreign=$3 unknown=$4 desc=$5 a b
	a=$(raw_as "$uid" "${tpl//@/$foreign}")
	b=$(raw_as "$uid" "${tpl//@/$unknown}")
	a=${a//$foreign/@} b=${b//$unknown/@}
	if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$(jget "$a" .ok)" = false ]; then
		ok "$desc"
	else
		nok "$desc"
		diag "foreign: $a" "unknown: $b"
	fi
}

# ---- Names are unique per owner ----------------------------------------------------------
r=$(rpc_as $A '{"op":"create","best_effort":true,"name":"shared"}')
a1=$(jget "$r" .sandbox.id)
is "$(jget "$r" .sandbox.owner_uid)" $A "A creates a sandbox named 'shared'"
r=$(rpc_as $B '{"op":"create","best_effort":true,"name":"shared"}')
b1=$(jget "$r" .sandbox.id)
is "$(jget "$r" '"\(.ok) \(.sandbox.owner_uid)"')" "true $B" \
	"B creates one of the same name: names are unique per owner, another's neither told nor taken"
check "the two are different sandboxes" test -n "$a1" -a -n "$b1" -a "$a1" != "$b1"
r=$(rpc_as $A '{"op":"create","best_effort":true,"name":"shared"}')
is "$(jget "$r" '"\(.error.code) \(.error.field)"')" "conflict name" "A's second 'shared' is a conflict"
is "$(jget "$(rpc_as $A '{"op":"inspect","sandbox":"shared"}')" .sandbox.id)" "$a1" "A's 'shared' is A's"
is "$(jget "$(rpc_as $B '{"op":"inspect","sandbox":"shared"}')" .sandbox.id)" "$b1" "B's 'shared' is B's"
r=$(rpc_as $A '{"op":"run","sandbox":"shared","command":"echo a > /work/who"}')
is "$(jget "$r" .exit_code)" 0 "A runs in its 'shared'"

# ---- Root and admins: UID/NAME ----------------------------------------------------------
is "$(jget "$(rpc "{\"op\":\"inspect\",\"sandbox\":\"$A/shared\"}")" .sandbox.id)" "$a1" "root: $A/shared is A's"
is "$(jget "$(rpc "{\"op\":\"inspect\",\"sandbox\":\"$B/shared\"}")" .sandbox.id)" "$b1" "root: $B/shared is B's"
is "$(jget "$(rpc '{"op":"inspect","sandbox":"shared"}')" .error.code)" not_found \
	"root: a bare name is among root's own sandboxes (it has none)"
r=$(rpc_as $ADMIN $ADMIN_GROUP "{\"op\":\"run\",\"sandbox\":\"$A/shared\",\"argv\":[\"cat\",\"/work/who\"]}")
is "$(jget "$r" .stdout)" a "an admin ($ADMIN_GROUP) runs in $A/shared"
is "$(jget "$(rpc_as $A "{\"op\":\"inspect\",\"sandbox\":\"$A/shared\"}")" .sandbox.id)" "$a1" \
	"A may name its own as $A/shared"
for k in "0$A/shared" "+$A/shared" "/shared" "$A/" "$A/shared/x" "99999999999/shared"; do
	is "$(jget "$(rpc "{\"op\":\"inspect\",\"sandbox\":\"$k\"}")" .error.code)" not_found "root: '$k' names nothing"
done
user_a=$(getent passwd $A | cut -d: -f1)
if [ -n "$user_a" ]; then
	is "$(ctl --json inspect "$user_a/shared" | jq -r .sandbox.id)" "$a1" "sandboxctl: $user_a/shared is uid $A's"
	out=$(ctl inspect "no-such-user-xq/shared" 2>&1)
	like "$out" "no user 'no-such-user-xq'" "sandboxctl: an unknown user name is said so"
else
	ok "sandboxctl USER/NAME # SKIP uid $A has no name here"
	ok "sandboxctl unknown user # SKIP"
fi

# ---- Another user's replies are an unknown id's, byte for byte ----------------------------
never=sbx-000000000000
for tpl in '{"id":1,"op":"inspect","sandbox":"@"}' \
	'{"id":1,"op":"run","sandbox":"@","argv":["true"]}' \
	'{"id":1,"op":"snapshot","sandbox":"@","label":"x"}' \
	'{"id":1,"op":"snapshot.list","sandbox":"@"}' \
	'{"id":1,"op":"snapshot.restore","sandbox":"@","snapshot":"snap-000000000000"}' \
	'{"id":1,"op":"snapshot.delete","sandbox":"@","snapshot":"snap-000000000000"}' \
	'{"id":1,"op":"pty.open","sandbox":"@","argv":["true"]}' \
	'{"id":1,"op":"port.open","sandbox":"@","port":8000}' \
	'{"id":1,"op":"port.close","sandbox":"@","port":8000}' \
	'{"id":1,"op":"create","best_effort":true,"from_snapshot":"@/snap-000000000000"}' \
	'{"id":1,"op":"destroy","sandbox":"@"}'; do
	same_as_unknown $B "$tpl" "$a1" "$never" "B: $(jget "$tpl" .op) of A's sandbox by id reads as an unknown id's"
done
same_as_unknown $B '{"id":1,"op":"inspect","sandbox":"@"}' "$A/shared" "$A/sharex" \
	"B: $A/shared reads as a name A does not have"

# A's snapshot, session and run, by their own ids.
snap=$(jget "$(rpc_as $A '{"op":"snapshot","sandbox":"shared","label":"mine"}')" .snapshot.id)
like "$snap" '^snap-' "A snapshots its sandbox"
for tpl in '{"id":1,"op":"create","best_effort":true,"from_snapshot":"@"}' \
	"{\"id\":1,\"op\":\"create\",\"best_effort\":true,\"from_snapshot\":\"$A/shared/@\"}" \
	"{\"id\":1,\"op\":\"snapshot.delete\",\"sandbox\":\"$b1\",\"snapshot\":\"@\"}"; do
	same_as_unknown $B "$tpl" "$snap" "snap-000000000000" "B: $(jget "$tpl" .op) naming A's snapshot: as an unknown one"
done
r=$(raw_as $A '{"id":"s","op":"pty.open","sandbox":"shared","argv":["sleep","300"],"pty":false}')
sess=$(jget "$r" .session)
like "$sess" '^pty-' "A opens a session that outlives its connection"
for tpl in '{"id":1,"op":"pty.write","session":"@","data":"x"}' \
	'{"id":1,"op":"pty.resize","session":"@","rows":10,"cols":10}' \
	'{"id":1,"op":"pty.signal","session":"@","signal":"TERM"}' \
	'{"id":1,"op":"pty.attach","session":"@"}' \
	'{"id":1,"op":"pty.detach","session":"@"}' \
	'{"id":1,"op":"pty.close","session":"@"}'; do
	same_as_unknown $B "$tpl" "$sess" "pty-000000000000" "B: $(jget "$tpl" .op) of A's session: as an unknown one"
done
r=$(rpc_as $A "{\"op\":\"pty.signal\",\"session\":\"$sess\",\"signal\":\"KILL\"}")
is "$(jget "$r" .ok)" true "A's session was left alone (A ends it)"
printf '%s\n' '{"id":"bg","op":"run","sandbox":"shared","argv":["sleep","30"]}' |
	as $A -- timeout 60 python3 "$T/client.py" "$SOCK" raw --count 2 --timeout 45 >"$T/bg.out" 2>&1 &
bg=$!
has_started() { [ -s "$T/bg.out" ]; }
wait_until 20 has_started
run_id=$(jget "$(sed -n 1p "$T/bg.out")" .run_id)
like "$run_id" '^run-' "A has a run in flight"
same_as_unknown $B '{"id":1,"op":"kill","run_id":"@"}' "$run_id" "run-000000000000" "B: kill of A's run: as an unknown one"
is "$(jget "$(rpc_as $A "{\"op\":\"kill\",\"run_id\":\"$run_id\"}")" .ok)" true "A's run was left alone (A kills it)"
wait "$bg"

# ---- destroy: already_gone for the owner and admins only ----------------------------------
r=$(rpc_as $A '{"op":"create","best_effort":true}')
gone=$(jget "$r" .sandbox.id)
is "$(jget "$(rpc_as $A "{\"op\":\"destroy\",\"sandbox\":\"$gone\"}")" .destroyed)" true "A destroys $gone"
same_as_unknown $B '{"id":1,"op":"destroy","sandbox":"@"}' "$gone" "$never" \
	"B: destroy of A's destroyed sandbox is not_found, as an id that never existed"
same_as_unknown $B '{"id":1,"op":"inspect","sandbox":"@"}' "$gone" "$never" \
	"B: inspect of it as well"
is "$(jget "$(rpc_as $A "{\"op\":\"destroy\",\"sandbox\":\"$gone\"}")" '"\(.ok) \(.already_gone)"')" "true true" \
	"A: destroy again is ok, already_gone"
is "$(jget "$(rpc "{\"op\":\"destroy\",\"sandbox\":\"$gone\"}")" .already_gone)" true "root: already_gone too"
is "$(jget "$(rpc_as $ADMIN $ADMIN_GROUP "{\"op\":\"destroy\",\"sandbox\":\"$gone\"}")" .already_gone)" true \
	"an admin: already_gone too"
is "$(jget "$(rpc_as $B "{\"op\":\"destroy\",\"sandbox\":\"$never\"}")" .error.code)" not_found \
	"an id that never existed is not_found"

# ---- health: a non-admin's own counts ----------------------------------------------------
r=$(rpc_as $B '{"op":"health"}')
is "$(jget "$r" '"\(.scope) \(.sandboxes) \(.runs) \(.quarantined) \(.netns)"')" "caller 1 0 null null" \
	"health for B: its own sandbox only (scope caller), no daemon-wide figures"
is "$(jget "$r" .connections)" 1 "health for B: its own connection"
other_user_files || nok "the test's programs could be copied for another uid"
like "$(as $B -- timeout 30 "$OTHER_SANDBOXCTL" --socket "$SOCK" status 2>&1)" "sandboxes: +1 \(yours\)" \
	"sandboxctl status for B says the count is its own"
r=$(rpc '{"op":"health"}')
is "$(jget "$r" '"\(.scope) \(.sandboxes)"')" "all 2" "health for root: every sandbox (scope all)"
is "$(jget "$(rpc_as $ADMIN $ADMIN_GROUP '{"op":"health"}')" '"\(.scope) \(.sandboxes)"')" "all 2" \
	"health for an admin: every sandbox"

# ---- Two sandboxes of one name come back after a restart --------------------------------
stop_daemon
start_daemon --config "$T/sandboxd.conf" || exit 0
chmod 0666 "$SOCK"
r=$(rpc '{"op":"health"}')
is "$(jget "$r" '"\(.sandboxes) \(.quarantined)"')" "2 0" "after a restart both 'shared' are back, none set aside"
is "$(jget "$(rpc_as $B '{"op":"inspect","sandbox":"shared"}')" .sandbox.id)" "$b1" "B's 'shared' is still B's"
is "$(jget "$(rpc "{\"op\":\"inspect\",\"sandbox\":\"$A/shared\"}")" .sandbox.id)" "$a1" "and $A/shared A's"
rpc "{\"op\":\"destroy\",\"sandbox\":\"$a1\"}" >/dev/null
rpc "{\"op\":\"destroy\",\"sandbox\":\"$b1\"}" >/dev/null
stop_daemon
