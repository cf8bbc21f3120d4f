#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# btrfs storage (storage = image:SIZE:btrfs): snapshots, forks and restores that copy nothing.
#  - the daemon makes a btrfs image, loop-mounts it over its sandboxes' directory with quotas
#    (qgroups) on; hello says storage image, fs btrfs, snapshots "subvolume";
#  - a workspace is a subvolume; a snapshot a read-only subvolume snapshot of it with the same
#    content (files, directories, symlinks, hard links, modes); a restore puts that content back
#    and the old workspace goes; a fork has the content, its files keeping the source's owners on
#    disk and idmapped at /work onto the fork's own user (its new files too; a fork of a fork's
#    snapshot, a restore in a fork, a daemon restart keep the mapping right; the source's range
#    given to another sandbox leaves the fork's files out of its reach);
#  - limits.disk is the sandbox's qgroup: a write past it fails inside with EDQUOT while another
#    sandbox and the host write on; a restart keeps the limit; limits.files is
#    limit_unenforceable unless best_effort;
#  - inside, making a subvolume or a snapshot (out of the qgroup's reach) is refused;
#  - snapshot.delete and destroy leave no subvolume behind.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

command -v mkfs.btrfs >/dev/null || skip_all "mkfs.btrfs missing (btrfs-progs)"
grep -qw btrfs /proc/filesystems || modprobe btrfs 2>/dev/null
grep -qw btrfs /proc/filesystems || skip_all "the kernel has no btrfs"

mkdir -p "$T"
_btrfs_end() {
        local rc=$?
        _daemon_end
        umount -l "$T/state/sandboxes" 2>/dev/null
        (exit "$rc")
        _cleanup
}
trap _btrfs_end EXIT

ST=$T/state
okif() { if [ "$1" = 0 ]; then ok "$2"; else nok "$2"; fi; }
printf '%s\n' "sweep_interval = 0" "storage = image:1G:btrfs" >"$T/sandboxd.conf"

start_daemon --config "$T/sandboxd.conf" || exit 0
[ "$(stat -f -c %T "$ST/sandboxes")" = btrfs ] && mountpoint -q "$ST/sandboxes"
okif $? "a btrfs mounted on $ST/sandboxes"
r=$(rpc '{"op":"hello"}')
is "$(jget "$r" '.capabilities.disk | [.storage, .fs, .snapshots, .enforced, .files_enforced] | tostring')" \
        '["image","btrfs","subvolume",true,false]' \
        "hello: storage image, fs btrfs, snapshots subvolume, disk enforced, files not"
like "$(jget "$r" .capabilities.disk.how)" "^btrfs qgroup of each writable subvolume at $ST/sandboxes" "hello says how: $(jget "$r" .capabilities.disk.how)"
like "$(ctl doctor 2>&1)" "snapshots: btrfs subvolume snapshots" "doctor names the snapshots' kind"

r=$(rpc '{"op":"create","limits":{"files":1000}}')
is "$(jget "$r" '.error.code + " " + .error.field')" "limit_unenforceable limits.files" \
        "limits.files on btrfs: limit_unenforceable, field limits.files"
r=$(rpc '{"op":"create","best_effort":true,"name":"a","limits":{"disk":"64M"}}')
is "$(jget "$r" .ok)" true "a sandbox with a 64M disk limit"
is "$(jget "$r" .sandbox.enforced.disk)" true "its disk limit is enforced"
wd=$(jget "$r" .sandbox.workdir)
is "$(stat -c %i "$wd")" 256 "its workspace is a subvolume (inode 256)"

# listing DIR: every entry's type, mode, size, link count, target and content digest, by path.
listing() {
        (cd "$1" && find . -mindepth 1 -printf '%p %y %m %s %n %l\n' | sort &&
                find . -type f -exec md5sum {} + | sort -k2)
}
fill='mkdir -p /work/d/e && printf one > /work/d/f && head -c 3M /dev/urandom > /work/big &&
        ln -s ../big /work/d/e/link && ln /work/d/f /work/d/hard && chmod 0640 /work/d/f && mkfifo /work/fifo'
r=$(rpc "$(jq -nc --arg c "$fill" '{op:"run",sandbox:"a",command:$c}')")
is "$(jget "$r" .exit_code)" 0 "a tree written in the workspace"
before=$(listing "$wd")

r=$(rpc '{"op":"snapshot","sandbox":"a","label":"one"}')
snap=$(jget "$r" .snapshot.id)
is "$(jget "$r" .ok)" true "a snapshot"
is "$(jget "$r" .frozen)" true "frozen for it"
diag "snapshot: frozen_s $(jget "$r" .frozen_s), bytes $(jget "$r" .snapshot.bytes), files $(jget "$r" .snapshot.files)"
is "$(jget "$r" .snapshot.files)" 4 "its record counts the 4 files, each inode once (one with 2 names, a symlink, a FIFO, the big one)"
tree=$ST/sandboxes/$(basename "$(dirname "$wd")")/snapshots/$snap/tree
is "$(stat -c %i "$tree")" 256 "the snapshot is a subvolume"
is "$(btrfs property get -ts "$tree" ro 2>/dev/null)" "ro=true" "read-only"
is "$(listing "$tree")" "$before" "with the workspace's content"

r=$(rpc '{"op":"run","sandbox":"a","command":"rm -r /work/d && echo new > /work/big && touch /work/added"}')
is "$(jget "$r" .exit_code)" 0 "the workspace changed after the snapshot"
[ "$(listing "$tree")" = "$before" ]
okif $? "the snapshot did not"
r=$(rpc "$(jq -nc --arg s "$snap" '{op:"snapshot.restore",sandbox:"a",snapshot:$s}')")
is "$(jget "$r" .ok)" true "restore"
is "$(listing "$wd")" "$before" "the workspace has the snapshot's content again"
is "$(stat -c %i "$wd")" 256 "and is a subvolume"
sbdir=$(dirname "$wd")
gone_new() { ! ls -d "$sbdir"/work.new-* >/dev/null 2>&1; }
wait_until 10 gone_new
okif $? "the old workspace is removed"
r=$(rpc '{"op":"run","sandbox":"a","command":"echo more >> /work/d/f && cat /work/d/hard"}')
is "$(jget "$r" .stdout)" "onemore" "the restored workspace is writable, its hard link kept"

# A fork takes its source's limits unless it asks (issue 35): this one asks 256M of disk, so that
# its subvolume's own qgroup, not the source's 64M, is what bounds it.
r=$(rpc "$(jq -nc --arg s "a/$snap" '{op:"create",best_effort:true,name:"f",from_snapshot:$s,limits:{disk:"256M"}}')")
is "$(jget "$r" .ok)" true "a fork of the snapshot"
fwd=$(jget "$r" .sandbox.workdir)
is "$(stat -c %i "$fwd")" 256 "its workspace is a subvolume"
is "$(listing "$fwd")" "$before" "with the snapshot's content"
r=$(rpc '{"op":"run","sandbox":"f","command":"stat -c \"%u:%g\" /work/big /work/d/f /work/d/e/link | sort -u; echo x >> /work/big"}')
is "$(jget "$r" .stdout)" "1000:1000" "owned by the fork's own user inside"
auid=$(stat -c %u "$wd/big")
fuid=$(stat -c %u "$fwd/big")
is "$fuid" "$auid" "on the host, its files keep the source's owners (no chown walk)"
abase=$((auid - 1000))
fdir=$(dirname "$fwd")
is "$(jq -r .work_uid "$fdir/meta.json")" "$abase" "the fork's record names the host uid its workspace's files carry"
[ "$(jq -r .uid_slot "$fdir/meta.json")" != "$(jq -r .uid_slot "$sbdir/meta.json")" ]
okif $? "while its own uid range is another one"
r=$(rpc '{"op":"run","sandbox":"f","command":"id -u; id -g; echo x >> /work/d/f && mkdir /work/nd && echo n > /work/nd/new && stat -c %u:%g /work/nd /work/nd/new /work/d/f | sort -u"}')
is "$(jget "$r" .stdout)" "$(printf '1000\n1000\n1000:1000')" "inside the fork: its user, who writes its files and whose new files are its own"
is "$(stat -c %u:%g "$fwd/nd/new")" "$auid:$auid" "a new file of the fork's carries the same base on disk as the rest of its tree"
r=$(rpc '{"op":"run","sandbox":"f","user":"root","command":"stat -c %u /work/nd/new; chown 0:0 /work/nd/new && stat -c %u:%g /work/nd/new"}')
is "$(jget "$r" .stdout)" "$(printf '1000\n0:0')" "root inside the fork chowns in /work within the fork's ids"
is "$(stat -c %u "$fwd/nd/new")" "$abase" "which is the base on disk"
rpc '{"op":"run","sandbox":"f","command":"rm -r /work/nd"}' >/dev/null
is "$(listing "$tree")" "$before" "the fork's writes leave the snapshot alone"
r=$(rpc '{"op":"run","sandbox":"f","command":"dd if=/dev/zero of=/work/fill bs=1M count=80 conv=fsync 2>&1; echo status $?; rm -f /work/fill"}')
like "$(jget "$r" .stdout)" "status 0" "the fork's disk limit is its own (256M asked): 80M past the source's 64M written"

# ---- a fork of a fork's snapshot, a restore in a fork ------------------------------------------
r=$(rpc '{"op":"snapshot","sandbox":"f"}')
fsnap=$(jget "$r" .snapshot.id)
is "$(jq -r .tree_uid "$fdir/snapshots/$fsnap/meta.json")" "$abase" "a fork's snapshot records the base its tree carries"
r=$(rpc "$(jq -nc --arg s "f/$fsnap" '{op:"create",best_effort:true,name:"g",from_snapshot:$s}')")
is "$(jget "$r" .ok)" true "a fork of the fork's snapshot"
gwd=$(jget "$r" .sandbox.workdir)
is "$(jq -r .work_uid "$(dirname "$gwd")/meta.json")" "$abase" "its record: the same base"
r=$(rpc '{"op":"run","sandbox":"g","command":"stat -c %u:%g /work/big /work/d/f | sort -u; echo y >> /work/d/f && tail -c 2 /work/d/f"}')
is "$(jget "$r" .stdout)" "$(printf '1000:1000\ny')" "its files are its user's inside, and writable"
rpc '{"op":"run","sandbox":"f","command":"rm -r /work/d"}' >/dev/null
r=$(rpc "$(jq -nc --arg s "$fsnap" '{op:"snapshot.restore",sandbox:"f",snapshot:$s}')")
is "$(jget "$r" .ok)" true "a restore in the fork"
r=$(rpc '{"op":"run","sandbox":"f","command":"stat -c %u:%g /work/d/f /work/big | sort -u; echo z >> /work/d/f && echo ok"}')
is "$(jget "$r" .stdout)" "$(printf '1000:1000\nok')" "the restored workspace is the fork's user's, writable"
is "$(jq -r .work_uid "$fdir/meta.json")" "$abase" "the fork's record keeps the base after the restore"

# ---- an overlay root: its upper layer is a subvolume too, snapshotted, forked, restored ---------
r=$(rpc '{"op":"create","best_effort":true,"name":"o","user":"root","root":"overlay"}')
is "$(jget "$r" .ok)" true "a sandbox with an overlay root"
odir=$(dirname "$(jget "$r" .sandbox.workdir)")
r=$(rpc '{"op":"run","sandbox":"o","user":"root","command":"echo pkg > /usr/local/pkg && echo w > /work/w && echo ok"}')
is "$(jget "$r" .stdout)" ok "a file installed in /usr/local, one in /work"
is "$(stat -c %i "$odir/root-upper")" 256 "its upper layer's directory (root-upper: upper and overlayfs's work) is a subvolume"
r=$(rpc '{"op":"snapshot","sandbox":"o"}')
osnap=$(jget "$r" .snapshot.id)
is "$(stat -c %i "$odir/snapshots/$osnap/root")" 256 "the snapshot has it as a subvolume of its own"
r=$(rpc "$(jq -nc --arg s "o/$osnap" '{op:"create",best_effort:true,name:"of",user:"root",from_snapshot:$s}')")
is "$(jget "$r" .ok)" true "a fork of it"
r=$(rpc '{"op":"run","sandbox":"of","user":"root","command":"cat /usr/local/pkg /work/w; stat -c %u /usr/local/pkg"}')
is "$(jget "$r" .stdout)" "$(printf 'pkg\nw\n0')" "the fork has the installed file (root's inside) and the workspace"
rpc '{"op":"run","sandbox":"o","user":"root","command":"rm /usr/local/pkg"}' >/dev/null
r=$(rpc "$(jq -nc --arg s "$osnap" '{op:"snapshot.restore",sandbox:"o",snapshot:$s}')")
is "$(jget "$r" .ok)" true "restore"
is "$(jget "$(rpc '{"op":"run","sandbox":"o","user":"root","command":"cat /usr/local/pkg"}')" .stdout)" pkg "the installed file is back"
for x in of o; do rpc "{\"op\":\"destroy\",\"sandbox\":\"$x\"}" >/dev/null; done

# ---- the disk limit, at write time -------------------------------------------------------------
r=$(rpc '{"op":"create","best_effort":true,"name":"b"}')
is "$(jget "$r" .ok)" true "another sandbox, no disk limit"
r=$(rpc '{"op":"run","sandbox":"a","command":"dd if=/dev/urandom of=/work/fill bs=1M count=100 conv=fsync 2>&1; echo status $?"}')
like "$(jget "$r" .stdout)" "Disk quota exceeded" "a write past 64M fails inside with EDQUOT"
like "$(jget "$r" .stdout)" "status 1" "and dd says so"
r=$(rpc '{"op":"run","sandbox":"b","command":"dd if=/dev/urandom of=/work/fill bs=1M count=80 conv=fsync 2>&1; echo status $?"}')
like "$(jget "$r" .stdout)" "status 0" "meanwhile the other sandbox writes 80M"
dd if=/dev/zero of="$ST/sandboxes/host-file" bs=1M count=80 conv=fsync 2>/dev/null
okif $? "and the host writes 80M on the same filesystem"
rm -f "$ST/sandboxes/host-file"
r=$(rpc '{"op":"run","sandbox":"a","command":"rm /work/fill && head -c 1M /dev/zero > /work/again && echo ok"}')
is "$(jget "$r" .stdout)" "ok" "once removed, the sandbox writes again"

# ---- nothing inside makes a subvolume out of the qgroup's reach -----------------------------
ioc='import fcntl, os, struct, sys
fd = os.open("/work", os.O_RDONLY)
# BTRFS_IOC_SUBVOL_CREATE: struct btrfs_ioctl_vol_args { s64 fd; char name[4088]; }
try:
    buf = bytearray(struct.pack("q4088s", 0, b"escape"))
    fcntl.ioctl(fd, 0x5000940e, buf)
    print("made")
except OSError as e:
    print(e.errno)'
r=$(rpc "$(jq -nc --arg c "$ioc" '{op:"run",sandbox:"a",argv:["python3","-c",$c]}')")
is "$(jget "$r" .stdout)" 1 "BTRFS_IOC_SUBVOL_CREATE inside: EPERM"

# ---- a restart keeps the limit --------------------------------------------------------------
stop_daemon
start_daemon --config "$T/sandboxd.conf" || exit 0
r=$(rpc '{"op":"run","sandbox":"a","command":"dd if=/dev/zero of=/work/fill bs=1M count=100 conv=fsync 2>&1; rm -f /work/fill"}')
like "$(jget "$r" .stdout)" "Disk quota exceeded" "after a restart, the limit still holds"
like "$(jget "$(rpc '{"op":"run","sandbox":"f","command":"cat /work/d/hard"}')" .stdout)" "one" "the fork is there too"
# The base comes back from the record: a snapshot taken now, and a fork of it, carry it.
r=$(rpc '{"op":"snapshot","sandbox":"f"}')
fsnap2=$(jget "$r" .snapshot.id)
is "$(jq -r .tree_uid "$fdir/snapshots/$fsnap2/meta.json")" "$abase" "after a restart, the fork's snapshot records its base"
r=$(rpc "$(jq -nc --arg s "f/$fsnap2" '{op:"create",best_effort:true,name:"h",from_snapshot:$s}')")
r=$(rpc '{"op":"run","sandbox":"h","command":"stat -c %u:%g /work/d/f /work/big | sort -u; echo w >> /work/d/f && echo ok"}')
is "$(jget "$r" .stdout)" "$(printf '1000:1000\nok')" "and a fork of it has its user's files, writable"
r=$(rpc "$(jq -nc --arg s "$fsnap2" '{op:"snapshot.restore",sandbox:"f",snapshot:$s}')")
r=$(rpc '{"op":"run","sandbox":"f","command":"stat -c %u:%g /work/d/f; echo v >> /work/d/f && echo ok"}')
is "$(jget "$r" .stdout)" "$(printf '1000:1000\nok')" "a restart of the fork's init after the daemon's (a restore) idmaps /work again"

# ---- nothing left behind ----------------------------------------------------------------------
r=$(rpc "$(jq -nc --arg s "$snap" '{op:"snapshot.delete",sandbox:"a",snapshot:$s}')")
is "$(jget "$r" .ok)" true "snapshot.delete"
snap_gone() { [ ! -e "$sbdir/snapshots/$snap" ]; }
wait_until 10 snap_gone
okif $? "the snapshot's subvolume is gone"
# The source's uid range given to another sandbox: the fork's files carry that sandbox's host
# ids on disk, out of its reach (the state directory is in no sandbox's view).
is "$(jget "$(rpc '{"op":"destroy","sandbox":"a"}')" .ok)" true "destroy a, the fork's source"
r=$(rpc '{"op":"create","best_effort":true,"name":"c"}')
cdir=$(dirname "$(jget "$r" .sandbox.workdir)")
rpc '{"op":"run","sandbox":"c","command":"touch /work/mine"}' >/dev/null
is "$(stat -c %u "$cdir/work/mine")" "$auid" "a new sandbox has the source's uid range (its files: the host uid of the fork's on disk)"
r=$(rpc "$(jq -nc --arg p "$fwd" '{op:"run",sandbox:"c",user:"root",command:("cat " + $p + "/d/hard 2>&1 || echo refused; ls /proc/1/root" + $p + " 2>&1 | head -1")}')")
like "$(jget "$r" .stdout)" "refused" "the sandbox with the source's range cannot reach the fork's files"
for n in b c f g h; do
        is "$(jget "$(rpc "{\"op\":\"destroy\",\"sandbox\":\"$n\"}")" .ok)" true "destroy $n"
done
no_subvols() { [ -z "$(btrfs subvolume list -o "$ST/sandboxes" 2>/dev/null)" ] && [ -z "$(ls -A "$ST/sandboxes" | grep '^sbx-')" ]; }
wait_until 10 no_subvols
okif $? "destroy leaves no subvolume and no sandbox directory ($(btrfs subvolume list -o "$ST/sandboxes" 2>&1 | head -3))"
