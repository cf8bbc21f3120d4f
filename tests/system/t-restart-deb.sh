#!/bin/bash
# A package upgrade with sandboxes alive (issue 22): with the Debian packages built
# (scripts/build-deb.sh; DEB_DIR, default ./deb-out), `dpkg -i` installs them, a restart runs the
# packaged daemon, and a second `dpkg -i` (an upgrade: postinst's try-restart) restarts it; after
# each, a background HTTP server in a sandbox answers with the same pid inside and the same init,
# in the same scope. Not part of `make check-vm` (the packages are built separately):
#   scripts/build-deb.sh && tests/vm/run-vm.sh "$PWD/build/vm-stage" "$PWD/tests/system/t-restart-deb.sh"
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/restart-lib.sh"

DEB_DIR=${DEB_DIR:-$here/../../deb-out}
if ! ls "$DEB_DIR"/sandboxd_*.deb "$DEB_DIR"/libsandbox0_*.deb >/dev/null 2>&1; then
	echo "1..0 # SKIP no packages in $DEB_DIR (scripts/build-deb.sh makes them)"
	exit 0
fi
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

# As t-deb.sh: no man-db re-index over 9p, no container's policy-rc.d forbidding restarts.
rm -f /var/lib/man-db/auto-update /usr/sbin/policy-rc.d
debs=("$DEB_DIR"/libsandbox0_*.deb "$DEB_DIR"/sandboxd_*.deb)
# The first install replaces the staged unit (ExecStart= of /usr/sbin); a new install does
# not restart the service: a restart by hand runs the packaged daemon.
out=$(timeout 240 dpkg -i "${debs[@]}" 2>&1)
ok $? "dpkg -i of the packages"
old=$(mainpid)
systemctl restart sandboxd.service
wait_up "$old" && [ "$(readlink "/proc/$(mainpid)/exe")" = /usr/sbin/sandboxd ]
ok $? "the packaged daemon runs ($(readlink "/proc/$(mainpid)/exe"))"
survived "a restart into the packaged daemon"
# The upgrade: postinst's try-restart (debhelper's --restart-after-upgrade; prerm does not stop).
old=$(mainpid) store0=$(systemctl show -p NFileDescriptorStore --value sandboxd.service)
out=$(timeout 240 dpkg -i "${debs[@]}" 2>&1)
ok $? "dpkg -i of the rebuilt packages again (an upgrade)"
diag "$(tail -n 3 <<<"$out")"
check "the package's upgrade restarted the daemon" wait_up "$old"
survived "dpkg -i"
# preinst did not stop the service (debian/rules: --restart-after-upgrade): the store was kept.
r=$(call "{\"op\":\"inspect\",\"sandbox\":\"$id\"}")
[ "$(jqr .sandbox.restored_init "$r")" = "fd store" ] &&
	[ "$(systemctl show -p NFileDescriptorStore --value sandboxd.service)" = "$store0" ]
ok $? "the upgrade was a restart, not a stop and a start: the init's pidfd came back from the fd store ($(jqr .sandbox.restored_init "$r"); store $store0 -> $(systemctl show -p NFileDescriptorStore --value sandboxd.service))"
call "{\"op\":\"destroy\",\"sandbox\":\"$id\"}" >/dev/null
done_testing
