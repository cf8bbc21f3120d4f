#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Small things of snapshots a user sees: frozen_s (and every other seconds field) is written
# rounded to microseconds; sandboxctl restore says the processes were killed; a fork from a
# snapshot takes its source's limits (and best_effort) unless the request gives them.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0
r=$(rpc '{"op":"create","best_effort":true,"name":"src","limits":{"memory":"300M","timeout_s":"45s","output_bytes":"3M","open_files":100,"file_size":"20M"}}')
src=$(jget "$r" .sandbox.id)
like "$src" '^sbx-' "a sandbox with limits of its own ($src)"
rpc '{"op":"run","sandbox":"src","command":"echo hi > /work/f"}' >/dev/null

# The raw line, as json-c writes it: at most 6 decimals.
raw=$(timeout 60 python3 - "$SOCK" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b'{"id":1,"op":"snapshot","sandbox":"src"}\n')
buf = b""
while True:
    buf += s.recv(65536)
    for line in buf.split(b"\n")[:-1]:
        if b'"ok"' in line:
            print(line.decode()); sys.exit(0)
PY
)
snap=$(jget "$raw" .snapshot.id)
like "$snap" '^snap-' "a snapshot ($snap)"
frozen=$(printf '%s' "$raw" | grep -oE '"frozen_s": ?[0-9.e-]+' | sed 's/.*: *//')
like "$frozen" '^[0-9]+\.[0-9]{1,6}$' "frozen_s is written rounded to microseconds ($frozen)"
r=$(rpc '{"op":"inspect","sandbox":"src"}')
timeout_raw=$(python3 "$TESTS_DIR/client.py" "$SOCK" call '{"op":"inspect","sandbox":"src"}' --timeout 30 | grep -oE '"timeout_s": ?[0-9.e-]+' | sed 's/.*: *//')
is "$timeout_raw" "45.0" "inspect's limits.timeout_s is 45.0"

# A fork: the source's limits.
r=$(rpc "{\"op\":\"create\",\"from_snapshot\":\"$snap\",\"name\":\"fork1\"}")
is "$(jget "$r" .ok)" true "a fork without limits or best_effort is created ($(jget "$r" .error.message))"
is "$(jget "$r" '.sandbox.limits | [.memory, .timeout_s, .output_bytes, .open_files, .file_size] | tostring')" \
        "[314572800,45,3145728,100,20971520]" "the fork has its source's limits"
is "$(jget "$r" .sandbox.best_effort)" true "and its best_effort"
is "$(jget "$(rpc '{"op":"run","sandbox":"fork1","command":"cat /work/f"}')" .stdout)" "hi" "and its workspace"
r=$(rpc "{\"op\":\"create\",\"from_snapshot\":\"$snap\",\"name\":\"fork2\",\"limits\":{\"timeout_s\":\"20s\"}}")
is "$(jget "$r" '.sandbox.limits | [.memory, .timeout_s, .open_files] | tostring')" "[314572800,20,100]" \
        "a limit the fork's request gives is its own; the others are the source's"

# restore says what happens, and only what did: nothing was running here.
out=$(ctl restore src "$snap" 2>&1)
like "$out" "^restored src from $snap \\([^)]*\\); every process of it was killed and it has a new init\$" \
        "sandboxctl restore says the processes were killed, and no runs or sessions where there were none ($out)"
check "and does not say they were restarted" sh -c "! printf '%s' '$out' | grep -q restarted"
# A run in flight and a session: the reply counts both, and so does sandboxctl.
ctl run --sandbox src -- sleep 100 >/dev/null 2>&1 &
runner=$!
r=$(rpc '{"op":"pty.open","sandbox":"src","argv":["sleep","100"],"pty":false}')
is "$(jget "$r" .ok)" true "a session runs in src"
src_run() { [ "$(jget "$(rpc '{"op":"inspect","sandbox":"src"}')" .sandbox.runs_in_flight)" = 1 ]; }
check "and a run" wait_until 30 src_run
out=$(ctl restore src "src/$snap" 2>&1)
like "$out" "^restored src from src/$snap \\([^)]*\\); every process of it was killed \\(1 run in flight ended as killed, 1 session ended\\) and it has a new init\$" \
        "with a run and a session, restore names both ($out)"
wait "$runner"
r=$(rpc "{\"op\":\"snapshot.restore\",\"sandbox\":\"src\",\"snapshot\":\"$snap\"}" 120)
is "$(jget "$r" '[.runs_killed, .sessions_ended] | tostring')" "[0,0]" "snapshot.restore's reply: runs_killed and sessions_ended"

# A snapshot field may be "SANDBOX/ID" (as from_snapshot and the Python package's Snapshot.ref
# write it) where SANDBOX is this sandbox, by id or name; another sandbox is refused, saying so.
for ref in "src/$snap" "$src/$snap"; do
        r=$(rpc "{\"op\":\"snapshot.restore\",\"sandbox\":\"src\",\"snapshot\":\"$ref\"}" 120)
        is "$(jget "$r" '.ok, .snapshot' | tr '\n' ' ')" "true $snap " "snapshot.restore takes \"snapshot\":\"$ref\""
done
r=$(rpc "{\"op\":\"snapshot.restore\",\"sandbox\":\"src\",\"snapshot\":\"fork1/$snap\"}")
is "$(jget "$r" '.error.code + " " + .error.field')" "invalid_request snapshot" "a SANDBOX/ID naming another sandbox is refused"
like "$(jget "$r" .error.message)" "is of another sandbox than $src" "and the message says so"
r=$(rpc "{\"op\":\"snapshot.delete\",\"sandbox\":\"src\",\"snapshot\":\"fork1/$snap\"}")
is "$(jget "$r" '.error.code + " " + .error.field')" "invalid_request snapshot" "likewise for snapshot.delete"
r=$(rpc "{\"op\":\"snapshot.delete\",\"sandbox\":\"src\",\"snapshot\":\"nosuch/$snap\"}")
is "$(jget "$r" '.error.code + " " + .error.field')" "not_found snapshot" "one naming no sandbox is an unknown snapshot"
snap2=$(jget "$(rpc '{"op":"snapshot","sandbox":"src"}' 120)" .snapshot.id)
out=$(ctl snapshot-delete src "src/$snap2" 2>&1)
is "$out" "deleted $snap2" "sandboxctl snapshot-delete SANDBOX SANDBOX/ID (it names the id deleted)"
is "$(ctl --json snapshots src | jq -r '[.snapshots[].id] | join(" ")')" "$snap" "and that snapshot is gone"
