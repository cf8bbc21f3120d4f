#!/bin/bash
# One transient scope per sandbox under a real systemd 252 (issue 22, docs/design/restarts.md
# section 2): each sandbox is sandboxd-<id>.scope in sandboxd.slice, outside the service's cgroup,
# so that `systemctl restart sandboxd` and a SIGKILL of the daemon (systemd restarts it:
# Restart=on-failure) leave its processes running (t-restart-deb.sh: a `dpkg -i` too): a background HTTP server started by a run answers after
# each, with the same pid inside and the same init. systemctl and systemd-cgls show the sandbox by
# name, and a destroy takes the scope away (t-restart-loop.sh: a snapshot restore keeps the scope,
# a scope without a record is stopped, a loop of restarts under load leaks nothing). Only this
# test's sandboxes are made and destroyed.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/restart-lib.sh"

check "the daemon answers" wait_up
placement=$(call '{"op":"hello"}' | jq -r .capabilities.placement)
[ "$placement" = scope ]
ok $? "hello says capabilities.placement \"scope\" under systemd (got $placement)"

r=$(call "{\"op\":\"create\",\"name\":\"scopes-$$\",\"limits\":{\"memory\":\"192M\",\"pids\":77}}")
id=$(jqr .sandbox.id "$r")
unit=sandboxd-$id.scope
cg=$slice/$unit/sandbox
[ "$(jqr .sandbox.scope "$r")" = "$unit" ] && [ "$(jqr .sandbox.cgroup "$r")" = "$cg" ]
ok $? "a sandbox $id: create says its scope $unit and its cgroup $cg"
systemctl is-active --quiet "$unit"
ok $? "systemctl: $unit is active"
systemctl status --no-pager "$unit" 2>&1 | grep -q "sandbox $id of uid 0 (scopes-$$)"
ok $? "systemctl status $unit shows it by name, with its description"
systemd-cgls --no-pager -u sandboxd.slice 2>/dev/null | grep -q "$unit"
ok $? "systemd-cgls shows $unit in sandboxd.slice"
[ "$(systemctl show -p Delegate --value "$unit")" = yes ] && [ "$(systemctl show -p Slice --value "$unit")" = sandboxd.slice ]
ok $? "the scope has Delegate=yes, in sandboxd.slice"
[ "$(cat "$cg/memory.max")" = $((192 * 1024 * 1024)) ] && [ "$(cat "$cg/pids.max")" = 77 ]
ok $? "the limits are in the scope's sandbox/ cgroup (memory.max $(cat "$cg/memory.max"), pids.max $(cat "$cg/pids.max"))"
[ "$(cat "$slice/$unit/memory.max")" = max ]
ok $? "and not in the scope's own files, which systemd owns"
[ ! -e "$slice/$unit/hold" ]
ok $? "the placeholder that made the scope is gone once the sandbox is ready"
init=$(cat "$cg/init/cgroup.procs")
[[ "$init" =~ ^[0-9]+$ ]]
ok $? "its init is pid $init, in $cg/init"
! grep -q "$init" /sys/fs/cgroup/system.slice/sandboxd.service/cgroup.procs 2>/dev/null &&
	! find /sys/fs/cgroup/system.slice/sandboxd.service -name cgroup.procs -exec cat {} + | grep -qx "$init"
ok $? "and not anywhere in sandboxd.service's cgroup"

out=$(run_in "$id" 'cd /work && echo hello > index.txt && (setsid python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 & echo $! > /work/srv.pid)')
GET='for i in $(seq 100); do python3 -c "import urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:8000/index.txt\", timeout=5).read().decode(), end=\"\")" 2>/dev/null && exit 0; sleep 0.1; done; exit 1'
[ "$(run_in "$id" "$GET")" = hello ]
ok $? "a background HTTP server, started by a run, answers in the sandbox"
srv=$(run_in "$id" 'cat /work/srv.pid')
SAME='test "$(tr "\0" " " < /proc/'"$srv"'/cmdline)" = "python3 -m http.server 8000 --bind 127.0.0.1 " && echo same'

survived() { # HOW
	local r
	r=$(call "{\"op\":\"inspect\",\"sandbox\":\"$id\"}")
	[ "$(jqr '.sandbox.state + " " + .sandbox.restored_processes' "$r")" = "ready kept" ]
	ok $? "after $1, the next daemon takes the sandbox back with its processes ($(jqr '.sandbox.state + " " + (.sandbox.restored_processes // "null") + " " + (.sandbox.restored_init // "null")' "$r"))"
	[ "$(cat "$cg/init/cgroup.procs" 2>/dev/null)" = "$init" ]
	ok $? "after $1, its init is the same process (pid $init)"
	[ "$(run_in "$id" "$GET")" = hello ]
	ok $? "after $1, the background server answers"
	[ "$(run_in "$id" "$SAME")" = same ]
	ok $? "after $1, it is the same process, pid $srv inside"
	systemctl is-active --quiet "$unit"
	ok $? "after $1, $unit is still active"
}

old=$(mainpid)
systemctl restart sandboxd.service
check "systemctl restart sandboxd: the daemon is back" wait_up "$old"
survived "systemctl restart"

old=$(mainpid)
kill -9 "$old"
check "kill -9 of the daemon: systemd restarts it (Restart=on-failure)" wait_up "$old"
survived "kill -9"

call "{\"op\":\"destroy\",\"sandbox\":\"$id\"}" >/dev/null
for _ in $(seq 50); do systemctl is-active --quiet "$unit" || break; sleep 0.2; done
! systemctl is-active --quiet "$unit" && [ ! -d "$slice/$unit" ]
ok $? "destroyed, the sandbox's scope is gone ($(systemctl is-active "$unit" 2>&1)) and so is its cgroup"
done_testing
