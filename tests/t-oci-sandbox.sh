#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# What an OCI runtime asks of a sandbox (issue #24): create's "root": {"path", "read_only"} (a
# host directory, idmapped with the same ids, as the whole root, with the sandbox's own /proc,
# /dev, /dev/pts and /dev/shm), over a plain directory and an overlayfs "merged" directory;
# "ephemeral" (never restored); "hostname"; "mounts" in such a sandbox (files, targets anywhere
# but /proc, /sys, /dev, made inside the root never through a symlink, "idmap": "same"); root
# clients only.
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
	for t in sh cat ls id stat echo touch test true sleep hostname mount grep head; do ln -sf busybox "$1/bin/$t"; done
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
diag "$r"
