#!/bin/bash
# sandboxd-oci under podman with real cgroups and the systemd cgroup manager (issue #24): the
# installed sandboxd (socket-activated, Delegate=yes) enforces a container's --memory 64m, and an
# allocation past it ends in an OOM kill that podman reports (exit 137); `run --rm` mirrors the
# exit status; `pause`/`unpause` freeze and thaw the sandbox; `update --memory` reaches it.
# podman's storage is vfs (the kernel cannot idmap an overlayfs mount) on an ext4 image (the
# guest's root is an overlay on tmpfs, which Linux 6.1 cannot idmap).
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock

OCI=$(command -v sandboxd-oci)
if [ -z "$OCI" ] || ! command -v podman >/dev/null; then
	echo "1..0 # SKIP sandboxd-oci or podman is not installed"
	exit 0
fi
D=/var/tmp/sbx-oci-$$
img=/var/tmp/sbx-oci-$$.img
modprobe loop 2>/dev/null
truncate -s 512M "$img" && mkfs.ext4 -q -F "$img" && mkdir -p "$D" && mount -o loop "$img" "$D"
ok $? "an ext4 image for podman's storage at $D"
mkdir -p "$D/tmp" "$D/rootfs/bin" "$D/rootfs/etc" "$D/rootfs/proc" "$D/rootfs/dev" "$D/rootfs/sys" "$D/rootfs/tmp"
cp "$(command -v busybox)" "$D/rootfs/bin/busybox"
for c in sh echo sleep cat head tail true; do ln -s busybox "$D/rootfs/bin/$c"; done
tar -C "$D/rootfs" -cf "$D/img.tar" .
cat >"$D/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
cgroup_manager = "systemd"
events_logger = "file"
runtime_supports_json = ["sandboxd-oci"]
runtime_supports_nocgroup = ["sandboxd-oci"]
[engine.runtimes]
sandboxd-oci = ["$OCI"]
EOF
cat >"$D/storage.conf" <<EOF
[storage]
driver = "vfs"
graphroot = "$D/graph"
runroot = "$D/run"
EOF
pod() {
	env TMPDIR="$D/tmp" CONTAINERS_CONF="$D/containers.conf" CONTAINERS_STORAGE_CONF="$D/storage.conf" \
		timeout 180 podman --root "$D/graph" --runroot "$D/run" --runtime sandboxd-oci "$@"
}
check "podman imports the test's rootfs tarball" pod import "$D/img.tar" localhost/sbx-oci
prun() { pod run --pull=never --network none "$@"; }

prun --rm localhost/sbx-oci sh -c 'exit 7' 2>"$D/err"
rc=$?
[ "$rc" = 7 ]
ok $? "podman run --rm (systemd cgroup manager) exits 7 (got $rc)"
[ "$rc" = 7 ] || diag "$(cat "$D/err")"

prun --rm --memory 64m localhost/sbx-oci sh -c 'head -c 200m /dev/zero | tail' 2>"$D/err"
rc=$?
[ "$rc" = 137 ]
ok $? "--memory 64m: an allocation past it is OOM-killed, and podman reports it (exit 137; got $rc)"
[ "$rc" = 137 ] || diag "$(cat "$D/err")"
diag "sandboxd: $(journalctl -u sandboxd.service --no-pager -q 2>/dev/null | grep -i oom | tail -2)"

id=$(prun -d --memory 64m --memory-swap 64m localhost/sbx-oci sleep 300 2>"$D/err")
[ -n "$id" ]
ok $? "podman run -d with --memory 64m"
[ -n "$id" ] || diag "$(cat "$D/err")"
sbx=$(jq -r .sandbox "/run/sandboxd-oci/$id/state.json" 2>/dev/null)
r=$(call '{"op":"inspect","sandbox":"'"$sbx"'"}')
[ "$(jqr .sandbox.limits.memory "$r")" = 67108864 ] && [ "$(jqr .sandbox.enforced.memory "$r")" = true ]
ok $? "its sandbox has memory.max 64M, enforced"
check "podman pause" pod pause "$id"
[ "$(jqr .sandbox.frozen "$(call '{"op":"inspect","sandbox":"'"$sbx"'"}')")" = true ]
ok $? "the sandbox is frozen"
[ "$(pod inspect -f '{{.State.Status}}' "$id")" = paused ]
ok $? "podman says paused"
check "podman unpause" pod unpause "$id"
[ "$(jqr .sandbox.frozen "$(call '{"op":"inspect","sandbox":"'"$sbx"'"}')")" = false ]
ok $? "the sandbox is thawed"
check "podman update --memory 128m" pod update --memory 128m --memory-swap 128m "$id"
[ "$(jqr .sandbox.limits.memory "$(call '{"op":"inspect","sandbox":"'"$sbx"'"}')")" = 134217728 ]
ok $? "the sandbox's memory limit is 128M"
check "podman rm -f" pod rm -f -t 2 "$id"
r=$(call '{"op":"inspect","sandbox":"'"$sbx"'"}')
[ "$(jqr .error.code "$r")" = not_found ]
ok $? "its sandbox is gone"

pod rm -af >/dev/null 2>&1
umount -R "$D" 2>/dev/null || umount -l "$D"
rm -rf "$D" "$img"
rm -rf /var/lib/containers/cache
done_testing
