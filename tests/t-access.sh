#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Who may do what: a sandbox belongs to the uid that created it (SO_PEERCRED). Another user can
# neither list, inspect, run in, kill, snapshot, restore, fork from nor destroy it, and learns
# nothing: not_found, as for an id that
# does not exist. Root and members of admin_group see everything. Per-uid caps hold.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

A=65534 B=65533 ADMIN=65532 ADMIN_GROUP=users
mkdir -p "$T"
printf 'admin_group = %s\nmax_sandboxes_per_uid = 2\nmax_connections_per_uid = 4\nmax_buffered_per_uid = 8M\n' "$ADMIN_GROUP" >"$T/sandboxd.conf"
start_daemon --config "$T/sandboxd.conf" || exit 0
# Let other users reach the test socket (the packaged socket unit uses group sandboxd instead).
chmod 0755 "$T" && chmod 0666 "$SOCK"

# What the other uids run is copied where they may read it (lib.sh: other_user_files).
check "the client and sandboxctl are copied where other uids may run them" other_user_files
as() { # UID [GROUP] -- command...
	local uid=$1 groups=--clear-groups
	shift
	[ "$1" != -- ] && groups=--groups=$(getent group "$1" | cut -d: -f3) && shift
	shift
	as_other "$uid" --regid="$uid" "$groups" -- "$@"
}
rpc_as() { # UID [GROUP] JSON
	local json=${*: -1}
	as "${@:1:$#-1}" -- timeout 35 python3 "$OTHER_CLIENT" "$SOCK" call "$json" --timeout 30
}

r=$(rpc_as $A '{"op":"hello"}')
is "$(jget "$r" .peer.uid)" $A "the daemon identifies the client by SO_PEERCRED (uid $A)"
r=$(rpc_as $A '{"op":"create","best_effort":true,"name":"a1"}')
is "$(jget "$r" .sandbox.owner_uid)" $A "user A creates sandbox a1, owned by A"
a1=$(jget "$r" .sandbox.id)
wd=$(jget "$r" .sandbox.workdir)
r=$(rpc_as $A '{"op":"run","sandbox":"a1","command":"echo secret > /work/s"}')
is "$(jget "$r" .exit_code)" 0 "A runs in a1"

is "$(jget "$(rpc_as $B '{"op":"list"}')" '.sandboxes | length')" 0 "user B's list does not show a1"
for req in "{\"op\":\"inspect\",\"sandbox\":\"$a1\"}" '{"op":"inspect","sandbox":"a1"}' \
	"{\"op\":\"run\",\"sandbox\":\"$a1\",\"argv\":[\"cat\",\"/work/s\"]}" \
	"{\"op\":\"destroy\",\"sandbox\":\"$a1\"}"; do
	r=$(rpc_as $B "$req")
	is "$(jget "$r" .error.code)" not_found "user B: $(jget "$req" .op) of A's sandbox ($(jget "$req" .sandbox)) is not_found"
done
r=$(rpc_as $B '{"op":"inspect","sandbox":"sbx-000000000000"}')
is "$(jget "$r" .error.message | sed 's/sbx-[0-9a-f]*//')" \
	"$(jget "$(rpc_as $B "{\"op\":\"inspect\",\"sandbox\":\"$a1\"}")" .error.message | sed 's/sbx-[0-9a-f]*//')" \
	"the refusal reads the same as for an id that does not exist"
r=$(rpc_as $B "{\"op\":\"run\",\"sandbox\":\"$a1\",\"user\":\"root\",\"argv\":[\"cat\",\"/work/s\"]}")
is "$(jget "$r" .error.code)" not_found "user B: a run as root of A's sandbox is not_found all the same"
# A run of A's in flight: B cannot kill it, and it goes on.
as $A -- timeout 60 python3 "$OTHER_CLIENT" "$SOCK" raw --count 2 --timeout 40 \
	<<<'{"id":"bg","op":"run","sandbox":"a1","argv":["sleep","20"]}' >"$T/bg.out" 2>&1 &
bg=$!
has_lines() { [ "$(wc -l <"$T/bg.out")" -ge "$1" ]; }
wait_until 30 has_lines 1
run_id=$(jget "$(sed -n 1p "$T/bg.out")" .run_id)
r=$(rpc_as $B "{\"op\":\"kill\",\"run_id\":\"$run_id\"}")
is "$(jget "$r" .error.code)" not_found "user B: kill of A's run in flight ($run_id) is not_found"
is "$(jget "$(rpc_as $A "{\"op\":\"inspect\",\"sandbox\":\"a1\"}")" .sandbox.runs_in_flight)" 1 "A's run goes on"
r=$(rpc_as $A "{\"op\":\"kill\",\"run_id\":\"$run_id\"}")
is "$(jget "$r" .ok)" true "A may kill it"
wait "$bg"
is "$(jget "$(sed -n 2p "$T/bg.out")" .reason)" killed "A's run ends killed (by A)"
# Snapshots of A's sandbox: B can neither take, list, restore, delete nor fork from them.
r=$(rpc_as $A '{"op":"snapshot","sandbox":"a1","label":"mine"}')
snap=$(jget "$r" .snapshot.id)
is "$(jget "$r" .ok)" true "A snapshots a1 ($snap)"
for req in '{"op":"snapshot","sandbox":"a1"}' '{"op":"snapshot.list","sandbox":"a1"}' \
	"{\"op\":\"snapshot.restore\",\"sandbox\":\"a1\",\"snapshot\":\"$snap\"}" \
	"{\"op\":\"snapshot.delete\",\"sandbox\":\"a1\",\"snapshot\":\"$snap\"}"; do
	r=$(rpc_as $B "$req")
	is "$(jget "$r" .error.code)" not_found "user B: $(jget "$req" .op) of A's sandbox is not_found"
done
r=$(rpc_as $B "{\"op\":\"create\",\"best_effort\":true,\"from_snapshot\":\"$snap\"}")
is "$(jget "$r" .error.code)" not_found "user B: a fork from A's snapshot is not_found"
is "$(jget "$(rpc_as $A '{"op":"snapshot.list","sandbox":"a1"}')" '[.snapshots[].id] | join(",")')" "$snap" \
	"A's snapshot is still there, alone"
b_reads() { as $B -- cat "$wd/s" 2>/dev/null; }
check "A's file is there on the host" test -f "$wd/s"
if b_reads >/dev/null; then nok "user B cannot read A's workspace on the host"; else ok "user B cannot read A's workspace on the host"; fi

is "$(jget "$(rpc '{"op":"list"}')" '[.sandboxes[].id] | join(",")')" "$a1" "root sees a1"
is "$(jget "$(rpc_as $ADMIN $ADMIN_GROUP '{"op":"list"}')" '[.sandboxes[].id] | join(",")')" "$a1" \
	"a member of admin_group ($ADMIN_GROUP) sees a1"
r=$(rpc_as $ADMIN $ADMIN_GROUP "{\"op\":\"run\",\"sandbox\":\"$A/a1\",\"argv\":[\"cat\",\"/work/s\"]}")
is "$(jget "$r" .stdout)" secret "the admin can run in a1 (as $A/a1: names are per owner)"

r=$(rpc_as $A '{"op":"create","best_effort":true}')
is "$(jget "$r" .ok)" true "A creates a second sandbox"
r=$(rpc_as $A '{"op":"create","best_effort":true}')
is "$(jget "$r" .error.code)" resource_exhausted "a third is refused: max_sandboxes_per_uid = 2"
r=$(rpc_as $B '{"op":"create","best_effort":true}')
is "$(jget "$r" .ok)" true "the cap is per uid: B may still create"

# One uid holding its max_connections_per_uid (4) cannot lock the others out (THREATS PRO-07).
mkdir -m 1777 "$T/conncap"
as $A -- timeout 60 python3 - "$SOCK" "$T/conncap" 2>"$T/conncap/err" <<'EOF' &
import json, os, socket, sys, time
conns = []
for i in range(4):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(b'{"id":1,"op":"health"}\n')
    conns.append(s.makefile("rb"))
answered = [json.loads(f.readline()).get("ok") for f in conns]
open(os.path.join(sys.argv[2], "held"), "w").write(json.dumps(answered))
for _ in range(300):
    if os.path.exists(os.path.join(sys.argv[2], "release")):
        break
    time.sleep(0.1)
EOF
holder=$!
wait_until 10 test -s "$T/conncap/held" || diag "$(cat "$T/conncap/err")"
is "$(cat "$T/conncap/held")" "[true, true, true, true]" "uid A holds four connections, each answered"
first_line_as() { # UID: the first line the daemon sends a new connection of UID, and whether it then closes it
	as "$1" -- timeout 20 python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(5)
try: s.sendall(b"{\"id\":7,\"op\":\"health\"}\n")
except OSError: pass  # a refused connection may be closed already
f = s.makefile("rb"); line = f.readline().decode().strip()
print(line)
def rest():
    try: return f.readline()
    except ConnectionResetError: return b""  # closed with our request unread
if "\"ok\":false" in line: print("closed" if rest() == b"" else "open")' "$SOCK"
}
out=$(first_line_as $A)
is "$(jget "$(head -1 <<<"$out")" '.error.code')" resource_exhausted "a fifth connection of A: resource_exhausted"
is "$(jget "$(head -1 <<<"$out")" '.error.message')" "uid $A has its maximum of 4 connections (max_connections_per_uid)" \
	"the message names the uid and the setting"
is "$(tail -1 <<<"$out")" closed "and the connection is closed"
is "$(jget "$(first_line_as $B | head -1)" .ok)" true "meanwhile uid B is answered"
is "$(jget "$(rpc '{"op":"health"}')" .ok)" true "and root"
touch "$T/conncap/release"
wait "$holder"
is "$(jget "$(first_line_as $A | head -1)" .ok)" true "once A's connections are closed, A connects again"

# What the daemon holds for one uid is capped at max_buffered_per_uid (8M here; RES-06, PRO-02):
# what the replies of its runs in flight may take (both streams at output_bytes, as base64:
# 2 x 4/3 x output_bytes), their stdin, its unread replies and its unended requests.
mkdir -m 1777 "$T/bufcap"
r=$(as $A -- timeout 60 python3 - "$SOCK" 2>"$T/bufcap/err" <<'EOF'
import json, socket, sys, time
def conn():
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(30)
    return s, s.makefile("rb")
def send(c, req):
    c[0].sendall(json.dumps(req).encode() + b"\n")
def final(c):
    while True:
        m = json.loads(c[1].readline())
        if "event" not in m:
            return m
def call(c, req):
    send(c, req)
    return final(c)
def code(m):
    return m.get("error", {}).get("code") if not m.get("ok") else "ok"
out = {}
a = conn()
# 2M of output per stream may take 5.3M of reply: a second such run of the same uid does not fit.
send(a, {"id": 1, "op": "run", "sandbox": "a1", "command": "sleep 3", "output_bytes": "2M"})
while True:
    m = json.loads(a[1].readline())
    if m.get("event") == "started":
        break
    if "event" not in m:
        raise SystemExit("the first run did not start: %s" % m)
r = call(conn(), {"id": 2, "op": "run", "sandbox": "a1", "argv": ["true"], "output_bytes": "2M"})
out["second"] = [r.get("error", {}).get("code"), r.get("error", {}).get("field"), r.get("error", {}).get("message")]
out["small"] = code(call(conn(), {"id": 3, "op": "run", "sandbox": "a1", "argv": ["true"], "output_bytes": "512K"}))
out["first"] = final(a).get("reason")
out["after"] = code(call(conn(), {"id": 4, "op": "run", "sandbox": "a1", "argv": ["true"], "output_bytes": "2M"}))
# Runs of 1M of binary output on both streams (a reply of 2.7M each). A client that reads as
# they come gets both of two.
cmd = "head -c 1000000 /dev/urandom; head -c 1000000 /dev/urandom >&2"
d = conn()
for i in range(2):
    send(d, {"id": 30 + i, "op": "run", "sandbox": "a1", "command": cmd, "output_bytes": "1M"})
out["reader"] = [code(final(d)) for i in range(2)]
# A client that never reads: of four sent at once, two fit; the others are refused, and the two
# replies wait unread within the budget. Once read, the uid's next run fits again.
b = conn()
for i in range(4):
    send(b, {"id": 10 + i, "op": "run", "sandbox": "a1", "command": cmd, "output_bytes": "1M"})
time.sleep(4)
out["pipelined"] = sorted(code(final(b)) for i in range(4))
out["later"] = call(conn(), {"id": 20, "op": "run", "sandbox": "a1", "command": "echo fine", "output_bytes": "2M"}).get("stdout")
print(json.dumps(out))
EOF
)
[ -n "$r" ] || diag "$(cat "$T/bufcap/err")"
is "$(jget "$r" '.second[0:2] | join(" ")')" "resource_exhausted output_bytes" \
	"uid A with a 2M-output run in flight: a second one (5.3M more) is refused, field output_bytes"
like "$(jget "$r" '.second[2]')" "^uid $A holds 5.3M of run output and unread replies; this run's 5.3M more would pass max_buffered_per_uid \\(8M\\)$" \
	"the message says what the uid holds and names the setting"
is "$(jget "$r" .small)" ok "a run that fits in what is left (512K of output) is accepted"
is "$(jget "$r" '"\(.first) \(.after)"')" "exited ok" "once the first has ended, the 2M run is accepted"
is "$(jget "$r" '.reader | join(",")')" "ok,ok" "a client that reads gets the replies of its two runs of 2.7M each"
is "$(jget "$r" '.pipelined | join(",")')" "ok,ok,resource_exhausted,resource_exhausted" \
	"a client that never reads: two of four runs fit, the others are refused"
is "$(jget "$r" .later)" fine "once it has read them, the uid's next run is accepted: nothing stays counted"
# Requests not yet ended count too: three connections of A each hold 3M of a line without its
# newline; the third passes 8M and is closed, the first two live on.
r=$(as $A -- timeout 60 python3 - "$SOCK" 2>"$T/bufcap/err2" <<'EOF'
import json, socket, sys, time
conns = []
for i in range(3):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(10)
    try:
        s.sendall(b'{"id":%d,"op":"health","pad":"' % i + b"x" * (3 << 20))
    except (BrokenPipeError, ConnectionResetError):
        pass  # closed while it was still sending: what is looked at below
    conns.append(s)
    time.sleep(0.5)
def closed(s):
    s.settimeout(0.5)
    try:
        return s.recv(1) == b""
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True
state = [closed(s) for s in conns]
replies = []
for s in conns[:2]:
    s.settimeout(10)
    s.sendall(b'"}\n')
    replies.append(json.loads(s.makefile("rb").readline()).get("error", {}).get("field"))
print(json.dumps({"closed": state, "replies": replies}))
EOF
)
[ -n "$r" ] || diag "$(cat "$T/bufcap/err2")"
is "$(jget "$r" '.closed | map(tostring) | join(",")')" "false,false,true" \
	"three unended 3M requests of one uid: the one that passes 8M is closed, the first two are not"
is "$(jget "$r" '.replies | join(",")')" "pad,pad" "the first two, ended, are answered (an unknown field 'pad')"
like "$(cat "$T/daemon.log")" "bytes of a request not yet ended, closing it" "the daemon's log says why"
r=$(rpc_as $B '{"op":"run","best_effort":true,"argv":["true"],"output_bytes":"2M"}')
is "$(jget "$r" .ok)" true "the cap is per uid: B runs with 2M of output"
r=$(rpc_as $A "{\"op\":\"destroy\",\"sandbox\":\"$a1\"}")
is "$(jget "$r" .destroyed)" true "A destroys a1"

# Who may connect at all: the socket unit makes the socket root:sandboxd 0660 (units/).
grep -q '^SocketMode=0660$' "$top_srcdir/units/sandboxd.socket.in" &&
	grep -q '^SocketGroup=sandboxd$' "$top_srcdir/units/sandboxd.socket.in" &&
	grep -q '^g sandboxd ' "$top_srcdir/units/sysusers.d/sandboxd.conf"
is "$?" 0 "the socket unit is root:sandboxd 0660, and sysusers creates group sandboxd"
ctl_as() { # UID [GROUP] -- sandboxctl args...: "STATUS: stderr"
	local out rc
	out=$(as "$@" 2>&1 >/dev/null)
	rc=$?
	printf '%s: %s' "$rc" "$out"
}
chmod 0660 "$SOCK" && chgrp "$ADMIN_GROUP" "$SOCK"
like "$(ctl_as $B -- "$OTHER_SANDBOXCTL" --socket "$SOCK" list)" \
	"^1: sandboxctl: permission denied on $SOCK: only root and members of group '$ADMIN_GROUP' may use sandboxd; add yourself \(sudo usermod -aG $ADMIN_GROUP \\\$USER\) and log in again$" \
	"sandboxctl as a uid outside the socket's group: EACCES explained (the socket's group, usermod -aG, log in again)"
is "$(ctl_as $ADMIN $ADMIN_GROUP -- "$OTHER_SANDBOXCTL" --socket "$SOCK" list)" "0: " "a member of the socket's group connects"
chmod 0666 "$SOCK"
like "$(ctl_as $B -- "$OTHER_SANDBOXCTL" --socket "$T/missing.sock" list)" \
	"^1: sandboxctl: no sandboxd socket at $T/missing.sock: start it with 'systemctl enable --now sandboxd.socket' under systemd, else 'sandboxd --listen $T/missing.sock'" \
	"sandboxctl on a missing socket: ENOENT explained (enable sandboxd.socket, or without systemd sandboxd --listen)"
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$T/stale.sock" && chmod 0666 "$T/stale.sock"
like "$(ctl_as $B -- "$OTHER_SANDBOXCTL" --socket "$T/stale.sock" list)" \
	"^1: sandboxctl: nothing is listening on $T/stale.sock .*systemctl restart sandboxd.socket" \
	"sandboxctl on a socket nobody listens on: ECONNREFUSED explained (restart sandboxd.socket)"
stop_daemon
