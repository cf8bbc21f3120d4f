#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The caller's directories inside a sandbox (create's and a throwaway run's "mounts"): opened
# with the client's own credentials beneath mount_roots, never through a symlink, idmapped so
# that the caller's files are the sandbox user's inside and what a run writes is the caller's on
# the host; targets only where the sandbox has no filesystem of its own; a filesystem that
# cannot be idmapped refused; destroy and restart leave the caller's files as they were.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

A=65534
ROOTS=$T/roots
mkdir -p "$ROOTS/ro" "$ROOTS/rw/sub" "$ROOTS/closed" "$ROOTS/pub" "$T/elsewhere" "$T/ram"
echo "read me" >"$ROOTS/ro/a.txt"
echo "mine" >"$ROOTS/rw/keep.txt"
chown -R $A:$A "$ROOTS/ro" "$ROOTS/rw" "$T/elsewhere"
chmod 0700 "$ROOTS/closed"
chmod 0755 "$ROOTS/pub"
ln -s "$ROOTS/rw" "$ROOTS/link"
ln -s /etc "$ROOTS/etc-link"
chmod 0755 "$T" "$ROOTS"
printf 'mount_roots = %s\n' "$ROOTS" >"$T/sandboxd.conf"
start_daemon --config "$T/sandboxd.conf" || exit 0
chmod 0666 "$SOCK"

rpc_as() { # UID JSON
	as_other "$1" --regid="$1" --clear-groups -- timeout 35 python3 "$OTHER_CLIENT" "$SOCK" call "$2" --timeout 30
}
mounts() { # SOURCE TARGET [READ_ONLY]
	printf '[{"source":"%s","target":"%s","read_only":%s}]' "$1" "$2" "${3:-false}"
}
err_of() { jget "$1" '.error | [.code, .field] | tostring'; }

r=$(rpc '{"op":"hello"}')
is "$(jget "$r" '.capabilities.kernel.mount_idmap')" true "hello: the kernel has idmapped mounts (capabilities.kernel.mount_idmap)"
is "$(jget "$r" '.capabilities.mount_roots | tostring')" "[\"$ROOTS\"]" "hello: capabilities.mount_roots lists the configured roots"

# Read-only: the caller's files are the sandbox user's inside, and cannot be written.
r=$(rpc_as $A '{"op":"create","best_effort":true,"name":"m","mounts":'"$(mounts "$ROOTS/ro" /work/ro true)"'}')
is "$(jget "$r" .sandbox.state)" ready "user $A creates a sandbox with $ROOTS/ro mounted read-only at /work/ro"
is "$(jget "$r" '.sandbox.mounts | tostring')" "[{\"source\":\"$ROOTS/ro\",\"target\":\"/work/ro\",\"read_only\":true}]" \
	"the reply's SANDBOX lists the mount"
r=$(rpc_as $A '{"op":"run","sandbox":"m","command":"cat /work/ro/a.txt; stat -c %u:%g /work/ro/a.txt; echo x > /work/ro/new 2>/dev/null || echo refused"}')
is "$(jget "$r" .stdout)" $'read me\n1000:1000\nrefused' \
	"inside, the caller's file reads as uid/gid 1000 (idmapped), and a write to the read-only mount is refused"
check "... and nothing was written on the host" [ ! -e "$ROOTS/ro/new" ]
r=$(rpc_as $A '{"op":"inspect","sandbox":"m"}')
is "$(jget "$r" '.sandbox.mounts[0].target')" /work/ro "inspect reports the mount"
r=$(rpc_as $A '{"op":"destroy","sandbox":"m"}')
is "$(jget "$r" .ok)" true "destroyed"

# Writable: a run writes there; the file is the caller's on the host.
before=$(cd "$ROOTS/rw" && find . -printf '%p %U %s\n' | sort | sha256sum)
r=$(rpc_as $A '{"op":"create","best_effort":true,"name":"w","mounts":'"$(mounts "$ROOTS/rw" /mnt/src)"'}')
w_id=$(jget "$r" .sandbox.id)
is "$(jget "$r" .sandbox.state)" ready "user $A creates a sandbox with $ROOTS/rw mounted writable at /mnt/src"
r=$(rpc_as $A '{"op":"run","sandbox":"w","command":"echo made inside > /mnt/src/out.txt && mkdir /mnt/src/d && stat -c %u /mnt/src/out.txt"}')
is "$(jget "$r" .stdout)" 1000 "a run writes /mnt/src/out.txt (uid 1000 inside)"
is "$(stat -c %u:%g "$ROOTS/rw/out.txt" 2>/dev/null)" "$A:$A" "on the host the new file belongs to the caller ($A:$A), not to a sandbox uid"
is "$(stat -c %u "$ROOTS/rw/d" 2>/dev/null)" $A "... and so does the new directory"
is "$(cat "$ROOTS/rw/out.txt" 2>/dev/null)" "made inside" "... with what the run wrote"
rm -f "$ROOTS/rw/out.txt" && rmdir "$ROOTS/rw/d"

# Restart: the mount comes back, opened as the caller again.
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
start_daemon --config "$T/sandboxd.conf" || exit 0
chmod 0666 "$SOCK"
# By id: the name w is user $A's, and root's own lookup of a name finds only root's.
check "the sandbox is ready again after the restart" wait_ready "$w_id"
r=$(rpc_as $A '{"op":"inspect","sandbox":"w"}')
is "$(jget "$r" '[.sandbox.state, .sandbox.mounts[0].target] | tostring')" '["ready","/mnt/src"]' \
	"after the daemon was killed and restarted, the sandbox is back with its mount"
r=$(rpc_as $A '{"op":"run","sandbox":"w","command":"cat /mnt/src/keep.txt && touch /mnt/src/again"}')
is "$(jget "$r" .stdout)" mine "... its runs see the caller's files"
is "$(stat -c %u "$ROOTS/rw/again" 2>/dev/null)" $A "... and what they write is still the caller's"
rm -f "$ROOTS/rw/again"
r=$(rpc_as $A '{"op":"destroy","sandbox":"w"}')
is "$(jget "$r" .ok)" true "destroyed"
after=$(cd "$ROOTS/rw" && find . -printf '%p %U %s\n' | sort | sha256sum)
is "$after" "$before" "destroy left the caller's directory as it was (names, owners, sizes)"
is "$(cat "$ROOTS/rw/keep.txt")" mine "... with its contents"

# Snapshot, restore and the sweep never touch the caller's files; the restored sandbox has its
# mount again (reopened as the caller).
r=$(rpc_as $A '{"op":"create","best_effort":true,"name":"snap","mounts":'"$(mounts "$ROOTS/rw" /work/src)"'}')
sid=$(jget "$r" .sandbox.id)
r=$(rpc_as $A '{"op":"run","sandbox":"snap","command":"echo ws > /work/own.txt; echo caller > /work/src/f.txt"}')
is "$(jget "$r" .exit_code)" 0 "a sandbox with $ROOTS/rw at /work/src writes its workspace and the mount"
r=$(rpc_as $A '{"op":"snapshot","sandbox":"snap"}')
snap=$(jget "$r" .snapshot.id)
like "$snap" . "it is snapshotted"
check "the snapshot holds the workspace's own file" 	[ -n "$(find "$T/state/sandboxes/$sid" -path '*snapshots*' -name own.txt 2>/dev/null)" ]
is "$(find "$T/state/sandboxes/$sid" -name f.txt 2>/dev/null)" "" "... and nothing of the caller's (the copy does not cross the mount)"
r=$(rpc_as $A '{"op":"run","sandbox":"snap","command":"rm /work/own.txt; echo changed > /work/src/f.txt"}')
r=$(rpc_as $A '{"op":"snapshot.restore","sandbox":"snap","snapshot":"'"$snap"'"}')
is "$(jget "$r" .ok)" true "snapshot.restore"
r=$(rpc_as $A '{"op":"run","sandbox":"snap","command":"cat /work/own.txt /work/src/f.txt; grep -c \" /work/src \" /proc/self/mountinfo"}')
is "$(jget "$r" .stdout)" $'ws\nchanged\n1' \
	"after it, the workspace is the snapshot's, the mount is back and the caller's file is as the caller left it"
r=$(rpc '{"op":"sweep"}')
is "$(jget "$r" .ok)" true "a sweep"
is "$(cat "$ROOTS/rw/f.txt")" changed "... leaves the caller's file alone"
r=$(rpc_as $A '{"op":"destroy","sandbox":"snap"}')
is "$(cat "$ROOTS/rw/f.txt" 2>/dev/null)" changed "destroy of a snapshotted sandbox leaves it too"
rm -f "$ROOTS/rw/f.txt"

# A throwaway run takes mounts too.
r=$(rpc_as $A '{"op":"run","best_effort":true,"mounts":'"$(mounts "$ROOTS/ro" /work/ro true)"',"command":"cat /work/ro/a.txt"}')
is "$(jget "$r" .stdout)" "read me" "a throwaway run mounts the caller's directory too"
check "... and the file is still there after its sandbox went" [ -f "$ROOTS/ro/a.txt" ]

# sandboxctl: create --mount SRC:DST:ro, run --mount SRC:DST.
ctl_as() { as_other $A --regid=$A --clear-groups -- timeout 60 "$OTHER_SANDBOXCTL" --socket "$SOCK" "$@"; }
id=$(ctl_as create --best-effort --mount "$ROOTS/ro:/work/ro:ro")
like "$id" '^sbx-' "sandboxctl create --mount $ROOTS/ro:/work/ro:ro"
is "$(ctl_as run -s "$id" -- cat /work/ro/a.txt)" "read me" "... its run reads the caller's file"
is "$(ctl_as --json inspect "$id" | jq -r '.sandbox.mounts[0].read_only')" true "... read-only, as :ro asked"
ctl_as destroy "$id" >/dev/null
ctl_as run --best-effort --mount "$ROOTS/rw/:/mnt/w" -- sh -c 'echo hi > /mnt/w/ctl.txt'
is "$(stat -c %u "$ROOTS/rw/ctl.txt" 2>/dev/null)" $A "sandboxctl run --mount $ROOTS/rw/:/mnt/w: the file it writes is the caller's"
rm -f "$ROOTS/rw/ctl.txt"
out=$(as_other $A --regid=$A --clear-groups -- sh -c 'cd "$1" && shift && exec "$@"' _ "$ROOTS" \
        timeout 60 "$OTHER_SANDBOXCTL" --socket "$SOCK" run --best-effort --mount "./ro/.//:/mnt/r:ro" -- cat /mnt/r/a.txt 2>&1)
is "$out" "read me" "sandboxctl run --mount ./ro/.//:/mnt/r (relative, with . and //): taken from the current directory"
out=$(as_other $A --regid=$A --clear-groups -- sh -c 'cd "$1" && shift && exec "$@"' _ "$ROOTS/rw" \
        timeout 60 "$OTHER_SANDBOXCTL" --socket "$SOCK" run --best-effort --mount "../ro:/mnt/r:ro" -- cat /mnt/r/a.txt 2>&1)
is "$out" "read me" "sandboxctl run --mount ../ro:/mnt/r: a leading .. climbs from the current directory"
out=$(ctl_as run --best-effort --mount "ro/../ro:/mnt/r:ro" -- true 2>&1)
like "$out" "'\.\.' after a name is not resolved" "... and one after a name is refused by sandboxctl, saying why"
out=$(ctl_as create --mount nocolon 2>&1)
like "$out" 'invalid --mount' "sandboxctl refuses a --mount without a target"
out=$(ctl_as create --mount "$ROOTS/ro:/work/x:rx" 2>&1)
like "$out" 'ro or rw' "... and one whose third part is not ro or rw"

# Refusals.
r=$(rpc_as $A '{"op":"create","best_effort":true,"mounts":'"$(mounts "$ROOTS/closed" /work/c true)"'}')
is "$(err_of "$r")" '["permission_denied","mounts[0].source"]' "a directory the client cannot read itself is refused (permission_denied)"
r=$(rpc_as $A '{"op":"create","best_effort":true,"mounts":'"$(mounts "$ROOTS/pub" /work/p)"'}')
is "$(err_of "$r")" '["permission_denied","mounts[0].source"]' "a directory the client may read but not write, asked writable, is refused"
r=$(rpc_as $A '{"op":"run","best_effort":true,"mounts":'"$(mounts "$ROOTS/pub" /work/p true)"',"command":"ls -a /work/p | wc -l"}')
is "$(jget "$r" .exit_code)" 0 "... and accepted read-only"
r=$(rpc_as $A '{"op":"create","best_effort":true,"mounts":'"$(mounts "$ROOTS/link" /work/l)"'}')
is "$(err_of "$r")" '["invalid_request","mounts[0].source"]' "a source that is a symlink (to a directory the client owns) is refused"
like "$(jget "$r" .error.message)" 'symlink' "... saying why"
r=$(rpc_as $A '{"op":"create","best_effort":true,"mounts":'"$(mounts "$ROOTS/link/sub" /work/l)"'}')
is "$(err_of "$r")" '["invalid_request","mounts[0].source"]' "a symlink planted in the middle of the source path is refused"
r=$(rpc_as $A '{"op":"create","best_effort":true,"mounts":'"$(mounts "$ROOTS/etc-link" /work/l true)"'}')
is "$(err_of "$r")" '["invalid_request","mounts[0].source"]' "a symlink to /etc beneath mount_roots is refused, never followed"
r=$(rpc_as $A '{"op":"create","best_effort":true,"mounts":'"$(mounts "$T/elsewhere" /work/e)"'}')
is "$(err_of "$r")" '["permission_denied","mounts[0].source"]' "a source outside mount_roots is refused, though the client owns it"
like "$(jget "$r" .error.message)" 'mount_roots' "... naming mount_roots"
r=$(rpc_as $A '{"op":"create","best_effort":true,"mounts":'"$(mounts "$ROOTS/../elsewhere" /work/e)"'}')
is "$(err_of "$r")" '["invalid_request","mounts[0].source"]' "a source with '..' is refused"
for t in /etc/x /proc/x /dev/x /usr/local /sys /run/x /tmp/x /var/x / /work "/work/../etc" /work/a/ relative "$T/state/x"; do
	r=$(rpc_as $A '{"op":"create","best_effort":true,"mounts":'"$(mounts "$ROOTS/ro" "$t" true)"'}')
	is "$(err_of "$r")" '["invalid_request","mounts[0].target"]' "target $t is refused"
done
r=$(rpc_as $A '{"op":"create","best_effort":true,"mounts":[{"source":"'"$ROOTS/ro"'","target":"/work/a","read_only":true},{"source":"'"$ROOTS/rw"'","target":"/work/a/b"}]}')
is "$(err_of "$r")" '["invalid_request","mounts[1].target"]' "a target beneath another mount's target is refused"
r=$(rpc_as $A '{"op":"create","best_effort":true,"mounts":[{"source":"'"$ROOTS/ro"'","target":"/work/a","bogus":1}]}')
is "$(jget "$r" .error.code)" invalid_request "an unknown field in a mount is refused"
r=$(rpc_as $A '{"op":"run","sandbox":"nope","mounts":'"$(mounts "$ROOTS/ro" /work/ro true)"',"command":"true"}')
is "$(err_of "$r")" '["invalid_request","mounts"]' "mounts on a run in an existing sandbox are refused"

# A filesystem that cannot be idmapped (ramfs): refused, never mounted as an unmapped uid.
if mount -t ramfs none "$T/ram" 2>/dev/null; then
	r=$(rpc '{"op":"create","best_effort":true,"mounts":'"$(mounts "$T/ram" /mnt/ram)"'}')
	is "$(err_of "$r")" '["invalid_request","mounts[0].source"]' "a directory on ramfs (no idmapped mounts) is refused"
	like "$(jget "$r" .error.message)" 'cannot be idmapped' "... saying its filesystem cannot be idmapped"
	umount "$T/ram"
else
	skip "cannot mount a ramfs here" 2
fi
r=$(rpc '{"op":"create","best_effort":true,"mounts":'"$(mounts /proc /mnt/p true)"'}')
is "$(err_of "$r")" '["invalid_request","mounts[0].source"]' "root may not mount a kernel interface (/proc) either"

# Root inside cannot undo a read-only mount: it is locked with the others.
r=$(rpc '{"op":"create","best_effort":true,"name":"rootro","user":"root","mounts":'"$(mounts "$ROOTS/ro" /work/ro true)"'}')
is "$(jget "$r" .sandbox.state)" ready "root creates a \"user\":\"root\" sandbox with a read-only mount"
r=$(rpc '{"op":"run","sandbox":"rootro","command":"mount -o remount,rw,bind /work/ro 2>&1 || echo remount-refused; umount /work/ro 2>&1 || echo umount-refused; touch /work/ro/x 2>&1 || echo still-ro"}')
like "$(jget "$r" .stdout)" 'remount-refused' "root inside cannot remount the read-only mount writable"
like "$(jget "$r" .stdout)" 'umount-refused' "... nor unmount it"
like "$(jget "$r" .stdout)" 'still-ro' "... and it stays read-only"
check "... nothing was written on the host" [ ! -e "$ROOTS/ro/x" ]
rpc '{"op":"destroy","sandbox":"rootro"}' >/dev/null

# "workspace": {"source"}: the caller's directory as /work.
before=$(cd "$ROOTS/rw" && find . -printf '%p %U %s\n' | sort | sha256sum)
r=$(rpc_as $A '{"op":"create","best_effort":true,"name":"cw","workspace":{"source":"'"$ROOTS/rw"'"},"mounts":'"$(mounts "$ROOTS/ro" /mnt/ro true)"'}')
is "$(jget "$r" '[.sandbox.state, .sandbox.workspace.source, .sandbox.workdir, (.sandbox.mounts | length)] | tostring')" \
	"[\"ready\",\"$ROOTS/rw\",null,1]" "workspace.source: the caller's directory is the workspace (SANDBOX says so; workdir null), beside a mount"
r=$(rpc_as $A '{"op":"run","sandbox":"cw","command":"pwd; cat keep.txt /mnt/ro/a.txt; echo built > result.txt; stat -c %u keep.txt"}')
is "$(jget "$r" .stdout)" $'/work\nmine\nread me\n1000' "a run's /work is the caller's directory (its files uid 1000 inside)"
is "$(stat -c %u "$ROOTS/rw/result.txt" 2>/dev/null)" $A "what the run wrote in /work is the caller's on the host"
r=$(rpc_as $A '{"op":"snapshot","sandbox":"cw"}')
is "$(err_of "$r")" '["conflict","sandbox"]' "a snapshot of a sandbox whose workspace is the caller's is refused (conflict)"
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
start_daemon --config "$T/sandboxd.conf" || exit 0
chmod 0666 "$SOCK"
r=$(rpc_as $A '{"op":"run","sandbox":"cw","command":"cat result.txt /mnt/ro/a.txt"}')
is "$(jget "$r" .stdout)" $'built\nread me' "after a restart, /work is the caller's directory again, and the mount is back"
r=$(rpc_as $A '{"op":"destroy","sandbox":"cw"}')
is "$(jget "$r" .ok)" true "destroyed"
is "$(cat "$ROOTS/rw/result.txt" 2>/dev/null)" built "destroy leaves the caller's workspace (what the run wrote stays)"
rm -f "$ROOTS/rw/result.txt"
is "$(cd "$ROOTS/rw" && find . -printf '%p %U %s\n' | sort | sha256sum)" "$before" "... and the rest of it as it was"
id=$(ctl_as create --best-effort --workspace-source "$ROOTS/rw")
is "$(ctl_as run -s "$id" -- cat keep.txt)" mine "sandboxctl create --workspace-source $ROOTS/rw: runs start in the caller's directory"
ctl_as destroy "$id" >/dev/null
r=$(rpc_as $A '{"op":"create","best_effort":true,"workspace":{"source":"'"$ROOTS/rw"'"},"limits":{"disk":"1G"}}')
is "$(err_of "$r")" '["invalid_request","limits.disk"]' "limits.disk with workspace.source is refused"
r=$(rpc_as $A '{"op":"create","best_effort":true,"workspace":{"source":"'"$ROOTS/rw"'"},"mounts":'"$(mounts "$ROOTS/ro" /work/ro true)"'}')
is "$(err_of "$r")" '["invalid_request","mounts[0].target"]' "a mount inside a caller's workspace is refused"
r=$(rpc_as $A '{"op":"create","best_effort":true,"workspace":{"source":"'"$T/elsewhere"'"}}')
is "$(err_of "$r")" '["permission_denied","workspace.source"]' "workspace.source outside mount_roots is refused"
r=$(rpc_as $A '{"op":"create","best_effort":true,"workspace":{"source":"'"$ROOTS/link"'"}}')
is "$(err_of "$r")" '["invalid_request","workspace.source"]' "workspace.source through a symlink is refused"
