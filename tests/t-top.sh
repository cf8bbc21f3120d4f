#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# sandboxctl top and the `usage` of list it polls: a busy sandbox shows CPU and an idle one does
# not; --sort orders the rows; --once and -n print and exit; MEMORY and PIDS are null/"-" where
# their controller is not enforced (this kind of host). On a terminal (a pty here) keys re-sort
# and quit, and the terminal's modes come back on q and on SIGTERM.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0

idle=$(ctl create --best-effort --name a-idle --memory 64M --pids 32)
busy=$(ctl create --best-effort --name b-busy --memory 64M --pids 32)
check "two sandboxes are created" test -n "$idle" -a -n "$busy"

# ---- list with usage ---------------------------------------------------------------------
r=$(rpc '{"id":1,"op":"list","usage":true}')
is "$(jget "$r" '[.sandboxes[] | (.usage.cpu_s | type)] | unique | join(",")')" number \
        "list with usage:true gives each sandbox a cpu_s (cpu.stat is in every cgroup2 directory)"
is "$(jget "$r" '[.sandboxes[] | has("runs_in_flight")] | all')" true "and its runs in flight"
is "$(jget "$r" '[.sandboxes[] | .usage | has("connections") and .connections == null] | all')" true \
        "and connections, null for sandboxes without egress"
mem_enforced=$(jget "$(rpc '{"id":1,"op":"inspect","sandbox":"a-idle"}')" .sandbox.enforced.memory)
if [ "$mem_enforced" = true ]; then
        is "$(jget "$r" '[.sandboxes[] | (.usage.memory_bytes | type)] | unique | join(",")')" number "memory_bytes is a number where memory is enforced"
else
        is "$(jget "$r" '[.sandboxes[] | .usage.memory_bytes] | unique | join(",")')" "" "memory_bytes is null where memory is not enforced"
fi
r=$(rpc '{"id":1,"op":"list"}')
is "$(jget "$r" '[.sandboxes[] | has("usage")] | any')" false "list without usage leaves it out"
r=$(rpc '{"id":1,"op":"list","usage":1}')
is "$(jget "$r" '.error.code + " " + .error.field')" "invalid_request usage" "usage must be a boolean"

# ---- a busy sandbox ----------------------------------------------------------------------
ctl run --sandbox b-busy --timeout 120 -- sh -c 'while :; do :; done' >/dev/null 2>&1 &
burner=$!
runs_busy() { [ "$(jget "$(rpc '{"id":1,"op":"inspect","sandbox":"b-busy"}')" .sandbox.runs_in_flight)" = 1 ]; }
check "the busy loop runs in b-busy" wait_until 30 runs_busy

out=$(ctl top --once)
rc=$?
diag "$out"
is "$rc" 0 "top --once exits 0"
like "$out" '^sandboxctl top - [0-9:]+ - 2 sandboxes - sorted by cpu'$'\n' "the header counts the sandboxes and names the order (and no interval: --once refreshes once)"
like "$out" $'\n''ID +NAME +STATE +MEMORY +PIDS +CPU% +CPU TIME +DISK +CONNS +RUNS'$'\n' "the columns are named"
like "$out" "$busy +b-busy +ready +[^ ]+ +[^ ]+ +[0-9.]+ +[^ ]+ +[^ ]+ +- +1"$'(\n|$)' "b-busy shows a CPU share and its run, and '-' connections (it has no egress)"
like "$out" "$idle +a-idle +ready " "a-idle is listed"
if [ "$mem_enforced" != true ]; then
        like "$out" "$idle +a-idle +ready +- +- " "MEMORY and PIDS are '-' where they are not accounted"
fi
is "$(printf '%s\n' "$out" | grep -c .)" 4 "--once prints one refresh: header, columns, two rows"

out=$(ctl top -n 2 --interval 1s)
is "$(printf '%s\n' "$out" | grep -o 'sorted by cpu.*' | tr '\n' '|')" "sorted by cpu - 1 of 2, every 1s|sorted by cpu - 2 of 2, every 1s|" \
        "-n 2: each header says which refresh of how many, and the interval"
ctl --json top -n 2 --interval 1s >"$T/top.json"
is "$?" 0 "top -n 2 --json exits 0"
is "$(grep -c . "$T/top.json")" 2 "-n 2 prints two refreshes, one JSON line each"
second=$(sed -n 2p "$T/top.json")
is "$(jget "$second" '[.sandboxes[].name] | join(" ")')" "b-busy a-idle" "sorted by cpu (the default), the busy sandbox comes first"
busy_pct=$(jget "$second" '.sandboxes[] | select(.name == "b-busy") | .cpu_percent')
idle_pct=$(jget "$second" '.sandboxes[] | select(.name == "a-idle") | .cpu_percent')
diag "cpu%: b-busy $busy_pct, a-idle $idle_pct"
check "the busy sandbox's CPU% over one refresh is above the idle one's" \
        python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) + 1 else 1)' "$busy_pct" "$idle_pct"
check "its cpu_s grew between the two refreshes" python3 -c 'import sys, json
a, b = (json.loads(l) for l in open(sys.argv[1]))
f = lambda r: [s["cpu_s"] for s in r["sandboxes"] if s["name"] == "b-busy"][0]
sys.exit(0 if f(b) > f(a) else 1)' "$T/top.json"
check "cpu_s and cpu_percent are written rounded (microseconds, hundredths), not as 17-digit doubles" sh -c \
        "! grep -qE '\"cpu_s\":[0-9]+\\.[0-9]{7,}|\"cpu_percent\":[0-9]+\\.[0-9]{3,}' '$T/top.json'"

is "$(ctl --json top --once --sort name | jq -r '[.sandboxes[].name] | join(" ")')" "a-idle b-busy" "--sort name orders by name"
is "$(ctl --json top --once --sort pids | jq -r .sort)" pids "--sort pids is taken"
is "$(ctl --json top --once | jq -c '[.sandboxes[] | has("connections") and .connections == null] | unique')" "[true]" \
        "--json: each row has connections, null without egress"
is "$(ctl --json top --once | jq -r '[.sandboxes[].disk_bytes] | map(tostring) | join(" ")')" "null null" \
        "before any sweep, disk_bytes is null"
rpc '{"op":"run","sandbox":"a-idle","command":"head -c 3000000 /dev/zero > /work/blob"}' >/dev/null
rpc '{"op":"sweep"}' >/dev/null
is "$(ctl --json top --once --sort disk | jq -r '[.sandboxes[].name] | join(" ")')" "a-idle b-busy" \
        "after a sweep, --sort disk puts the sandbox holding 3M first"
check "its disk_bytes is what the sweep measured (at least 3M)" \
        [ "$(ctl --json top --once | jq -r '.sandboxes[] | select(.name == "a-idle") | .disk_bytes')" -ge 3000000 ]
like "$(ctl top --once --sort disk)" "a-idle +ready +[^ ]+ +[^ ]+ +[0-9.-]+ +[^ ]+ +[0-9.]+M/none " \
        "the DISK column shows it in human units, and 'none' for no disk limit"
like "$(ctl inspect a-idle)" "disk limit: +none" "as inspect says it"
ctl top --sort bogus >/dev/null 2>"$T/err"
is "$?" 1 "--sort with an unknown key fails"
like "$(cat "$T/err")" "invalid --sort 'bogus' \\(mem, pids, cpu, disk or name\\)" "and says why, naming every key"
ctl top -n 0 >/dev/null 2>&1
is "$?" 1 "-n 0 is refused"

# ---- on a terminal -------------------------------------------------------------------------
run_py "top on a pty" 90 "$SANDBOXCTL" "$SOCK" <<'PY'
import os, pty, select, signal, sys, termios, time
from client import check
ctl, sock = sys.argv[1], sys.argv[2]

def spawn():
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(ctl, [ctl, "--socket", sock, "top", "--interval", "30s"])
    return pid, fd

def read_until(fd, needle, limit=30, done=None):
    buf, end = b"", time.monotonic() + limit
    done = done or (lambda b: needle in b)
    while not done(buf) and time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
    return buf

def wait_exit(pid, limit=20):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        p, status = os.waitpid(pid, os.WNOHANG)
        if p:
            return status
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    return None

def modes_restored(fd):
    lflag = termios.tcgetattr(fd)[3]
    return bool(lflag & termios.ECHO) and bool(lflag & termios.ICANON)

pid, fd = spawn()
out = read_until(fd, b"sorted by cpu")
check(b"\x1b[?1049h" in out, "top switches to the alternate screen")
check(b"keys: m p c d n sort, q quit" in out, "top names its keys on a terminal")
check(not modes_restored(fd), "while it runs, the terminal is in raw mode (no echo, no line editing)")
os.write(fd, b"n")
# The redraw after the key: its header, then both rows (the terminal may get them in pieces).
redrawn = lambda b: b"sorted by name" in b and b"b-busy" in b.split(b"sorted by name", 1)[1]
out = read_until(fd, b"", done=redrawn)
check(b"sorted by name" in out, "the key n re-sorts by name at once")
rows = out.split(b"sorted by name", 1)[-1]
check(b"a-idle" in rows and rows.find(b"a-idle") < rows.find(b"b-busy"), "and the rows follow")
os.write(fd, b"q")
out = read_until(fd, b"\x1b[?1049l")
status = wait_exit(pid)
check(status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "q quits with status 0")
check(b"\x1b[?25h\x1b[?1049l" in out, "on q the cursor and the main screen come back")
check(modes_restored(fd), "on q echo and line editing come back")
os.close(fd)

pid, fd = spawn()
read_until(fd, b"sorted by cpu")
os.kill(pid, signal.SIGTSTP)
out = read_until(fd, b"\x1b[?1049l")
stopped = False
end = time.monotonic() + 20
while time.monotonic() < end and not stopped:
    p, status = os.waitpid(pid, os.WUNTRACED | os.WNOHANG)
    stopped = p != 0 and os.WIFSTOPPED(status)
    time.sleep(0.1)
check(stopped, "Ctrl-Z (SIGTSTP) stops top")
check(b"\x1b[?1049l" in out and modes_restored(fd), "and gives the terminal back before it stops")
os.kill(pid, signal.SIGCONT)
out = read_until(fd, b"sorted by cpu")
check(b"sorted by cpu" in out and not modes_restored(fd), "fg (SIGCONT) redraws and takes raw mode back")
os.kill(pid, signal.SIGTERM)
out = read_until(fd, b"\x1b[?1049l")
status = wait_exit(pid)
check(status is not None and os.WIFEXITED(status), "SIGTERM ends top through its own exit path")
check(b"\x1b[?1049l" in out and modes_restored(fd), "on SIGTERM the terminal is restored too")
os.close(fd)

# A daemon that takes the connection and never answers: top waits in its first list. A signal
# there must still end it (the client library retries its read on EINTR), terminal restored.
import socket, tempfile
mute_path = os.path.join(tempfile.mkdtemp(), "mute.sock")
mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
mute.bind(mute_path)
mute.listen(4)
for sig in (signal.SIGTERM, signal.SIGINT):
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(ctl, [ctl, "--socket", mute_path, "top"])
    conn, _ = mute.accept()
    conn.settimeout(10)
    conn.recv(4096)  # its request: top is now waiting for the answer
    time.sleep(0.2)
    os.kill(pid, sig)
    read_until(fd, b"\x1b[?1049l", limit=5)
    status = wait_exit(pid, 10)
    check(status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == sig,
          "%s ends top while the daemon has not answered (status %r)" % (signal.Signals(sig).name, status))
    check(modes_restored(fd), "and the terminal is restored")
    conn.close()
    os.close(fd)
PY

kill "$burner" 2>/dev/null
wait "$burner" 2>/dev/null
ctl destroy "$idle" "$busy" >/dev/null
stop_daemon
