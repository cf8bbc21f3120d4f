#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Streaming runs ("stream": true): output arrives as events while the program runs, in order,
# whole (nothing dropped, UTF-8 kept as text across reads), and a client that reads slowly makes
# the program wait instead of the daemon buffer without bound.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0

run_py "streaming" 120 <<'PYEOF'
import os, time
from client import Conn, check, is_
sock, pid = os.environ["SOCK"], int(os.environ["DAEMON_PID"])
def rss_kb():
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
c = Conn(sock, 60)

def stream(req, on_event=None):
    req = dict(req, op="run", best_effort=True, stream=True, id="s")
    c.send(req)
    events, t0 = [], time.monotonic()
    while True:
        m = c.recv_json(60)
        if m is None or "event" not in m:
            return events, m
        events.append((time.monotonic() - t0, m))
        if on_event:
            on_event(m)

ev, final = stream({"command": "echo one; sleep 2; echo two >&2; printf '\\303'; sleep 0.2; printf '\\251!\\n'"})
kinds = [m["event"] for _, m in ev]
is_(kinds[0], "started", "the started event comes first")
out = [(t, m) for t, m in ev if m["event"] in ("stdout", "stderr")]
is_([m["event"] for _, m in out], ["stdout", "stderr", "stdout"], "stdout and stderr events in the order written")
is_([m["seq"] for _, m in out], list(range(len(out))), "sequence numbers count up from 0 across both streams")
check(out and out[0][0] < 1.5, "the first line arrived while the program still ran (after %.2f s)" % (out[0][0] if out else -1))
is_(out[-1][1].get("data"), "\u00e9!\n", "a character split between two writes arrives whole, as text")
is_((final.get("ok"), final.get("exit_code"), final.get("stdout"), final.get("stderr")),
    (True, 0, "one\n\u00e9!\n", "two\n"), "then the usual final result")

# Whole output through events, even past output_bytes (which caps only the final result).
ev, final = stream({"command": "head -c 3000000 /dev/urandom | base64 -w 76", "output_bytes": 1000})
data = "".join(m.get("data", "") for _, m in ev if m["event"] == "stdout")
is_(len(data), final.get("stdout_bytes"), "every byte arrived as events (%d)" % len(data))
is_(final.get("stdout_truncated"), True, "while the final result keeps only head and tail")

# A slow reader: 200 MB written while the client does not read for 3 s.
base = rss_kb()
c.send({"op": "run", "best_effort": True, "stream": True, "id": "flood", "output_bytes": 1000,
        "command": "head -c 200000000 /dev/zero | tr '\\0' a; echo done >&2"})
time.sleep(3)
held = rss_kb()
check(held - base < 16384, "the daemon's RSS grew by %d kB while the client did not read (bound: 16 MiB)" % (held - base))
total, final = 0, None
while True:
    m = c.recv_json(120)
    if m is None or "event" not in m:
        final = m
        break
    if m["event"] == "stdout":
        total += len(m.get("data", ""))
is_(total, 200000000, "then all 200 MB arrived")
is_((final or {}).get("stderr"), "done\n", "and the program finished normally: it waited, nothing was lost")
PYEOF

out=$(ctl run --stream --best-effort -- sh -c 'echo a; echo b >&2; exit 3' 2>"$T/err")
is "$?:$out:$(cat "$T/err")" "3:a:b" "sandboxctl run --stream passes output and exit status through"
stop_daemon
