#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Errors say what they are about: every error about a path names the path, every error about a
# sandbox names the sandbox, in the daemon's reply (so that every client shows it), and
# sandboxctl cat/cp print it.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0
sbx=$(jget "$(rpc '{"op":"create","best_effort":true,"name":"e1"}')" .sandbox.id)
like "$sbx" '^sbx-' "a sandbox ($sbx)"

r=$(rpc '{"op":"file.stat","sandbox":"e1","path":"/work/nope"}')
is "$(jget "$r" '[.error.code, .error.field, .error.message] | tostring')" \
        '["not_found","path","/work/nope: No such file or directory"]' "file.stat of a missing path names it"
r=$(rpc '{"op":"file.read","sandbox":"e1","path":"nope/deeper"}')
is "$(jget "$r" .error.message)" "/work/nope/deeper: No such file or directory" "a relative path is named as resolved below /work"
rpc '{"op":"run","sandbox":"e1","command":"echo x > /work/f"}' >/dev/null
r=$(rpc '{"op":"file.stat","sandbox":"e1","path":"/work/f/x"}')
is "$(jget "$r" .error.message)" "/work/f/x: no such file or directory (a component is not a directory)" \
        "a file used as a directory: named"
r=$(rpc '{"op":"file.write","sandbox":"e1","path":"/usr/x","data":"hi"}')
is "$(jget "$r" '[.error.code, .error.message] | tostring')" '["permission_denied","/usr/x: Read-only file system"]' \
        "a write to the read-only /usr names the path"
r=$(rpc '{"op":"file.remove","sandbox":"e1","path":"/work"}')
like "$(jget "$r" .error.message)" '^/work: is / or /work' "a refused remove names the path"
r=$(rpc "{\"op\":\"file.stat\",\"sandbox\":\"e1\",\"path\":\"/work/$(printf 'a%.0s' $(seq 1 250))/$(printf 'b%.0s' $(seq 1 250))\"}")
like "$(jget "$r" .error.message)" '^/work/aaaa+\.\.\.b+: No such file or directory$' "a long path is cut in its middle, the words stay"

out=$(ctl cat e1 /work/x 2>&1)
is "$out" "sandboxctl: not_found: /work/x: No such file or directory (field: path)" "sandboxctl cat names the path"
out=$(cd "$T" && ctl cp nosuch:/work/x ./x 2>&1)
is "$out" "sandboxctl: not_found: no sandbox 'nosuch' (field: sandbox)" "cp from a sandbox that does not exist says so, naming it"
out=$(cd "$T" && ctl cp ./nothing-here e1:/work/y 2>&1)
like "$out" "nothing-here" "cp of a missing local file names it ($out)"
out=$(cd "$T" && ctl cp e1:/work/x ./x 2>&1)
like "$out" "/work/x" "cp of a missing file in the sandbox names it ($out)"

# The daemon names its fields; sandboxctl names the option that set the field.
out=$(ctl run -s e1 --timeout 0 -- true 2>&1)
is "$out" "sandboxctl: invalid_request: --timeout must be positive (option: --timeout)" "run --timeout 0 names --timeout, not timeout_s"
out=$(ctl create --best-effort --memory 1k 2>&1)
is "$out" "sandboxctl: invalid_request: --memory must be at least 1M (option: --memory)" "create --memory 1k names --memory, not limits.memory"
out=$(ctl run -s e1 --memory 1k -- true 2>&1)
like "$out" "^sandboxctl: invalid_request: --memory must be at least 1M.* \\(option: --memory\\)$" "run -s --memory 1k names --memory, not memory ($out)"

rpc '{"op":"sandbox.freeze","sandbox":"e1"}' >/dev/null
r=$(rpc '{"op":"run","sandbox":"e1","command":"true"}')
is "$(jget "$r" .error.message)" "sandbox $sbx is frozen (sandbox.thaw resumes it)" "a run in a frozen sandbox names it"
r=$(rpc '{"op":"file.stat","sandbox":"e1","path":"/work"}')
is "$(jget "$r" .error.message)" "sandbox $sbx is frozen (sandbox.thaw resumes it)" "so does a file operation"
r=$(rpc '{"op":"pty.open","sandbox":"e1","argv":["true"]}')
is "$(jget "$r" .error.message)" "sandbox $sbx is frozen (sandbox.thaw resumes it)" "and a session"
rpc '{"op":"sandbox.thaw","sandbox":"e1"}' >/dev/null

# An empty SANDBOX argument ("$id" after a create that failed) is said to be empty, by every verb
# that takes one, before any request: not the protocol's "missing field 'sandbox'".
empty_sbx() {
        local name=$1 out rc
        shift
        out=$(ctl "$@" 2>&1 </dev/null)
        rc=$?
        # 1, or 125 for run, exec and shell (whose own statuses pass through otherwise).
        is "$rc:$out" "$(case $name in run*|exec|shell) echo 125 ;; *) echo 1 ;; esac):sandboxctl: the sandbox argument is empty: give a sandbox's id, name or USER/NAME" \
                "sandboxctl $name with an empty SANDBOX says so"
}
empty_sbx inspect inspect ""
empty_sbx destroy destroy ""
empty_sbx "run --sandbox" run --sandbox "" -- true
empty_sbx exec exec "" true
empty_sbx shell shell ""
empty_sbx sessions sessions ""
empty_sbx ls ls ""
empty_sbx cat cat "" /work/f
empty_sbx rm rm "" /work/f
empty_sbx port port "" 8000
empty_sbx snapshot snapshot ""
empty_sbx snapshots snapshots ""
empty_sbx restore restore "" snap-000000000000
empty_sbx snapshot-delete snapshot-delete "" snap-000000000000
empty_sbx sweep sweep ""

# sandboxctl image import makes a relative path absolute for the daemon, and names it as people
# would: no "/./" in it.
mkdir -p "$T/imgdir"
out=$(cd "$T/imgdir" && ctl image import bb2 ./nonexistent.tar 2>&1)
like "$out" "^sandboxctl: not_found: $T/imgdir/nonexistent.tar" "image import ./x names the path without '/./' ($out)"
out=$(cd "$T/imgdir" && ctl image import bb2 ../imgdir//nonexistent.tar 2>&1)
like "$out" "^sandboxctl: not_found: $T/imgdir/nonexistent.tar" "... and a leading '..' climbs, '//' is one '/' ($out)"
