#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Disk limits the filesystem enforces (project quotas) and the daemon's own storage:
#  - on a state directory without project quotas, hello and doctor say disk limits are the
#    sweep's and why, and a create asking for limits.disk or limits.files is
#    limit_unenforceable unless best_effort;
#  - storage = image:SIZE: the daemon makes a sparse XFS image with reflinks, loop-mounts it
#    over its sandboxes' directory, a snapshot and a fork of a 64M file share its blocks, a
#    restart keeps the sandbox and reuses the mount; switching storage with sandboxes on the
#    other side is refused at start, saying what to do;
#  - where the kernel has quotas (not this build host's: it lacks CONFIG_QUOTA; the VM test
#    tests/system/t-quota.sh shows it under systemd), a sandbox writing past limits.disk gets
#    EDQUOT while another sandbox and the host write on, a restart keeps the limit, destroy
#    clears it; on an XFS made by the test and on an ext4 made with -O project,quota.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

mkdir -p "$T"
MOUNTS=()
# The daemon first (it holds the mounts open), then the test's mounts, then lib.sh's cleanup.
_quota_end() {
        local rc=$? m
        _daemon_end
        for m in "${MOUNTS[@]}"; do
                umount -l "$m" 2>/dev/null
        done
        (exit "$rc")
        _cleanup
}
trap _quota_end EXIT

ST=$T/state
# okif STATUS DESC: ok when STATUS is 0.
okif() { if [ "$1" = 0 ]; then ok "$2"; else nok "$2"; fi; }
skip() { ok "# SKIP $*"; }
conf() { printf '%s\n' "sweep_interval = 0" "$@" >"$T/sandboxd.conf"; }

# project_limit DIR ID: the project's block hard limit in bytes (quotactl_fd Q_GETQUOTA), 0: none.
project_limit() {
        python3 - "$1" "$2" <<'PY'
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
buf = ctypes.create_string_buffer(72)
# quotactl_fd(fd, QCMD(Q_GETQUOTA, PRJQUOTA), id, &if_dqblk)
if libc.syscall(443, fd, (0x800007 << 8) | 2, int(sys.argv[2]), buf) < 0:
    # ENOENT, ESRCH: the filesystem keeps nothing for the id: no limit
    print(0 if ctypes.get_errno() in (2, 3) else "error %d" % ctypes.get_errno())
else:
    print(struct.unpack("8QI", buf.raw[:68])[0] * 1024)
PY
}

# start_refused DESC ERE: sandboxd exits non-zero at start, its log matching ERE.
start_refused() {
        local out rc
        out=$(timeout -k 5 20 "$SANDBOXD" --config "$T/sandboxd.conf" --listen "$T/refused.sock" --state-dir "$ST" \
                --cgroup-root "$CG" --pool-size 0 2>&1)
        rc=$?
        [ "$rc" != 0 ] && [ "$rc" != 124 ]
        okif $? "$1: sandboxd refuses to start (status $rc)"
        like "$out" "$2" "$1: and says what to do"
}

# ---- state directory without project quotas -------------------------------------------------
conf
start_daemon --config "$T/sandboxd.conf" || exit 0
r=$(rpc '{"op":"hello"}')
disk_enforced=$(jget "$r" .capabilities.disk.enforced)
is "$(jget "$r" .capabilities.disk.storage)" state "hello: storage is the state directory's filesystem"
fs=$(stat -f -c %T "$ST/sandboxes")
if [ "$disk_enforced" = false ]; then
        like "$(jget "$r" .capabilities.disk.how)" "^no project quotas at $ST/sandboxes: " \
                "hello: disk limits not enforced here ($fs), and why: $(jget "$r" .capabilities.disk.how)"
        r=$(rpc '{"op":"create","limits":{"disk":"64M"}}')
        is "$(jget "$r" '.error.code + " " + .error.field')" "limit_unenforceable limits.disk" \
                "create with limits.disk where it cannot be enforced: limit_unenforceable, field limits.disk"
        like "$(jget "$r" .error.message)" "best_effort" "the message says best_effort runs it anyway"
        r=$(rpc '{"op":"create","limits":{"files":1000}}')
        is "$(jget "$r" '.error.code + " " + .error.field')" "limit_unenforceable limits.files" \
                "create with limits.files: the same, field limits.files"
        r=$(rpc '{"op":"create","best_effort":true,"name":"swept","limits":{"disk":"64M"}}')
        is "$(jget "$r" '.ok, .sandbox.enforced.disk, .sandbox.limits.disk' | tr '\n' ' ')" "true false 67108864 " \
                "with best_effort: made, enforced.disk false, the limit kept (the sweep's)"
        out=$(ctl doctor 2>&1)
        like "$out" "disk-limits.*applied by the sweep after the fact" "doctor: disk limits are the sweep's here"
        like "$out" "storage = image:200G" "doctor: the fix names storage = image"
else
        skip "the state directory's filesystem ($fs) enforces project quotas"
fi
is "$(jget "$(rpc '{"op":"health"}')" .sandboxes)" "$([ "$disk_enforced" = false ] && echo 1 || echo 0)" \
        "refused creates left no sandbox"
stop_daemon

# ---- switching to storage = image with sandboxes on the state filesystem: refused -----------
if [ "$disk_enforced" = false ]; then
        conf "storage = image:512M"
        start_refused "storage = image over a sandbox on the state filesystem" "already holds sandboxes.*Destroy them first"
        [ ! -e "$ST/storage.img" ] && ! mountpoint -q "$ST/sandboxes"
        okif $? "nothing made, nothing mounted"
        conf
        start_daemon --config "$T/sandboxd.conf" || exit 0
        is "$(jget "$(rpc '{"op":"destroy","sandbox":"swept"}')" .ok)" true "destroyed with storage = state"
        stop_daemon
fi

# ---- storage = image: made, mounted, reflinks ---------------------------------------------
conf "storage = image:512M"
MOUNTS+=("$ST/sandboxes")
start_daemon --config "$T/sandboxd.conf" || exit 0
[ "$(stat -f -c %T "$ST/sandboxes")" = xfs ] && mountpoint -q "$ST/sandboxes"
okif $? "an XFS mounted on $ST/sandboxes"
is "$(stat -c %s "$ST/storage.img")" 536870912 "storage.img is 512M"
[ "$(du -k "$ST/storage.img" | cut -f1)" -lt 131072 ]
okif $? "and sparse ($(du -k "$ST/storage.img" | cut -f1) KiB on disk)"
is "$(stat -c %a "$ST/sandboxes")" 711 "the mounted root has the sandboxes directory's mode"
r=$(rpc '{"op":"hello"}')
is "$(jget "$r" '.capabilities.disk.storage, .capabilities.disk.reflink' | tr '\n' ' ')" "image true " \
        "hello: storage image, reflinks"
img_quota=$(jget "$r" .capabilities.disk.enforced)
diag "disk: $(jget "$r" .capabilities.disk.how)"
if [ "$img_quota" = true ]; then
        like "$(jget "$r" .capabilities.disk.how)" "^project quota on xfs at $ST/sandboxes$" "hello says how"
else
        like "$(jget "$r" .capabilities.disk.how)" "^no project quotas at $ST/sandboxes: " "hello says why not"
        like "$(ctl doctor 2>&1)" "storage image is mounted without project quotas" "doctor says why"
fi

r=$(rpc '{"op":"create","best_effort":true,"name":"img"}')
wd=$(jget "$r" .sandbox.workdir)
like "$wd" "^$ST/sandboxes/sbx-" "the workspace is on the image"
r=$(rpc '{"op":"run","sandbox":"img","command":"head -c 64M /dev/urandom > /work/big && md5sum < /work/big"}')
sum=$(jget "$r" .stdout)
is "$(jget "$r" .exit_code)" 0 "64M written into the workspace"
sync -f "$ST/sandboxes"
used0=$(df -k --output=used "$ST/sandboxes" | tail -1)
r=$(rpc '{"op":"snapshot","sandbox":"img"}')
snap=$(jget "$r" .snapshot.id)
is "$(jget "$r" .ok)" true "a snapshot of it"
r=$(rpc '{"op":"create","best_effort":true,"name":"img-fork","from_snapshot":"img/'"$snap"'"}')
is "$(jget "$r" .ok)" true "a fork from the snapshot"
sync -f "$ST/sandboxes"
used1=$(df -k --output=used "$ST/sandboxes" | tail -1)
[ $((used1 - used0)) -lt 16384 ]
okif $? "snapshot and fork share the 64M file's blocks (used grew by $((used1 - used0)) KiB)"
is "$(jget "$(rpc '{"op":"run","sandbox":"img-fork","command":"md5sum < /work/big"}')" .stdout)" "$sum" \
        "the fork's copy has the same bytes"

# ---- a restart keeps it -------------------------------------------------------------------
stop_daemon
start_daemon --config "$T/sandboxd.conf" || exit 0
like "$(cat "$T/daemon.log")" "storage: made $ST/storage.img" "the image was made once"
is "$(grep -c "storage: $ST/storage.img mounted" "$T/daemon.log")" 1 "and mounted once: a restart uses the mount it finds"
is "$(jget "$(rpc '{"op":"run","sandbox":"img","command":"md5sum < /work/big"}')" .stdout)" "$sum" \
        "after a restart the sandbox is back with its file"

# ---- write-time enforcement, where the kernel has project quotas ---------------------------
# quota_scenario LABEL: needs a daemon whose storage enforces project quotas.
quota_scenario() {
        local l=$1 r a b pid_a
        r=$(rpc '{"op":"create","name":"q-a","limits":{"disk":"32M"},"best_effort":true}')
        is "$(jget "$r" .sandbox.enforced.disk)" true "$l: limits.disk 32M enforced"
        rpc '{"op":"create","name":"q-b","limits":{"disk":"32M"},"best_effort":true}' >/dev/null
        r=$(rpc '{"op":"run","sandbox":"q-a","command":"head -c 64M /dev/zero > /work/big; echo rc=$?; stat -c %s /work/big"}')
        like "$(jget "$r" .stderr)" "Disk quota exceeded|No space left" "$l: a write past it fails inside (EDQUOT or ENOSPC)"
        like "$(jget "$r" .stdout)" "^rc=1" "$l: head sees the error"
        r=$(rpc '{"op":"run","sandbox":"q-b","command":"head -c 16M /dev/zero > /work/f && echo ok"}')
        is "$(jget "$r" .stdout)" ok "$l: another sandbox writes on"
        check "$l: the host writes on" dd if=/dev/zero of="$ST/sandboxes/host-file" bs=1M count=16 status=none
        rm -f "$ST/sandboxes/host-file"
        pid_a=$(jget "$(rpc '{"op":"inspect","sandbox":"q-a"}')" .sandbox.id)
        a=$(jq -r .project_id "$ST/sandboxes/$pid_a/meta.json")
        [ "$a" -gt 0 ] 2>/dev/null
        okif $? "$l: its project id ($a) is in its record"
        b=$(project_limit "$ST/sandboxes" "$a")
        [ "$b" -ge 33554432 ] 2>/dev/null && [ "$b" -le 35651584 ]
        okif $? "$l: its project's hard limit is 32M and the record's room ($b)"
        stop_daemon
        start_daemon --config "$T/sandboxd.conf" || return
        r=$(rpc '{"op":"run","sandbox":"q-a","command":"rm /work/big; head -c 64M /dev/zero > /work/big; stat -c %s /work/big"}')
        [ "$(jget "$r" .stdout)" -lt 40000000 ] 2>/dev/null && [ "$(jget "$(rpc '{"op":"inspect","sandbox":"q-a"}')" .sandbox.enforced.disk)" = true ]
        okif $? "$l: after a restart the limit holds ($(jget "$r" .stdout) bytes)"
        rpc '{"op":"destroy","sandbox":"q-a"}' >/dev/null
        rpc '{"op":"destroy","sandbox":"q-b"}' >/dev/null
        is "$(project_limit "$ST/sandboxes" "$a")" 0 "$l: destroy cleared its project's limit"
}
if [ "$img_quota" = true ]; then
        quota_scenario "image"
else
        skip "write-time enforcement: this kernel has no project quotas (tests/system/t-quota.sh shows it)"
fi
stop_daemon

# ---- back to storage = state with the image there: refused -----------------------------------
conf
start_refused "storage = state while storage.img is there" "storage.img is there.*Set storage = image:SIZE again"

# ---- ext4 -O project,quota prepared by the administrator ------------------------------------
umount -l "$ST/sandboxes"
rm -rf "$ST"
mkdir -p "$ST/sandboxes"
truncate -s 256M "$T/ext4.img"
if mkfs.ext4 -q -I 256 -O project,quota "$T/ext4.img" 2>/dev/null && mount -o loop,prjquota "$T/ext4.img" "$ST/sandboxes" 2>/dev/null; then
        MOUNTS+=("$ST/sandboxes")
        conf
        start_daemon --config "$T/sandboxd.conf" || exit 0
        like "$(jget "$(rpc '{"op":"hello"}')" .capabilities.disk.how)" "^project quota on ext4 at " "ext4 prjquota: enforced"
        quota_scenario "ext4"
        stop_daemon
else
        skip "ext4 -O project,quota: this kernel cannot mount it with prjquota"
fi
