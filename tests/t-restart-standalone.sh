#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Sandboxes outlive the daemon (issue 22; docs/protocol.md "Restarts"). Without systemd and without
# a holder (hold_timeout = 0; tests/t-restart-hold.sh has the holder): after a
# SIGTERM and after a SIGKILL, a background server in a sandbox goes on, the next daemon takes the
# sandbox back with the same init and the same processes (the server answers, the same pid
# inside), and the runs the daemon's death cut short are reported lost, and what is left of
# them is killed (their timeout and output cap no longer held). With an fd store (a
# stand-in for systemd's, tests/fake-fdstore.py): the init's pidfd comes back from it, by name,
# checked; what is not ours, or not what its name says, is closed and removed from the store.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

KEEP_SANDBOXES=1
echo "hold_timeout = 0" >"$T/nohold.conf"
start_daemon --config "$T/nohold.conf" || exit 0
r=$(rpc '{"op":"create","best_effort":true,"name":"keep","user":"root"}')
id=$(jget "$r" .sandbox.id)
like "$id" '^sbx-' "a sandbox 'keep'"
r=$(rpc '{"op":"run","sandbox":"keep","command":"cd /work && echo hello > index.txt && (setsid python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 & echo $! > /work/srv.pid)"}')
is "$(jget "$r" .exit_code)" 0 "a background HTTP server started in it"
GET='import urllib.request, time
for i in range(100):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:8000/index.txt", timeout=5).read().decode(), end=""); break
    except OSError: time.sleep(0.1)'
get_json=$(jq -cn --arg c "$GET" '{"op":"run","sandbox":"keep","argv":["python3","-c",$c]}')
is "$(jget "$(rpc "$get_json")" .stdout)" hello "the server answers inside the sandbox"
srv_pid=$(jget "$(rpc '{"op":"run","sandbox":"keep","argv":["cat","/work/srv.pid"]}')" .stdout)
init=$(cg_procs "$CG/sandboxes/$id/init")
like "$init" '^[0-9]+$' "the sandbox's init is pid $init on the host"
srv_cmd='test "$(tr "\0" " " < /proc/'"$srv_pid"'/cmdline)" = "python3 -m http.server 8000 --bind 127.0.0.1 " && echo same'

# A run in flight when the daemon goes: the client sees its connection end without a final reply.
inflight() { # SIGNAL
        run_py "a run in flight at SIG$1" 60 "$1" <<'PY'
import os, signal, sys
from client import Conn, check
c = Conn(os.environ["SOCK"], 30)
c.send({"id": 1, "op": "run", "sandbox": "keep", "argv": ["sh", "-c", "echo started; exec sleep 1000"]})
m = c.recv_json()
check(m.get("event") == "started", "the run started", m)
os.kill(int(os.environ["DAEMON_PID"]), getattr(signal, "SIG" + sys.argv[1]))
try:
    while True:
        m = c.recv_json()
        if "event" not in m:
            break
except Exception:
    m = None
check(m is None, "its connection ended with the daemon, without a final reply", m)
PY
}
alive() { kill -0 "$1" 2>/dev/null && [ "$(awk '/^State:/ { print $2 }' "/proc/$1/status" 2>/dev/null)" != Z ]; }

after() { # HOW: the daemon was stopped so; checks the sandbox came back whole
        local how=$1 r
        check "after $how, the init still runs (pid $init)" alive "$init"
        check "after $how, the sandbox's cgroup is still there" [ -d "$CG/sandboxes/$id/init" ]
        start_daemon --config "$T/nohold.conf" || return 1
        r=$(rpc '{"op":"inspect","sandbox":"keep"}')
        is "$(jget "$r" '.sandbox.state + " " + .sandbox.restored_processes + " " + .sandbox.restored_init')" \
                "ready kept cgroup" "after $how, the next daemon takes the sandbox back with its processes (init found in its cgroup)"
        is "$(cg_procs "$CG/sandboxes/$id/init")" "$init" "after $how, its init is the same process"
        is "$(jget "$(rpc "$get_json")" .stdout)" hello "after $how, the background server answers"
        r=$(rpc "$(jq -cn --arg c "$srv_cmd" '{"op":"run","sandbox":"keep","argv":["sh","-c",$c]}')")
        is "$(jget "$r" .stdout)" same "after $how, it is the same process, pid $srv_pid inside"
        r=$(rpc '{"op":"inspect","sandbox":"keep"}')
        is "$(jget "$r" '[.sandbox.interrupted_runs[] | select(.argv[2] == "echo started; exec sleep 1000")] | length')" "$2" \
                "after $how, the run cut short is reported lost (interrupted_runs: $2 so far)"
        check "after $how, what the lost run left running was killed (it had lost its timeout and its reader)" \
                wait_until 5 _no_sleep
        is "$(jget "$(rpc '{"op":"run","sandbox":"keep","command":"echo new"}')" .stdout)" new "after $how, new runs work"
}
_no_sleep() { [ "$(jget "$(rpc '{"op":"run","sandbox":"keep","command":"pgrep -cx sleep"}')" .stdout)" = 0 ]; }

inflight TERM
wait_until 15 _daemon_gone
wait "$DAEMON_PID"
is "$?" 0 "SIGTERM: the daemon exits with status 0"
DAEMON_PID=
after SIGTERM 1

inflight KILL
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
after SIGKILL 2

# With stop_sandboxes = 1 a stop kills them, and the next daemon starts the sandbox anew.
r=$(rpc '{"op":"destroy","sandbox":"keep"}')
is "$(jget "$r" .destroyed)" true "destroy ends it all"
check "the init is gone" wait_until 5 eval '! alive '"$init"
is "$(cg_procs | wc -l)" 0 "no process is left in any sandbox"
stop_daemon

# ---- an fd store: the init's pidfd comes back from it ----------------------------------------
start_under_fake_fdstore
check "a daemon under a service manager with an fd store answers" daemon_up
r=$(rpc '{"op":"create","best_effort":true,"name":"st"}')
sid=$(jget "$r" .sandbox.id)
_stored() { grep -qx "s.$sid.init anon_inode:\[pidfd\]" "$T/store"; }
check "the init's pidfd is in the store as s.$sid.init" wait_until 5 _stored
sinit=$(cg_procs "$CG/sandboxes/$sid/init")
# What the store must not keep: a name of no sandbox, and one of ours that is no pidfd.
python3 - "$T/notify" "$sid" <<'PY'
import array, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
fd = os.open("/dev/null", os.O_RDONLY)
for name in ("s.sbx-000000000000.init", "s.%s.ring" % sys.argv[2]):
    s.sendmsg([("FDSTORE=1\nFDNAME=%s\nFDPOLL=0" % name).encode()],
               [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]).tobytes())], 0, sys.argv[1])
PY
_three() { [ "$(wc -l < "$T/store")" = 3 ]; }
check "two stray fds were put in the store beside it" wait_until 5 _three
old=$DAEMON_PID
kill -KILL "$DAEMON_PID"
kill -USR1 "$MGR"
check "after SIGKILL, the manager starts the next daemon with the stored fds" daemon_up "$old"
r=$(rpc '{"op":"inspect","sandbox":"st"}')
is "$(jget "$r" '.sandbox.restored_processes + " " + .sandbox.restored_init')" "kept fd store" \
        "the next daemon took the init back from the fd store"
is "$(cg_procs "$CG/sandboxes/$sid/init")" "$sinit" "the same init"
_only_init() { [ "$(cat "$T/store")" = "s.$sid.init anon_inode:[pidfd]" ]; }
check "the stray fds were closed and removed from the store; the pidfd stays" wait_until 5 _only_init
like "$(cat "$T/daemon.log")" "closed 2 fd\\(s\\) of the fd store that no sandbox claims" "the log says so"
# A stored fd under the init's name that is no pidfd: not trusted; the init is found in its cgroup.
python3 - "$T/notify" "$sid" <<'PY'
import array, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
name = "s.%s.init" % sys.argv[2]
s.sendto(("FDSTOREREMOVE=1\nFDNAME=%s" % name).encode(), sys.argv[1])
fd = os.open("/dev/null", os.O_RDONLY)
s.sendmsg([("FDSTORE=1\nFDNAME=%s\nFDPOLL=0" % name).encode()],
           [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]).tobytes())], 0, sys.argv[1])
PY
_null() { grep -qx "s.$sid.init /dev/null" "$T/store"; }
check "the init's name now stores /dev/null" wait_until 5 _null
old=$DAEMON_PID
kill -KILL "$DAEMON_PID"
kill -USR1 "$MGR"
check "the next daemon starts" daemon_up "$old"
r=$(rpc '{"op":"inspect","sandbox":"st"}')
is "$(jget "$r" '.sandbox.restored_processes + " " + .sandbox.restored_init')" "kept cgroup" \
        "a stored fd that is not a pidfd is not taken for the init: it is found in its cgroup"
check "the store holds the real pidfd again, and only it" wait_until 5 _only_init
is "$(cg_procs "$CG/sandboxes/$sid/init")" "$sinit" "the same init still"
r=$(rpc '{"op":"destroy","sandbox":"st"}')
is "$(jget "$r" .destroyed)" true "destroy"
_empty() { [ ! -s "$T/store" ]; }
check "its pidfd left the store with it" wait_until 5 _empty
# The daemon is the manager's child, not ours: stopped by hand, checked as stop_daemon would.
kill -TERM "$DAEMON_PID"
check "the daemon stops on SIGTERM" wait_until 15 _daemon_gone
DAEMON_PID=
kill -TERM "$MGR"
wait "$MGR"
is "$(find "$CG/sandboxes" -mindepth 1 -type d | wc -l)" 0 "no sandbox cgroup is left"
