#!/bin/bash
# create's "mounts" on the Debian 12 kernel (6.1) under a real systemd: a directory on tmpfs
# cannot be idmapped before 6.3 and is refused (never mounted as an unmapped uid); one on ext4
# (a loop image) is idmapped: the caller's (root's) files are uid 1000's inside and what a run
# writes there is the caller's on the host; destroy leaves it.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock

r=$(call '{"op":"hello"}')
[ "$(jqr .capabilities.kernel.mount_idmap "$r")" = true ]
ok $? "hello: the kernel has idmapped mounts (mount_setattr)"
diag "kernel $(uname -r), /tmp is $(stat -f -c %T /tmp)"

d=$(mktemp -d /tmp/mnt-XXXXXX)
r=$(call '{"op":"create","mounts":[{"source":"'"$d"'","target":"/mnt/t"}]}')
diag "tmpfs: $(jq -c .error <<<"$r")"
if [ "$(stat -f -c %T /tmp)" = tmpfs ] && [ "$(printf '%s\n6.3\n' "$(uname -r | cut -d- -f1)" | sort -V | head -1)" != 6.3 ]; then
	[ "$(jqr .error.code "$r")" = invalid_request ] && [ "$(jqr .error.field "$r")" = "mounts[0].source" ] &&
		jqr .error.message "$r" | grep -q 'cannot be idmapped'
	ok $? "a directory on tmpfs (no idmapped mounts before 6.3) is refused, saying its filesystem cannot be idmapped"
else
	[ "$(jqr .ok "$r")" = true ]
	ok $? "a directory on tmpfs is mounted (the kernel idmaps tmpfs)"
	call '{"op":"destroy","sandbox":"'"$(jqr .sandbox.id "$r")"'"}' >/dev/null
fi
rmdir "$d"

img=/var/tmp/sbx-mounts-$$.img mnt=/var/tmp/sbx-mounts-$$
modprobe loop 2>/dev/null
truncate -s 64M "$img" && mkfs.ext4 -q -F "$img" && mkdir -p "$mnt" && mount -o loop "$img" "$mnt"
ok $? "an ext4 image mounted at $mnt"
mkdir "$mnt/src" && echo "from the host" >"$mnt/src/a.txt"
r=$(call '{"op":"create","mounts":[{"source":"'"$mnt/src"'","target":"/work/src"}]}')
diag "ext4: $(jq -c '.error // .sandbox.mounts' <<<"$r")"
[ "$(jqr .ok "$r")" = true ]
ok $? "a directory on ext4 is mounted"
sid=$(jqr .sandbox.id "$r")
r=$(call '{"op":"run","sandbox":"'"$sid"'","command":"stat -c %u /work/src/a.txt; cat /work/src/a.txt; echo inside > /work/src/b.txt; grep -c idmapped /proc/self/mountinfo"}')
diag "run: $(jq -c '[.stdout, .stderr]' <<<"$r")"
[ "$(jqr .stdout "$r")" = "1000
from the host
1" ]
ok $? "inside, the caller's file is uid 1000's, the run writes there, the mount is idmapped"
[ "$(stat -c %u:%g "$mnt/src/b.txt" 2>/dev/null)" = 0:0 ]
ok $? "the file the run wrote belongs to the caller (root) on the host"
call '{"op":"destroy","sandbox":"'"$sid"'"}' >/dev/null
[ "$(cat "$mnt/src/a.txt" "$mnt/src/b.txt" 2>/dev/null)" = "from the host
inside" ]
ok $? "destroy leaves the caller's files"
umount "$mnt"; rm -rf "$mnt" "$img"
done_testing
