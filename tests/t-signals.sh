#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A command gets every signal at its default, whatever the daemon was started with: signals
# ignored where sandboxd was started (SIGINT and SIGQUIT by a shell's `&`, 32 and 33 by some
# supervisors) survive execve, and a C library's sigaction() cannot even see 32 to 34 (glibc
# and musl keep them). Here the daemon starts with SIGINT, SIGQUIT, 32, 33, 34 and 40 ignored;
# each, sent by a run to itself, must end it as signaled, in a sandbox and a throwaway run.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

[ "$(uname -m)" = x86_64 ] || skip_all "the wrapper sets signals to SIG_IGN with x86_64's rt_sigaction number"
mkdir -p "$T"
# The kernel's rt_sigaction (13 on x86_64), which takes every signal: handler SIG_IGN (1), no
# flags, no restorer, empty mask; then the daemon, which inherits the ignored signals.
cat >"$T/ignore-then-exec.py" <<'EOF'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
ign = (ctypes.c_ulong * 4)(1, 0, 0, 0)
for sig in (2, 3, 32, 33, 34, 40):
    if libc.syscall(13, sig, ign, None, 8) != 0:
        sys.exit("rt_sigaction(%d): %s" % (sig, os.strerror(ctypes.get_errno())))
os.execv(sys.argv[1], sys.argv[1:])
EOF
printf '#!/bin/sh\nexec python3 %s %s "$@"\n' "$T/ignore-then-exec.py" "$SANDBOXD" >"$T/sandboxd-ignoring"
chmod 0755 "$T/sandboxd-ignoring"
SANDBOXD=$T/sandboxd-ignoring
start_daemon || exit 0

ign=$(sed -n 's/^SigIgn:\t*//p' "/proc/$(pgrep -P "$DAEMON_PID" -x sandboxd || echo "$DAEMON_PID")/status")
# bits 1, 2, 31, 32, 33, 39: signals 2, 3, 32, 33, 34, 40
check "the daemon runs with SIGINT, SIGQUIT, 32, 33, 34 and 40 ignored (SigIgn $ign)" \
	[ $((0x$ign & 0x8380000006)) = $((0x8380000006)) ]

run_py "signals" 120 <<'EOF'
import os
from client import Conn, is_
c = Conn(os.environ["SOCK"], 60)
r = c.call({"op": "create", "best_effort": True, "name": "sig"})
is_(r.get("ok"), True, "a sandbox")
names = {2: "INT", 3: "QUIT", 32: "32", 33: "33", 34: "RTMIN", 40: "RTMIN+6"}
for sig in (2, 3, 32, 33, 34, 40):
    for where in ({"sandbox": "sig"}, {"best_effort": True}):
        r = c.call(dict(where, op="run", timeout_s=20, command="kill -%d $$; echo survived" % sig))
        is_((r.get("reason"), r.get("signal"), r.get("exit_code"), r.get("stdout")),
            ("signaled", names[sig], 128 + sig, ""),
            "%s: kill -%d $$ ends it (the daemon's ignored signal is the default again)"
            % ("in a sandbox" if "sandbox" in where else "a throwaway run", sig))
c.call({"op": "destroy", "sandbox": "sig"})
c.close()
EOF
stop_daemon
