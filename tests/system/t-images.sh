#!/bin/bash
# Images under a real systemd on the Debian 12 kernel (6.1): the store's filesystem is probed
# for idmapped mounts (the VM's state directory is on its overlay root); a sandbox of an image
# is refused clearly where it cannot be idmapped. On ext4 an image's overlay root works although
# the machine's own root cannot be idmapped. With the store on ext4 (a loop image mounted
# at /var/lib/sandboxd/images while the daemon is stopped), a .tar.gz and an OCI layout built
# here are imported, their own /bin/sh runs `cat /etc/os-release`, two sandboxes share one
# image, removal is refused while used, and a hostile archive leaves nothing.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock
STATE=/var/lib/sandboxd
W=$(mktemp -d /var/tmp/sbx-images-XXXXXX)

# A tiny rootfs from the host's static busybox, a tarball and a one-layer OCI layout of it.
mkdir -p "$W/root/bin" "$W/root/etc"
cp /bin/busybox "$W/root/bin/" && for t in sh cat id stat; do ln -s busybox "$W/root/bin/$t"; done
printf 'ID=sbxvm\nPRETTY_NAME="sandboxd VM image 51c2"\n' >"$W/root/etc/os-release"
mkdir -p "$W/root/srv" && echo x >"$W/root/srv/f" && chown 4321:4321 "$W/root/srv/f"
tar -C "$W/root" --numeric-owner -czf "$W/root.tar.gz" .
python3 - "$W" <<'EOF'
import hashlib, json, os, sys
W = sys.argv[1]; out = W + "/oci"; os.makedirs(out + "/blobs/sha256")
def blob(data):
    h = hashlib.sha256(data).hexdigest(); open(f"{out}/blobs/sha256/{h}", "wb").write(data)
    return {"digest": "sha256:" + h, "size": len(data)}
cfg = blob(b'{"architecture":"amd64","os":"linux"}')
layer = blob(open(W + "/root.tar.gz", "rb").read()); layer["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip"
m = blob(json.dumps({"schemaVersion": 2, "config": cfg, "layers": [layer]}).encode())
m["mediaType"] = "application/vnd.oci.image.manifest.v1+json"
json.dump({"schemaVersion": 2, "manifests": [m]}, open(out + "/index.json", "w"))
EOF
python3 -c "
import io, tarfile
t = tarfile.open('$W/evil.tar', 'w'); i = tarfile.TarInfo('../../../etc/evil'); i.size = 1; t.addfile(i, io.BytesIO(b'x'))"

r=$(call '{"op":"hello"}')
diag "kernel $(uname -r); state dir on $(stat -f -c %T $STATE); capabilities.images: $(jq -c .capabilities.images <<<"$r")"
r=$(call '{"op":"image.import","name":"vm-tar","source":"'"$W/root.tar.gz"'"}')
[ "$(jqr .image.kind "$r")" = tar ]
ok $? "image.import of a .tar.gz works on the VM's own state directory"
if [ "$(jqr .capabilities.images.idmap "$(call '{"op":"hello"}')")" = false ]; then
	r=$(call '{"op":"create","image":"vm-tar"}')
	diag "$(jq -c .error <<<"$r")"
	[ "$(jqr .error.code "$r")" = invalid_request ] && [ "$(jqr .error.field "$r")" = image ] &&
		jqr .error.message "$r" | grep -q 'cannot be idmapped'
	ok $? "the store's filesystem ($(stat -f -c %T $STATE)) cannot be idmapped on $(uname -r): create with image is refused, saying why"
fi
call '{"op":"image.remove","image":"vm-tar"}' >/dev/null

# The store on ext4, which Linux 6.1 idmaps.
systemctl stop sandboxd.service
modprobe loop 2>/dev/null
truncate -s 256M "$W/store.img" && mkfs.ext4 -q -F "$W/store.img" && mount -o loop "$W/store.img" "$STATE/images" &&
	chmod 0700 "$STATE/images"
ok $? "an ext4 image mounted at $STATE/images"
r=$(call '{"op":"hello"}')
[ "$(jqr .capabilities.images.idmap "$r")" = true ]
ok $? "hello (a new daemon, socket-activated): the store on ext4 can be idmapped"

r=$(call '{"op":"image.import","name":"vm-oci","source":"'"$W/oci"'"}')
diag "$(jq -c '.image // .error' <<<"$r")"
[ "$(jqr .image.kind "$r")" = oci ]
ok $? "image.import of an OCI layout"
r=$(call '{"op":"create","image":"vm-oci","name":"img-a"}')
a=$(jqr .sandbox.id "$r")
r=$(call '{"op":"create","image":"vm-oci","name":"img-b"}')
b=$(jqr .sandbox.id "$r")
r=$(call '{"op":"run","sandbox":"'"$a"'","argv":["/bin/sh","-c","cat /etc/os-release; readlink /bin/sh; stat -c %u /srv/f; echo a > /work/mine"]}')
diag "$(jq -c '[.stdout, .stderr]' <<<"$r")"
[ "$(jqr .stdout "$r")" = 'ID=sbxvm
PRETTY_NAME="sandboxd VM image 51c2"
busybox
4321' ]
ok $? "a sandbox of the OCI image runs the image's own /bin/sh: its os-release, its owners (idmapped)"
r=$(call '{"op":"run","sandbox":"'"$b"'","argv":["/bin/sh","-c","head -1 /etc/os-release; cat /work/mine 2>/dev/null || echo own"]}')
[ "$(jqr .stdout "$r")" = 'ID=sbxvm
own' ]
ok $? "a second sandbox of the same image sees it too, with a /work of its own"
# The machine's root (9p + tmpfs overlayfs) cannot be idmapped, the store's ext4 can: an image's
# overlay root is judged by its own lower layer (issue 35). Its upper layer is in the state
# directory, on the machine's overlayfs here, which overlayfs may refuse as an upper layer: then
# the refusal names that step, not the idmapping.
r=$(call '{"op":"hello"}')
diag "root_overlay: $(jq -c .capabilities.root_overlay <<<"$r")"
[ "$(jqr .capabilities.root_overlay.available "$r")" = false ] &&
	! jqr .capabilities.root_overlay.image.error "$r" | grep -q 'idmapped lower layer'
ok $? "hello: overlay roots of the host's root are not available here; of images, the idmapping is not what fails"
img_ov=$(jqr .capabilities.root_overlay.image.available "$r")
r=$(call '{"op":"create","image":"vm-oci","name":"img-ov","root":"overlay","user":"root"}')
diag "$(jq -c '.error // .sandbox.root' <<<"$r")"
if [ "$img_ov" = true ]; then
	ov=$(jqr .sandbox.id "$r")
	r=$(call '{"op":"run","sandbox":"'"$ov"'","user":"root","argv":["/bin/sh","-c","echo mine > /etc/ov && cat /etc/ov"]}')
	[ "$(jqr .stdout "$r")" = mine ]
	ok $? "a sandbox of the image with root: overlay writes the image's /etc as root"
	call '{"op":"destroy","sandbox":"'"$ov"'"}' >/dev/null
else
	[ "$(jqr .error.field "$r")" = root ] && jqr .error.message "$r" | grep -q '^overlay roots of images do not work on this host' &&
		! jqr .error.message "$r" | grep -q 'idmapped'
	ok $? "create with image and root: overlay is refused for the image's own reason, as hello says"
fi
r=$(call '{"op":"image.remove","image":"vm-oci"}')
[ "$(jqr .error.code "$r")" = conflict ]
ok $? "image.remove while two sandboxes use it: conflict"
r=$(call '{"op":"image.import","name":"vm-evil","source":"'"$W/evil.tar"'"}')
sleep 1 # the refused tree is removed by a child
[ "$(jqr .error.code "$r")" = invalid_request ] && [ ! -e /etc/evil ] && [ -z "$(ls -A "$STATE/images" | grep -v -e lost+found -e vm-oci)" ]
ok $? "a ../ entry is refused and leaves nothing (no /etc/evil, no temporary tree)"

call '{"op":"destroy","sandbox":"'"$a"'"}' >/dev/null
call '{"op":"destroy","sandbox":"'"$b"'"}' >/dev/null
r=$(call '{"op":"image.remove","image":"vm-oci"}')
[ "$(jqr .ok "$r")" = true ]
ok $? "image.remove once unused"
systemctl stop sandboxd.service
sleep 1
umount "$STATE/images" && rm -rf "$W"
ok $? "the ext4 store unmounted, the work directory removed"
done_testing
