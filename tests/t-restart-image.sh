#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# storage = image across restarts (issue 22): the sandboxes' processes outlive the daemon as with
# the default storage. A background process in a sandbox goes on through a SIGTERM and a SIGKILL
# of the daemon, the next daemon takes the sandbox back with it, and the sandbox's files are
# intact. The mount is then reused where it is (a daemon restarted in the same mount namespace),
# or, when the next daemon does not see it (systemd gives each start of the service a mount
# namespace of its own: here the mount is taken away from the daemon's namespace while the
# sandboxes' namespaces still hold it), the loop device still attached to the image is found by
# the image's device and inode and mounted again: the same filesystem, which a file written from
# the host and read in the sandbox proves. Refused, saying why: another filesystem mounted on the
# sandboxes' directory, an image file replaced (told by storage.img.loop, the record of the loop
# device and inode, and without it by the loop device's backing file) or moved away while its
# loop device is still held.
# The script runs in a mount namespace of its own: its mounts go with it.
if [ -z "${SBX_IMAGE_NS:-}" ]; then
        SBX_IMAGE_NS=1 exec unshare --mount --propagation private -- "$0" "$@"
fi
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

command -v mkfs.xfs >/dev/null && [ -e /dev/loop-control ] || skip_all "no mkfs.xfs or no /dev/loop-control"
KEEP_SANDBOXES=1
ST=$T/state
mkdir -p "$ST"
printf '%s\n' "sweep_interval = 0" "storage = image:512M" >"$T/sandboxd.conf"
# The sandboxes first (their mount namespaces hold the image's loop device), then the mount.
_image_end() {
        local rc=$?
        _daemon_end
        [ -n "$CG" ] && [ -d "$CG" ] && _cg_remove_tree force
        umount -l "$ST/sandboxes" 2>/dev/null
        umount -l "$T/other" 2>/dev/null
        (exit "$rc")
        _cleanup
}
trap _image_end EXIT
alive() { kill -0 "$1" 2>/dev/null && [ "$(awk '/^State:/ { print $2 }' "/proc/$1/status" 2>/dev/null)" != Z ]; }
# term_daemon / kill_daemon: the daemon goes, the sandboxes stay (stop_daemon checks the opposite).
term_daemon() {
        kill -TERM "$DAEMON_PID"
        wait "$DAEMON_PID"
        is "$?" 0 "SIGTERM: the daemon exits with status 0"
        DAEMON_PID=
}
kill_daemon() {
        kill -KILL "$DAEMON_PID"
        wait "$DAEMON_PID" 2>/dev/null
        DAEMON_PID=
}
# start_refused DESC ERE: sandboxd exits non-zero at start, its log matching ERE.
start_refused() {
        local out rc
        out=$(timeout -k 5 30 "$SANDBOXD" --config "$T/sandboxd.conf" --listen "$T/refused.sock" --state-dir "$ST" \
                --cgroup-root "$CG" --pool-size 0 2>&1)
        rc=$?
        diag "$(grep 'storage = image' <<<"$out" | tail -n 1)"
        [ "$rc" != 0 ] && [ "$rc" != 124 ]
        check "$1: sandboxd refuses to start (status $rc)" [ "$?" = 0 ]
        like "$out" "$2" "$1: and says why"
}
loop_of_image() { losetup -n -O NAME -j "$ST/storage.img" 2>/dev/null | head -1; }

start_daemon --config "$T/sandboxd.conf" || exit 0
[ "$(stat -f -c %T "$ST/sandboxes")" = xfs ] && mountpoint -q "$ST/sandboxes"
check "the image's XFS is mounted on $ST/sandboxes" [ "$?" = 0 ]
loop=$(loop_of_image)
like "$loop" '^/dev/loop[0-9]+$' "through $loop"
r=$(rpc '{"op":"create","best_effort":true,"name":"keep"}')
id=$(jget "$r" .sandbox.id)
wd=$(jget "$r" .sandbox.workdir)
like "$wd" "^$ST/sandboxes/$id" "a sandbox 'keep' with its workspace on the image"
r=$(rpc '{"op":"run","sandbox":"keep","command":"head -c 8M /dev/urandom > /work/data && md5sum < /work/data && (setsid sh -c '\''while :; do date +%s%N >> /work/ticks; sleep 0.1; done'\'' >/dev/null 2>&1 & echo $! > /work/bg.pid)"}')
sum=$(jget "$r" .stdout)
is "$(jget "$r" .exit_code)" 0 "8M written and a background writer started in it"
bg=$(jget "$(rpc '{"op":"run","sandbox":"keep","argv":["cat","/work/bg.pid"]}')" .stdout)
init=$(cg_procs "$CG/sandboxes/$id/init")
like "$init" '^[0-9]+$' "the sandbox's init is pid $init on the host"
bg_cmd='test -d /proc/'"$bg"' && grep -q "while :" /proc/'"$bg"'/cmdline && echo same'

# after HOW LOG_ERE: the daemon was stopped so; the next one takes the sandbox back, processes and files.
after() {
        local how=$1 r n0 n1
        check "after $how, the sandbox's init still runs" alive "$init"
        start_daemon --config "$T/sandboxd.conf" || return 1
        like "$(tail -n 30 "$T/daemon.log")" "$2" "after $how, the next daemon says how it found the image"
        r=$(rpc '{"op":"inspect","sandbox":"keep"}')
        is "$(jget "$r" '.sandbox.state + " " + .sandbox.restored_processes')" "ready kept" \
                "after $how, the next daemon takes the sandbox back with its processes"
        is "$(cg_procs "$CG/sandboxes/$id/init")" "$init" "after $how, its init is the same process"
        is "$(jget "$(rpc "$(jq -cn --arg c "$bg_cmd" '{"op":"run","sandbox":"keep","argv":["sh","-c",$c]}')")" .stdout)" same \
                "after $how, the background writer is the same process (pid $bg inside)"
        n0=$(jget "$(rpc '{"op":"run","sandbox":"keep","command":"wc -l < /work/ticks"}')" .stdout)
        sleep 0.5
        n1=$(jget "$(rpc '{"op":"run","sandbox":"keep","command":"wc -l < /work/ticks"}')" .stdout)
        check "after $how, it still writes ($n0 then $n1 lines)" [ "${n1:-0}" -gt "${n0:-0}" ]
        is "$(jget "$(rpc '{"op":"run","sandbox":"keep","command":"md5sum < /work/data"}')" .stdout)" "$sum" \
                "after $how, the sandbox's 8M file is intact"
        is "$(loop_of_image)" "$loop" "after $how, the image is still on $loop alone"
}

term_daemon
after SIGTERM "loaded|restored|ready"
is "$(grep -c "storage: $ST/storage.img mounted" "$T/daemon.log")" 1 "the mount it found was reused, not made again"
kill_daemon
after SIGKILL "loaded|restored|ready"

# The next daemon in a mount namespace without the image's mount, as under systemd.
term_daemon
umount -l "$ST/sandboxes"
check "the daemon's namespace has no mount on $ST/sandboxes any more" eval '! mountpoint -q "$ST/sandboxes"'
check "the sandboxes still hold $loop" [ "$(loop_of_image)" = "$loop" ]
after "SIGTERM and the mount gone" "storage: $ST/storage.img still attached to $loop .*mounted again on $ST/sandboxes"
echo from-host >"$wd/from-host"
is "$(jget "$(rpc '{"op":"run","sandbox":"keep","command":"cat /work/from-host"}')" .stdout)" from-host \
        "the daemon's mount and the sandbox's are one filesystem: a file written on one is read on the other"
kill_daemon
umount -l "$ST/sandboxes"
after "SIGKILL and the mount gone" "storage: $ST/storage.img still attached to $loop .*mounted again"

# ---- hostile: another filesystem on the sandboxes' directory, an image replaced ---------------
term_daemon
umount -l "$ST/sandboxes"
truncate -s 320M "$T/other.img"
mkfs.xfs -q "$T/other.img"
mount -o loop "$T/other.img" "$ST/sandboxes"
start_refused "another XFS mounted on $ST/sandboxes" "already a mount point \(xfs from /dev/loop[0-9]+, device [0-9:]+\), not of $ST/storage.img \(xfs on $loop\)"
umount "$ST/sandboxes"
mount -t tmpfs tmpfs "$ST/sandboxes"
start_refused "a tmpfs mounted on $ST/sandboxes" "already a mount point \(tmpfs from tmpfs"
umount "$ST/sandboxes"
ln "$ST/storage.img" "$T/kept.img"
mv "$T/other.img" "$ST/storage.img"
start_refused "storage.img replaced while $loop holds the earlier one" "$ST/storage.img is another file, but $loop is still attached to the image that was there.*put that file back"
# Without storage.img.loop (a daemon of before it), the kernel's backing file still tells.
mv "$ST/storage.img.loop" "$T/record"
start_refused "storage.img replaced, and no record of the loop device" "$ST/storage.img is not the file $loop is attached to.*put the earlier image back"
mv "$T/record" "$ST/storage.img.loop"
check "nothing was mounted" eval '! mountpoint -q "$ST/sandboxes"'
mv "$ST/storage.img" "$T/other.img"
start_refused "storage.img moved away while $loop holds it" "$ST/storage.img is missing, but $loop is still attached to the image that was there"
check "no new image was made in its place" [ ! -e "$ST/storage.img" ]
mv "$T/kept.img" "$ST/storage.img"
after "the image put back" "storage: $ST/storage.img still attached to $loop .*mounted again"

r=$(rpc '{"op":"destroy","sandbox":"keep"}')
is "$(jget "$r" .destroyed)" true "destroy ends it all"
check "the init is gone" wait_until 5 eval '! alive '"$init"
stop_daemon
umount "$ST/sandboxes"
check "once unmounted, the loop device goes with the image's last mount" wait_until 5 eval '[ -z "$(loop_of_image)" ]'
