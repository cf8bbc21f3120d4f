#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# What an OCI runtime asks of a sandbox (issue #24): create's "root": {"path", "read_only"} (a
# host directory, idmapped with the same ids, as the whole root, with the sandbox's own /proc,
# /dev, /dev/pts and /dev/shm), over a plain directory and an overlayfs "merged" directory;
# "ephemeral" (never restored); "hostname"; "mounts" in such a sandbox (files, targets anywhere
# but /proc, /sys, /dev, made inside the root never through a symlink, "idmap": "same"); root
# clients only; sandbox.signal, inspect's pids, sandbox.freeze / thaw, sandbox.update (what the
# host can show of them: tests/system/t-oci-sandbox.sh has the controllers); "network":
# {"netns_fd"} joining a namespace made by unshare --net with a veth in it, and its refusals;
# "sysctls" of the sandbox's network and ipc namespaces (hostile names and values refused),
# "masked_paths" and "readonly_paths" (runc's way, locked), "with_connection" (issue 30), and
# "root": {"tree_fd"}: a detached tree of a rootfs the client mounted in a namespace of its own,
# and the hostile trees refused.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

BUSYBOX=$(command -v busybox || true)
[ -n "$BUSYBOX" ] && file -L "$BUSYBOX" 2>/dev/null | grep -q 'statically linked' ||
	skip_all "a static busybox is needed to build a tiny rootfs (apt-get install busybox-static)"

start_daemon || exit 0
chmod 0666 "$SOCK"

# ---- A tiny rootfs, owned by host root, with a file of uid 1234 ------------------------------
mkrootfs() { # DIR
	mkdir -p "$1/bin" "$1/etc" "$1/srv" "$1/proc" "$1/dev" "$1/sys" "$1/tmp" "$1/work"
	cp "$BUSYBOX" "$1/bin/busybox"
	for t in sh cat ls id stat echo touch test true sleep hostname mount grep head ip; do ln -sf busybox "$1/bin/$t"; done
	echo "ID=ocitest" >"$1/etc/os-release"
	echo owned >"$1/srv/svc" && chown 1234:1234 "$1/srv/svc"
	chmod 1777 "$1/tmp"
}
ROOT=$T/rootfs
mkrootfs "$ROOT"
# runs start in /work until a run may name its cwd anywhere in such a root: the rootfs has one
err_of() { jget "$1" '.error | [.code, .field] | tostring'; }
run_in() { # SANDBOX CMD [USER]
	rpc '{"op":"run","sandbox":"'"$1"'","argv":["/bin/sh","-c",'"$(jq -Rn --arg c "$2" '$c')"'],"user":"'"${3:-root}"'"}'
}
out_of() { jget "$1" '.stdout'; }

r=$(rpc '{"op":"create","best_effort":true,"root":{"path":"'"$ROOT"'"},"hostname":"box1","ephemeral":true}')
id=$(jget "$r" .sandbox.id)
is "$(jget "$r" .sandbox.state)" ready "create with root.path: ready"
is "$(jget "$r" '.sandbox.root | tostring')" "{\"path\":\"$ROOT\",\"read_only\":false}" "SANDBOX shows root.path and read_only"
is "$(jget "$r" '.sandbox.hostname')" box1 "SANDBOX shows the hostname"
is "$(jget "$r" '.sandbox.ephemeral')" true "SANDBOX shows ephemeral"
r=$(run_in "$id" 'cat /etc/os-release; stat -c "%u:%g" /bin/busybox /srv/svc; hostname; id -u')
is "$(out_of "$r")" "$(printf 'ID=ocitest\n0:0\n1234:1234\nbox1\n0')" \
	"the run is the rootfs's own /bin/sh; host root's files are root's inside, uid 1234's are 1234's; the hostname"
r=$(run_in "$id" 'echo made >/made-by-root; echo t >/tmp/own-tmp; echo s >/dev/shm/x && cat /dev/shm/x; cat /proc/1/comm; test -c /dev/null && test -e /dev/pts/ptmx && echo devs; grep -c " /dev/pts devpts " /proc/mounts; test -d /work && echo "rootfs /work only"')
is "$(out_of "$r")" "$(printf 's\nsandbox-init\ndevs\n1\nrootfs /work only')" \
	"its own /proc (pid 1 is its init), /dev with null and a devpts, a writable /dev/shm"
is "$(stat -c %u:%g "$ROOT/made-by-root" 2>/dev/null)" 0:0 "a file root made at / inside is host root's on the host (same ids, no chown)"
is "$(cat "$ROOT/tmp/own-tmp" 2>/dev/null)" t "/tmp is the rootfs's own (written through to the host directory)"
is "$(ls -A "$ROOT/dev")" "" "the rootfs's own /dev stays untouched (the sandbox's /dev is over it)"
r=$(run_in "$id" 'touch /srv/svc' sandbox)
is "$(jget "$r" .exit_code)" 1 "uid 1000 cannot write uid 1234's file (the owners are real inside)"

# read_only: nothing of the rootfs is written, /dev/shm still is.
r=$(rpc '{"op":"create","best_effort":true,"root":{"path":"'"$ROOT"'","read_only":true}}')
ro=$(jget "$r" .sandbox.id)
is "$(jget "$r" '.sandbox.root.read_only')" true "create with root.read_only: SANDBOX says so"
r=$(run_in "$ro" 'touch /x 2>&1; touch /tmp/x 2>&1; echo ok >/dev/shm/y && cat /dev/shm/y')
like "$(out_of "$r")" 'Read-only file system.*Read-only file system.*ok' "a read_only root is read-only everywhere (/ and /tmp), root or not; /dev/shm is writable"
check "nothing was written into the host directory" test ! -e "$ROOT/x" -a ! -e "$ROOT/tmp/x"

# Overlayfs "merged" (what podman hands a runtime): Linux (6.18 here) idmaps the layers of an
# overlay but not an overlayfs mount itself, so it is refused, plainly, naming root.path.
mkdir -p "$T/ov/lower" "$T/ov/upper" "$T/ov/work" "$T/ov/merged"
mkrootfs "$T/ov/lower"
if mount -t overlay overlay -o "lowerdir=$T/ov/lower,upperdir=$T/ov/upper,workdir=$T/ov/work" "$T/ov/merged" 2>/dev/null; then
	r=$(rpc '{"op":"create","best_effort":true,"root":{"path":"'"$T/ov/merged"'"}}')
	is "$(err_of "$r")" '["invalid_request","root.path"]' "root.path an overlayfs merged directory: refused (invalid_request, root.path)"
	like "$(jget "$r" .error.message)" 'overlayfs mount, which this kernel cannot idmap' "... saying that the kernel cannot idmap an overlayfs mount"
	umount "$T/ov/merged"
else
	nok "overlayfs can be mounted here (mount -t overlay as root)"
fi

# ---- Refusals ----------------------------------------------------------------------------------
rpc_as() { # UID JSON
	as_other "$1" --regid="$1" --clear-groups -- timeout 35 python3 "$OTHER_CLIENT" "$SOCK" call "$2" --timeout 30
}
r=$(rpc_as 65534 '{"op":"create","best_effort":true,"root":{"path":"'"$ROOT"'"}}')
is "$(err_of "$r")" '["permission_denied","root.path"]' "root.path from a client that is not root: permission_denied"
r=$(rpc_as 65534 '{"op":"create","best_effort":true,"mounts":[{"source":"/tmp","target":"/mnt/x","idmap":"same"}]}')
is "$(err_of "$r")" '["permission_denied","mounts[0].idmap"]' "\"idmap\": \"same\" from a client that is not root: permission_denied"
ln -s "$ROOT" "$T/rootlink"
r=$(rpc '{"op":"create","best_effort":true,"root":{"path":"'"$T/rootlink"'"}}')
is "$(err_of "$r")" '["invalid_request","root.path"]' "a root.path through a symlink: refused, never followed"
r=$(rpc '{"op":"create","best_effort":true,"root":{"path":"/proc"}}')
is "$(err_of "$r")" '["invalid_request","root.path"]' "a kernel filesystem (/proc) as root.path: refused"
r=$(rpc '{"op":"create","best_effort":true,"root":{"path":"'"$ROOT"'/../rootfs"}}')
is "$(err_of "$r")" '["invalid_request","root.path"]' "a root.path with '..': refused"
r=$(rpc '{"op":"create","best_effort":true,"root":{"path":"'"$ROOT"'","extra":1}}')
is "$(jget "$r" .error.code)" invalid_request "an unknown field in root: refused"
r=$(rpc '{"op":"create","best_effort":true,"root":{"path":"'"$ROOT"'"},"image":"x"}')
is "$(err_of "$r")" '["invalid_request","root.path"]' "root.path with image: refused"
for h in -a a- "a_b" "$(printf 'a%.0s' $(seq 65))" ""; do
	r=$(rpc '{"op":"create","best_effort":true,"hostname":"'"$h"'"}')
	is "$(err_of "$r")" '["invalid_request","hostname"]' "hostname '$h' refused"
done
r=$(rpc '{"op":"create","best_effort":true,"ephemeral":1}')
is "$(err_of "$r")" '["invalid_request","ephemeral"]' "ephemeral that is not a boolean: refused"

# ---- sysctls of the sandbox's own namespaces (create's "sysctls") ------------------------------
host_sysctls=$(cat /proc/sys/kernel/msgmax /proc/sys/fs/mqueue/msg_max /proc/sys/net/ipv4/ping_group_range | tr '\n\t' '  ')
r=$(rpc '{"op":"create","best_effort":true,"ephemeral":true,"root":{"path":"'"$ROOT"'"},"sysctls":{"kernel.msgmax":"12345","fs.mqueue.msg_max":"20","net.ipv4.ping_group_range":"0 0","net.ipv4.ip_unprivileged_port_start":"80"}}')
sid=$(jget "$r" .sandbox.id)
is "$(jget "$r" .sandbox.state)" ready "create with sysctls of the ipc and network namespaces: ready"
[ "$sid" != null ] || diag "$r"
is "$(jget "$r" '.sandbox.sysctls["kernel.msgmax"]')" 12345 "SANDBOX shows them"
r=$(run_in "$sid" 'cat /proc/sys/kernel/msgmax /proc/sys/fs/mqueue/msg_max /proc/sys/net/ipv4/ping_group_range /proc/sys/net/ipv4/ip_unprivileged_port_start' sandbox)
is "$(echo $(out_of "$r"))" "12345 20 0 0 80" \
	"inside: kernel.msgmax, fs.mqueue.msg_max, ip_unprivileged_port_start as given, ping_group_range's gids the sandbox's own (0 0)"
is "$(cat /proc/sys/kernel/msgmax /proc/sys/fs/mqueue/msg_max /proc/sys/net/ipv4/ping_group_range | tr '\n\t' '  ')" "$host_sysctls" \
	"the host's values are untouched"
r=$(run_in "$sid" 'echo 1 >/proc/sys/net/ipv4/ip_unprivileged_port_start 2>/dev/null && echo wrote; cat /proc/sys/net/ipv4/ip_unprivileged_port_start')
is "$(out_of "$r")" 80 "root inside still cannot write the network namespace's sysctls"
rpc '{"op":"destroy","sandbox":"'"$sid"'"}' >/dev/null
r=$(rpc '{"op":"create","best_effort":true,"ephemeral":true,"root":{"path":"'"$ROOT"'"}}')
sid=$(jget "$r" .sandbox.id)
r=$(run_in "$sid" 'cat /proc/sys/kernel/msgmax /proc/sys/net/ipv4/ip_unprivileged_port_start' sandbox)
is "$(echo $(out_of "$r"))" "8192 0" \
	"the next sandbox has the defaults, the pool's port 0 (a namespace whose sysctls were set is never used again)"
rpc '{"op":"destroy","sandbox":"'"$sid"'"}' >/dev/null
long=$(printf 'x%.0s' $(seq 257))
many=$(for i in $(seq 33); do printf '"net.ipv4.conf.lo.x%d":"1",' "$i"; done)
for bad in '"kernel.panic":"1"' '"vm.overcommit_memory":"0"' '"kernel.hostname":"x"' '"net..ipv4":"1"' '"net/ipv4":"1"' \
	'"net.ipv4.":"1"' '".net":"1"' '"net.ipv4.ip_forward":1' '"net.ipv4.ip_forward":""' "\"net.ipv4.ip_forward\":\"$long\"" \
	'"net.ipv4.ip_forward":"1\n2"' "${many%,}"; do
	r=$(rpc '{"op":"create","best_effort":true,"ephemeral":true,"root":{"path":"'"$ROOT"'"},"sysctls":{'"$bad"'}}')
	is "$(err_of "$r")" '["invalid_request","sysctls"]' "sysctls {${bad:0:40}}: refused"
done
r=$(rpc '{"op":"create","best_effort":true,"ephemeral":true,"root":{"path":"'"$ROOT"'"},"sysctls":{"kernel.panic":"1"}}')
like "$(jget "$r" .error.message)" "kernel.panic is not a sysctl of the sandbox's own namespaces" "... naming the key"
r=$(rpc '{"op":"create","best_effort":true,"ephemeral":true,"root":{"path":"'"$ROOT"'"},"sysctls":{"kernel.msgmax":"-5x"}}')
is "$(jget "$r" '[.error.code, .error.step] | tostring')" '["spawn_failed","sysctl"]' "a value the kernel refuses: spawn_failed at step sysctl"
is "$(cat /proc/sys/kernel/msgmax /proc/sys/fs/mqueue/msg_max /proc/sys/net/ipv4/ping_group_range | tr '\n\t' '  ')" "$host_sysctls" \
	"the host's values are still untouched"

# ---- with_connection: the sandbox ends with the connection that created it ----------------------
r=$(rpc '{"op":"create","best_effort":true,"root":{"path":"'"$ROOT"'"},"with_connection":true}')
wid=$(jget "$r" .sandbox.id)
is "$(jget "$r" '[.sandbox.state, .sandbox.ephemeral] | tostring')" '["ready",true]' "create with with_connection: ready, and ephemeral"
for _ in $(seq 40); do rpc '{"op":"list"}' | jq -e --arg id "$wid" '[.sandboxes[].id] | index($id) == null' >/dev/null && break; sleep 0.25; done
wait_until 10 sh -c "! ls '$CG/sandboxes' 2>/dev/null | grep -q '$wid'"
check "the connection that created it closed (rpc's, once answered): the sandbox was destroyed, its cgroup gone" \
        sh -c "! ls '$CG/sandboxes' 2>/dev/null | grep -q '$wid' && [ '$wid' != null ]"
is "$(rpc '{"op":"list"}' | jq --arg id "$wid" '[.sandboxes[].id] | index($id)')" null "... and is not listed"
r=$(rpc '{"op":"create","best_effort":true,"root":{"path":"'"$ROOT"'"},"with_connection":1}')
is "$(err_of "$r")" '["invalid_request","with_connection"]' "with_connection that is not a boolean: refused"

# ---- masked_paths and readonly_paths (an OCI config's maskedPaths and readonlyPaths) ------------
mkdir -p "$ROOT/secret-dir" "$ROOT/data" && echo hidden >"$ROOT/secret-dir/f" && echo hidden >"$ROOT/secret" && chmod 0666 "$ROOT/secret"
chmod 0777 "$ROOT/data" && ln -sfn /secret "$ROOT/secretlink"
r=$(rpc '{"op":"create","best_effort":true,"ephemeral":true,"root":{"path":"'"$ROOT"'"},"masked_paths":["/secretlink","/secret-dir","/no/such"],"readonly_paths":["/data","/proc/sys"]}')
pid_=$(jget "$r" .sandbox.id)
is "$(jget "$r" .sandbox.state)" ready "create with masked_paths (a symlink to a file, a directory, a missing path) and readonly_paths"
[ "$pid_" != null ] || diag "$r"
is "$(jget "$r" '.sandbox.masked_paths | length')" 3 "SANDBOX shows masked_paths"
r=$(run_in "$pid_" 'cat /secret; echo "[$(ls -A /secret-dir)]"; echo x >/secret-dir/g 2>&1 || echo ro-dir; echo y >/secret 2>/dev/null; cat /secret; touch /data/new 2>&1 || echo ro-data')
is "$(out_of "$r" | grep -v 'Read-only\|Permission')" "$(printf '[]
ro-dir
ro-data')" \
	"the masked file (through its symlink) reads empty, the masked directory is empty and read-only, the read-only path cannot be written, as root"
r=$(run_in "$pid_" 'umount /data 2>&1; umount /secret 2>&1; touch /data/new2 2>&1; cat /secret')
check "root inside cannot unmount them (locked), and nothing was written" test ! -e "$ROOT/data/new" -a ! -e "$ROOT/data/new2"
is "$(cat "$ROOT/secret")" hidden "the host's file behind the mask is untouched"
rpc '{"op":"destroy","sandbox":"'"$pid_"'"}' >/dev/null
for bad in '"masked_paths":["relative"]' '"masked_paths":["/a/../b"]' '"readonly_paths":["/"]' '"readonly_paths":"/data"' \
	'"masked_paths":[1]' "\"masked_paths\":[$(for i in $(seq 65); do printf '"/p%d",' "$i"; done | sed 's/,$//')]"; do
	field=${bad%%\":*}; field=${field#\"}
	r=$(rpc '{"op":"create","best_effort":true,"ephemeral":true,"root":{"path":"'"$ROOT"'"},'"$bad"'}')
	is "$(err_of "$r")" "[\"invalid_request\",\"$field\"]" "${bad:0:40}: refused"
done

# ---- Mounts in a root.path sandbox ------------------------------------------------------------
mkdir -p "$T/bundle/data" && echo "127.0.0.1 oci-host" >"$T/bundle/hosts" && echo d >"$T/bundle/data/f"
chown 0:0 "$T/bundle/hosts"
mkdir -p "$ROOT/etc/sub" && ln -sfn /etc "$ROOT/etclink" && ln -sfn /tmp/evil "$ROOT/etc/dangling"
mnt() { # SOURCE TARGET [IDMAP]
	printf '{"source":"%s","target":"%s"%s}' "$1" "$2" "${3:+,\"idmap\":\"$3\"}"
}
r=$(rpc '{"op":"create","best_effort":true,"ephemeral":true,"root":{"path":"'"$ROOT"'"},"mounts":['"$(mnt "$T/bundle/hosts" /etc/hosts same),$(mnt "$T/bundle/data" /new/data same),$(mnt "$T/bundle/data" /dev/shm/d)"']}')
mid=$(jget "$r" .sandbox.id)
is "$(jget "$r" .sandbox.state)" ready "root.path with a file mount at /etc/hosts, a directory at a new /new/data and one beneath /dev/shm"
[ "$mid" != null ] || diag "$r"
is "$(jget "$r" '.sandbox.mounts[0].idmap')" same "SANDBOX shows idmap same"
r=$(run_in "$mid" 'cat /etc/hosts; stat -c "%u:%g %F" /etc/hosts /new/data/f /dev/shm/d/f')
is "$(out_of "$r")" "$(printf '127.0.0.1 oci-host\n0:0 regular file\n0:0 regular file\n1000:1000 regular file')" \
	"the file is bound at /etc/hosts; with idmap same host root's files are root's inside, without it the sandbox user's"
is "$(stat -c %F "$ROOT/etc/hosts" 2>/dev/null)" "regular empty file" "the file target was made in the rootfs as an empty file"
is "$(stat -c %F "$ROOT/new/data" 2>/dev/null)" directory "the directory target was made in the rootfs"
# A read-only root whose image lacks the targets (containerd's pause image has only /pause, and
# gets /etc/resolv.conf bound into a read-only root): they are made, as runc makes them, before
# the root becomes read-only.
rm -f "$ROOT/etc/resolv.conf"
r=$(rpc '{"op":"create","best_effort":true,"ephemeral":true,"root":{"path":"'"$ROOT"'","read_only":true},"mounts":['"$(mnt "$T/bundle/hosts" /etc/resolv.conf same),$(mnt "$T/bundle/data" /ro-new/data same)"']}')
rid=$(jget "$r" .sandbox.id)
is "$(jget "$r" .sandbox.state)" ready "a read-only root.path with a file and a directory mount whose targets it lacks: ready"
[ "$rid" != null ] || diag "$r"
r=$(run_in "$rid" 'cat /etc/resolv.conf /ro-new/data/f; touch /x 2>&1; touch /etc/y 2>&1')
like "$(out_of "$r")" '127\.0\.0\.1 oci-host.*d.*Read-only file system.*Read-only file system' \
	"both are bound, and the root is read-only all the same"
is "$(stat -c %F "$ROOT/etc/resolv.conf" 2>/dev/null) $(stat -c %F "$ROOT/ro-new/data" 2>/dev/null)" \
	"regular empty file directory" "the targets were made in the rootfs, as runc makes them"
check "nothing else was written into the rootfs" test ! -e "$ROOT/x" -a ! -e "$ROOT/etc/y"
rpc '{"op":"destroy","sandbox":"'"$rid"'"}' >/dev/null
for t in /etclink/x /etc/dangling; do
	r=$(rpc '{"op":"create","best_effort":true,"ephemeral":true,"root":{"path":"'"$ROOT"'"},"mounts":['"$(mnt "$T/bundle/hosts" "$t")"']}')
	is "$(jget "$r" '[.error.code, .error.step, .error.errno] | tostring')" '["spawn_failed","mounts","ELOOP"]' \
		"a mount target through a symlink ($t) is refused (ELOOP at step mounts)"
done
check "nothing was made through the symlinks" test ! -e /etc/x -a ! -e /tmp/evil
for t in /proc/x /sys /dev/null /dev /; do
	r=$(rpc '{"op":"create","best_effort":true,"root":{"path":"'"$ROOT"'"},"mounts":['"$(mnt "$T/bundle/hosts" "$t")"']}')
	is "$(err_of "$r")" '["invalid_request","mounts[0].target"]' "mount target $t in a root.path sandbox: refused"
done
r=$(rpc '{"op":"create","best_effort":true,"mounts":['"$(mnt "$T/bundle/hosts" /mnt/hosts)"']}')
is "$(err_of "$r")" '["invalid_request","mounts[0].source"]' "a file mount in a sandbox without root.path: refused"
r=$(rpc '{"op":"create","best_effort":true,"mounts":['"$(mnt "$T/bundle/data" /mnt/d bogus)"']}')
is "$(err_of "$r")" '["invalid_request","mounts[0].idmap"]' "idmap other than same or caller: refused"

# ---- Lifetime: ephemeral sandboxes are not restored, recorded ones are --------------------------
r=$(run_in "$id" 'sleep 1000 >/dev/null 2>&1 &')
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
check "the ephemeral sandbox's background process outlived the daemon's SIGKILL" test -n "$(cat "$CG/sandboxes/$id"/*/cgroup.procs 2>/dev/null)"
start_daemon || exit 0
chmod 0666 "$SOCK"
r=$(rpc '{"op":"list"}')
is "$(jget "$r" '[.sandboxes[].id] | sort | join(",")')" "$(printf '%s\n' "$ro" | sort | paste -sd,)" \
	"after a restart, the recorded root.path sandbox is back and the ephemeral ones are not"
check "the ephemeral sandbox's cgroup (and its processes) are gone" test ! -e "$CG/sandboxes/$id"
check "nothing of it is in the state directory" test ! -e "$T/state/sandboxes/$id"
r=$(run_in "$ro" 'cat /etc/os-release; touch /y 2>/dev/null || echo still-ro')
is "$(out_of "$r")" "$(printf 'ID=ocitest\nstill-ro')" "the restored root.path sandbox runs in its root again, read-only still"

# ---- sandbox.signal, inspect pids, sandbox.freeze / thaw, sandbox.update ------------------------
r=$(rpc '{"op":"create","best_effort":true,"ephemeral":true,"root":{"path":"'"$ROOT"'"}}')
op=$(jget "$r" .sandbox.id)
rm -f "$ROOT/work/usr1"
run_in "$op" 'trap "echo got >/work/usr1; exit 0" USR1; sleep 1000 & wait' >/dev/null &
runner=$!
# Another run's background process, which ignores USR1 (so that the KILL below has it to kill).
run_in "$op" 'trap "" USR1; sleep 1000 >/dev/null 2>&1 &' >/dev/null
member_pids() { cat "$CG/sandboxes/$op"/*/cgroup.procs 2>/dev/null | sort -n | paste -sd' '; }
# The processes of its runs (not the next run's warm helper: docs/architecture.md).
run_pids() { local d; for d in "$CG/sandboxes/$op"/run-*; do cg_procs_but_warm "$d"; done; }
has_n_pids() { [ "$(run_pids | wc -l)" -ge "$1" ]; }
wait_until 5 has_n_pids 3
r=$(rpc '{"op":"inspect","sandbox":"'"$op"'","pids":true}')
is "$(jget "$r" '.sandbox.pids | map(tostring) | join(" ")')" "$(member_pids)" \
	"inspect with pids: every host pid of the sandbox's cgroup tree (its init's, both runs'), sorted"
is "$(jget "$(rpc '{"op":"inspect","sandbox":"'"$op"'"}')" '.sandbox.pids')" null "without pids: no list"
r=$(rpc '{"op":"sandbox.signal","sandbox":"'"$op"'","signal":"USR1"}')
is "$(jget "$r" .ok)" true "sandbox.signal USR1: ok"
is "$(jget "$r" .signalled)" 3 "... signalled every process of both runs (the first's shell and sleep, the other's sleep)"
wait "$runner"
is "$(cat "$ROOT/work/usr1" 2>/dev/null)" got "the trap of the run in flight got USR1 (its run then ended)"
init_alive() { [ -n "$(cat "$CG/sandboxes/$op/init/cgroup.procs" 2>/dev/null)" ]; }
check "the sandbox's init was not signalled" init_alive
check "the other run's sleep, which ignores USR1, is still there" has_n_pids 1
r=$(rpc '{"op":"sandbox.signal","sandbox":"'"$op"'","signal":9}')
is "$(jget "$r" .signalled)" 1 "sandbox.signal 9: through cgroup.kill, one process"
runs_empty() { [ -z "$(run_pids)" ]; }
check "... the background sleep of the other run is gone" wait_until 5 runs_empty
check "... and the init lives on" init_alive
r=$(rpc '{"op":"sandbox.signal","sandbox":"'"$op"'","signal":"NOPE"}')
is "$(err_of "$r")" '["invalid_request","signal"]' "an unknown signal: refused"

# Freeze: a busy loop stops accumulating CPU time, new work is refused, thaw resumes it.
run_in "$op" 'while :; do :; done >/dev/null 2>&1 &' >/dev/null
cpu_of() { awk '$1 == "usage_usec" { print $2 }' "$CG/sandboxes/$op/cpu.stat"; }
r=$(rpc '{"op":"sandbox.freeze","sandbox":"'"$op"'"}')
is "$(jget "$r" '[.ok, .frozen] | tostring')" '[true,true]' "sandbox.freeze answers once frozen"
is "$(awk '$1 == "frozen" { print $2 }' "$CG/sandboxes/$op/cgroup.events")" 1 "... cgroup.events says frozen 1"
c1=$(cpu_of); sleep 0.5; c2=$(cpu_of)
is "$c2" "$c1" "a busy loop in the frozen sandbox accumulates no CPU time (usage_usec $c1 over 0.5 s)"
is "$(jget "$(rpc '{"op":"inspect","sandbox":"'"$op"'"}')" .sandbox.frozen)" true "inspect says frozen"
r=$(run_in "$op" 'true')
is "$(jget "$r" '[.error.code, .error.message] | tostring')" '["conflict","sandbox '"$op"' is frozen (sandbox.thaw resumes it)"]' "a run in a frozen sandbox: conflict, frozen"
r=$(rpc '{"op":"file.stat","sandbox":"'"$op"'","path":"/work"}')
is "$(jget "$r" .error.code)" conflict "a file operation in a frozen sandbox: conflict"
r=$(rpc '{"op":"pty.open","sandbox":"'"$op"'","argv":["/bin/sh"]}')
is "$(jget "$r" .error.code)" conflict "a session in a frozen sandbox: conflict"
r=$(rpc '{"op":"sandbox.thaw","sandbox":"'"$op"'"}')
is "$(jget "$r" '[.ok, .frozen] | tostring')" '[true,false]' "sandbox.thaw answers once thawed"
c1=$(cpu_of); sleep 0.3; c2=$(cpu_of)
check "after thaw the busy loop runs again (usage_usec $c1 -> $c2)" test "$c2" -gt "$c1"
is "$(out_of "$(run_in "$op" 'echo back')")" back "and runs are taken again"
r=$(rpc '{"op":"sandbox.freeze","sandbox":"'"$op"'"}')
r=$(rpc '{"op":"destroy","sandbox":"'"$op"'"}')
is "$(jget "$r" .ok)" true "a frozen sandbox is destroyed all the same"
check "... its cgroup is gone" wait_until 10 test ! -e "$CG/sandboxes/$op"

# Update: inspect and the record say the new limits; a limit the host cannot enforce is refused
# without best_effort; maximums hold. (The kernel's side is tests/system/t-oci-update.sh.)
r=$(rpc '{"op":"sandbox.update","sandbox":"'"$ro"'","limits":{"memory":"300M","pids":77,"cpus":0.5}}')
is "$(jget "$r" '.sandbox.limits | [.memory, .pids, .cpus] | tostring')" '[314572800,77,0.5]' "sandbox.update: the reply is the SANDBOX with the new limits"
is "$(jget "$(rpc '{"op":"inspect","sandbox":"'"$ro"'"}')" '.sandbox.limits.pids')" 77 "inspect says them"
for c in memory pids cpu; do
	if grep -qw "$c" "$CG/sandboxes/cgroup.subtree_control" 2>/dev/null; then
		f=$c.max; [ $c = pids ] || [ $c = memory ] || f=cpu.max
		like "$(cat "$CG/sandboxes/$ro/$f")" '^(314572800|77|50000 100000)$' "$f holds the new limit"
	fi
done
r=$(rpc '{"op":"sandbox.update","sandbox":"'"$ro"'","limits":{"memory":"1T"}}')
is "$(err_of "$r")" '["invalid_request","limits.memory"]' "an update past the configured maximum: refused"
r=$(rpc '{"op":"sandbox.update","sandbox":"'"$ro"'","limits":{"timeout_s":5}}')
is "$(jget "$r" .error.code)" invalid_request "an update of another limit than memory, pids, cpus: refused"
if ! grep -qw pids "$CG/sandboxes/cgroup.subtree_control" 2>/dev/null; then
	r=$(rpc '{"op":"sandbox.update","sandbox":"'"$ro"'","best_effort":false,"limits":{"pids":50}}')
	is "$(err_of "$r")" '["limit_unenforceable","limits.pids"]' "without best_effort, a limit this host cannot enforce: refused"
fi
kill -TERM "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null; DAEMON_PID=
rm -f "$T/daemon-stopped"
start_daemon || exit 0
chmod 0666 "$SOCK"
is "$(jget "$(rpc '{"op":"inspect","sandbox":"'"$ro"'"}')" '.sandbox.limits | [.memory, .pids, .cpus] | tostring')" '[314572800,77,0.5]' \
	"the updated limits survive a restart (the record)"
rpc '{"op":"destroy","sandbox":"'"$ro"'"}' >/dev/null

# ---- network.netns_fd: the engine's namespace (unshare --net, with a veth that has an address) ---
unshare --net sleep 1000 &
NSPID=$!
trap 'rc=$?; kill $NSPID 2>/dev/null; (exit $rc); _cleanup' EXIT
VA=sbxo$$a
ns_ready() { [ "$(readlink /proc/$NSPID/ns/net)" != "$(readlink /proc/self/ns/net)" ]; }
wait_until 5 ns_ready
ip link add "$VA" type veth peer name eth-oci netns "$NSPID" &&
	nsenter -t "$NSPID" -n ip addr add 10.213.77.2/24 dev eth-oci &&
	nsenter -t "$NSPID" -n ip link set eth-oci up &&
	nsenter -t "$NSPID" -n ip link set lo up
has_veth() { nsenter -t "$NSPID" -n ip -4 addr show eth-oci | grep -q 'inet 10.213.77.2/24'; }
check "a network namespace with a veth (10.213.77.2/24) for the test" has_veth
run_py "netns_fd" 120 "$SOCK" "$ROOT" "$NSPID" <<'PYEOF'
import array, json, os, socket, sys
from client import Conn as Client, call_with_fds, check, is_
sock, root, nspid = sys.argv[1], sys.argv[2], sys.argv[3]

def create(req, fds, uid=None):
    return call_with_fds(sock, req, fds, uid)

def err(r):
    e = r.get("error", {})
    return [e.get("code"), e.get("field")]

base = {"op": "create", "best_effort": True, "root": {"path": root}}
ns = os.open(f"/proc/{nspid}/ns/net", os.O_RDONLY)
r = create(dict(base, network={"netns_fd": 0}), [ns])
check(r.get("ok") is True, "create with network.netns_fd: ready", r)
sid = r.get("sandbox", {}).get("id")
is_(r.get("sandbox", {}).get("network"), "joined", "SANDBOX's network says joined")
is_(r.get("sandbox", {}).get("ephemeral"), True, "a sandbox that joined a namespace is never recorded (ephemeral)")
c = Client(sock)
r = c.call({"op": "run", "sandbox": sid, "user": "root", "argv": ["/bin/sh", "-c", "ip -4 addr show eth-oci; cat /proc/net/dev | grep -c eth-oci"]}, timeout=30)
out = r.get("stdout", "")
check("inet 10.213.77.2/24" in out, "the sandbox sees the namespace's veth with its address", r)
r = c.call({"op": "run", "sandbox": sid, "user": "root", "argv": ["/bin/sh", "-c", "ip link set eth-oci down 2>&1; echo rc=$?"]}, timeout=30)
check("rc=0" not in r.get("stdout", ""), "root inside cannot change that namespace (it is not its user namespace's)", r)
c.call({"op": "destroy", "sandbox": sid}, timeout=30)

host = os.open("/proc/self/ns/net", os.O_RDONLY)
is_(err(create(dict(base, network={"netns_fd": 0}), [host])), ["permission_denied", "network.netns_fd"],
    "the daemon's own (the host's) network namespace: refused")
uts = os.open(f"/proc/{nspid}/ns/uts", os.O_RDONLY)
is_(err(create(dict(base, network={"netns_fd": 0}), [uts])), ["invalid_request", "network.netns_fd"],
    "a uts namespace fd as netns_fd: refused")
f = os.open(root + "/etc/os-release", os.O_RDONLY)
is_(err(create(dict(base, network={"netns_fd": 0}), [f])), ["invalid_request", "network.netns_fd"],
    "a regular file as netns_fd: refused")
is_(err(create(dict(base, network={"netns_fd": 0}), [])), ["invalid_request", "network.netns_fd"],
    "netns_fd without an fd: refused")
ns2 = os.open(f"/proc/{nspid}/ns/net", os.O_RDONLY)
is_(err(create(dict(base), [ns2])), ["invalid_request", "fds"], "an fd with a create that names none: refused")
ns3 = os.open(f"/proc/{nspid}/ns/net", os.O_RDONLY)
is_(err(create({"op": "create", "best_effort": True, "network": {"netns_fd": 0}}, [ns3], uid=65534)),
    ["permission_denied", "network.netns_fd"], "netns_fd from a client that is not root: refused")
ns4 = os.open(f"/proc/{nspid}/ns/net", os.O_RDONLY)
is_(err(create(dict(base, network={"netns_fd": 0, "egress": "all"}), [ns4])), ["invalid_request", "network"],
    "netns_fd with egress: refused")
PYEOF

# ---- root.tree_fd: a rootfs mounted in a mount namespace of the client only (buildah's way) ----
# The client (this Python, in a private mount namespace of its own) binds the rootfs over an
# empty directory and sends a detached copy of that mount; the daemon's namespace shows the
# directory empty. Hostile trees are refused as a path source would be.
mkdir -p "$T/tree/empty" "$T/tree/ov/lower" "$T/tree/ov/upper" "$T/tree/ov/work" "$T/tree/ov/merged"
run_py "tree_fd" 120 "$SOCK" "$ROOT" "$T/tree" <<'PYEOF'
import array, ctypes, json, os, socket, sys
from client import Conn as Client, call_with_fds, check, is_
sock, root, tdir = sys.argv[1], sys.argv[2], sys.argv[3]
empty = tdir + "/empty"
libc = ctypes.CDLL(None, use_errno=True)

def must(r, what):
    if r < 0:
        raise OSError(ctypes.get_errno(), what)
    return r

def tree(path):  # open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)
    return must(libc.syscall(428, -100, path.encode(), 1 | os.O_CLOEXEC), "open_tree " + path)

must(libc.unshare(0x20000), "unshare(CLONE_NEWNS)")
must(libc.mount(None, b"/", None, 0x4000 | (1 << 18), None), "mount --make-rprivate /")
must(libc.mount(root.encode(), empty.encode(), None, 4096, None), "mount --bind")

def create(req, fds, uid=None):
    return call_with_fds(sock, req, fds, uid)

def err(r):
    e = r.get("error", {})
    return [e.get("code"), e.get("field")]

def with_tree(fd_index=0, **kw):
    return {"op": "create", "best_effort": True, "root": dict({"path": empty, "tree_fd": fd_index}, **kw)}

r = create(with_tree(), [tree(empty)])
check(r.get("ok") is True, "create with root.tree_fd (a detached copy of a private bind mount): ready", r)
sb = r.get("sandbox", {})
is_(sb.get("root"), {"path": empty, "read_only": False}, "SANDBOX's root shows the path")
is_(sb.get("ephemeral"), True, "a sandbox whose root came as a tree is never recorded (ephemeral)")
c = Client(sock)
r = c.call({"op": "run", "sandbox": sb.get("id"), "user": "root", "argv": ["/bin/sh", "-c", "cat /etc/os-release; stat -c %u /srv/svc"]}, timeout=30)
is_(r.get("stdout"), "ID=ocitest\n1234\n", "the sandbox sees the tree's files with their owners (same ids)")
c.call({"op": "destroy", "sandbox": sb.get("id")}, timeout=30)

r = create(with_tree(read_only=True), [tree(empty)])
check(r.get("ok") is True, "root.tree_fd with read_only: ready", r)
r2 = c.call({"op": "run", "sandbox": r.get("sandbox", {}).get("id"), "user": "root", "argv": ["/bin/sh", "-c", "touch /srv/x 2>&1; echo rc=$?"]}, timeout=30)
check("Read-only file system" in r2.get("stdout", ""), "... and its root is read-only", r2)
c.call({"op": "destroy", "sandbox": r.get("sandbox", {}).get("id")}, timeout=30)

is_(err(create(with_tree(), [])), ["invalid_request", "root.tree_fd"], "root.tree_fd without an fd: refused")
is_(err(create(with_tree(), [os.open(empty, os.O_PATH | os.O_DIRECTORY)])), ["invalid_request", "root.tree_fd"],
    "an O_PATH fd of a mounted directory (not a detached tree): refused")
is_(err(create(with_tree(), [tree("/")])), ["invalid_request", "root.tree_fd"], "a tree of the host's / : refused")
r = create(with_tree(), [tree("/proc")])
is_(err(r), ["invalid_request", "root.tree_fd"], "a tree of /proc (a kernel filesystem): refused")
check("kernel interface" in r.get("error", {}).get("message", ""), "... as a kernel interface", r)
is_(err(create(with_tree(), [os.open(root + "/etc/os-release", os.O_RDONLY)])), ["invalid_request", "root.tree_fd"],
    "a regular file as root.tree_fd: refused")
is_(err(create(with_tree(), [tree(empty), tree(empty)])), ["invalid_request", "fds"],
    "two fds with a create that names one: refused")
is_(err(create(with_tree(), [tree(empty)], uid=65534)), ["permission_denied", "root.tree_fd"],
    "root.tree_fd from a client that is not root: refused")
ov = tdir + "/ov"
if libc.mount(b"overlay", (ov + "/merged").encode(), b"overlay", 0,
              ("lowerdir=%s,upperdir=%s/upper,workdir=%s/work" % (root, ov, ov)).encode()) == 0:
    r = create({"op": "create", "best_effort": True, "root": {"path": ov + "/merged", "tree_fd": 0}}, [tree(ov + "/merged")])
    is_(err(r), ["invalid_request", "root.path"], "a tree of an overlayfs mount: refused, naming root.path")
    check("overlayfs mount, which this kernel cannot idmap" in r.get("error", {}).get("message", ""),
          "... saying that the kernel cannot idmap an overlayfs mount", r)
else:
    check(False, "overlayfs can be mounted here (errno %d)" % ctypes.get_errno())
PYEOF
is "$(ls -A "$T/tree/empty" | wc -l)" 0 "the daemon's namespace (the test's) never saw the private bind"
