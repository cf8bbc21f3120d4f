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

# restore says what happens.
out=$(ctl restore src "$snap" 2>&1)
like "$out" "^restored src from $snap \\(.*\\); every process of it was killed \\(0 runs in flight ended as killed, sessions ended\\) and it has a new init\$" \
        "sandboxctl restore says the processes were killed ($out)"
check "and does not say they were restarted" sh -c "! printf '%s' '$out' | grep -q restarted"
