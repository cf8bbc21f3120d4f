#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Security round 3, images (docs/security.md ESC-25 and the rows after it):
#  - a non-root admin's import reads its source as that admin: a root-only file of a directory
#    it may read is refused, a symlink in the source's path is never followed, a source outside
#    mount_roots is refused (point 2);
#  - only the decompressors the docs list, built in: an lrzip, lzop or grzip stream is refused
#    and no program of that name in the daemon's PATH runs (point 5);
#  - image_max_files bounds every header read, skipped ones too (point 6);
#  - image.inspect and image.list count only the caller's own sandboxes for a non-admin (point 7);
#  - "owner_only": only the importer and admins make sandboxes of it, kept across a restart
#    (point 10).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

ADMIN=65532 ADMIN_GROUP=users OTHER=65534
mkdir -p "$T/share" "$T/fakebin"
cat >"$T/sandboxd.conf" <<EOF
admin_group = $ADMIN_GROUP
mount_roots = $T/share
image_max_files = 1000
EOF
# Programs libarchive's external filters would run: each leaves a marker if it ever runs.
for p in lrzip lzop grzip lz4 lzip; do
	printf '#!/bin/sh\ntouch %s/ran-%s\ncat\n' "$T" "$p" >"$T/fakebin/$p"
	chmod 0755 "$T/fakebin/$p"
done
PATH=$T/fakebin:$PATH start_daemon --config "$T/sandboxd.conf" || exit 0
chmod 0755 "$T" && chmod 0666 "$SOCK"
IMAGES=$T/state/images
check "the client is copied where other uids may run it" other_user_files
rpc_as() { # UID GROUP JSON
	local gid groups=--clear-groups
	[ "$2" != - ] && gid=$(getent group "$2" | cut -d: -f3) && groups=--groups=$gid
	as_other "$1" --regid="$1" "$groups" -- timeout 65 python3 "$OTHER_CLIENT" "$SOCK" call "$3" --timeout 60
}

# ---- 2: a non-root admin's import reads as that admin ----------------------------------------
mkdir -p "$T/share/src/sub"
echo public >"$T/share/src/public"
echo "root-only 9c41" >"$T/share/src/secret" && chmod 0600 "$T/share/src/secret"
echo hidden >"$T/share/src/sub/f" && chmod 0700 "$T/share/src/sub"
ln -s /etc "$T/share/etc-link"
r=$(rpc_as $ADMIN $ADMIN_GROUP "{\"op\":\"image.import\",\"name\":\"adm-src\",\"source\":\"$T/share/src\"}")
isnt_ok=$(jget "$r" '.ok')
check "a non-root admin's import of a directory with a root-only file is refused" [ "$isnt_ok" != true ]
like "$r" 'secret|permission|Permission' "... naming the file it may not read"
check "... and no image holds the root-only file" [ ! -e "$IMAGES/adm-src/rootfs/secret" ]
r=$(rpc_as $ADMIN $ADMIN_GROUP "{\"op\":\"image.import\",\"name\":\"adm-link\",\"source\":\"$T/share/etc-link\"}")
is "$(jget "$r" '.ok')" false "a non-root admin's import through a symlink to /etc is refused"
check "... and makes no image" [ ! -e "$IMAGES/adm-link" ]
r=$(rpc_as $ADMIN $ADMIN_GROUP '{"op":"image.import","name":"adm-etc","source":"/etc"}')
is "$(jget "$r" '.error.code')" permission_denied "a non-root admin's import of /etc (outside mount_roots) is refused"
check "... and makes no image" [ ! -e "$IMAGES/adm-etc" ]
chmod 0644 "$T/share/src/secret" && chmod 0755 "$T/share/src/sub"
r=$(rpc_as $ADMIN $ADMIN_GROUP "{\"op\":\"image.import\",\"name\":\"adm-ok\",\"source\":\"$T/share/src\"}")
is "$(jget "$r" '.ok')" true "a non-root admin imports a directory it may read whole"
[ "$(jget "$r" '.ok')" = true ] || diag "$r"
r=$(rpc "{\"op\":\"image.import\",\"name\":\"root-link\",\"source\":\"$T/share/etc-link\"}")
is "$(jget "$r" '.ok')" false "root's import through a symlink is refused too (never followed)"

# ---- 5: only gzip, xz, bzip2, zstd, built in ---------------------------------------------------
printf 'LRZI\000\006' >"$T/x.lrz" && head -c 4096 /dev/urandom >>"$T/x.lrz"
printf '\211LZO\000\r\n\032\n' >"$T/x.lzo" && head -c 4096 /dev/urandom >>"$T/x.lzo"
printf 'GRZipII\000\002\004:)' >"$T/x.grz" && head -c 4096 /dev/urandom >>"$T/x.grz"
for f in lrz lzo grz; do
	r=$(rpc "{\"op\":\"image.import\",\"name\":\"f-$f\",\"source\":\"$T/x.$f\"}")
	is "$(jget "$r" '.ok')" false "an import of a .$f stream is refused"
done
ran=$(ls "$T" | grep '^ran-' | tr '\n' ' ')
is "$ran" "" "no outside decompressor in the daemon's PATH ran"
mkdir -p "$T/tiny/etc" && echo tiny >"$T/tiny/etc/f"
for z in gzip xz bzip2 zstd; do
	command -v $z >/dev/null || { ok "# SKIP $z not installed"; continue; }
	tar -C "$T/tiny" -cf - . | $z -c >"$T/tiny.tar.$z"
	r=$(rpc "{\"op\":\"image.import\",\"name\":\"z-$z\",\"source\":\"$T/tiny.tar.$z\"}")
	is "$(jget "$r" '.ok')" true "a $z tar is imported"
done

# ---- 6: every header counts ------------------------------------------------------------------
python3 - "$T/devs.tar" <<'EOF'
import sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.GNU_FORMAT) as t:
    for i in range(5000):
        ti = tarfile.TarInfo(f"d{i}")
        ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
        t.addfile(ti)
EOF
r=$(rpc "{\"op\":\"image.import\",\"name\":\"devs\",\"source\":\"$T/devs.tar\"}")
is "$(jget "$r" '.error.code')" resource_exhausted "5,000 skipped device entries under image_max_files = 1000: refused"
check "... and no image is made" [ ! -e "$IMAGES/devs" ]

# ---- 7: another user's usage is not counted for a non-admin ----------------------------------
s1=$(jget "$(rpc '{"op":"create","best_effort":true,"image":"z-gzip"}')" '.sandbox.id')
s2=$(jget "$(rpc '{"op":"create","best_effort":true,"image":"z-gzip"}')" '.sandbox.id')
check "root makes two sandboxes of an image" [ -n "$s1" ] && [ "$s1" != null ] && [ -n "$s2" ] && [ "$s2" != null ]
r=$(rpc_as $OTHER - '{"op":"image.inspect","image":"z-gzip"}')
is "$(jget "$r" '.image.users')" 0 "another user's image.inspect counts none of root's sandboxes"
is "$(jget "$r" '.image.used_by | length')" 0 "... and lists none"
r=$(rpc_as $OTHER - '{"op":"image.list"}')
is "$(jget "$r" '.images[] | select(.name == "z-gzip") | .users')" 0 "... nor does its image.list"
r=$(rpc_as $ADMIN $ADMIN_GROUP '{"op":"image.inspect","image":"z-gzip"}')
is "$(jget "$r" '.image.users')" 2 "an admin's image.inspect counts them all"
is "$(jget "$(rpc '{"op":"image.inspect","image":"z-gzip"}')" '.image.users')" 2 "root's too"
rpc "{\"op\":\"destroy\",\"sandbox\":\"$s1\"}" >/dev/null
rpc "{\"op\":\"destroy\",\"sandbox\":\"$s2\"}" >/dev/null

# ---- 10: owner-only images -------------------------------------------------------------------
r=$(rpc "{\"op\":\"image.import\",\"name\":\"mine\",\"source\":\"$T/tiny.tar.gzip\",\"owner_only\":true}")
is "$(jget "$r" '.image.owner_only')" true "image.import with owner_only: true says so"
r=$(rpc_as $OTHER - '{"op":"create","best_effort":true,"image":"mine"}')
is "$(jget "$r" '.error.code')" permission_denied "another user cannot make a sandbox of an owner-only image"
r=$(rpc_as $OTHER - '{"op":"create","best_effort":true,"image":"z-gzip"}')
o=$(jget "$r" '.sandbox.id')
check "... but can of an image without it" [ -n "$o" ] && [ "$o" != null ]
[ -n "$o" ] && [ "$o" != null ] && rpc_as $OTHER - "{\"op\":\"destroy\",\"sandbox\":\"$o\"}" >/dev/null
r=$(rpc_as $ADMIN $ADMIN_GROUP '{"op":"create","best_effort":true,"image":"mine"}')
a=$(jget "$r" '.sandbox.id')
check "an admin can make a sandbox of an owner-only image" [ -n "$a" ] && [ "$a" != null ]
[ -n "$a" ] && [ "$a" != null ] && rpc_as $ADMIN $ADMIN_GROUP "{\"op\":\"destroy\",\"sandbox\":\"$a\"}" >/dev/null
out=$(ctl image import mine2 "$T/tiny.tar.gzip" --owner-only 2>&1)
like "$out" 'owner_only: +yes' "sandboxctl image import --owner-only"
stop_daemon
PATH=$T/fakebin:$PATH start_daemon --config "$T/sandboxd.conf" || exit 0
chmod 0666 "$SOCK"
is "$(jget "$(rpc '{"op":"image.inspect","image":"mine"}')" '.image.owner_only')" true "owner_only is kept across a restart"
r=$(rpc_as $OTHER - '{"op":"create","best_effort":true,"image":"mine2"}')
is "$(jget "$r" '.error.code')" permission_denied "... and still refuses another user"
stop_daemon
