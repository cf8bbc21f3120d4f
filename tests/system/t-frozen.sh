#!/bin/bash
# A frozen sandbox under the packaged unit (issue 17, section 1): a run and a session sent ~50 ms
# into a snapshot's freeze, many times, while health must answer within 5 s each time and the run
# and the session finish after the thaw with their output; then a run while the sandbox's cgroup
# is frozen by hand. Before the fix the daemon sat in vfork for the first run, for good.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock
name=frozenvm-$$ # a name of this run's own: what a user made is never touched

r=$(call '{"op":"create","name":"'"$name"'","limits":{"memory":"256M","pids":64}}')
[ "$(jqr .ok "$r")" = true ]
ok $? "a sandbox with enforced limits"
scg=$(jqr .sandbox.cgroup "$r")
r=$(SBX_TIMEOUT=250 call '{"op":"run","sandbox":"'"$name"'","timeout_s":240,"command":"mkdir /work/many && cd /work/many && python3 -c \"[open(str(i), \\\"w\\\").write(\\\"x\\\") for i in range(8000)]\""}')
[ "$(jqr .exit_code "$r")" = 0 ]
ok $? "8000 files in its workspace"

py() { # prints TAP from the PASS/FAIL lines of a Python snippet on stdin
	local line
	PYTHONPATH=$here/.. timeout -k 5 "$1" python3 -u - "${@:2}" >py.out 2>py.err
	local rc=$?
	while IFS= read -r line; do
		case $line in
		"PASS "*) ok 0 "${line#PASS }" ;;
		"FAIL "*) ok 1 "${line#FAIL }" ;;
		*) echo "# $line" ;;
		esac
	done <py.out
	ok $rc "the checks ran to the end (status $rc; 124 is a timeout)"
	[ "$rc" = 0 ] || while IFS= read -r line; do echo "# $line"; done < <(tail -n 20 py.err)
}

py 200 "$SANDBOXD_SOCKET" "$name" "$scg" <<'EOF'
import sys, time
from client import Conn, ClientError, check, wait_for
from ptyclient import Session
sock, sbx, scg = sys.argv[1:4]
ROUNDS = 5

def frozen():
    with open(scg + "/cgroup.events") as f:
        return "frozen 1" in f.read()

def call(req, limit):
    try:
        c = Conn(sock, limit)
        r = c.call(req, limit)
        c.close()
        return r
    except (ClientError, OSError) as e:
        return {"client_error": str(e)}

raced = 0
failures, slow, freezes = [], [], []
for i in range(ROUNDS):
    a = Conn(sock, 120)
    a.send({"id": "snap", "op": "snapshot", "sandbox": sbx})
    wait_for(frozen, 10, 0.002)
    time.sleep(0.05)
    b = Conn(sock, 120)
    b.send({"id": "run", "op": "run", "sandbox": sbx, "command": "echo round-%d; ls /work/many | wc -l" % i})
    p = Conn(sock, 120)
    p.send({"id": "open", "op": "pty.open", "sandbox": sbx, "pty": False, "argv": ["echo", "session-%d" % i]})
    sent_frozen = frozen()
    t0 = time.monotonic()
    h = call({"op": "health"}, 5)
    if not h.get("ok"):
        slow.append((i, time.monotonic() - t0, h))
        break
    s = a.final("snap", 120)
    freezes.append(s.get("frozen_s"))
    r = b.final("run", 60)
    if sent_frozen and s.get("ok"):
        raced += 1
    if (r.get("ok"), r.get("exit_code"), r.get("stdout")) != (True, 0, "round-%d\n8000\n" % i):
        failures.append((i, "run", r))
    o = p.final("open", 60)
    if not o.get("ok"):
        failures.append((i, "pty.open", o))
    else:
        ss = Session(p, o, "open")
        if not ss.wait_for("session-%d" % i, 30) or (ss.wait_exit(30) or {}).get("exit_code") != 0:
            failures.append((i, "session", ss.out, ss.exit))
    if s.get("ok"):
        call({"op": "snapshot.delete", "sandbox": sbx, "snapshot": s["snapshot"]["id"]}, 30)
    for c in (a, b, p):
        c.close()
print("freezes (frozen_s): %s" % freezes)
check(not slow, "health answered within 5 s in every round (a run and a session sent during the freeze)", slow)
check(raced >= ROUNDS // 2, "the run and the session were sent while the snapshot froze the sandbox in %d of %d rounds" %
      (raced, ROUNDS))
check(not failures and not slow, "every run and session finished after the thaw, exit 0 and their output right", *failures)

# Frozen by hand: the run waits for the thaw, health is answered meanwhile.
with open(scg + "/cgroup.freeze", "w") as f:
    f.write("1")
try:
    check(wait_for(frozen, 10, 0.01), "the sandbox's cgroup frozen by hand")
    b = Conn(sock, 60)
    b.send({"id": "run", "op": "run", "sandbox": sbx, "argv": ["echo", "by-hand"]})
    t0 = time.monotonic()
    h = call({"op": "health"}, 5)
    check(h.get("ok"), "health answers within 5 s while the run waits (%.2f s)" % (time.monotonic() - t0), h)
    time.sleep(1)
    check(frozen(), "the sandbox is still frozen")
finally:
    with open(scg + "/cgroup.freeze", "w") as f:
        f.write("0")
try:
    r = b.final("run", 60)
except ClientError as e:
    r = {"client_error": str(e)}
check(r.get("ok") and r.get("stdout") == "by-hand\n", "after the thaw the run finishes with its output", r)
EOF

[ "$(sed -n 's/^frozen //p' "$scg/cgroup.events")" = 0 ]
ok $? "the sandbox is thawed at the end"
systemctl is-active --quiet sandboxd.service
ok $? "sandboxd.service is still active"
r=$(call '{"op":"destroy","sandbox":"'"$name"'"}')
[ "$(jqr .destroyed "$r")" = true ]
ok $? "destroy"
done_testing
