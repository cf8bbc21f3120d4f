#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A sandbox's /dev (daemon/host/dev-template.c, daemon/exec/sandbox-setup.c): the daemon's <state>/dev,
# bound read-only, with working nodes, a private devpts and /dev/shm -> /run/shm; a template
# someone tampered with is not used, and neither is one on a nodev filesystem: the sandboxes
# then bind the host's nodes one by one, with the same view.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

# Everything a sandbox's /dev must do, as both users; $1 names the setup, $2 is how many of /dev's
# entries are mounts of their own (1 with the template: pts; 7 without: pts and the six nodes).
check_dev_view() {
	run_py "$1" 60 "$1" "$2" <<'EOF'
import os, sys
from client import Conn, is_
how, node_mounts = sys.argv[1], sys.argv[2]
c = Conn(os.environ["SOCK"])
script = "; ".join([
    "echo x > /dev/null && echo null-ok",
    "head -c 3 /dev/zero | od -An -tx1 | tr -d ' '",
    "head -c 16 /dev/urandom | wc -c",
    "echo x 2>/dev/null > /dev/full || echo full-refuses",
    "stat -c %t:%T /dev/null /dev/tty",
    "touch /dev/new 2>/dev/null || echo dev-readonly",
    "echo s > /dev/shm/s && readlink /dev/shm && cat /run/shm/s",
    "readlink /dev/fd /dev/ptmx",
    "test -c /dev/pts/ptmx && echo own-devpts",
])
want = ["null-ok", "000000", "16", "full-refuses", "1:3", "5:0", "dev-readonly", "/run/shm", "s",
        "/proc/self/fd", "pts/ptmx", "own-devpts"]
for user in ("sandbox", "root"):
    r = c.call({"op": "run", "best_effort": True, "user": user, "command": script})
    is_(r.get("stdout", "").split(), want,
        "%s: /dev works as %s: nodes, read-only, /dev/shm is /run/shm, links, own devpts" % (how, user))
r = c.call({"op": "run", "best_effort": True, "command": "awk '$5 ~ \"^/dev/[a-z]+$\" {n++} END {print n+0}' /proc/self/mountinfo"})
is_(r.get("stdout", "").strip(), node_mounts, "%s: %s of /dev's entries are mounts of their own" % (how, node_mounts))
EOF
}

mkdir -p "$T"
start_daemon || exit 0
check "the daemon made <state>/dev" [ -c "$T/state/dev/null" ]
is "$(stat -c '%a %U' "$T/state/dev" "$T/state/dev/urandom")" "755 root
666 root" "owned by root: the directory 0755, the nodes 0666"
check_dev_view "template" 1
stop_daemon

# A template that is not what it must be is left alone (nothing is removed from it) and not used.
rm "$T/state/dev/zero"
printf 'not a device\n' >"$T/state/dev/zero"
start_daemon || exit 0
like "$(cat "$T/daemon.log")" "cannot prepare .*/dev" "a tampered template is reported"
is "$(cat "$T/state/dev/zero")" "not a device" "and left as it is"
check_dev_view "tampered template" 7
stop_daemon
rm -rf "$T/state"

# A state directory on a nodev filesystem: no template at all.
mkdir -p "$T/state"
mount -t tmpfs -o nodev,mode=0711 sandboxd-test-nodev "$T/state" || { nok "mount a nodev tmpfs for the state directory"; exit 0; }
start_daemon || { umount "$T/state"; exit 0; }
check "no template on a nodev filesystem" [ ! -e "$T/state/dev" ]
check_dev_view "nodev state directory" 7
stop_daemon
umount "$T/state"
check "the nodev tmpfs is gone again" eval "! grep -q sandboxd-test-nodev /proc/self/mountinfo"
