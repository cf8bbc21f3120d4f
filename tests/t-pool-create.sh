#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The pools for create (pool_create, pool_images; docs/sandboxd.conf.md): off by default (a create
# is made fresh and nothing is made ahead); when set, they fill in the background with sandboxes
# no one sees, a create that asks for what they are gets one, recorded as its own with the name,
# env, user and ttl it asked for, and fresh: a new id, an empty /work (a file a previous user
# left is not there), a uid range of its own; anything else is made fresh; the pool refills; an
# image's pool serves creates from that image, image.remove takes its pooled sandboxes away, and a
# sandbox handed out comes back after a restart like any other.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

BUSYBOX=$(command -v busybox || true)
[ -n "$BUSYBOX" ] && file -L "$BUSYBOX" 2>/dev/null | grep -q 'statically linked' ||
	skip_all "a static busybox is needed to build a tiny rootfs (apt-get install busybox-static)"

# The sandboxes there are, by their cgroups; the ready ones have their init's leaf.
sbx_ids() { (cd "$CG/sandboxes" 2>/dev/null && for d in sbx-*; do [ -d "$d/init" ] && echo "$d"; done) | sort; }
pool_create_ready() { jget "$(rpc '{"op":"health"}')" .capacity.pool.create.ready; }
_ready_is() { [ "$(pool_create_ready)" = "$1" ]; }
# Its uid range, seen from the host: its workspace belongs to uid 1000 inside (host_uid + 1000).
host_uid() { stat -c %u "$T/state/sandboxes/$1/work"; }

# ---- Off by default -------------------------------------------------------------------------
start_daemon || exit 0
is "$(jget "$(rpc '{"op":"health"}')" .capacity.pool.create.size)" 0 "without pool_create or pool_images: no create pool"
sleep 0.5
is "$(ls -A "$T/state/sandboxes" | wc -l)" 0 "nothing is made ahead of a create"
r=$(rpc '{"op":"create","best_effort":true}')
a=$(jget "$r" .sandbox.id)
is "$(jget "$r" .sandbox.state)" ready "a create is answered once its fresh sandbox is ready"
is "$(sbx_ids)" "$a" "and it is the only sandbox there is"
is "$(jget "$(rpc "{\"op\":\"destroy\",\"sandbox\":\"$a\"}")" .ok)" true "destroyed"
stop_daemon

# ---- pool_create and pool_images ------------------------------------------------------------
ROOT=$T/rootfs
mkdir -p "$ROOT/bin" "$ROOT/etc"
cp "$BUSYBOX" "$ROOT/bin/busybox"
for t in sh cat ls id true; do ln -s busybox "$ROOT/bin/$t"; done
printf 'ID=pooltest\n' >"$ROOT/etc/os-release"
printf 'pool_create = 2\npool_images = tiny:2\n' >"$T/sandboxd.conf"
start_daemon --config "$T/sandboxd.conf" || exit 0
is "$(jget "$(rpc '{"op":"health"}')" .capacity.pool.create.size)" 4 "health: the create pools' size is 2 + 2"
check "the host root's pool fills (2 ready; the image is not imported yet)" wait_until 30 _ready_is 2
r=$(rpc "{\"op\":\"image.import\",\"name\":\"tiny\",\"source\":\"$ROOT\"}" 60)
is "$(jget "$r" .ok)" true "image tiny imported"
check "then the image's pool fills too (4 ready)" wait_until 30 _ready_is 4
P0=$(sbx_ids)
is "$(jget "$(rpc '{"op":"list"}')" '.sandboxes | length')" 0 "list shows no pooled sandbox"
is "$(jget "$(rpc '{"op":"health"}')" .sandboxes)" 0 "health counts none"
for p in $P0; do [ -e "$T/state/sandboxes/$p/meta.json" ] && break; done
check "a pooled sandbox is not recorded (no meta.json)" [ ! -e "$T/state/sandboxes/$p/meta.json" ]

r=$(rpc '{"op":"create","best_effort":true,"name":"first","user":"root","env":{"FOO":"bar"},"ttl":"1h"}')
a=$(jget "$r" .sandbox.id)
is "$(jget "$r" .sandbox.state)" ready "a create with the default limits is answered ready"
check "it got a pooled sandbox" grep -qx "$a" <<<"$P0"
is "$(jget "$r" .sandbox.name)" first "with the name it asked for"
check "recorded as a create records it (meta.json)" [ -e "$T/state/sandboxes/$a/meta.json" ]
is "$(jget "$(rpc '{"op":"list"}')" '.sandboxes[0].id')" "$a" "list shows it"
is "$(jget "$(rpc "{\"op\":\"inspect\",\"sandbox\":\"first\"}")" .sandbox.id)" "$a" "found by its name"
r=$(rpc "{\"op\":\"run\",\"sandbox\":\"$a\",\"argv\":[\"sh\",\"-c\",\"id -u; echo \$FOO; ls -A /work | wc -l\"]}")
is "$(jget "$r" .stdout)" "0
bar
0" "its runs are root (user), see its env, and /work is empty"
r=$(rpc "{\"op\":\"run\",\"sandbox\":\"$a\",\"argv\":[\"sh\",\"-c\",\"umount /proc/sys 2>/dev/null; grep -c ' /proc/sys ' /proc/self/mountinfo\"]}")
is "$(jget "$r" .stdout)" 1 "root inside cannot undo its mounts (made locked, as a create's are): /proc/sys stays"
is "$(jget "$(rpc "{\"op\":\"run\",\"sandbox\":\"$a\",\"argv\":[\"sh\",\"-c\",\"echo left > /work/secret\"]}")" .exit_code)" 0 \
	"a file left in its /work"
ua=$(host_uid "$a")
is "$(jget "$(rpc "{\"op\":\"destroy\",\"sandbox\":\"$a\"}")" .ok)" true "and it is destroyed"

check "the pool refills (4 ready)" wait_until 30 _ready_is 4
P1=$(sbx_ids)
check "with new sandboxes only" bash -c '! grep -qx "$1" <<<"$2"' _ "$a" "$P1"
r=$(rpc '{"op":"create","best_effort":true,"name":"first"}')
b=$(jget "$r" .sandbox.id)
check "the next create got a pooled sandbox" grep -qx "$b" <<<"$P1"
check "with a new id" [ "$b" != "$a" ]
r=$(rpc "{\"op\":\"run\",\"sandbox\":\"$b\",\"argv\":[\"sh\",\"-c\",\"id -u; ls -A /work | wc -l; cat /work/secret\"]}")
is "$(jget "$r" .stdout)" "1000
0" "it runs as the default user, and the file the previous one left is not there"
P1=$(wait_until 30 _ready_is 4; sbx_ids)
r=$(rpc '{"op":"create","best_effort":true}')
c=$(jget "$r" .sandbox.id)
check "another create got a pooled sandbox too" grep -qx "$c" <<<"$P1"
ub=$(host_uid "$b") uc=$(host_uid "$c")
check "each has a uid range of its own ($ub, $uc)" [ -n "$ub" ] && [ -n "$uc" ] && [ "$ub" != "$uc" ]
diag "uid ranges: destroyed $ua, now $ub and $uc"

P2=$(wait_until 30 _ready_is 4; sbx_ids)
r=$(rpc '{"op":"create","best_effort":true,"limits":{"pids":77}}')
d=$(jget "$r" .sandbox.id)
is "$(jget "$r" .sandbox.state)" ready "a create with other limits"
check "is made fresh, not taken from the pool" bash -c '! grep -qx "$1" <<<"$2"' _ "$d" "$P2"
r=$(rpc '{"op":"create","best_effort":true,"name":"first"}')
is "$(jget "$r" .error.code)" conflict "a name taken already: refused as without a pool"
r=$(rpc '{"op":"create","limits":{"memory":"1"}}')
is "$(jget "$r" .error.field)" limits.memory "an invalid request is refused as without a pool (limits.memory)"
is "$(jget "$(rpc '{"op":"health"}')" .capacity.pool.create.ready)" 4 "the refused requests took nothing from the pool"

r=$(rpc '{"op":"create","best_effort":true,"image":"tiny"}')
e=$(jget "$r" .sandbox.id)
check "a create from image tiny got a pooled sandbox of that image" grep -qx "$e" <<<"$P2"
is "$(jget "$r" .sandbox.image)" tiny "its image is tiny"
r=$(rpc "{\"op\":\"run\",\"sandbox\":\"$e\",\"argv\":[\"cat\",\"/etc/os-release\"]}")
is "$(jget "$r" .stdout)" "ID=pooltest" "it runs the image's own files"
is "$(jget "$(rpc '{"op":"image.remove","image":"tiny"}')" .error.code)" conflict "image.remove: refused while a client's sandbox uses it"
is "$(jget "$(rpc "{\"op\":\"destroy\",\"sandbox\":\"$e\"}")" .ok)" true "that sandbox destroyed"
check "its pool is full again" wait_until 30 _ready_is 4
is "$(jget "$(rpc '{"op":"image.remove","image":"tiny"}')" .removed)" tiny "image.remove takes the image's pooled sandboxes with it"
check "the host root's pool stays (2 ready)" wait_until 30 _ready_is 2
sleep 0.5
is "$(jget "$(rpc '{"op":"health"}')" .capacity.pool.create.filling)" 0 "and nothing refills the removed image's"

stop_daemon
start_daemon --config "$T/sandboxd.conf" || exit 0
r=$(rpc '{"op":"inspect","sandbox":"first"}')
is "$(jget "$r" .sandbox.id)" "$b" "after a restart, a sandbox the pool handed out comes back from its record"
is "$(jget "$(rpc "{\"op\":\"run\",\"sandbox\":\"$b\",\"argv\":[\"true\"]}")" .exit_code)" 0 "and runs"
check "the pool fills again after the restart (2 ready)" wait_until 30 _ready_is 2
for s in "$b" "$c" "$d"; do rpc "{\"op\":\"destroy\",\"sandbox\":\"$s\"}" >/dev/null; done
stop_daemon

# ---- A record that cannot be written --------------------------------------------------------
# The state directory on a tmpfs whose inodes run out as the record is written: the create is
# told why, and its sandbox goes (the records of a burst are written after the creates are read).
_no_sbx() { [ "$(sbx_ids | wc -l)" = "$1" ]; }
full_after() { mount -o "remount,nr_inodes=$(($(df --output=iused "$T/state" | tail -n 1) + $1))" "$T/state"; }
rm -rf "$T/state" && mkdir -p "$T/state"
printf 'min_free_disk = 0\nmin_free_files = 0\n' >"$T/zero.conf"
# Unmounted on every path below: nothing here exits early.
if mount -t tmpfs -o size=512M,mode=0755 sbx-pool-test "$T/state"; then
	start_daemon --config "$T/zero.conf"
	full_after 2 # the sandbox's directory and its work/, not its meta.json
	r=$(rpc '{"op":"create","best_effort":true}')
	is "$(jget "$r" '.error | [.code, .field] | tostring')" '["resource_exhausted","disk"]' \
		"a fresh create whose record cannot be written: resource_exhausted, field disk"
	like "$(jget "$r" .error.message)" "cannot record the sandbox" "which says so"
	check "and its sandbox is gone" wait_until 30 _no_sbx 0
	stop_daemon
	mount -o remount,nr_inodes=100000 "$T/state"
	printf 'min_free_disk = 0\nmin_free_files = 0\npool_create = 1\n' >"$T/one.conf"
	start_daemon --config "$T/one.conf"
	check "a pool of 1 fills" wait_until 30 _ready_is 1
	p=$(sbx_ids)
	full_after 0
	r=$(rpc '{"op":"create","best_effort":true}')
	is "$(jget "$r" '.error | [.code, .field] | tostring')" '["resource_exhausted","disk"]' \
		"a create from the pool whose record cannot be written: resource_exhausted, field disk"
	_gone() { [ -n "$1" ] && ! sbx_ids | grep -qx "$1" && [ ! -e "$T/state/sandboxes/$1" ]; }
	check "and the sandbox it was given is gone" wait_until 30 _gone "$p"
	mount -o remount,nr_inodes=100000 "$T/state"
	stop_daemon
	umount "$T/state" || umount -l "$T/state"
else
	nok "a tmpfs for the state directory (mount -t tmpfs)"
fi

