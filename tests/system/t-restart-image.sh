#!/bin/bash
# Sandboxes outlive the daemon with storage = image too (issue 22), under a real systemd 252: a
# second instance of the installed sandboxd.service (quota-lib.sh, the unit's own hardening and
# mount namespace) with storage = image:1G. The image's filesystem is mounted in the unit's mount
# namespace, which goes with each stop; a sandbox's mount namespace holds its copy, so its loop
# device stays attached, and the next start finds it by the image's device and inode and mounts
# it again (the same filesystem, never a second one). A background writer in a sandbox goes on
# through `systemctl restart` and `kill -9` of the daemon (systemd restarts it), the same
# process, still writing; its 8M file is intact, its disk limit still enforced; the image stays
# on one loop device, which is released once the last sandbox and the unit are gone.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/quota-lib.sh"

qmain() { systemctl show -p MainPID --value $Q.service; }
qhealth() { SBX_TIMEOUT=10 call '{"op":"health"}' | jq -r .ok 2>/dev/null; }
qup() { # OLD_MAINPID
	for _ in $(seq 300); do
		[ "$(qmain)" != "$1" ] && [ "$(qmain)" != 0 ] && [ "$(qhealth)" = true ] && return 0
		sleep 0.2
	done
	return 1
}
loops() { losetup -n -O NAME -j "$STATE/storage.img" 2>/dev/null; }
taken_over() { journalctl -u $Q.service --no-pager -o cat | grep -c "storage: $STATE/storage.img still attached to $loop .*mounted again"; }

qstart "$STATE" "storage = image:1G"
ok $? "the unit starts with storage = image:1G"
[ "$(inns stat -f -c %T "$STATE/sandboxes")" = xfs ]
ok $? "its image is mounted (xfs) in the unit's namespace"
loop=$(loops)
[[ $loop =~ ^/dev/loop[0-9]+$ ]]
ok $? "through $loop"
r=$(call '{"op":"create","name":"img-keep","limits":{"disk":"64M"}}')
id=$(jqr .sandbox.id "$r")
cg=$(jqr .sandbox.cgroup "$r")
[ "$(jqr .sandbox.enforced.disk "$r")" = true ] && [ -d "$cg/init" ]
ok $? "a sandbox $id with limits.disk 64M enforced, in $cg"
r=$(call "$(jq -cn '{"op":"run","sandbox":"img-keep","argv":["sh","-c","head -c 8M /dev/urandom > /work/data && md5sum < /work/data && (setsid sh -c \"while :; do date +%s%N >> /work/ticks; sleep 0.1; done\" >/dev/null 2>&1 & echo $! > /work/bg.pid)"]}')")
sum=$(jqr .stdout "$r")
[ "$(jqr .exit_code "$r")" = 0 ]
ok $? "8M written and a background writer started in it"
bg=$(jqr .stdout "$(call '{"op":"run","sandbox":"img-keep","argv":["cat","/work/bg.pid"]}')")
init=$(cat "$cg/init/cgroup.procs")
run() { jqr .stdout "$(call "$(jq -cn --arg c "$1" '{"op":"run","sandbox":"img-keep","argv":["sh","-c",$c]}')")"; }

survived() { # HOW TAKEN_OVER_BEFORE
	local r n0 n1
	[ "$(taken_over)" -gt "$2" ]
	ok $? "after $1, the next daemon found $loop still attached and mounted it again"
	[ "$(loops)" = "$loop" ]
	ok $? "after $1, the image is on $loop alone ($(loops | tr '\n' ' '))"
	r=$(call '{"op":"inspect","sandbox":"img-keep"}')
	[ "$(jqr '.sandbox.state + " " + .sandbox.restored_processes' "$r")" = "ready kept" ] && [ "$(jqr .sandbox.enforced.disk "$r")" = true ]
	ok $? "after $1, the sandbox is taken back with its processes, its disk limit enforced ($(jqr '.sandbox.state + " " + (.sandbox.restored_processes // "null") + " " + (.sandbox.enforced.disk|tostring)' "$r"))"
	[ "$(cat "$cg/init/cgroup.procs" 2>/dev/null)" = "$init" ]
	ok $? "after $1, its init is the same process (pid $init)"
	[ "$(run "test -d /proc/$bg && grep -q 'while :' /proc/$bg/cmdline && echo same")" = same ]
	ok $? "after $1, the background writer is the same process (pid $bg inside)"
	n0=$(run 'wc -l < /work/ticks')
	sleep 1
	n1=$(run 'wc -l < /work/ticks')
	[ "${n1:-0}" -gt "${n0:-0}" ] 2>/dev/null
	ok $? "after $1, it still writes ($n0 then $n1 lines)"
	[ "$(run 'md5sum < /work/data')" = "$sum" ]
	ok $? "after $1, the sandbox's 8M file is intact"
	[ "$(inns cat "$STATE/sandboxes/$id/meta.json" | jq -r .id)" = "$id" ]
	ok $? "after $1, the daemon's mount shows the sandbox's record"
}

n_over=$(taken_over)
old=$(qmain)
systemctl restart $Q.service
check "systemctl restart: the daemon is back" qup "$old"
survived "systemctl restart" "$n_over"

n_over=$(taken_over)
old=$(qmain)
kill -9 "$old"
check "kill -9 of the daemon: systemd restarts it (Restart=on-failure)" qup "$old"
survived "kill -9" "$n_over"

r=$(run 'head -c 128M /dev/zero > /work/big; echo rc=$?')
[[ $r =~ ^rc=1 ]]
ok $? "the disk limit still holds: writing 128M fails ($r)"
call '{"op":"destroy","sandbox":"img-keep"}' >/dev/null
systemctl stop $Q.service
for _ in $(seq 50); do [ -z "$(loops)" ] && break; sleep 0.2; done
[ -z "$(loops)" ]
ok $? "with the sandbox destroyed and the unit stopped, the image's loop device is released"
quota_unit_remove
done_testing
