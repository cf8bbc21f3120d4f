#!/bin/bash
# create's "root": "overlay" on Debian's 6.1 kernel under a real systemd. The machine's own root
# is an overlayfs here (9p + tmpfs), which cannot be idmapped: the installed daemon says so in
# hello and refuses such a create, saying why. A daemon whose root_dir (a busybox root) and state
# directory are on an ext4 image makes them: root inside writes /usr/local and /etc, the next run
# sees them root's, another sandbox does not, a new daemon after the first was killed (its
# sandboxes with it) mounts them again, and a fork from a snapshot has them. Over an image of its
# store: root writes the image's /etc and /usr, the next run and a new daemon see it, another
# sandbox of the image does not, and the image's rootfs is unchanged.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock
diag "kernel $(uname -r), / is $(stat -f -c %T /)"

r=$(call '{"op":"hello"}')
diag "installed daemon: $(jq -c .capabilities.root_overlay <<<"$r")"
if [ "$(jqr .capabilities.root_overlay.available "$r")" = true ]; then
	ok 0 "hello: the installed daemon can make overlay roots here"
else
	r=$(call '{"op":"create","root":"overlay"}')
	diag "create: $(jq -c .error <<<"$r")"
	[ "$(jqr .error.code "$r")" = invalid_request ] && [ "$(jqr .error.field "$r")" = root ] &&
		jqr .error.message "$r" | grep -q "overlay roots of the host's root do not work on this host ("
	ok $? "where it cannot (this root's filesystem), create with root: overlay is refused, saying why"
fi

img=/var/tmp/sbx-ovl-$$.img mnt=/var/tmp/sbx-ovl-$$
modprobe loop 2>/dev/null
truncate -s 256M "$img" && mkfs.ext4 -q -F "$img" && mkdir -p "$mnt" && mount -o loop "$img" "$mnt"
ok $? "an ext4 image mounted at $mnt"
root=$mnt/root
mkdir -p "$root/usr/bin" "$root/usr/local" "$root/etc" "$mnt/state" && chmod 0700 "$mnt/state" &&
	cp /bin/busybox "$root/usr/bin/busybox" && ln -s usr/bin "$root/bin" &&
	for c in sh cat echo stat ls mkdir id test; do ln -s busybox "$root/usr/bin/$c" || exit 1; done
ok $? "a busybox root on it"

exe=$(systemctl show -p ExecStart --value sandboxd.service | sed -n 's/.*path=\([^ ;]*\).*/\1/p')
S=/run/sbx-ovl.sock
start() { # UNIT
	rm -f "$S"
	systemd-run --unit "$1" --quiet -p Delegate=yes "$exe" --listen "$S" --state-dir "$mnt/state" --root-dir "$root"
	for _ in $(seq 100); do [ -S "$S" ] && break; sleep 0.1; done
}
ov() { SANDBOXD_SOCKET=$S call "$@"; }
out() { jqr .stdout "$(ov "$(jq -nc --arg s "$1" --arg c "$2" '{op:"run",sandbox:$s,command:$c}')")"; }

start sbx-ovl
r=$(ov '{"op":"hello"}')
diag "root_dir on ext4: $(jq -c .capabilities.root_overlay <<<"$r")"
[ "$(jqr .capabilities.root_overlay.available "$r")" = true ]
ok $? "a daemon whose root_dir and state are on ext4 can make overlay roots"
a=$(jqr .sandbox.id "$(ov '{"op":"create","name":"a","user":"root","root":"overlay"}')")
b=$(jqr .sandbox.id "$(ov '{"op":"create","name":"b","user":"root","root":"overlay"}')")
r=$(out a 'echo local > /usr/local/x && echo etc > /etc/x && id -u')
diag "write: $r"
[ "$r" = 0 ]
ok $? "root inside writes /usr/local/x and /etc/x"
r=$(out a 'cat /usr/local/x /etc/x; stat -c %u:%g /usr/local/x /etc/x')
[ "$r" = "local
etc
0:0
0:0" ]
ok $? "the next run sees them, root's inside"
[ "$(out b 'test -e /usr/local/x || test -e /etc/x || echo none')" = none ]
ok $? "another sandbox does not"
[ ! -e "$root/usr/local/x" ] && [ ! -e "$root/etc/x" ]
ok $? "the root_dir is untouched"

# Over an image of that daemon's store (on the ext4 too): one overlay of the image's whole root.
mkdir -p "$mnt/irt/bin" "$mnt/irt/etc" && cp /bin/busybox "$mnt/irt/bin/" &&
	for c in sh cat echo stat; do ln -s busybox "$mnt/irt/bin/$c" || exit 1; done &&
	echo ID=sbxvmov >"$mnt/irt/etc/os-release" && tar -C "$mnt/irt" --numeric-owner -cf "$mnt/irt.tar" .
r=$(ov '{"op":"image.import","name":"ovimg","source":"'"$mnt/irt.tar"'"}')
[ "$(jqr .image.kind "$r")" = tar ]
ok $? "an image imported into that daemon's store"
ov '{"op":"create","name":"i1","user":"root","root":"overlay","image":"ovimg"}' >"$mnt/i1.json"
ov '{"op":"create","name":"i2","user":"root","root":"overlay","image":"ovimg"}' >/dev/null
diag "create with image and root overlay: $(jq -c '.error // [.sandbox.image, .sandbox.root]' "$mnt/i1.json")"
r=$(out i1 'echo mine > /etc/x && echo changed > /etc/os-release && busybox mkdir -p /usr/local && echo u > /usr/local/u && echo ok')
[ "$r" = ok ]
ok $? "over an image: root inside writes the image's /etc and /usr"
[ "$(out i1 'cat /etc/x /etc/os-release /usr/local/u; stat -c %u:%g /etc/x /usr/local/u')" = "mine
changed
u
0:0
0:0" ]
ok $? "the next run sees them, root's inside"
[ "$(out i2 'cat /etc/os-release; test -e /etc/x || echo none')" = "ID=sbxvmov
none" ]
ok $? "another sandbox of the image sees the image as imported"
irt=$mnt/state/images/ovimg/rootfs
[ "$(cat "$irt/etc/os-release")" = ID=sbxvmov ] && [ ! -e "$irt/etc/x" ] && [ ! -e "$irt/usr" ]
ok $? "the image's rootfs is unchanged on the host"

systemctl kill -s KILL sbx-ovl.service
systemctl stop sbx-ovl.service 2>/dev/null
systemctl reset-failed sbx-ovl.service 2>/dev/null
start sbx-ovl2
r=$(out a 'cat /usr/local/x /etc/x')
[ "$r" = "local
etc" ]
ok $? "a new daemon (the first killed, its sandboxes with it) mounts them again"
[ "$(out i1 'cat /etc/x /usr/local/u')" = "mine
u" ]
ok $? "the overlay over the image too"

s=$(jqr .snapshot.id "$(ov '{"op":"snapshot","sandbox":"a"}')")
r=$(ov "$(jq -nc --arg s "a/$s" '{op:"create",name:"f",user:"root",from_snapshot:$s}')")
diag "fork: $(jq -c '.error // .sandbox.root' <<<"$r")"
[ "$(out f 'cat /usr/local/x; stat -c %u /usr/local/x')" = "local
0" ]
ok $? "a fork from a snapshot has them, root's inside"

for x in a b f i1 i2; do ov "{\"op\":\"destroy\",\"sandbox\":\"$x\"}" >/dev/null; done
[ -z "$(ls "$mnt/state/sandboxes" 2>/dev/null | grep '^sbx-')" ]
ok $? "destroy removes their directories, upper layers and all"
systemctl stop sbx-ovl2.service
umount "$mnt"; rm -rf "$mnt" "$img"
done_testing
