#!/bin/bash
# A restart of sandboxd is invisible to the sandboxes (issue 22, "Done means"; docs/design/
# restarts.md section 8), under a real systemd 252: with a background HTTP server in a sandbox, an
# open session printing a counter every 10 ms and a run printing for 20 s, each of `systemctl
# restart sandboxd`, `kill -9` of the daemon (systemd restarts it), `systemctl stop sandboxd;
# systemctl start sandboxd` (systemd drops the fd store at the stop: the holder, `sandboxd
# --hold` in a scope of its own, keeps the fds until the start) and, when DEB_DIR and
# DEB_UPGRADE_DIR name packages built by scripts/build-deb.sh (`make check-vm-deb` builds none
# itself: .ci/run does not run it yet), `dpkg -i` of a rebuilt package over the installed
# one (DEB_DIR's is installed first and runs; DEB_UPGRADE_DIR's, a higher version, is the
# upgrade, through the maintainer scripts) leave all three going: the server answers with the same pid inside, the session reattaches with from_seq
# and its counter has no gap and no duplicate, and the run's client, back with run.attach, gets
# the rest of the stream and a final reply whose head, tail and byte counts are those of what the
# program wrote (it writes the same to a file, compared byte for byte). In the end the fd store
# holds what it held before. Only this test's sandbox is made and destroyed.
DEB_DIR_SET=${DEB_DIR:-}
source "$(dirname "$0")/lib.sh"
# DEB_DIR here is what the caller set, not lib.sh's default: without it, no dpkg part.
exec python3 - "$here/.." "${DEB_DIR_SET:-}" "${DEB_UPGRADE_DIR:-}" <<'PY'
import glob, os, re, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from client import Conn, ClientError
from ptyclient import attach, data_of, open_session


def debs_in(d):
    return sorted(glob.glob(d + "/libsandbox0_*.deb") + glob.glob(d + "/sandboxd_*.deb")) if d else []


DEBS0, DEBS = debs_in(sys.argv[2]), debs_in(sys.argv[3])
WANT_DEBS = bool(sys.argv[2] or sys.argv[3])
SOCK = "/run/sandboxd/sandboxd.sock"
n = 0


def ok(cond, desc, *diag):
    global n
    n += 1
    print(("ok %d - %s" if cond else "not ok %d - %s") % (n, desc))
    if not cond:
        for d in diag:
            for line in str(d)[:3000].splitlines() or [""]:
                print("# " + line)
    sys.stdout.flush()
    return bool(cond)


def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=1200)


def mainpid():
    return sh("systemctl show -p MainPID --value sandboxd.service").stdout.strip()


def store():
    return sh("systemctl show -p NFileDescriptorStore --value sandboxd.service").stdout.strip()


def call(req, timeout=60):
    c = Conn(SOCK, timeout)
    try:
        return c.call(req, timeout)
    finally:
        c.close()


def health():
    try:
        return call({"op": "health"}, 5).get("ok")
    except (OSError, ClientError, ValueError):
        return False


def wait_up(old):
    end = time.monotonic() + 120
    while time.monotonic() < end:
        # health first: its connection starts the service (socket activation)
        if health() and mainpid() not in (old, "0", ""):
            return True
        time.sleep(0.2)
    return False


def run_sh(sbx, cmd, **extra):
    return call(dict(extra, op="run", sandbox=sbx, argv=["sh", "-c", cmd]))


def head_tail(b, cap):
    if len(b) <= cap:
        return b
    h, t = cap - cap // 2, cap // 2
    return b[:h] + b"\n[... %d bytes dropped ...]\n" % (len(b) - h - t) + b[len(b) - t:]


def counters(text):
    return [int(x) for x in re.findall(r"^n=(\d+)\r?$", text, re.M)]


def version(deb):
    return sh("dpkg-deb -f %s Version" % deb).stdout.strip()


def installed(pkg):
    return sh("dpkg-query -W -f '${Version}' %s" % pkg).stdout.strip()


upgrade = False
if WANT_DEBS:
    upgrade = ok(len(DEBS0) == 2 and len(DEBS) == 2 and
                 subprocess.run(["dpkg", "--compare-versions", version(DEBS[1]), "gt", version(DEBS0[1])]).returncode == 0,
                 "DEB_DIR=%s and DEB_UPGRADE_DIR=%s hold libsandbox0 and sandboxd, the second a higher version (%s over %s)" %
                 (sys.argv[2], sys.argv[3], DEBS and version(DEBS[1]), DEBS0 and version(DEBS0[1])))
fresh = not os.path.exists("/var/lib/sandboxd") and not installed("sandboxd")
if upgrade:
    # As t-deb.sh: no man-db re-index over 9p, no container's policy-rc.d forbidding restarts.
    sh("rm -f /var/lib/man-db/auto-update /usr/sbin/policy-rc.d")
    r = sh("dpkg -i %s" % " ".join(DEBS0))
    ok(r.returncode == 0, "dpkg -i of DEB_DIR's packages (%s), the version to upgrade from" % version(DEBS0[1]), r.stdout[-500:], r.stderr[-500:])
    old = mainpid()
    if old not in ("0", "") and os.readlink("/proc/%s/exe" % old) != "/usr/sbin/sandboxd":
        sh("systemctl restart sandboxd.service")  # the staged daemon gives way to the packaged one
    else:
        old = "x"
    ok(wait_up(old) and os.readlink("/proc/%s/exe" % mainpid()) == "/usr/sbin/sandboxd" and installed("sandboxd") == version(DEBS0[1]),
       "the packaged daemon %s runs" % installed("sandboxd"))
ok(wait_up("x"), "the daemon answers")
store0 = store()
r = call({"op": "create", "name": "restart-all-%d" % os.getpid()})
sbx = (r.get("sandbox") or {}).get("id")
ok(r.get("ok"), "a sandbox %s" % sbx, r)
run_sh(sbx, "cd /work && echo hello > index.txt && (setsid python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 & echo $! > /work/srv.pid)")
GET = ('for i in $(seq 100); do python3 -c "import urllib.request; print(urllib.request.urlopen('
       '\\"http://127.0.0.1:8000/index.txt\\", timeout=5).read().decode(), end=\\"\\")" 2>/dev/null && exit 0; sleep 0.1; done; exit 1')
ok(run_sh(sbx, GET).get("stdout", "").strip() == "hello", "a background HTTP server answers in it")
srv = run_sh(sbx, "cat /work/srv.pid").get("stdout", "").strip()
SAME = 'test "$(tr "\\0" " " < /proc/%s/cmdline)" = "python3 -m http.server 8000 --bind 127.0.0.1 " && echo same' % srv

COUNTER = "import time\ni = 0\nwhile True:\n    i += 1\n    print('n=%d' % i, flush=True)\n    time.sleep(0.01)\n"
sr, sess = open_session(Conn(SOCK, 60), sbx, argv=["python3", "-c", COUNTER])
ok(sr.get("ok") and sess.wait_for("n=30\r\n", 60), "an open session prints a counter", sr)
sid, seq, seen = sess.id, sess.next_seq, sess.text()

CAP = 4096
PROG = r'''
import os, sys, time
f = open(sys.argv[1], "w")
i = 0
while i < 200 or not os.path.exists(sys.argv[1] + ".stop"):
    s = "line %05d %s\n" % (i, "y" * 30)
    sys.stdout.write(s); sys.stdout.flush(); f.write(s); f.flush()
    time.sleep(0.1)
    i += 1
'''


def start_run(k):
    c = Conn(SOCK, 60)
    c.send({"id": 1, "op": "run", "sandbox": sbx, "stream": True, "output_bytes": CAP, "timeout_s": 120,
            "argv": ["python3", "-c", PROG, "/work/run-%d.txt" % k]})
    m = c.recv_json(60) or {}
    have = {"stdout": 0, "stderr": 0}
    end = time.monotonic() + 3
    while time.monotonic() < end:
        e = c.recv_json(10)
        if e and e.get("event") in ("stdout", "stderr"):
            have[e["event"]] += len(data_of(e))
        elif e and "event" not in e:
            print("# the run ended before the restart: %s" % str(e)[:1500])
    return m.get("run_id"), have, c  # c stays open: a run whose first client goes is killed


def finish_run(how, run_id, have, k):
    # It prints for 20 s at least, and on until told to stop: past a restart however long it takes.
    run_sh(sbx, "touch /work/run-%d.txt.stop" % k)
    c = Conn(SOCK, 60)
    c.send({"id": 2, "op": "run.attach", "run_id": run_id, "from": dict(have)})
    gaps, final = [], None
    try:
        while True:
            m = c.recv_json(60)
            if m is None or "event" not in m:
                final = m
                break
            ev = m["event"]
            if ev in ("stdout", "stderr"):
                if m.get("offset") != have[ev]:
                    gaps.append((ev, have[ev], m.get("offset")))
                have[ev] = m["offset"] + len(data_of(m))
            elif ev == "dropped":
                have[m["stream"]] = m["offset"] + m["bytes"]
    except ClientError as e:
        final = {"client_error": str(e)}
    c.close()
    final = final or {}
    if not final.get("ok"):
        r = call({"op": "inspect", "sandbox": sbx})
        print("# interrupted_runs: %s" % [x for x in (r.get("sandbox") or {}).get("interrupted_runs", []) if x.get("id") == run_id])
        for line in sh("journalctl -u sandboxd.service --no-pager -o short-monotonic | grep -i -e run- -e store -e capture | tail -n 20").stdout.splitlines():
            print("# " + line[:300])
    ok(final.get("ok") and final.get("exit_code") == 0 and final.get("reason") == "exited",
       "after %s, the run's client, back with run.attach, gets its final reply: exit 0" % how, final)
    ok(not gaps, "after %s, the rest of its stream follows on from what the client had" % how, gaps[:3])
    out = run_sh(sbx, "cat /work/run-%d.txt" % k, output_bytes=1 << 20).get("stdout", "").encode()
    ok(len(out) >= 200 * 42 and len(out) % 42 == 0 and final.get("stdout_bytes") == len(out),
       "after %s, stdout_bytes counts all it wrote (%s of %d)" % (how, final.get("stdout_bytes"), len(out)))
    ok(final.get("stdout", "").encode() == head_tail(out, CAP) and final.get("stdout_truncated") is True,
       "after %s, the final reply's stdout is the whole head and tail of what it wrote" % how)


def check_all(how):
    global seq, seen
    r = call({"op": "inspect", "sandbox": sbx})
    ok((r.get("sandbox") or {}).get("restored_processes") == "kept", "after %s, the sandbox is back with its processes" % how, r)
    ok(run_sh(sbx, GET).get("stdout", "").strip() == "hello", "after %s, the background server answers" % how)
    ok(run_sh(sbx, SAME).get("stdout", "").strip() == "same", "after %s, it is the same process, pid %s inside" % (how, srv))
    ar, s = attach(Conn(SOCK, 60), sid, from_seq=seq)
    ok(ar.get("ok") and ar.get("first_seq") == seq and ar.get("dropped") == 0,
       "after %s, the session reattaches from_seq %d, nothing dropped" % (how, seq), ar)
    last = counters(seen)[-1] if counters(seen) else 0
    ok(s is not None and s.wait_for("n=%d\r\n" % (last + 60), 60), "after %s, its counter goes on" % how)
    whole = seen + (s.text() if s else "")
    ns = counters(whole)
    ok(ns and ns == list(range(ns[0], ns[0] + len(ns))), "after %s, the counter has no gap and no duplicate (%d..%d)" %
       (how, ns[0] if ns else 0, ns[-1] if ns else 0), [x for i, x in enumerate(ns[1:]) if x != ns[i] + 1][:5])
    if s:
        seq, seen = s.next_seq, whole
        s.c.close()  # detached: an attached client that does not read would hold the program back


def restart(how):
    old = mainpid()
    if how == "systemctl restart":
        r = sh("systemctl restart sandboxd.service")
    elif how == "kill -9":
        r = sh("kill -9 %s" % old)
    elif how == "systemctl stop; systemctl start":
        r = sh("systemctl stop sandboxd.service")
        held = sh("systemctl list-units --plain --no-legend 'sandboxd-hold-*.scope'").stdout
        ok(r.returncode == 0 and re.search(r"^sandboxd-hold-\d+\.scope +loaded active running", held, re.M),
           "systemctl stop: a holder runs in a scope of its own", held, r.stderr[-500:])
        ok(store() == "0", "systemctl stop: systemd dropped the fd store (%s fds)" % store())
        ok(os.path.exists("/run/sandboxd/hold.sock"), "the holder listens on /run/sandboxd/hold.sock")
        time.sleep(2)
        r = sh("systemctl start sandboxd.service")
    else:
        r = sh("dpkg -i %s" % " ".join(DEBS))
        how = "dpkg -i of the rebuilt packages (%s over %s)" % (version(DEBS[1]), version(DEBS0[1]))
    ok(r.returncode == 0, "%s" % how, r.stdout[-500:], r.stderr[-500:])
    if how.startswith("dpkg"):
        ok(installed("sandboxd") == version(DEBS[1]) and installed("libsandbox0") == version(DEBS[1]),
           "the upgrade installed sandboxd and libsandbox0 %s" % version(DEBS[1]))
    up = ok(wait_up(old), "after %s, a new daemon answers" % how)
    if how == "systemctl stop; systemctl start":
        end = time.monotonic() + 20
        while sh("systemctl list-units --plain --no-legend 'sandboxd-hold-*.scope'").stdout.strip() and time.monotonic() < end:
            time.sleep(0.5)
        ok(not sh("systemctl list-units --plain --no-legend 'sandboxd-hold-*.scope'").stdout.strip() and
           not os.path.exists("/run/sandboxd/hold.sock"), "after %s, the holder gave its fds and is gone, its scope too" % how)
        j = sh("journalctl -u sandboxd.service --no-pager | grep -e 'back from the holder' | tail -n 1").stdout
        ok(re.search(r"took [1-9]\d* fd\(s\) back from the holder", j), "the new daemon took the fds back from the holder", j)
    return up


for k, how in enumerate(("systemctl restart", "kill -9", "systemctl stop; systemctl start") + (("dpkg -i",) if upgrade else ())):
    run_id, have, first = start_run(k)
    ok(run_id and have["stdout"] > 0, "a run prints for 20 s (%s; %d bytes so far)" % (run_id, have["stdout"]))
    if not restart(how):
        break
    first.close()  # its connection ended with the old daemon
    check_all(how)
    finish_run(how, run_id, have, k)

r = call({"op": "pty.close", "session": sid}, 60)
ok(r.get("ok"), "the session closes", r)
r = call({"op": "destroy", "sandbox": sbx}, 60)
ok(r.get("destroyed"), "destroy", r)
end = time.monotonic() + 20
while store() != store0 and time.monotonic() < end:
    time.sleep(0.5)
ok(store() == store0, "the fd store holds as many fds as before (%s, was %s)" % (store(), store0))
if upgrade and fresh:
    # A guest with no sandboxd before (make check-vm-deb) is left as found, for t-restart-deb.sh.
    r = sh("dpkg --purge sandboxd libsandbox0")
    ok(r.returncode == 0 and not installed("sandboxd") and not os.path.exists("/var/lib/sandboxd"),
       "dpkg --purge sandboxd libsandbox0: the guest is as the test found it", r.stdout[-500:], r.stderr[-500:])
print("1..%d" % n)
PY
