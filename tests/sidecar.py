# SPDX-License-Identifier: LGPL-2.1-or-later
"""python3 -m sandboxd.sidecar against a real daemon ($SOCK), run by t-sidecar.sh: DeepTutor's
runner contract (the requests its client sends, captured byte for byte in
tests/fixtures/deeptutor/), the contract's types and defaults, and the refusals that keep a web
page and slow connections out. Prints "PASS desc"/"FAIL desc" lines."""
import glob
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time

from client import check, is_, wait_for

from sandboxd import Client, sidecar

SOCK = os.environ["SOCK"]
WS = os.environ["WS"]
TOP = os.environ["top_srcdir"]
FIXTURES = os.path.join(TOP, "tests", "fixtures", "deeptutor")
hello = Client(SOCK).hello()
ENFORCES = bool(hello.capabilities.get("cgroup", {}).get("memory"))
NO_EXIT = {"stdout": "", "stderr": "", "exit_code": 0, "timed_out": False}

cfg = sidecar.Config(SOCK, best_effort=not ENFORCES, allowed_workdirs=[WS])
sc = sidecar.Sidecar(cfg, "127.0.0.1", 0).start()
PORT = sc.port


def parse(raw):
    """(status, JSON body) of one HTTP answer in raw bytes."""
    head, _, body = raw.partition(b"\r\n\r\n")
    m = re.match(rb"HTTP/1\.1 (\d+) ", head)
    try:
        return (int(m.group(1)) if m else 0), json.loads(body or b"{}")
    except ValueError:
        return (int(m.group(1)) if m else 0), {"raw": body[:200]}


def send_raw(data, port=PORT, timeout=90):
    """Sends bytes as they are; the answer (up to the connection's end or a whole body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    got = b""
    while True:
        head, sep, body = got.partition(b"\r\n\r\n")
        m = re.search(rb"(?i)content-length: (\d+)", head)
        if sep and m and len(body) >= int(m.group(1)):
            break
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    s.close()
    return parse(got)


def post(body, headers=None, port=PORT, host=None):
    data = json.dumps(body).encode()
    h = {"Host": host or f"127.0.0.1:{port}", "Content-Type": "application/json",
         "Content-Length": str(len(data))}
    h.update(headers or {})
    req = "".join(f"{k}: {v}\r\n" for k, v in h.items() if v is not None)
    return send_raw(f"POST /exec HTTP/1.1\r\n{req}\r\n".encode() + data, port)


# ---- DeepTutor's client, byte for byte --------------------------------------------------
# Captured from RunnerSidecarBackend.exec (httpx) pointed at http://127.0.0.1:8900: only the
# Host's port is changed to this sidecar's.
def replay(name):
    with open(os.path.join(FIXTURES, name + ".http"), "rb") as f:
        raw = f.read()
    return send_raw(raw.replace(b"Host: 127.0.0.1:8900\r\n", b"Host: 127.0.0.1:%d\r\n" % PORT))


with open(os.path.join(WS, "data", "in.txt"), "w") as f:
    f.write("from the host\n")
is_(sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(FIXTURES, "*.http"))),
    ["argv", "env", "memory-hog", "mount-readonly", "output", "plain", "timeout",
     "workdir-inside", "workdir-outside"], "the captured requests of DeepTutor's client")
st, b = replay("plain")
is_((st, b["stdout"], b["stderr"], b["exit_code"], b["timed_out"], b["error"]),
    (200, "out\n", "err\n", 3, False, ""),
    "DeepTutor's plain command: a non-zero exit is exit_code 3 and error \"\" (the contract's "
    "string, not null), its argv [] and unknown-to-old-runners members taken")
st, b = replay("argv")
is_((st, b["stdout"], b["error"]), (200, "a b $(id) ; rm -rf /\n", ""),
    "DeepTutor's argv request runs without a shell: its hostile arguments are data")
st, b = replay("timeout")
is_((st, b["exit_code"], b["timed_out"], b["error"], b["stdout"]), (200, 124, True, "", "early\n"),
    "DeepTutor's timeout_s 1: exit_code 124, timed_out, what came before the kill kept")
st, b = replay("output")
want = "a" * 500 + "\n\n... (24,003 chars truncated) ...\n\n" + "a" * 497 + "END"
is_((st, b["stdout"], b["error"]), (200, want, ""),
    "DeepTutor's max_output_chars 1000 over 25,003 characters: head and tail of 500, the "
    "reference's marker with its thousands separator")
st, b = replay("env")
lines = b["stdout"].splitlines()
is_((st, lines, b["error"]),
    (200, ["FOO=bar", "LANG=C.UTF-8", "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
           "PWD=/work"], ""),
    "DeepTutor's env replaces the environment: PATH alone is kept, no HOME added")
st, b = replay("workdir-inside")
is_((st, b["stdout"], b["error"]), (200, f"{WS}/task\nmade-by-sandbox\n", ""),
    "DeepTutor's workdir inside the allowed roots, mounted at its own path (host_path == sandbox_path)")
check(os.path.exists(os.path.join(WS, "task", "made-by-sandbox")),
      "... and what the command wrote there is the host's file")
st, b = replay("workdir-outside")
check(st == 200 and b["stdout"] == "" and b["error"].startswith("workdir '/etc' is outside the shared workspace roots"),
      "DeepTutor's workdir /etc, outside the allowed roots: refused with the reference's error", b)
st, b = replay("mount-readonly")
check(st == 200 and b["stdout"] == "from the host\n" and b["exit_code"] != 0 and "Read-only" in b["stderr"]
      and b["error"] == "" and not os.path.exists(os.path.join(WS, "data", "out.txt")),
      "DeepTutor's read-only mount: the host's file is read, a write is refused", b)
st, b = replay("memory-hog")
check(st == 200 and b["error"] == "" and b["exit_code"] != 0 and "1073741824" not in b["stdout"],
      "DeepTutor's memory hog under memory_mb 64: it does not get its GiB; the command's "
      "failure, not the runner's", b)

# ---- the contract's types, defaults and the runner's own failures ----------------------
st, b = post({"command": "echo $((1+1))", "nonsense": {"x": 1}, "limits": {"gpus": 2}})
is_((st, b["stdout"], b["error"]), (200, "2\n", ""), "unknown members and limits are ignored")
for body, field in (({"command": 5}, "'command'"), ({"command": "true", "argv": "ls"}, "'argv'"),
                    ({"command": "true", "argv": ["ls", 1]}, "'argv'"),
                    ({"command": "true", "workdir": 123}, "'workdir'"),
                    ({"command": "true", "env": ["A=1"]}, "'env'"),
                    ({"command": "true", "mounts": {"a": 1}}, "'mounts'"),
                    ({"command": "true", "mounts": [{"host_path": WS}]}, "'mounts[0].sandbox_path'"),
                    ({"command": "true", "limits": []}, "'limits'"),
                    ({"command": "true", "limits": {"memory_mb": "lots"}}, "'limits.memory_mb'"),
                    ({"command": "true", "limits": {"timeout_s": True}}, "'limits.timeout_s'"),
                    ({}, "'command'")):
    st, b = post(body)
    check(st == 400 and field in b["error"] and b["exit_code"] == 0, f"{json.dumps(body)[:60]}: 400 naming {field}", st, b)
st, b = post({"command": "sleep 2; echo done", "limits": {"timeout_s": 0, "memory_mb": -1, "cpu_seconds": None}})
is_((st, b["stdout"], b["timed_out"]), (200, "done\n", False),
    "limits not positive or null take the defaults (30 s, 512 MB, 30 CPU-seconds), as the reference's")
st, b = post({"command": "x=$(head -c 12000 /dev/zero | tr '\\0' b); echo $x"})
check(st == 200 and b["stdout"].startswith("b" * 5000 + "\n\n... (2,001 chars truncated)") and b["stdout_truncated"],
      "without max_output_chars, 10,000 characters are kept", b["stdout"][4990:5040])
st, b = post({"command": "printf '%.0s\\303\\251' $(seq 3000)", "limits": {"max_output_chars": 100}})
is_((st, b["stdout"]), (200, "é" * 50 + "\n\n... (2,900 chars truncated) ...\n\n" + "é" * 50),
    "max_output_chars counts characters, not bytes (é is two)")
st, b = post({"command": "head -c 3000000 /dev/zero | tr '\\0' a; printf END", "limits": {"max_output_chars": 100}})
is_((st, b["stdout"]), (200, "a" * 50 + "\n\n... (2,999,903 chars truncated) ...\n\n" + "a" * 47 + "END"),
    "output past what sandboxd keeps whole (1 MiB): the characters it dropped are counted too")
st, b = post({"command": "true", "mounts": [{"host_path": "/etc", "sandbox_path": "/srv/etc"}]})
check(st == 200 and b["error"].startswith("mounts[0] ") and "outside the shared workspace roots" in b["error"],
      "a mount whose host_path is outside the allowed roots: refused, naming the entry", b)
st, b = post({"command": "true", "mounts": [{"host_path": WS + "/data", "sandbox_path": WS + "/data"},
                                            {"host_path": WS + "/task", "sandbox_path": "/etc/task"}]})
check(st == 200 and "mounts[1] (host_path " + WS + "/task, sandbox_path /etc/task)" in b["error"]
      and "mounts[1].target" in b["error"], "a mount target sandboxd does not allow: its error names the entry", b)
st, b = post({"argv": ["/nonexistent/prog"], "command": "/nonexistent/prog"})
check(st == 200 and b["exit_code"] == 0 and "could not be started" in b["error"],
      "an argv program that does not exist: the runner's failure, error set", b)
st, b = post({"command": "pwd", "workdir": WS + "/../../etc"})
check(st == 200 and "outside the shared workspace roots" in b["error"],
      "a workdir that leaves the roots through ..: refused", b)

# ---- /health tells the truth ------------------------------------------------------------
st, b = send_raw(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{PORT}\r\n\r\n".encode())
is_((st, b.get("status")), (200, "ok"), "GET /health: 200 when an /exec would run")
down = sidecar.Config(os.path.join(os.environ["T"], "nonexistent.sock"), allowed_workdirs=[WS])
code, b = sidecar.health(down)
check(code == 503 and "unreachable" in b["error"], "sandboxd unreachable: /health 503 saying so", b)
code, b = sidecar.execute({"command": "true"}, down)
check(code == 200 and "unreachable" in b["error"], "... and /exec an error string", b)
if not ENFORCES:
    strict = sidecar.Config(SOCK, best_effort=False, allowed_workdirs=[WS])
    code, b = sidecar.health(strict)
    check(code == 503 and "--best-effort" in b["error"],
          "memory not enforceable here and no --best-effort: /health 503 naming the sidecar's flag", b)
    code, b = sidecar.execute({"command": "true"}, strict)
    check(code == 200 and "--best-effort" in b["error"], "... and /exec's error names the flag too", b)

# ---- what a web page could send ----------------------------------------------------------
MARK = os.path.join(WS, "task", "ran")
run_mark = {"command": "touch ran", "workdir": WS + "/task"}
form = b"command=touch+ran&workdir=" + WS.encode() + b"%2Ftask"
st, b = send_raw(b"POST /exec HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: http://evil.example\r\n"
                 b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n%s"
                 % (PORT, len(form), form))
check(st == 403 and not os.path.exists(MARK), "a cross-site form post: refused (403), nothing ran", st, b)
st, b = post(run_mark, {"Content-Type": "text/plain"})
check(st == 415 and not os.path.exists(MARK), "a text/plain post: refused (415), nothing ran", st, b)
st, b = post(run_mark, {"Content-Type": None})
check(st == 415 and not os.path.exists(MARK), "a post without Content-Type: refused (415)", st, b)
st, b = post(run_mark, host=f"rebound.evil.example:{PORT}")
check(st == 403 and "Host" in b["error"] and not os.path.exists(MARK),
      "a foreign Host (DNS rebinding): refused (403), nothing ran", st, b)
st, b = post(run_mark, {"Origin": "http://evil.example"})
check(st == 403 and "Origin" in b["error"] and not os.path.exists(MARK),
      "a foreign Origin with a JSON body: refused (403), nothing ran", st, b)
st, b = post({"command": "echo fine"}, host=f"localhost:{PORT}")
is_((st, b["stdout"]), (200, "fine\n"), "Host localhost:PORT is this loopback sidecar's own")
big = b'{"command":"echo edge"}'
exact = big + b" " * (sidecar.MAX_REQUEST_BYTES - len(big))
st, b = send_raw(b"POST /exec HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (PORT, len(exact), exact))
is_((st, b.get("stdout")), (200, "edge\n"), "a body of exactly 4 MiB: run")
st, b = send_raw(b"POST /exec HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s " % (PORT, len(exact) + 1, exact))
is_(st, 413, "4 MiB + 1 byte: 413")
sc.stop()

# ---- python3 -m sandboxd.sidecar: token, Unix socket, slow connections ---------------------
def program(*args):
    p = subprocess.Popen([sys.executable, "-m", "sandboxd.sidecar", "--socket", SOCK,
                          "--allowed-workdirs", WS] + (["--best-effort"] if not ENFORCES else [])
                         + list(args), stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
    return p, (int(m.group(1)) if m else 0), line


tok = os.path.join(os.environ["T"], "token")
with open(tok, "w") as f:
    f.write("s3cret\n")
p, port, line = program("--port", "0", "--token-file", tok)
try:
    st, b = post({"command": "echo hi"}, port=port)
    is_(st, 401, "--token-file: a request without the bearer token is refused (401)")
    st, b = post({"command": "echo hi"}, {"Authorization": "Bearer wrong"}, port=port)
    is_(st, 401, "... and one with another token")
    st, b = post({"command": "echo hi"}, {"Authorization": "Bearer s3cret"}, port=port)
    is_((st, b.get("stdout")), (200, "hi\n"), "... the right one runs")
finally:
    p.terminate()
    p.wait(10)

usock = os.path.join(os.environ["T"], "sidecar.sock")
p, _, line = program("--unix", usock)
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect(usock)
    data = json.dumps({"command": "echo unix"}).encode()
    s.sendall(b"POST /exec HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(data), data))
    got = b""
    while chunk := s.recv(65536):
        got += chunk
    s.close()
    is_((parse(got)[0], parse(got)[1].get("stdout"), oct(os.stat(usock).st_mode & 0o777)),
        (200, "unix\n", "0o600"), "--unix PATH: served on a Unix socket of mode 0600")
finally:
    p.terminate()
    p.wait(10)

SLOW = 500
p, port, line = program("--port", "0", "--workers", "4", "--request-timeout", "3")
slow = []
try:
    idle = socket.create_connection(("127.0.0.1", port), timeout=30)
    for i in range(SLOW):
        c = socket.create_connection(("127.0.0.1", port), timeout=30)
        c.sendall(b"POST /exec HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: appl" % port)
        slow.append(c)
    st, b = post({"command": "echo answered"}, port=port)
    threads = int(re.search(r"Threads:\s+(\d+)", open(f"/proc/{p.pid}/status").read()).group(1))
    is_((st, b.get("stdout")), (200, "answered\n"), f"{SLOW} connections sending half a header: "
        "a prompt request is still answered")
    check(threads <= 1 + 4, f"... and the sidecar runs at most 1 + --workers threads ({threads})")
    slow[0].settimeout(30)
    first = slow[0].recv(4096)
    check(first.startswith(b"HTTP/1.1 408 "), "a request that has not arrived within "
          "--request-timeout is answered 408 and closed", first[:60])
    is_(idle.recv(4096), b"", "an idle connection (no request begun) is closed after --request-timeout, unanswered")
    idle.close()
    gone = wait_for(lambda: len(os.listdir(f"/proc/{p.pid}/fd")) < 50, 30)
    check(gone, "... and the slow connections' descriptors are all released")
finally:
    for c in slow:
        c.close()
    p.terminate()
    p.wait(10)
