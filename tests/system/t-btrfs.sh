#!/bin/bash
# btrfs storage under a real systemd: a second instance of the installed sandboxd.service
# (quota-lib.sh) with storage = image:1G:btrfs makes its btrfs image, loop-mounts it in the
# unit's mount namespace with qgroups on; a sandbox writing past limits.disk gets EDQUOT while
# another sandbox and the host write on; a snapshot and a fork of it are subvolume snapshots
# with the sandbox's content; a restart of the unit mounts the image again and keeps the
# limit; destroy leaves no subvolume behind. Its sandboxes live in that instance only.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/quota-lib.sh"

# Debian's kernel has btrfs as a module; mount(2) would load it too, this says so if it cannot.
modprobe btrfs 2>/dev/null
grep -qw btrfs /proc/filesystems
ok $? "the kernel has btrfs ($(uname -r))"
STATE=/var/lib/$Q-btrfs
CONF=("storage = image:1G:btrfs")
qstart "$STATE" "${CONF[@]}"
ok $? "the unit starts with storage = image:1G:btrfs"
journalctl -u $Q.service --no-pager -o cat | grep storage: | sed 's/^/# /'
[ "$(inns stat -f -c %T "$STATE/sandboxes")" = btrfs ] && [ -f "$STATE/storage.img" ]
ok $? "it made $STATE/storage.img and mounted it (btrfs) in its namespace"
r=$(call '{"op":"hello"}')
diag "hello: $(jq -c .capabilities.disk <<<"$r")"
[ "$(jqr '.capabilities.disk | [.storage, .fs, .snapshots, .enforced] | tostring' "$r")" = '["image","btrfs","subvolume",true]' ]
ok $? "hello: storage image, fs btrfs, snapshots subvolume, disk limits enforced"

r=$(call '{"op":"create","name":"qa","limits":{"disk":"16M","memory":"128M"}}')
[ "$(jqr .sandbox.enforced.disk "$r")" = true ]
ok $? "create with limits.disk 16M, no best_effort: enforced"
[ "$(jqr .sandbox.enforced.disk "$r")" = true ] || { diag "reply: $(head -c 600 <<<"$r")"; qjournal; }
call '{"op":"create","name":"qb","limits":{"disk":"16M","memory":"128M"}}' >/dev/null
r=$(call '{"op":"run","sandbox":"qa","command":"head -c 32M /dev/zero > /work/big; echo rc=$?; sync /work/big; stat -c %s /work/big"}')
diag "$(jq -c '[.stdout, .stderr, .error]' <<<"$r")"
[[ $(jqr .stderr "$r") =~ "Disk quota exceeded" ]] && [[ $(jqr .stdout "$r") =~ ^rc=1 ]]
ok $? "writing 32M fails inside with EDQUOT at $(jqr .stdout "$r" | sed -n 2p) bytes"
r=$(call '{"op":"run","sandbox":"qb","command":"head -c 8M /dev/zero > /work/f && echo ok"}')
[ "$(jqr .stdout "$r")" = ok ]
ok $? "another sandbox writes on"
inns dd if=/dev/zero of="$STATE/sandboxes/host-file" bs=1M count=32 status=none && inns rm "$STATE/sandboxes/host-file"
ok $? "the host writes 32M on the same filesystem"

r=$(call '{"op":"run","sandbox":"qa","command":"rm /work/big; mkdir /work/d; echo hello > /work/d/f; ln -s d/f /work/l"}')
r=$(call '{"op":"snapshot","sandbox":"qa"}')
snap=$(jqr .snapshot.id "$r")
[ "$(jqr .ok "$r")" = true ]
ok $? "a snapshot (frozen $(jqr .frozen_s "$r") s)"
r=$(call "{\"op\":\"create\",\"name\":\"qf\",\"from_snapshot\":\"qa/$snap\",\"limits\":{\"memory\":\"128M\"}}")
[ "$(jqr .ok "$r")" = true ]
ok $? "a fork of it"
r=$(call '{"op":"run","sandbox":"qf","command":"cat /work/l; stat -c %u /work/d/f; echo x > /work/d/g && echo written"}')
[ "$(jqr .stdout "$r")" = "$(printf 'hello\n1000\nwritten')" ]
ok $? "the fork has the content, owned by its user, writable ($(jqr .stdout "$r" | tr '\n' ' '))"
wa=$(jqr .sandbox.workdir "$(call '{"op":"inspect","sandbox":"qa"}')")
wf=$(jqr .sandbox.workdir "$(call '{"op":"inspect","sandbox":"qf"}')")
oa=$(inns stat -c %u "$wa/d/f"); of=$(inns stat -c %u "$wf/d/f" "$wf/d/g" | sort -u)
[ -n "$oa" ] && [ "$of" = "$oa" ] && [ "$(jqr .stdout "$(call '{"op":"run","sandbox":"qf","command":"id -u"}')")" = 1000 ]
ok $? "no chown: the fork's files and its new one keep the source's host uid $oa on disk ($of), idmapped to its user"

qstart "$STATE" "${CONF[@]}"
ok $? "the unit restarts"
[ "$(inns stat -f -c %T "$STATE/sandboxes")" = btrfs ]
ok $? "the image is mounted again"
r=$(call '{"op":"run","sandbox":"qa","command":"head -c 32M /dev/zero > /work/big; sync /work/big; stat -c %s /work/big"}')
e=$(jqr .sandbox.enforced.disk "$(call '{"op":"inspect","sandbox":"qa"}')")
[ "$(jqr .stdout "$r")" -lt 20000000 ] 2>/dev/null && [ "$e" = true ]
ok $? "after the restart the limit holds ($(jqr .stdout "$r") bytes; enforced.disk $e)"
[ "$(jqr .stdout "$(call '{"op":"run","sandbox":"qf","command":"cat /work/d/g"}')")" = x ]
ok $? "the fork's files are there after the restart"

for sb in qa qb qf; do call "{\"op\":\"destroy\",\"sandbox\":\"$sb\"}" >/dev/null; done
for _ in $(seq 100); do
	[ -z "$(inns btrfs subvolume list -o "$STATE/sandboxes" 2>/dev/null)" ] && break
	sleep 0.1
done
left=$(inns btrfs subvolume list -o "$STATE/sandboxes" 2>&1)
[ -z "$left" ]
ok $? "destroy leaves no subvolume behind${left:+: $left}"
systemctl stop $Q.service
quota_unit_remove
done_testing
