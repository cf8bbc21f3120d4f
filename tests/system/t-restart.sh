#!/bin/bash
# sandboxd's fd store under a real systemd 252 (issue 22): every recorded sandbox's init pidfd is
# in the service's store (FDSTORE=1, FDNAME=s.<id>.init, FDPOLL=0; NFileDescriptorStore counts
# them), and a loop of `systemctl restart` and a SIGKILL with Restart=on-failure leak nothing:
# fds in the store, sandbox cgroups and processes are as many after as before, and every sandbox
# comes back ready. Each sandbox is in a transient scope of sandboxd.slice (placement "scope",
# t-restart-scopes.sh), outside the service's cgroup, so a restart keeps its init and its pidfd
# in the store. Only this test's sandboxes are made and destroyed.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock
base=/sys/fs/cgroup/system.slice/sandboxd.service/sandboxes
slice=/sys/fs/cgroup/sandboxd.slice
N=5

store() { systemctl show -p NFileDescriptorStore --value sandboxd.service; }
health() { SBX_TIMEOUT=10 call '{"op":"health"}' | jq -r .ok 2>/dev/null; }
wait_up() { # OLD_MAINPID
	local i
	for i in $(seq 300); do
		[ "$(systemctl show -p MainPID --value sandboxd.service)" != "${1:-x}" ] && [ "$(health)" = true ] && return 0
		sleep 0.2
	done
	return 1
}
ours_ready() {
	local id
	for id in $ids; do
		[ "$(jqr .sandbox.state "$(call "{\"op\":\"inspect\",\"sandbox\":\"$id\"}")")" = ready ] || return 1
	done
}
cgroups() { { find "$base" -mindepth 1 -maxdepth 1 -type d -name 'sbx-*'; find "$slice" -mindepth 1 -maxdepth 1 -type d -name 'sandboxd-sbx-*.scope'; } 2>/dev/null | wc -l; }
procs() { find "$base" "$slice" -name cgroup.procs -exec cat {} + 2>/dev/null | wc -l; }
stable() { # the pool refills after a start: wait until the counts stop moving
	local a b i
	for i in $(seq 50); do
		a="$(cgroups) $(procs) $(store)"
		sleep 0.5
		b="$(cgroups) $(procs) $(store)"
		[ "$a" = "$b" ] && return 0
	done
	return 1
}

check "the daemon answers" wait_up
stable
s0=$(store)
ids=
for i in 1 2 3; do
	r=$(call "{\"op\":\"create\",\"name\":\"restart-$$-$i\"}")
	ids="$ids $(jqr .sandbox.id "$r")"
done
[ "$(echo $ids | wc -w)" = 3 ] && ! grep -q null <<<"$ids"
ok $? "three sandboxes are created:$ids"
stable
s1=$(store)
diag "fds in the store: $s0 before, $s1 with the three sandboxes"
[ "$s1" -eq $((s0 + 3)) ]
ok $? "each one's init pidfd is in the service's fd store (NFileDescriptorStore $s0 -> $s1)"
c1=$(cgroups) p1=$(procs)
for i in $(seq $N); do
	old=$(systemctl show -p MainPID --value sandboxd.service)
	systemctl restart sandboxd.service
	wait_up "$old" && ours_ready && stable || { diag "restart $i: the daemon or a sandbox did not come back"; break; }
	[ "$(store) $(cgroups) $(procs)" = "$s1 $c1 $p1" ] || { diag "restart $i: store $(store), cgroups $(cgroups), processes $(procs)"; break; }
done
ok $? "$N restarts: every sandbox back and ready each time; store $s1, cgroups $c1, processes $p1 each time"
r=$(call "{\"op\":\"inspect\",\"sandbox\":\"$(echo $ids | cut -d' ' -f1)\"}")
diag "after a restart under systemd: restored_processes=$(jqr .sandbox.restored_processes "$r") restored_init=$(jqr .sandbox.restored_init "$r")"
old=$(systemctl show -p MainPID --value sandboxd.service)
systemctl kill -s KILL sandboxd.service
wait_up "$old" && ours_ready && stable
ok $? "after SIGKILL, systemd restarts the daemon (Restart=on-failure) and every sandbox is back"
[ "$(store) $(cgroups) $(procs)" = "$s1 $c1 $p1" ]
ok $? "and nothing leaked: store $(store) (was $s1), cgroups $(cgroups) ($c1), processes $(procs) ($p1)"
for id in $ids; do call "{\"op\":\"destroy\",\"sandbox\":\"$id\"}" >/dev/null; done
stable
[ "$(store)" = "$s0" ]
ok $? "destroyed, their pidfds leave the store ($(store), was $s0)"
done_testing
