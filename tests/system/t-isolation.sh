#!/bin/bash
# sandboxd under a real systemd and Debian's kernel: who may connect through the packaged socket
# unit (group sandboxd, made by systemd-sysusers), and who a command is inside a sandbox.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock
sock=$SANDBOXD_SOCKET
ctl=$(command -v sandboxctl)
gid=$(getent group sandboxd | cut -d: -f3)

[ -n "$gid" ]
ok $? "systemd-sysusers made group sandboxd"
[ "$(stat -c %U:%G:%a "$sock")" = root:sandboxd:660 ]
ok $? "the socket is root:sandboxd 0660 (SocketGroup=sandboxd, SocketMode=0660)"
diag "$(stat -c '%U:%G:%a %n' "$sock")"
as_nobody() { setpriv --reuid=65534 --regid=65534 "$@"; }

err=$(as_nobody --clear-groups "$ctl" list 2>&1 >/dev/null)
rc=$?
diag "$err"
[ "$rc" = 1 ] && [[ $err == *"permission denied on $sock"*"usermod -aG sandboxd"*"log in again"* ]]
ok $? "a user outside group sandboxd is refused, and sandboxctl says to join the group and log in again"
as_nobody --groups="$gid" "$ctl" list >/dev/null 2>&1
ok $? "the same user in group sandboxd connects"

out=$(as_nobody --groups="$gid" "$ctl" run -- sh -c 'id -u; grep -E "^(Groups|CapEff|CapBnd):" /proc/self/status' 2>&1)
diag "$out"
[ "$(printf '%s\n' "$out" | tr -s '\t ' ' ')" = "$(printf '1000\nGroups: \nCapEff: 0000000000000000\nCapBnd: 0000000000000000')" ]
ok $? "a run is uid 1000 inside, without groups or capabilities"
umount_py='import ctypes, errno; l = ctypes.CDLL(None, use_errno=True)
for p in (b"/proc/sys", b"/proc"):
    print(errno.errorcode.get(ctypes.get_errno(), "ok") if l.umount2(p, 2) else "unmounted")'
out=$(as_nobody --groups="$gid" "$ctl" run --user root -- python3 -c "$umount_py" 2>&1)
diag "$out"
[ "$(echo $out)" = "EINVAL EINVAL" ]
ok $? "root of the sandbox's user namespace cannot unmount /proc/sys or /proc: the mounts are locked"
out=$(as_nobody --groups="$gid" "$ctl" run -- sh -c "python3 -c '$umount_py'; stat -f -c %T /work" 2>&1)
diag "$out"
[ "$(echo $out)" = "EPERM EPERM tmpfs" ]
ok $? "a throwaway run as the default user (no child user namespace) cannot either (EPERM); its /work is tmpfs"
# The daemon's /dev template under the packaged unit (StateDirectory=sandboxd, ProtectSystem=full):
# made, and what every sandbox sees as its /dev, read-only, with working nodes.
[ -c /var/lib/sandboxd/dev/null ] && [ "$(stat -c %t:%T /var/lib/sandboxd/dev/urandom)" = 1:9 ] &&
	! journalctl -u sandboxd --no-pager 2>/dev/null | grep -q "cannot prepare"
ok $? "the unit's daemon made /var/lib/sandboxd/dev (no fallback to binding the host's nodes)"
out=$(as_nobody --groups="$gid" "$ctl" run -- sh -c 'echo x >/dev/null && head -c 4 /dev/urandom | wc -c; touch /dev/x 2>/dev/null || echo ro; readlink /dev/shm; awk "\$5 ~ \"^/dev/[a-z]+\$\" {n++} END {print n+0}" /proc/self/mountinfo' 2>&1)
diag "$out"
[ "$(echo $out)" = "4 ro /run/shm 1" ]
ok $? "a sandbox's /dev is the template: nodes work, read-only, /dev/shm -> /run/shm, only pts mounted below"
# Network namespaces from the daemon's pool (daemon/host/netns-pool.h) on Debian's kernel: the helper's
# sysfs moved in shows lo and, under it, the sandbox's own cgroup with its memory limit; root of
# the sandbox cannot bring lo down; later sandboxes get namespaces used before.
out=$(as_nobody --groups="$gid" "$ctl" run --memory 96M -- sh -c "ls /sys/class/net; cat /sys/fs/cgroup/memory.max" 2>&1)
diag "$out"
[ "$(echo "$out" | head -n 2 | tr '\n' ' ')" = "lo 100663296 " ]
ok $? "a sandbox's /sys shows its namespace's lo and its own cgroup (memory.max 96M)"
out=$(as_nobody --groups="$gid" "$ctl" run --user root -- python3 -c 'import fcntl, socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", 0)); print("allowed")
except PermissionError:
    print("EPERM")' 2>&1)
diag "$out"
[ "$out" = EPERM ]
ok $? "root of a sandbox cannot bring its lo down: the namespace is the host's"
out=$("$ctl" health 2>&1 | grep -E '^netns.(made|reused)')
diag "$out"
[[ $out =~ netns.reused:\ *[1-9] ]]
ok $? "later sandboxes got namespaces used before (health: netns.reused)"
done_testing
