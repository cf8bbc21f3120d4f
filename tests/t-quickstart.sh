#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# scripts/quickstart.sh's notes, from its own functions (the script sourced: nothing installed):
# an earlier copy in /usr/local is named before installing into /usr beside it, and the closing
# note says where the daemon's log is and how to stop it. Needs no daemon and no root; prints
# TAP, exits 0.
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
QS=$top_srcdir/scripts/quickstart.sh

n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; }
like() { if printf '%s' "$1" | grep -qE -- "$2"; then ok "$3"; else nok "$3"; printf '# got: %s\n' "$1"; fi; }
is() { if [ "$1" = "$2" ]; then ok "$3"; else nok "$3"; printf '# got: %s\n# expected: %s\n' "$1" "$2"; fi; }
T=$(mktemp -d "${TMPDIR:-/tmp}/sbxt-quickstart.XXXXXX") || { echo "1..0 # SKIP mktemp failed"; exit 0; }
trap 'rm -rf "$T"; echo "1..$n"; exit 0' EXIT

# Sourcing a script without its guard would run it: install into /usr and start a daemon. Never.
if ! grep -q '^\[\[ "${BASH_SOURCE\[0\]}" != "$0" \]\] && return 0$' "$QS"; then
        nok "scripts/quickstart.sh returns when sourced (its guard line), so its functions can be tested"
        exit 0
fi
# qs FUNCTION ARGS...: one function of the script, in a subshell (its traps and set -e stay there).
qs() { (. "$QS" && "$@") 2>&1; }

out=$(qs type usr_local_note)
like "$out" "usr_local_note is a function" "the script can be sourced for its functions (nothing runs)"
mkdir -p "$T/root/usr/local/bin"
is "$(qs usr_local_note "$T/root")" "" "no copy in /usr/local: nothing said"
touch "$T/root/usr/local/bin/sandboxctl"
out=$(qs usr_local_note "$T/root")
like "$out" "An earlier install is in /usr/local: /usr/local/bin/sandboxctl" "a copy in /usr/local is named"
like "$out" "installs into /usr .*beside it" "...and the note says the install goes to /usr, beside it"
like "$out" "comes$|first in PATH" "...and that the old one comes first in PATH"
grep -q '^install_sandboxd() {$' "$QS" && grep -A2 '^install_sandboxd() {$' "$QS" | grep -q usr_local_note
is "$?" 0 "install_sandboxd says so before it installs"

echo 4242 >"$T/pid"
out=$(QUICKSTART_PIDFILE=$T/pid qs closing_note)
like "$out" "Log:  /var/log/sandboxd.log" "the closing note says where the log of the daemon it started is"
like "$out" "Stop: kill 4242 " "...and how to stop it (its pid)"
like "$out" "Start it again: \(cd / && nohup sandboxd --listen " "...and how to start it again without systemd"
echo already >"$T/pid"
out=$(QUICKSTART_PIDFILE=$T/pid qs closing_note)
like "$out" "Stop: kill .*running before this script" "a daemon that was running already: how to stop it, said as not this script's"
# The pids it names are the listener's only: a process whose command line is the daemon's but
# which holds no listening socket there (a session's helper) is not one, nor is a client.
python3 - "$T/l.sock" "$T/fake-helper" >/dev/null 2>&1 <<'PY' &
import os, socket, sys, time
lst = socket.socket(socket.AF_UNIX)
lst.bind(sys.argv[1])
lst.listen(4)
if os.fork() == 0:
    lst.close()
    c = socket.socket(socket.AF_UNIX)
    c.connect(sys.argv[1])
    open(sys.argv[2], "w").write(str(os.getpid()))
    time.sleep(30)
    os._exit(0)
conn, _ = lst.accept()
time.sleep(30)
PY
listener=$!
for _ in $(seq 50); do [ -s "$T/fake-helper" ] && break; sleep 0.1; done
is "$(qs listener_pids "$T/l.sock")" "$listener" "listener_pids names the process listening on the socket, not a client of it"
kill "$listener" "$(cat "$T/fake-helper")" 2>/dev/null
grep -q '^closing_note$' "$QS"
is "$?" 0 "the script ends with the closing note, whatever the demos did"
