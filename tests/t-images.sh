#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The image store (image.import, image.list, image.inspect, image.remove) and sandboxes from an
# image: imports from a directory, a .tar, a .tar.gz, a .tar.zst and an OCI image layout built
# here (busybox and a distinctive os-release; layers with a whiteout and an opaque directory); a
# sandbox runs the image's own /bin/sh with the image's owners; two sandboxes share one image;
# removal is refused while one uses it; an overlay root over an image ("root": "overlay") is
# written as root and kept (runs, SIGKILL + restart, snapshot + restore, fork) while the image's
# tree stays unchanged; hostile archives are refused or neutralised and leave nothing behind.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

BUSYBOX=$(command -v busybox || true)
[ -n "$BUSYBOX" ] && file -L "$BUSYBOX" 2>/dev/null | grep -q 'statically linked' ||
	skip_all "a static busybox is needed to build a tiny rootfs (apt-get install busybox-static)"
command -v zstd >/dev/null || skip_all "zstd is needed to make a .tar.zst (apt-get install zstd)"

mkdir -p "$T/share" && echo shared >"$T/share/f"
cat >"$T/sandboxd.conf" <<EOF
image_max_size = 1G
image_max_files = 400
mount_roots = $T/share
EOF
start_daemon --config "$T/sandboxd.conf" || exit 0
IMAGES=$T/state/images

# ---- A tiny rootfs --------------------------------------------------------------------------
ROOT=$T/rootfs
mkdir -p "$ROOT/bin" "$ROOT/etc" "$ROOT/srv/owned" "$ROOT/opq"
cp "$BUSYBOX" "$ROOT/bin/busybox"
for t in sh cat ls id stat echo touch test true; do ln -s busybox "$ROOT/bin/$t"; done
printf 'ID=sbxtest\nPRETTY_NAME="sandboxd test image 7f3a"\n' >"$ROOT/etc/os-release"
printf 'root:x:0:0:root:/root:/bin/sh\nsvc:x:1234:1234:svc:/srv:/bin/sh\n' >"$ROOT/etc/passwd"
echo secret >"$ROOT/srv/owned/file"
chown -R 1234:1234 "$ROOT/srv/owned"
cp "$BUSYBOX" "$ROOT/bin/suid" && chmod 4755 "$ROOT/bin/suid"
echo lower >"$ROOT/opq/old"
echo gone >"$ROOT/removeme"

tar -C "$ROOT" --numeric-owner -cf "$T/root.tar" .
gzip -c "$T/root.tar" >"$T/root.tar.gz"
zstd -q -c "$T/root.tar" >"$T/root.tar.zst"

# An OCI layout: layer 1 the rootfs, layer 2 (gzip) removes /removeme (whiteout), empties /opq
# (opaque directory) and adds /etc/layer2.
mkdir -p "$T/l2/etc" "$T/l2/opq"
echo second >"$T/l2/etc/layer2"
echo upper >"$T/l2/opq/new"
touch "$T/l2/.wh.removeme" "$T/l2/opq/.wh..wh..opq"
tar -C "$T/l2" --numeric-owner -czf "$T/layer2.tar.gz" .
# mkoci.py OUT MUTATION LAYER...: the layout, or one spoilt as MUTATION says (every other digest
# and size kept right): layer-byte, manifest-byte, config-byte (one byte of that blob changed
# after it was described), layer-size (layer 2's descriptor says one byte more), sha512 (layer
# 1's digest a sha512 one), malformed (layer 1's digest in uppercase hex, which sha256 is not).
cat >"$T/mkoci.py" <<'EOF'
import hashlib, json, os, sys
out, mutation, layers = sys.argv[1], sys.argv[2], sys.argv[3:]
os.makedirs(out + "/blobs/sha256")
def blob(data):
    h = hashlib.sha256(data).hexdigest()
    open(f"{out}/blobs/sha256/{h}", "wb").write(data)
    return {"digest": "sha256:" + h, "size": len(data)}
def spoil(h):
    p = f"{out}/blobs/sha256/{h}"
    data = bytearray(open(p, "rb").read())
    i = data.find(b"7f3a") if b"7f3a" in data else data.find(b"2")
    data[i] ^= 1
    open(p, "wb").write(bytes(data))
config = blob(json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers"}}).encode())
config["mediaType"] = "application/vnd.oci.image.config.v1+json"
ls = []
for p in layers:
    d = blob(open(p, "rb").read())
    d["mediaType"] = "application/vnd.oci.image.layer.v1.tar" + ("+gzip" if p.endswith(".gz") else "")
    ls.append(d)
names = {"layer": ls[0]["digest"][7:], "layer2": ls[1]["digest"][7:], "config": config["digest"][7:]}
if mutation == "layer-size":
    ls[1]["size"] += 1
elif mutation == "sha512":
    ls[0]["digest"] = "sha512:" + hashlib.sha512(open(layers[0], "rb").read()).hexdigest()
elif mutation == "malformed":
    ls[0]["digest"] = ls[0]["digest"].upper().replace("SHA256", "sha256")
m = blob(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                     "config": config, "layers": ls}).encode())
m["mediaType"] = "application/vnd.oci.image.manifest.v1+json"
m["annotations"] = {"org.opencontainers.image.ref.name": "latest"}
names["manifest"] = m["digest"][7:]
if mutation.endswith("-byte"):
    spoil(names[mutation[:-5]])
json.dump({"schemaVersion": 2, "manifests": [m]}, open(out + "/index.json", "w"))
json.dump({"imageLayoutVersion": "1.0.0"}, open(out + "/oci-layout", "w"))
json.dump(names, open(out + ".names", "w"))
print(m["digest"], file=open(out + ".digest", "w"))
EOF
python3 "$T/mkoci.py" "$T/oci" good "$T/root.tar" "$T/layer2.tar.gz"

no_tmp() { [ -z "$(find "$IMAGES" -mindepth 1 -maxdepth 1 -name '.tmp-*' 2>/dev/null)" ]; }
nothing_left() { # DESC: no .tmp-* in the store (a refused import's tree is removed by a child, just after the reply)
	wait_until 10 no_tmp
	is "$(find "$IMAGES" -mindepth 1 -maxdepth 1 -name '.tmp-*' 2>/dev/null | wc -l)" 0 "$1: no temporary tree left in the store"
}

# ---- Imports ---------------------------------------------------------------------------------
for kind in dir tar tgz tzst; do
	case $kind in
	dir) src=$ROOT want=directory ;;
	tar) src=$T/root.tar want=tar ;;
	tgz) src=$T/root.tar.gz want=tar ;;
	tzst) src=$T/root.tar.zst want=tar ;;
	esac
	r=$(rpc '{"op":"image.import","name":"img-'$kind'","source":"'"$src"'"}' 60)
	is "$(jget "$r" '[.ok, .image.name, .image.kind] | tostring')" "[true,\"img-$kind\",\"$want\"]" "image.import from $(basename "$src") ($want)"
	like "$(jget "$r" .image.files)" '^[0-9]+$' "... the reply counts its files"
done
nothing_left "after the imports"
is "$(stat -c %a "$IMAGES/img-tar/rootfs/bin/busybox")" 755 "the image's files keep their modes"
is "$(stat -c %a "$IMAGES/img-tar/rootfs/bin/suid")" 755 "... but a setuid bit is dropped (tar import)"
is "$(stat -c %a "$IMAGES/img-dir/rootfs/bin/suid")" 755 "... and in a directory import"
is "$(stat -c %u "$IMAGES/img-tgz/rootfs/srv/owned/file")" 1234 "owners are kept as the archive has them (1234)"

r=$(rpc '{"op":"image.import","name":"img-oci","source":"'"$T/oci"'","tag":"latest"}' 60)
is "$(jget "$r" '[.ok, .image.kind, .image.digest] | tostring')" "[true,\"oci\",\"$(cat "$T/oci.digest")\"]" \
	"image.import from an OCI layout (tag latest): kind oci, the manifest's digest"
check "... layer 2's whiteout removed /removeme of layer 1" [ ! -e "$IMAGES/img-oci/rootfs/removeme" ]
check "... its opaque directory hid layer 1's /opq/old" [ ! -e "$IMAGES/img-oci/rootfs/opq/old" ]
is "$(cat "$IMAGES/img-oci/rootfs/opq/new" "$IMAGES/img-oci/rootfs/etc/layer2" 2>&1)" $'upper\nsecond' "... and added its own files"
check "... no .wh. file is left in the image" [ -z "$(find "$IMAGES/img-oci/rootfs" -name '.wh.*')" ]
r=$(rpc '{"op":"image.import","name":"img-oci2","source":"'"$T/oci"'","tag":"nope"}')
is "$(jget "$r" '.error | [.code, .field] | tostring')" '["not_found","tag"]' "an OCI tag the index does not list: not_found, field tag"

# Every blob is checked against its descriptor (digest and size) before it is used.
spoilt() { # MUTATION PATTERN DESC: the spoilt layout is refused, the message matching PATTERN
	local r
	python3 "$T/mkoci.py" "$T/oci-$1" "$1" "$T/root.tar" "$T/layer2.tar.gz"
	r=$(rpc '{"op":"image.import","name":"s-'"$1"'","source":"'"$T/oci-$1"'"}' 60)
	is "$(jget "$r" '.error | [.code, .field] | tostring')" '["invalid_request","source"]' "OCI layout with $3: refused"
	like "$(jget "$r" .error.message)" "$2" "... the message names the blob"
	check "... no image s-$1" [ ! -e "$IMAGES/s-$1" ]
	nothing_left "... $1"
}
spoilt layer-byte "layer 1 of 2, blobs/sha256/$(jq -r .layer "$T/oci.names"): a blob whose sha256 differs" \
	"one byte of layer 1 altered"
spoilt manifest-byte "the manifest blobs/sha256/[0-9a-f]{64}: a blob whose sha256 differs" "one byte of the manifest altered"
spoilt config-byte "the config blobs/sha256/[0-9a-f]{64}: a blob whose sha256 differs" "one byte of the config altered"
spoilt layer-size "layer 2 of 2, blobs/sha256/$(jq -r .layer2 "$T/oci.names"): a blob whose size differs" "layer 2's size one byte off"
spoilt sha512 "layer 1 of the manifest: digest 'sha512:[0-9a-f]+' is not sha256" "a sha512 digest"
spoilt malformed "layer 1 of the manifest: malformed digest 'sha256:[0-9A-F]+'" "a malformed digest (uppercase hex)"

r=$(rpc '{"op":"image.import","name":"img-tar","source":"'"$T/root.tar"'"}')
is "$(jget "$r" '.error.code')" conflict "importing a name that exists: conflict"
r=$(rpc '{"op":"image.import","name":"../x","source":"'"$T/root.tar"'"}')
is "$(jget "$r" '.error | [.code, .field] | tostring')" '["invalid_request","name"]' "an image name with '/': invalid_request"
r=$(rpc '{"op":"image.import","name":"nosrc","source":"'"$T/does-not-exist"'"}')
is "$(jget "$r" '.error | [.code, .field] | tostring')" '["not_found","source"]' "a source that does not exist: not_found"

# Progress events, on a connection of our own.
run_py progress 60 "$T/root.tar.zst" <<'EOF'
import os, sys
from client import Conn
c = Conn(os.environ["SOCK"])
c.send({"id": 7, "op": "image.import", "name": "img-progress", "source": sys.argv[1]})
events = []
while True:
    m = c.recv_json(60)
    if "event" in m:
        events.append(m)
        continue
    break
print("PASS the import answered ok" if m.get("ok") else "FAIL the import: %r" % m)
print("PASS its events are progress events with counts" if all(e["event"] == "progress" and "imported" in e for e in events)
      else "FAIL events: %r" % events)
EOF

# ---- list and inspect -------------------------------------------------------------------------
r=$(rpc '{"op":"image.list"}')
is "$(jget "$r" '[.images[].name] | sort | join(",")')" "img-dir,img-oci,img-progress,img-tar,img-tgz,img-tzst" "image.list lists every image"
r=$(rpc '{"op":"image.inspect","image":"img-tar"}')
is "$(jget "$r" '[.image.users, (.image.used_by | length), (.image.size > 1000000), (.image.imported_at | test("^20[0-9-]+T"))] | tostring')" \
	'[0,0,true,true]' "image.inspect: size, imported_at, no users yet"
r=$(rpc '{"op":"image.inspect","image":"nope"}')
is "$(jget "$r" '.error | [.code, .field] | tostring')" '["not_found","image"]' "image.inspect of an unknown image: not_found"

# ---- Sandboxes from an image -------------------------------------------------------------------
r=$(rpc '{"op":"create","best_effort":true,"name":"a","image":"img-oci"}')
is "$(jget "$r" '[.sandbox.state, .sandbox.image] | tostring')" '["ready","img-oci"]' "create with image img-oci: ready, inspect names the image"
r=$(rpc '{"op":"run","sandbox":"a","argv":["/bin/sh","-c","cat /etc/os-release; cat /etc/layer2; readlink /bin/sh"]}')
is "$(jget "$r" .stdout)" $'ID=sbxtest\nPRETTY_NAME="sandboxd test image 7f3a"\nsecond\nbusybox' \
	"the run is the image's own /bin/sh (busybox) and sees the image's /etc/os-release"
r=$(rpc '{"op":"run","sandbox":"a","user":"root","argv":["/bin/sh","-c","stat -c %u:%g /srv/owned/file /bin/busybox; id -u; touch /etc/x 2>/dev/null || echo ro; ls /proc/self >/dev/null && echo proc; echo w >/tmp/t && echo tmp; echo w >/work/w && echo work"]}')
is "$(jget "$r" .stdout)" $'1234:1234\n0:0\n0\nro\nproc\ntmp\nwork' \
	"inside, the image's owners are as the image has them (idmapped), its root is read-only; /proc, /tmp, /work are the sandbox's"
r=$(rpc '{"op":"run","sandbox":"a","argv":["/bin/sh","-c","id -u; cat /srv/owned/file 2>/dev/null || echo denied"]}')
is "$(jget "$r" .stdout)" $'1000\nsecret' "the default user is uid 1000 and reads what the image lets it read"
r=$(rpc '{"op":"create","best_effort":true,"name":"b","image":"img-oci"}')
is "$(jget "$r" .sandbox.state)" ready "a second sandbox of the same image"
r=$(rpc '{"op":"run","sandbox":"b","argv":["/bin/sh","-c","cat /etc/os-release | head -1; test -e /work/w && echo shared || echo own"]}')
is "$(jget "$r" .stdout)" $'ID=sbxtest\nown' "... runs the image too, with a /work of its own"
r=$(rpc '{"op":"run","best_effort":true,"image":"img-tzst","argv":["/bin/cat","/etc/os-release"]}')
is "$(jget "$r" .stdout)" $'ID=sbxtest\nPRETTY_NAME="sandboxd test image 7f3a"' "a throwaway run with image (from the .tar.zst)"
r=$(rpc '{"op":"run","best_effort":true,"argv":["/bin/sh","-c","test -e /etc/layer2 && echo image || echo host"]}')
is "$(jget "$r" .stdout)" host "a run without image still sees the host's view"
r=$(rpc '{"op":"create","best_effort":true,"image":"nope"}')
is "$(jget "$r" '.error | [.code, .field] | tostring')" '["not_found","image"]' "create with an unknown image: not_found, field image"

# The caller's mounts in an image: a target the read-only image lacks is refused at create,
# except beneath /work (the sandbox's own, where the mount point is made); nothing is written
# into the image.
share_at() { printf '[{"source":"%s","target":"%s","read_only":true}]' "$T/share" "$1"; }
r=$(rpc '{"op":"create","best_effort":true,"image":"img-tar","mounts":'"$(share_at /mnt/data)"'}')
is "$(jget "$r" '.error | [.code, .field] | tostring')" '["invalid_request","mounts[0].target"]' \
	"create with image and a mount at /mnt/data, which the image lacks: invalid_request, field mounts[0].target"
like "$(jget "$r" .error.message)" "/mnt/data does not exist in image img-tar .*beneath /work" "... saying so, and what to choose"
r=$(rpc '{"op":"create","best_effort":true,"image":"img-tar","mounts":'"$(share_at /srv/owned/file)"'}')
is "$(jget "$r" '.error | [.code, .field] | tostring')" '["invalid_request","mounts[0].target"]' \
	"... a target that is a file of the image: invalid_request"
like "$(jget "$r" .error.message)" "/srv/owned/file is not a directory in image img-tar" "... saying so"
r=$(rpc '{"op":"create","best_effort":true,"name":"mnt","image":"img-tar","mounts":'"$(share_at /srv/owned)"'}')
is "$(jget "$r" .sandbox.state)" ready "a mount at /srv/owned, a directory of the image: ready"
r=$(rpc '{"op":"run","sandbox":"mnt","argv":["/bin/cat","/srv/owned/f"]}')
is "$(jget "$r" .stdout)" shared "... the run sees the caller's directory there"
rpc '{"op":"destroy","sandbox":"mnt"}' >/dev/null
r=$(rpc '{"op":"create","best_effort":true,"name":"mnt","image":"img-tar","mounts":'"$(share_at /work/a/data)"'}')
is "$(jget "$r" .sandbox.state)" ready "a mount at /work/a/data, which the image lacks, beneath /work: ready"
r=$(rpc '{"op":"run","sandbox":"mnt","argv":["/bin/cat","/work/a/data/f"]}')
is "$(jget "$r" .stdout)" shared "... the run sees the caller's directory there"
rpc '{"op":"destroy","sandbox":"mnt"}' >/dev/null
check "... and nothing was made in the image's tree" [ ! -e "$IMAGES/img-tar/rootfs/mnt" ] && [ ! -e "$IMAGES/img-tar/rootfs/work/a" ]

r=$(rpc '{"op":"image.inspect","image":"img-oci"}')
is "$(jget "$r" '[.image.users, (.image.used_by | length)] | tostring')" '[2,2]' "image.inspect: used by the two sandboxes"
r=$(rpc '{"op":"image.remove","image":"img-oci"}')
is "$(jget "$r" '.error | [.code, .field] | tostring')" '["conflict","image"]' "image.remove while sandboxes use it: conflict"
like "$(jget "$r" .error.message)" 'used by 2 sandboxes' "... and the message says by which"
check "... the image is still there" [ -d "$IMAGES/img-oci/rootfs" ]

# A restart keeps the images and the sandboxes that use them.
stop_daemon
start_daemon --config "$T/sandboxd.conf" || exit 0
r=$(rpc '{"op":"run","sandbox":"a","argv":["/bin/cat","/etc/layer2"]}')
is "$(jget "$r" .stdout)" second "after a daemon restart the sandbox runs in its image again"
r=$(rpc '{"op":"image.inspect","image":"img-oci"}')
is "$(jget "$r" '.image.users')" 2 "... and the image counts its users again"

# ---- An overlay root over an image ("image" + "root": "overlay") --------------------------------
# Root inside writes the image's /etc, /usr/local and /var and installs a "package" (a tar of
# root-owned files unpacked by the image's busybox, with its record in /var/lib): kept across runs,
# a daemon killed with SIGKILL, a snapshot + restore and a fork; another sandbox of the image
# never sees it; the image's own tree is never written.
tree_sum() { # the image's rootfs: names, owners, modes and contents
	(cd "$IMAGES/img-tar/rootfs" && find . -printf '%p %U:%G %m %y\n' | sort &&
		find . -type f -print0 | sort -z | xargs -0 sha256sum) | sha256sum
}
ov_ok=$(jget "$(rpc '{"op":"hello"}')" .capabilities.root_overlay.image.available)
if [ "$ov_ok" != true ]; then
	diag "overlay roots of images do not work on this host: $(jget "$(rpc '{"op":"hello"}')" .capabilities.root_overlay.image.error)"
else
	sum0=$(tree_sum)
	osh() { # SANDBOX USER SCRIPT: the run's reply (the image's /bin/sh)
		rpc "$(jq -nc --arg s "$1" --arg u "$2" --arg c "$3" '{op:"run",sandbox:$s,user:$u,argv:["/bin/sh","-c",$c]}')" 60
	}
	oout() { jget "$(osh "$@")" .stdout; }
	r=$(rpc '{"op":"create","best_effort":true,"name":"ov","image":"img-tar","root":"overlay","user":"root"}')
	ov=$(jget "$r" .sandbox.id)
	is "$(jget "$r" '[.sandbox.state, .sandbox.image, .sandbox.root] | tostring')" '["ready","img-tar","overlay"]' \
		"create with image and root: overlay: ready, with both"
	[ "$(jget "$r" .sandbox.state)" = ready ] || diag "$r"
	mkdir -p "$T/opkg/usr/bin" "$T/opkg/var/lib/opkg"
	printf '#!/bin/sh\necho hello from a package\n' >"$T/opkg/usr/bin/ohello"
	chmod 0755 "$T/opkg/usr/bin/ohello"
	echo "ohello 1.0 installed" >"$T/opkg/var/lib/opkg/ohello"
	tar -C "$T/opkg" --owner=0 --group=0 --numeric-owner -cf "$T/opkg.tar" usr var
	check "a package (a tar of root's files) is copied into the sandbox" ctl cp "$T/opkg.tar" "ov:/work/opkg.tar"
	r=$(osh ov root 'echo etc > /etc/x && busybox mkdir -p /usr/local/bin && printf "#!/bin/sh\necho y\n" > /usr/local/bin/y &&
busybox chmod 755 /usr/local/bin/y && echo changed > /etc/os-release && busybox rm /removeme && echo mine > /srv/owned/root-wrote &&
busybox tar -C / -xf /work/opkg.tar')
	is "$(jget "$r" .exit_code)" 0 "root inside writes /etc, /usr/local, the image's root-owned files and 1234's /srv/owned, and installs the package"
	[ "$(jget "$r" .exit_code)" = 0 ] || diag "$(jget "$r" .stderr)"
	OV_CHECK='cat /etc/x /etc/os-release; /usr/local/bin/y; /usr/bin/ohello; cat /var/lib/opkg/ohello;
test -e /removeme || echo removed; stat -c "%u:%g" /etc/x /usr/local/bin/y /usr/bin/ohello /srv/owned/file'
	OV_OK=$'etc\nchanged\ny\nhello from a package\nohello 1.0 installed\nremoved\n0:0\n0:0\n0:0\n1234:1234'
	is "$(oout ov root "$OV_CHECK")" "$OV_OK" "the next run sees it all, root's files owned by root inside, the image's 1234 still 1234"
	is "$(oout ov sandbox 'id -u; /usr/bin/ohello; echo x > /etc/y 2>/dev/null || echo denied')" $'1000\nhello from a package\ndenied' \
		"uid 1000 inside runs the package and cannot write the image's /etc"
	ov_uid=$(($(stat -c %u "$T/state/sandboxes/$ov/work") - 1000))
	ovup=$T/state/sandboxes/$ov/root-upper/upper/rootfs
	is "$(stat -c %u "$ovup/usr/bin/ohello" 2>&1)" "$ov_uid" "on the host, the upper layer (root-upper/upper/rootfs) holds it, owned by the sandbox's uid 0"
	check "and a whiteout for the removed file" test -c "$ovup/removeme"

	r=$(rpc '{"op":"create","best_effort":true,"name":"ov2","image":"img-tar","root":"overlay","user":"root"}')
	is "$(oout ov2 root 'test -e /etc/x || test -e /usr/bin/ohello || echo clean; busybox head -n1 /etc/os-release; test -e /removeme && echo there')" \
		$'clean\nID=sbxtest\nthere' "another overlay sandbox of the image sees the image as it is"
	r=$(rpc '{"op":"create","best_effort":true,"name":"ovro","image":"img-tar","user":"root"}')
	is "$(oout ovro root 'test -e /etc/x || echo clean; touch /etc/z 2>/dev/null || echo ro')" $'clean\nro' \
		"and a read-only sandbox of it sees it unchanged and read-only"
	is "$(tree_sum)" "$sum0" "the image's rootfs on the host is unchanged"

	kill -KILL "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_PID=
	start_daemon --config "$T/sandboxd.conf" || exit 0
	is "$(jget "$(rpc '{"op":"inspect","sandbox":"ov"}')" '[.sandbox.image, .sandbox.root] | tostring')" '["img-tar","overlay"]' \
		"after SIGKILL and a new daemon: the sandbox is still the image's, with its overlay root"
	is "$(oout ov root "$OV_CHECK")" "$OV_OK" "and what root wrote is all there"

	r=$(rpc '{"op":"snapshot","sandbox":"ov","label":"pkg"}' 60)
	osnap=$(jget "$r" .snapshot.id)
	like "$osnap" '^snap-[0-9a-f]{12}$' "a snapshot of it"
	r=$(osh ov root 'busybox rm -r /usr/bin/ohello /var/lib/opkg /etc/x && echo after > /etc/os-release && test ! -e /usr/bin/ohello')
	is "$(jget "$r" .exit_code)" 0 "the package and /etc/x removed, /etc/os-release changed again"
	r=$(rpc "$(jq -nc --arg s "$osnap" '{op:"snapshot.restore",sandbox:"ov",snapshot:$s}')" 60)
	is "$(jget "$r" .ok)" true "snapshot.restore"
	[ "$(jget "$r" .ok)" = true ] || diag "$r"
	is "$(oout ov root "$OV_CHECK")" "$OV_OK" "restore brings the upper layer back as it was"

	r=$(rpc "$(jq -nc --arg s "ov/$osnap" '{op:"create",best_effort:true,name:"ovf",user:"root",from_snapshot:$s}')" 60)
	ovf=$(jget "$r" .sandbox.id)
	is "$(jget "$r" '[.sandbox.image, .sandbox.root] | tostring')" '["img-tar","overlay"]' "a fork of it has its image and an overlay root"
	[ -n "$ovf" ] && [ "$ovf" != null ] || diag "$r"
	is "$(oout ovf root "$OV_CHECK")" "$OV_OK" "the fork has what root wrote, the package included"
	ovf_uid=$(($(stat -c %u "$T/state/sandboxes/$ovf/work") - 1000))
	is "$(stat -c %u "$T/state/sandboxes/$ovf/root-upper/upper/rootfs/usr/bin/ohello" 2>&1)" "$ovf_uid" \
		"its upper layer's files belong to the fork's uid range"
	is "$(jget "$(osh ovf root 'echo fork > /etc/x')" .exit_code)" 0 "the fork writes its own /etc/x"
	is "$(oout ov root 'cat /etc/x')" etc "which the source never sees"
	is "$(tree_sum)" "$sum0" "the image's rootfs is still unchanged after restore and fork"
	for s in ov ov2 ovro ovf; do rpc "{\"op\":\"destroy\",\"sandbox\":\"$s\"}" >/dev/null; done
	check "destroy removes the overlay sandboxes' directories" \
		wait_until 10 sh -c "! test -e '$T/state/sandboxes/$ov' && ! test -e '$T/state/sandboxes/$ovf'"
fi

rpc '{"op":"destroy","sandbox":"a"}' >/dev/null
rpc '{"op":"destroy","sandbox":"b"}' >/dev/null
r=$(rpc '{"op":"image.remove","image":"img-oci"}')
is "$(jget "$r" '[.ok, .removed] | tostring')" '[true,"img-oci"]' "image.remove once no sandbox uses it"
wait_until 10 test ! -e "$IMAGES/img-oci"
check "... its tree is gone" [ ! -e "$IMAGES/img-oci" ]
r=$(rpc '{"op":"image.list"}')
is "$(jget "$r" '[.images[].name] | index("img-oci")')" null "... and image.list no longer has it"

# ---- Hostile archives --------------------------------------------------------------------------
mkdir -p "$T/outside"
python3 - "$T" <<'EOF'
import io, sys, tarfile
T = sys.argv[1]
def tar(name, entries):
    with tarfile.open(f"{T}/{name}.tar", "w", format=tarfile.GNU_FORMAT) as t:
        for e, data in entries:
            t.addfile(e, io.BytesIO(data) if data is not None else None)
def f(name, data=b"x"):
    i = tarfile.TarInfo(name); i.size = len(data); return (i, data)
def sym(name, target):
    i = tarfile.TarInfo(name); i.type = tarfile.SYMTYPE; i.linkname = target; return (i, None)
def hard(name, target):
    i = tarfile.TarInfo(name); i.type = tarfile.LNKTYPE; i.linkname = target; return (i, None)
def dev(name):
    i = tarfile.TarInfo(name); i.type = tarfile.CHRTYPE; i.devmajor, i.devminor = 1, 3; return (i, None)
tar("dotdot", [f("ok"), f("../../../outside/dotdot")])
tar("abslink", [sym("link", f"{T}/outside"), f("link/pwned")])
tar("device", [f("etc/ok"), dev("dev/mynull"), dev("etc/kmem")])
tar("hardout", [f("ok"), hard("hl", "../../../etc/passwd")])
tar("hardabs", [f("ok"), hard("hl", "/etc/shadow")])
tar("many", [f(f"f{i}") for i in range(500)])
EOF
truncate -s 10G "$T/big" && tar -C "$T" --sparse -cf "$T/sparse.tar" big && rm -f "$T/big"

hostile() { # NAME CODE DESC
	local r
	r=$(rpc '{"op":"image.import","name":"h-'"$1"'","source":"'"$T/$1.tar"'"}' 60)
	is "$(jget "$r" '.error.code')" "$2" "hostile $1.tar ($3): refused, $2"
	[ "$(jget "$r" '.error.code')" = "$2" ] || diag "$r"
	check "... no image h-$1" [ ! -e "$IMAGES/h-$1" ]
	nothing_left "... $1.tar"
}
hostile dotdot invalid_request "an entry ../../../outside/dotdot"
check "... nothing was written outside" [ ! -e "$T/outside/dotdot" ]
hostile abslink invalid_request "an absolute symlink, then a file through it"
check "... nothing was written through the symlink" [ ! -e "$T/outside/pwned" ]
hostile hardout invalid_request "a hard link to ../../../etc/passwd"
hostile hardabs invalid_request "a hard link to /etc/shadow, which the image does not have"
hostile sparse resource_exhausted "a 10 GB sparse file, over image_max_size 1G"
hostile many resource_exhausted "500 entries, over image_max_files 400"
r=$(rpc '{"op":"image.import","name":"h-device","source":"'"$T/device.tar"'"}' 60)
is "$(jget "$r" '[.ok, (.image.files > 0)] | tostring')" '[true,true]' "device.tar: imported, ..."
check "... without its device nodes" [ ! -e "$IMAGES/h-device/rootfs/dev/mynull" ] && [ ! -e "$IMAGES/h-device/rootfs/etc/kmem" ]
check "... its other files are there" [ -f "$IMAGES/h-device/rootfs/etc/ok" ]
r=$(rpc '{"op":"image.import","name":"h-notar","source":"'"$T/oci.digest"'"}' 60)
is "$(jget "$r" '.error.code')" invalid_request "a file that is no tar archive: invalid_request"
nothing_left "... not a tar"

# An import cut short (its child killed) leaves nothing, and a restart removes a stale temp tree.
mkdir -p "$T/bigsrc" && truncate -s 900M "$T/bigsrc/zeros" && tar -C "$T/bigsrc" -cf - zeros | gzip -1 >"$T/big.tar.gz"
rm -rf "$T/bigsrc"
import_child() {
	local p
	for p in $(cat "/proc/$DAEMON_PID/task/"*/children 2>/dev/null); do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = sandboxd-import ] && echo "$p"
	done
}
rpc '{"op":"image.import","name":"cut","source":"'"$T/big.tar.gz"'"}' 60 >"$T/cut.reply" &
rpc_pid=$!
pid=
for _ in $(seq 1 1000); do pid=$(import_child); [ -n "$pid" ] && break; sleep 0.01; done
check "an import runs in a child process of its own (sandboxd-import)" test -n "$pid"
[ -n "$pid" ] && kill -KILL "$pid"
wait "$rpc_pid"
like "$(jget "$(cat "$T/cut.reply")" '.error.message')" 'ended without a result' "an import whose child is killed fails, saying so"
wait_until 10 test -z "$(find "$IMAGES" -mindepth 1 -maxdepth 1 -name '.tmp-*')"
nothing_left "... the killed import"
check "... and there is no image 'cut'" [ ! -e "$IMAGES/cut" ]
rm -f "$T/big.tar.gz"
mkdir -p "$IMAGES/.tmp-stale-0000" && touch "$IMAGES/.tmp-stale-0000/junk"
stop_daemon
start_daemon --config "$T/sandboxd.conf" || exit 0
check "a restart removes what an unfinished import left (.tmp-*)" [ ! -e "$IMAGES/.tmp-stale-0000" ]
r=$(rpc '{"op":"image.list"}')
is "$(jget "$r" '[.images[].name] | sort | join(",")')" "h-device,img-dir,img-progress,img-tar,img-tgz,img-tzst" "... and keeps every complete image"

# Other users may list and use images, not import or remove them.
chmod 0666 "$SOCK"
r=$(as_other 65534 -- timeout 35 python3 "$OTHER_CLIENT" "$SOCK" call '{"op":"image.import","name":"x","source":"/etc"}' --timeout 30)
is "$(jget "$r" '.error.code')" permission_denied "image.import by another user: permission_denied"
r=$(as_other 65534 -- timeout 35 python3 "$OTHER_CLIENT" "$SOCK" call '{"op":"image.remove","image":"img-tar"}' --timeout 30)
is "$(jget "$r" '.error.code')" permission_denied "image.remove by another user: permission_denied"
r=$(as_other 65534 -- timeout 35 python3 "$OTHER_CLIENT" "$SOCK" call '{"op":"run","best_effort":true,"image":"img-tar","argv":["/bin/cat","/etc/os-release"]}' --timeout 30)
is "$(jget "$r" '.stdout | split("\n")[0]')" "ID=sbxtest" "another user runs a throwaway sandbox of an image"

# ---- sandboxctl --------------------------------------------------------------------------------
out=$(ctl image import ctl-img "$T/root.tar.gz" 2>&1)
like "$out" 'kind: +tar' "sandboxctl image import NAME SOURCE prints the image"
is "$(ctl image list -q | grep -c '^ctl-img$')" 1 "sandboxctl image list -q lists it"
like "$(ctl image list)" 'NAME +KIND +SIZE' "sandboxctl image list prints a table"
id=$(ctl create --best-effort --image ctl-img)
is "$(ctl run --sandbox "$id" -- cat /etc/os-release | head -1)" "ID=sbxtest" "sandboxctl create --image, then run, runs in the image"
is "$(ctl run --best-effort --image ctl-img -- /bin/sh -c 'readlink /bin/sh')" busybox "sandboxctl run --image (throwaway)"
is "$(ctl --json image inspect ctl-img | jq -r '.image.used_by | join(",")')" "$id" "sandboxctl image inspect names the sandbox using it"
ctl image rm ctl-img >/dev/null 2>&1
is "$?" 1 "sandboxctl image rm of an image in use fails (status 1)"
ctl destroy "$id" >/dev/null
is "$(ctl image rm ctl-img)" ctl-img "sandboxctl image rm once it is unused"

r=$(rpc '{"op":"hello"}')
is "$(jget "$r" '.capabilities.images | [.idmap, .error, (.store | endswith("/images"))] | tostring')" '[true,null,true]' \
	"hello: capabilities.images says the image store can be idmapped here"

# ---- The Python package --------------------------------------------------------------------------
run_py python 60 "$top_srcdir/python" "$T/root.tar" <<'EOF2'
import os, sys
sys.path.insert(0, sys.argv[1])
from sandboxd import Client, Sandbox
c = Client(os.environ["SOCK"])
img = c.image_import("py-img", sys.argv[2])
print("PASS Client.image_import" if img["name"] == "py-img" and img["kind"] == "tar" else "FAIL %r" % img)
print("PASS Client.image_list" if "py-img" in [i["name"] for i in c.image_list()] else "FAIL image_list")
with Sandbox.create(client=c, best_effort=True, image="py-img") as sb:
    r = sb.run("cat /etc/os-release")
    print("PASS Sandbox.create(image=...) runs in the image" if r.stdout.startswith("ID=sbxtest") else "FAIL %r" % r.stdout)
    print("PASS Client.image_inspect names the sandbox" if c.image_inspect("py-img")["used_by"] == [sb.id] else "FAIL inspect")
r = c.run("cat /etc/os-release", image="py-img", best_effort=True)
print("PASS Client.run(image=...)" if r.stdout.startswith("ID=sbxtest") else "FAIL %r" % r.stdout)
# The throwaway sandbox is torn down just after its reply: it holds the image until then.
import time
deadline = time.monotonic() + 10
while c.image_inspect("py-img")["users"] and time.monotonic() < deadline:
    time.sleep(0.05)
c.image_remove("py-img")
print("PASS Client.image_remove" if "py-img" not in [i["name"] for i in c.image_list()] else "FAIL remove")
EOF2
