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
cgroups() { find "$slice" -type d 2>/dev/null | wc -l; }
procs() { find "$slice" -name cgroup.procs -exec cat {} + 2>/dev/null | wc -l; }
counts() { echo "store $(store) scopes $(scopes) cgroups $(cgroups) processes $(procs)"; }
stable() { # the pool refills after a start: wait until the counts stop moving
	local a b i
	for i in $(seq 60); do
		a=$(counts)
		sleep 0.5
		b=$(counts)
		[ "$a" = "$b" ] && return 0
	done
	return 1
}
run_in() { # SANDBOX COMMAND: its stdout
	call "$(jq -cn --arg s "$1" --arg c "$2" '{"op":"run","sandbox":$s,"argv":["sh","-c",$c]}')" | jq -r .stdout
}
