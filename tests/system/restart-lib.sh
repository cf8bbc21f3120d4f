# shellcheck shell=bash
# What the VM's restart tests share (t-restart-scopes.sh, t-restart-loop.sh, t-restart-deb.sh): the
# installed daemon's socket, sandboxd.slice, and the counts that show a restart leaked nothing.
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock
slice=/sys/fs/cgroup/sandboxd.slice

store() { systemctl show -p NFileDescriptorStore --value sandboxd.service; }
mainpid() { systemctl show -p MainPID --value sandboxd.service; }
health() { SBX_TIMEOUT=10 call '{"op":"health"}' | jq -r .ok 2>/dev/null; }
wait_up() { # OLD_MAINPID
	local i
	for i in $(seq 300); do
		# health first: its connection starts the service (socket activation)
		[ "$(health)" = true ] && [ "$(mainpid)" != "${1:-x}" ] && [ "$(mainpid)" != 0 ] && return 0
		sleep 0.2
	done
	return 1
}
scopes() { systemctl list-units --all --plain --no-legend 'sandboxd-*.scope' | grep -c '^sandboxd-'; }
# counts: the fds in the store, the scopes, the cgroups and processes of sandboxd.slice and the
# processes of the service's own cgroup. Each cgroup has one cgroup.procs, found by the shell's
# own globbing: a TCG guest takes a few tenths of a second a process, and stable() counts often.
counts() {
	local cg svc
	shopt -s globstar nullglob
	cg=("$slice"/**/cgroup.procs)
	svc=(/sys/fs/cgroup/system.slice/sandboxd.service/**/cgroup.procs)
	shopt -u globstar nullglob
	echo "store $(store) scopes $(scopes) cgroups ${#cg[@]}" \
		"processes $(cat "${cg[@]}" /dev/null 2>/dev/null | wc -l) service-processes $(cat "${svc[@]}" /dev/null 2>/dev/null | wc -l)"
}
# stable: the pool refills after a start: wait until the counts stop moving; STABLE is the last
# counts taken (the settled ones when the status is 0).
stable() {
	local a i
	a=$(counts)
	for i in $(seq 60); do
		sleep 0.5
		STABLE=$(counts)
		[ "$a" = "$STABLE" ] && return 0
		a=$STABLE
	done
	return 1
}
run_in() { # SANDBOX COMMAND: its stdout
	call "$(jq -cn --arg s "$1" --arg c "$2" '{"op":"run","sandbox":$s,"argv":["sh","-c",$c]}')" | jq -r .stdout
}

# A sandbox in its scope with a background HTTP server (t-restart-scopes.sh, t-restart-deb.sh):
# checks the scope, its limits and its init, and sets id, unit, cg, init, srv, GET and SAME for
# survived() below.
sandbox_with_server() { # NAME
	local r placement
	placement=$(call '{"op":"hello"}' | jq -r .capabilities.placement)
	[ "$placement" = scope ]
	ok $? "hello says capabilities.placement \"scope\" under systemd (got $placement)"

	r=$(call "{\"op\":\"create\",\"name\":\"$1\",\"limits\":{\"memory\":\"192M\",\"pids\":77}}")
	id=$(jqr .sandbox.id "$r")
	unit=sandboxd-$id.scope
	cg=$slice/$unit/sandbox
	[ "$(jqr .sandbox.scope "$r")" = "$unit" ] && [ "$(jqr .sandbox.cgroup "$r")" = "$cg" ]
	ok $? "a sandbox $id: create says its scope $unit and its cgroup $cg"
	systemctl is-active --quiet "$unit"
	ok $? "systemctl: $unit is active"
	systemctl status --no-pager "$unit" 2>&1 | grep -q "sandbox $id of uid 0 ($1)"
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

	run_in "$id" 'cd /work && echo hello > index.txt && (setsid python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 & echo $! > /work/srv.pid)' >/dev/null
	GET='for i in $(seq 100); do python3 -c "import urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:8000/index.txt\", timeout=5).read().decode(), end=\"\")" 2>/dev/null && exit 0; sleep 0.1; done; exit 1'
	[ "$(run_in "$id" "$GET")" = hello ]
	ok $? "a background HTTP server, started by a run, answers in the sandbox"
	srv=$(run_in "$id" 'cat /work/srv.pid')
	SAME='test "$(tr "\0" " " < /proc/'"$srv"'/cmdline)" = "python3 -m http.server 8000 --bind 127.0.0.1 " && echo same'
}

# After a restart of some kind: the sandbox of sandbox_with_server() is back with the same init,
# the same server and its scope.
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

