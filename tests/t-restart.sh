#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Nothing a user stored is lost when the daemon dies: after SIGKILL or SIGTERM, the next daemon
# lists every recorded sandbox with its workspace, says when it brought it back, and removes
# what the crash left half-done. Processes that were running do not survive (docs/protocol.md).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0
r=$(rpc '{"op":"create","best_effort":true,"name":"keep","user":"root"}')
id=$(jget "$r" .sandbox.id)
wd=$(jget "$r" .sandbox.workdir)
r=$(rpc '{"op":"run","sandbox":"keep","command":"echo precious > /work/file; mkdir -p /work/d/e; sleep 1000 >/dev/null 2>&1 &"}')
is "$(jget "$r" .exit_code)" 0 "a file and a background process in sandbox 'keep'"
old_init=$(for p in $(cg_procs "$CG/sandboxes/$id/init"); do echo "$p"; done | head -1)

kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
# What a crash in the middle of work leaves: a workspace being removed, a sandbox never recorded.
mkdir -p "$T/state/sandboxes/.trash-sbx-0123456789ab/x" "$T/state/sandboxes/sbx-00000000abcd/work"
start_daemon || exit 0

r=$(rpc '{"op":"list"}')
is "$(jget "$r" '[.sandboxes[] | .id + "/" + (.name // "")] | join(",")')" "$id/keep" \
	"after SIGKILL, the next daemon lists the sandbox with its id and name"
r=$(rpc '{"op":"inspect","sandbox":"keep"}')
is "$(jget "$r" .sandbox.state)" ready "it is ready"
like "$(jget "$r" .sandbox.restarted_at)" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T' "inspect says when it was brought back"
is "$(jget "$r" .sandbox.workdir)" "$wd" "its workspace is the same directory"
is "$(jget "$r" .sandbox.user)" root "its user option (root) is kept"
r=$(rpc '{"op":"run","sandbox":"keep","command":"cat /work/file; test -d /work/d/e && echo dir; pgrep -c sleep || true"}')
is "$(jget "$r" .stdout)" $'precious\ndir\n0' "its files are intact; the background process did not survive"
# Killed, it is reaped by whoever inherited it when the daemon died (PID 1 here), so it may
# linger as a zombie for a moment: gone means no longer running.
_init_gone() { [ -z "$old_init" ] || [ "$(awk '/^State:/ { print $2 }' "/proc/$old_init/status" 2>/dev/null)" = "" ] ||
	[ "$(awk '/^State:/ { print $2 }' "/proc/$old_init/status" 2>/dev/null)" = Z ]; }
check "the old init is gone (killed; at most a zombie awaiting its new parent)" wait_until 5 _init_gone
is "$(cg_child_count)" 2 "its cgroups are new: the sandbox and its init's leaf"
check "the half-removed workspace was cleaned up" [ ! -e "$T/state/sandboxes/.trash-sbx-0123456789ab" ]
check "the unrecorded sandbox directory was cleaned up" [ ! -e "$T/state/sandboxes/sbx-00000000abcd" ]
r=$(rpc '{"op":"create","best_effort":true,"name":"keep"}')
is "$(jget "$r" .error.code)" conflict "its name is still taken"

stop_daemon
start_daemon || exit 0
r=$(rpc '{"op":"run","sandbox":"keep","argv":["cat","/work/file"]}')
is "$(jget "$r" .stdout)" precious "after a clean stop and start, the sandbox and its files are back too"
r=$(rpc "{\"op\":\"destroy\",\"sandbox\":\"$id\"}")
is "$(jget "$r" .destroyed)" true "destroy"
stop_daemon
start_daemon || exit 0
is "$(jget "$(rpc '{"op":"list"}')" '.sandboxes | length')" 0 "a destroyed sandbox stays destroyed across a restart"
stop_daemon
