#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Socket activation: sandboxd started by systemd-socket-activate takes its listening socket from
# sd_listen_fds() (no --listen), answers on it, runs a command, and stops cleanly on SIGTERM.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

command -v systemd-socket-activate >/dev/null || skip_all "systemd-socket-activate is not installed"

start_daemon_activated || exit 0
ok "socket-activated sandboxd answers health on $SOCK"

exe=$(readlink "/proc/$DAEMON_PID/exe")
is "$exe" "$(readlink -f "$SANDBOXD")" "the activator exec'ed sandboxd itself (same pid)"
check "sandboxd's command line has no --listen" eval '! tr "\0" "\n" <"/proc/$DAEMON_PID/cmdline" | grep -qx -- --listen'
like "$(readlink "/proc/$DAEMON_PID/fd/3")" '^socket:' "fd 3 (SD_LISTEN_FDS_START) of sandboxd is the inherited socket"

run_py "activated daemon" 60 <<'EOF'
import os
from client import Conn, check, is_, wait_for, cgroup_dirs
sock, cg = os.environ["SOCK"], os.environ["CG"]
c = Conn(sock)
h = c.call({"op": "hello"})
is_((h.get("ok"), h.get("protocol")), (True, 1), "hello through the activation socket")
is_((h.get("capabilities") or {}).get("cgroup_root"), cg, "it uses the --cgroup-root it was given")
is_((h.get("peer") or {}).get("pid"), os.getpid(), "SO_PEERCRED works on the inherited socket")
r = c.call({"op": "run", "best_effort": True,
            "argv": ["sh", "-c", "echo activated; [ -e '%s' ] && echo visible || echo hidden" % sock]}, 60)
is_((r.get("ok"), r.get("exit_code"), r.get("stdout")), (True, 0, "activated\nhidden\n"),
    "a throwaway run works, and the control socket is not visible inside")
others = [Conn(sock) for _ in range(5)]
is_([o.call({"op": "health"}).get("status") for o in others], ["ok"] * 5, "several connections on the inherited socket")
for o in others:
    o.close()
check(wait_for(lambda: not cgroup_dirs(cg + "/sandboxes"), 5), "the throwaway sandbox's cgroup is gone")
c.close()
EOF

stop_daemon
check "the activation socket file is still there after sandboxd stopped (it belongs to the activator)" [ -S "$SOCK" ]

# Both at once: an inherited socket and --listen.
rm -f "$SOCK"
systemd-socket-activate -l "$SOCK" \
        "$SANDBOXD" --listen "$T/second.sock" --state-dir "$T/state" --cgroup-root "$CG" >>"$T/daemon.log" 2>&1 &
DAEMON_PID=$!
export DAEMON_PID
if _wait_ready; then
        ok "sandboxd with an activation socket and --listen starts"
        is "$(jget "$(SOCK=$T/second.sock rpc '{"id":1,"op":"health"}')" .status)" ok "--listen socket answers too"
        is "$(jget "$(rpc '{"id":1,"op":"hello"}')" .protocol)" 1 "the activation socket answers"
        stop_daemon
else
        _daemon_failed_to_start "sandboxd with an activation socket and --listen starts"
fi
