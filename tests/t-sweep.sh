#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The disk sweep: figures equal to du's on a hostile tree (FIFOs, symlink loops, 100,000 hard
# links, 10,000 nested directories, a mount inside), the oldest snapshots evicted first over
# limits.disk, runs refused while still over and accepted once back under, ttl and idle expiry,
# new sandboxes refused below min_free_disk, and a walk cut short by sweep_timeout (partial).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

mkdir -p "$T"
# No periodic sweep: every sweep here is one the test asked for.
printf 'sweep_interval = 0\n' >"$T/sweep.conf"
start_daemon --config "$T/sweep.conf" || exit 0

# sandbox_of REPLY ID: the sweep's entry for one sandbox
sandbox_of() { jget "$1" ".sandboxes[] | select(.id == \"$2\")"; }

# -- a hostile workspace, measured against du ------------------------------------------------
r=$(rpc '{"op":"create","best_effort":true,"name":"hostile"}')
hid=$(jget "$r" .sandbox.id)
wd=$(jget "$r" .sandbox.workdir)
python3 - "$wd" <<'EOF'
import errno, os, socket, sys
os.chdir(sys.argv[1])
os.mkfifo("fifo")
s = socket.socket(socket.AF_UNIX); s.bind("sock"); s.close()
os.symlink("loop", "loop")
os.symlink(".", "self")
os.symlink("/", "root")
os.symlink("/nonexistent", "dangling")
os.mkdir("links")
t = 0
open("links/target0", "w").write("x" * 10000)
# 100,000 hard links; ext4 stops at 65,000 per inode (EMLINK), then a second target takes the rest.
for i in range(100000):
    try:
        os.link("links/target%d" % t, "links/l%d" % i)
    except OSError as e:
        if e.errno != errno.EMLINK:
            raise
        t += 1
        open("links/target%d" % t, "w").write("y" * 5000)
        os.link("links/target%d" % t, "links/l%d" % i)
os.mkdir("deep")
d = os.open("deep", os.O_RDONLY)
for i in range(10000):
    os.mkdir("d", dir_fd=d)
    n = os.open("d", os.O_RDONLY, dir_fd=d)
    os.close(d)
    d = n
fd = os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=d)
os.write(fd, b"leaf" * 1000)
os.close(fd)
os.mkdir("mnt")
EOF
made=$?
hostile_tree_made() { # the script ran to its end, and what it made is there
	[ "$made" = 0 ] && [ -p "$wd/fifo" ] && [ -S "$wd/sock" ] && [ -L "$wd/loop" ] && [ -L "$wd/self" ] &&
		[ "$(find "$wd/links" -mindepth 1 -name 'l[0-9]*' | wc -l)" = 100000 ] &&
		[ "$(find "$wd/deep" -mindepth 1 -name leaf -size +0 | wc -l)" = 1 ] &&
		[ "$(find "$wd/deep" -type d | wc -l)" = 10001 ]
}
check "a hostile tree: FIFO, socket, symlink loops, 100,000 hard links, 10,000 nested directories" hostile_tree_made
mount -t tmpfs -o size=16m sbxt-sweep "$wd/mnt" && dd if=/dev/zero of="$wd/mnt/big" bs=1M count=4 status=none
check "a tmpfs mounted inside the workspace, holding 4M" [ -s "$wd/mnt/big" ]

start=$(date +%s%N)
r=$(rpc '{"op":"sweep"}' 120)
took=$((($(date +%s%N) - start) / 1000000))
diag "sweep of the hostile tree: ${took} ms"
is "$(jget "$r" .ok)" true "sweep answers"
h=$(sandbox_of "$r" "$hid")
du_bytes=$(du -x -B1 -s "$wd" | cut -f1)
du_app=$(du -x -B1 -s --apparent-size "$wd" | cut -f1)
du_inodes=$(du -x --inodes -s "$wd" | cut -f1)
du_crossing=$(du -B1 -s "$wd" | cut -f1)
diag "du -x: $du_bytes bytes, $du_app apparent, $du_inodes inodes (crossing the mount: $du_crossing)"
is "$(jget "$h" .workspace.bytes)" "$du_bytes" "workspace bytes = du -x -B1 -s (st_blocks * 512)"
is "$(jget "$h" .workspace.apparent_bytes)" "$du_app" "workspace apparent_bytes = du -x -B1 -s --apparent-size"
is "$(jget "$h" .workspace.files)" "$du_inodes" "workspace files = du -x --inodes -s (hard links counted once)"
check "the mount inside is not crossed (du without -x counts 4M more)" [ "$du_crossing" -gt $((du_bytes + 4000000)) ]
check "the mounted file is still there (the walk opened nothing)" [ -s "$wd/mnt/big" ]
is "$(jget "$h" .snapshots)" "[]" "no snapshots yet"
is "$(jget "$r" .totals.bytes)" "$(jget "$r" '[.sandboxes[].bytes] | add')" "totals.bytes is the sum over the sandboxes"
run_py "sweep-progress" 120 <<'EOF'
import os
from client import Conn, check, is_
c = Conn(os.environ["SOCK"], 120)
c.send({"id": "p", "op": "sweep", "dry_run": True})
events, reply = [], None
while reply is None:
    m = c.recv_json(120)
    if m is None:
        break
    if m.get("event") == "progress":
        events.append(m)
    elif m.get("id") == "p":
        reply = m
check(reply and reply.get("ok") and events, "a sweep sends progress events before its reply", (len(events), reply and reply.get("error")))
last = events[-1] if events else {}
n = len(reply.get("sandboxes", [])) if reply else -1
is_((last.get("sandboxes_done"), last.get("sandboxes_total")), (n, n), "the last progress event: every sandbox measured")
is_((last.get("bytes"), last.get("files")), (reply["totals"]["bytes"], reply["totals"]["files"]) if reply else None,
    "and its bytes and files are the totals")
check(all(a["sandboxes_done"] <= b["sandboxes_done"] and a["bytes"] <= b["bytes"] for a, b in zip(events, events[1:])),
      "progress only goes forward", events)
EOF
umount "$wd/mnt"
# Later sweeps need not walk these again.
rm -rf "$wd/deep" "$wd/links"

# A directory swapped for a symlink to / in a loop while sweeps walk the tree: nothing outside
# the workspace is ever counted (following the link once would count the whole host).
mkdir -p "$wd/swap/d/e"
for i in $(seq 50); do echo "$i" >"$wd/swap/d/e/f$i"; done
(cd "$wd/swap" && while :; do mv -T d d.real; ln -s / d; rm d; mv -T d.real d; done) 2>/dev/null &
swapper=$!
max=0
for i in 1 2 3 4 5; do
	f=$(jget "$(rpc '{"op":"sweep"}')" ".sandboxes[] | select(.id == \"$hid\") | .workspace.files")
	[ -n "$f" ] && [ "$f" -gt "$max" ] && max=$f
done
kill "$swapper"
wait "$swapper" 2>/dev/null
check "while d is swapped for a symlink to / in a loop, five sweeps count at most the workspace ($max files)" \
	test "$max" -gt 0 -a "$max" -le 100

# -- quota: the oldest snapshots go first ------------------------------------------------------
r=$(rpc '{"op":"create","best_effort":true,"name":"quota","limits":{"disk":"1M"}}')
qid=$(jget "$r" .sandbox.id)
is "$(jget "$r" .sandbox.limits.disk)" 1048576 "create takes limits.disk"
r=$(rpc '{"op":"run","sandbox":"quota","command":"head -c 300000 /dev/urandom > /work/data"}')
is "$(jget "$r" .exit_code)" 0 "300K written in the workspace"
snaps=$T/state/sandboxes/$qid/snapshots
# Three snapshots in the shared layout (snapshots/<id>/{meta.json,tree/}); names do not sort by
# age, created_at does: ...0b (Jan 1) is the oldest, then ...0c, then ...0a.
mksnap() { # ID CREATED_AT
	mkdir -p "$snaps/$1/tree"
	printf '{"id":"%s","label":"l-%s","created_at":"%s","bytes":409600,"files":1}\n' "$1" "$1" "$2" >"$snaps/$1/meta.json"
	head -c 409600 /dev/urandom >"$snaps/$1/tree/file"
}
mksnap snap-00000000000a 2026-01-03T00:00:00Z
mksnap snap-00000000000b 2026-01-01T00:00:00Z
mksnap snap-00000000000c 2026-01-02T00:00:00Z
mkdir -p "$snaps/.tmp-half" && head -c 8192 /dev/urandom >"$snaps/.tmp-half/x"

r=$(rpc '{"op":"sweep","dry_run":true}')
q=$(sandbox_of "$r" "$qid")
is "$(jget "$q" '.snapshots | map(select(.partial | not)) | length')" 3 "dry run: three snapshots measured"
is "$(jget "$q" '[.snapshots[] | select(.partial)] | length')" 1 "the half-made snapshot is counted, as partial"
is "$(jget "$r" "[.actions[] | select(.sandbox == \"$qid\" and .action == \"evict_snapshot\") | .snapshot] | join(\",\")")" \
	"snap-00000000000b,snap-00000000000c" "dry run: over 1M, the two oldest snapshots would go, oldest first"
check "dry run: nothing was removed" test -d "$snaps/snap-00000000000b" -a -d "$snaps/snap-00000000000c"
du_q=$(du -x -B1 -s "$T/state/sandboxes/$qid/work" "$snaps"/* "$snaps"/.tmp-half | awk '{ s += $1 } END { print s }')
is "$(jget "$q" .bytes)" "$du_q" "a sandbox's bytes = du of its workspace plus its snapshots"

r=$(rpc '{"op":"sweep"}')
is "$(jget "$r" "[.actions[] | select(.sandbox == \"$qid\") | .action + \":\" + (.snapshot // \"\")] | join(\",\")")" \
	"evict_snapshot:snap-00000000000b,evict_snapshot:snap-00000000000c" "sweep: the two oldest snapshots are evicted, in order"
check "snap-00000000000b and snap-00000000000c are gone, snap-00000000000a (newest) and the half-made one stay" \
	eval "[ ! -e '$snaps/snap-00000000000b' ] && [ ! -e '$snaps/snap-00000000000c' ] && [ -d '$snaps/snap-00000000000a' ] && [ -d '$snaps/.tmp-half' ]"
_no_removing() { ! ls -a "$snaps" | grep -q '^\.tmp-snap-'; }
check "the evicted snapshots' bytes are removed in the background (as snapshot.delete does)" wait_until 10 _no_removing
is "$(jget "$(sandbox_of "$r" "$qid")" .runs_refused)" false "back under its limit: runs are accepted"

# -- still over without snapshots: runs refused until back under -----------------------------
r=$(rpc '{"op":"run","sandbox":"quota","command":"head -c 2000000 /dev/zero > /work/big"}')
is "$(jget "$r" .exit_code)" 0 "2M more written in the workspace"
r=$(rpc '{"op":"sweep"}')
is "$(jget "$r" "[.actions[] | select(.sandbox == \"$qid\") | .action] | join(\",\")")" "evict_snapshot,refuse_runs" \
	"over even without its last snapshot: it goes, then runs are refused"
r=$(rpc '{"op":"run","sandbox":"quota","argv":["true"]}')
is "$(jget "$r" .error.code)/$(jget "$r" .error.field)" "resource_exhausted/disk" "a run is refused: resource_exhausted, field disk"
diag "$(jget "$r" .error.message)"
is "$(jget "$(rpc '{"op":"inspect","sandbox":"quota"}')" .sandbox.disk_refused)" true "inspect says disk_refused"
rm -f "$T/state/sandboxes/$qid/work/big"
r=$(rpc '{"op":"sweep"}')
is "$(jget "$r" "[.actions[] | select(.sandbox == \"$qid\") | .action] | join(\",\")")" "accept_runs" \
	"after cleanup, the sweep accepts runs again"
r=$(rpc '{"op":"run","sandbox":"quota","argv":["echo","again"]}')
is "$(jget "$r" .stdout)" again "a run is accepted again"

# -- over again: removing files and running again is enough, no sweep_interval to wait for ------
r=$(rpc '{"op":"run","sandbox":"quota","command":"head -c 2000000 /dev/zero > /work/big"}')
is "$(jget "$r" .exit_code)" 0 "2M written again"
r=$(rpc '{"op":"sweep"}')
is "$(jget "$r" "[.actions[] | select(.sandbox == \"$qid\") | .action] | join(\",\")")" "refuse_runs" \
	"over its limit again: runs are refused"
# A restart does not forget it (the refusal is in the sandbox's record).
stop_daemon
start_daemon --config "$T/sweep.conf" || exit 0
r=$(rpc '{"op":"run","sandbox":"quota","argv":["true"]}')
is "$(jget "$r" .error.code)/$(jget "$r" .error.field)" "resource_exhausted/disk" \
        "after a daemon restart, a run of the sandbox over its limit is still refused"
r=$(rpc '{"op":"run","sandbox":"quota","argv":["true"]}')
like "$(jget "$r" .error.message)" "remove files .* and run again" "the refusal says that removing files and running again works"
like "$(jget "$r" .error.message)" "sandboxctl rm" "... naming sandboxctl rm"
out=$(ctl rm quota /work/big 2>&1)
like "$? $out" "^0 sandboxctl: quota is back under its disk limit: its runs are taken again$" \
        "sandboxctl rm (file.remove), as the refusal says, is not refused over the limit, measures it again and says it is back under"
r=$(rpc '{"op":"run","sandbox":"quota","argv":["echo","at-once"]}')
is "$(jget "$r" .stdout)" at-once "... so the very next run is taken ('remove, then run again')"
_run_taken() { [ "$(jget "$(rpc '{"op":"run","sandbox":"quota","argv":["echo","taken"]}')" .stdout)" = taken ]; }
check "a run after the files were removed is taken (the refusal had the sandbox measured again)" wait_until 60 _run_taken
r=$(rpc '{"op":"run","sandbox":"quota","command":"head -c 2000000 /dev/zero > /work/big"}')
r=$(rpc '{"op":"sweep","sandbox":"quota"}')
is "$(jget "$r" '[.sandboxes[].id] | join(",")')" "$qid" "sweep with sandbox: that one only is measured"
is "$(jget "$r" "[.actions[] | select(.sandbox == \"$qid\") | .action] | join(\",\")")" "refuse_runs" \
	"... and, over once more, its runs are refused"
rm -f "$T/state/sandboxes/$qid/work/big"
r=$(ctl sweep --json quota)
is "$(jget "$r" '[.sandboxes[].id] | join(",")')" "$qid" "sandboxctl sweep SANDBOX measures that sandbox only, now"
out=$(ctl sweep --dry-run quota)
like "$out" $'\nTotal: [^ ]+ in ([02-9]|[0-9]{2,}) files over 1 sandbox; ' "its total says '1 sandbox' ($(grep Total <<<"$out"))"
check "and no '1 files' or '1 sandboxes' anywhere" bash -c '! grep -qE "(^|[^0-9])1 (files|sandboxes)" <<<"$1"' _ "$out"
r=$(rpc '{"op":"run","sandbox":"quota","argv":["echo","now"]}')
is "$(jget "$r" .stdout)" now "... and its runs are taken at once"
r=$(rpc '{"op":"sweep","sandbox":"nosuch"}')
is "$(jget "$r" .error.code)" not_found "sweep of a sandbox that does not exist: not_found"

# -- ttl and idle ------------------------------------------------------------------------------
r=$(rpc '{"op":"create","best_effort":true,"name":"short","ttl":"1s"}')
tid=$(jget "$r" .sandbox.id)
is "$(jget "$r" .sandbox.ttl_s)" 1 "create takes ttl"
like "$(jget "$r" .sandbox.expires_at)" '^20[0-9-]+T' "and says when it expires"
r=$(rpc '{"op":"create","best_effort":true,"name":"lazy","idle":"1s"}')
iid=$(jget "$r" .sandbox.id)
r=$(rpc '{"op":"create","best_effort":true,"name":"busy","idle":"1h","ttl":"1h"}')
sleep 1.5
r=$(rpc '{"op":"sweep","dry_run":true}')
is "$(jget "$r" '[.actions[] | select(.action == "destroy") | .reason] | sort | join(",")')" "idle,ttl" \
	"dry run: the sandbox past its ttl and the idle one would be destroyed"
is "$(jget "$(rpc '{"op":"list"}')" '.sandboxes | length')" 5 "dry run: nothing destroyed"
r=$(rpc '{"op":"sweep"}')
is "$(jget "$r" "[.actions[] | select(.action == \"destroy\") | .sandbox + \":\" + .reason] | sort | join(\",\")")" \
	"$(printf '%s\n' "$iid:idle" "$tid:ttl" | sort | paste -sd,)" "sweep destroys them, saying why"
_gone() { [ "$(jget "$(rpc '{"op":"list"}')" '[.sandboxes[].name] | sort | join(",")')" = busy,hostile,quota ]; }
check "only the sandboxes within their ttl and idle time are left" wait_until 10 _gone

# -- sandboxctl ----------------------------------------------------------------------------------
out=$(ctl sweep --dry-run)
like "$out" 'SANDBOX +NAME +WORKSPACE +SNAPSHOTS +N +TOTAL +FILES +LIMIT +STATE' "sandboxctl sweep prints a table"
like "$out" 'quota +[0-9.]+[KM]' "with sizes in human units"
is "$(ctl --json sweep --dry-run | jq -r .dry_run)" true "sandboxctl --json sweep --dry-run"
# On a terminal (script(1) gives it one) a progress bar is drawn on stderr, then erased.
tty_out=$(script -qec "$SANDBOXCTL --socket $SOCK sweep --dry-run" /dev/null)
like "$tty_out" $'\r\[#+\] 100%  3/3 sandboxes, ' "on a terminal, sandboxctl sweep draws a progress bar that reaches 3/3"
like "$tty_out" $'\r\033\\[K' "and erases it before the table"
check "without a terminal there is no bar" bash -c '! grep -q "sandboxes, " <<<"$1"' _ "$out"
out=$(ctl create --best-effort --name viactl --disk 64M --ttl 1h --idle 30m)
r=$(rpc '{"op":"inspect","sandbox":"viactl"}')
is "$(jget "$r" '[.sandbox.limits.disk, .sandbox.ttl_s, .sandbox.idle_s] | map(tostring) | join(",")')" "67108864,3600,1800" \
	"sandboxctl create --disk --ttl --idle"

# -- the remover takes any depth with a bounded number of directories open --------------------
r=$(rpc '{"op":"create","best_effort":true,"name":"deep"}')
did=$(jget "$r" .sandbox.id)
python3 - "$(jget "$r" .sandbox.workdir)" <<'EOF'
import os, sys
d = os.open(sys.argv[1], os.O_RDONLY)
for i in range(10000):
    os.mkdir("d", dir_fd=d)
    n = os.open("d", os.O_RDONLY, dir_fd=d)
    os.close(d)
    d = n
open("/proc/self/fd/%d/leaf" % d, "w").write("leaf")
EOF
# 1,024 fds, as systemd gives a service by default: fewer than the tree has levels.
prlimit --pid "$DAEMON_PID" --nofile=1024:1024
is "$(jget "$(rpc '{"op":"destroy","sandbox":"deep"}')" .ok)" true "a sandbox with 10,000 nested directories is destroyed"
_deep_gone() { [ ! -e "$T/state/sandboxes/$did" ] && ! ls -a "$T/state/sandboxes" | grep -q '^\.trash-'; }
check "its workspace is removed in the background to the last entry" wait_until 60 _deep_gone
stop_daemon

# -- the free-disk floor -----------------------------------------------------------------------
printf 'sweep_interval = 0\nmin_free_disk = 1000T\n' >"$T/floor.conf"
start_daemon --config "$T/floor.conf" || exit 0
r=$(rpc '{"op":"create","best_effort":true}')
is "$(jget "$r" .error.code)/$(jget "$r" .error.field)" "resource_exhausted/disk" \
	"below min_free_disk, create is refused: resource_exhausted, field disk"
diag "$(jget "$r" .error.message)"
r=$(rpc '{"op":"run","best_effort":true,"argv":["true"]}')
is "$(jget "$r" .error.code)" resource_exhausted "and so is a throwaway run"
r=$(rpc '{"op":"run","sandbox":"quota","argv":["echo","still"]}')
is "$(jget "$r" .stdout)" still "existing sandboxes still run"
stop_daemon

# -- a walk cut short by sweep_timeout (THREATS RES-08) ----------------------------------------
# Each entry takes 20 ms (SANDBOXD_TEST_SWEEP_DELAY_US: a slow disk), and sweep_timeout is 1 s: a
# workspace of 5 files is measured in full, one of 200 is cut short, the one after is not reached.
printf 'sweep_interval = 0\nsweep_timeout = 1s\n' >"$T/cut.conf"
SANDBOXD_TEST_SWEEP_DELAY_US=20000 start_daemon --config "$T/cut.conf" || exit 0
run_py "sweep cut short" 120 <<'EOF'
import os, time
from client import Conn, check, is_
c = Conn(os.environ["SOCK"], 60)
sb = {}
# Created last to first: the walk goes through the sandboxes newest first.
for name, files, disk in (("c3", 5, "4K"), ("c2", 200, "16K"), ("c1", 5, None)):
    req = {"op": "create", "best_effort": True, "name": name}
    if disk:
        req["limits"] = {"disk": disk}
    sb[name] = c.call(req)["sandbox"]
    for i in range(files):
        open(os.path.join(sb[name]["workdir"], "f%d" % i), "w").write("x" * 4096)
t0 = time.monotonic()
r = c.call({"op": "sweep"}, 60)
took = time.monotonic() - t0
is_(r.get("ok"), True, "a sweep past sweep_timeout still answers ok, with what it measured")
check(took < 5, "... when the child stopped itself at sweep_timeout, not after the whole walk (%.1f s; 200 entries take 4 s)" % took)
is_(r.get("partial"), True, "... partial: true")
order = [s["name"] for s in r.get("sandboxes", [])]
is_(order[:3], ["c1", "c2", "c3"], "the sandboxes in the order walked (newest first; the earlier parts' ones after them)")
by = {s["name"]: s for s in r.get("sandboxes", [])}
is_([by.get(n, {}).get("partial") for n in order], [False] + [True] * (len(order) - 1),
    "the first sandbox was measured in full, the second cut short, the others not reached")
is_(by["c1"]["workspace"]["files"], 6, "... the first one's figures are whole (5 files and the top directory)")
n2 = by["c2"]["workspace"]["files"]
check(2 <= n2 < 201, "... the second one's are a lower bound (%d of 201 entries)" % n2)
is_(by["c3"]["workspace"]["files"], 0, "... the third one has none")
check(by["c2"]["bytes"] > 16384 and by["c2"]["runs_refused"] is True,
      "a lower bound over a limit is over it: the second one's runs are refused (%d > 16K)" % by["c2"]["bytes"])
is_(by["c3"]["runs_refused"], False, "a sandbox not measured is not refused for it (its 20K are over its 4K)")
ins = {n: c.call({"op": "inspect", "sandbox": n})["sandbox"] for n in ("c1", "c2", "c3")}
check(ins["c1"]["disk_bytes"] and ins["c2"]["disk_bytes"] is None and ins["c3"]["disk_bytes"] is None,
      "inspect: disk_bytes is set by whole measurements only", [ins[n]["disk_bytes"] for n in ins])
is_(c.call({"op": "run", "sandbox": "c2", "argv": ["true"]}).get("error", {}).get("field"), "disk",
    "the second one's runs are refused (field disk)")
r = c.call({"op": "sweep"}, 60)
order = [s["name"] for s in r.get("sandboxes", [])]
by = {s["name"]: s for s in r.get("sandboxes", [])}
is_((order[:1], order[-2:]), (["c3"], ["c1", "c2"]),
    "the next sweep walks those the last one did not reach first, and the ones it walked last")
is_((by["c3"]["partial"], by["c3"]["runs_refused"]), (False, True),
    "... so the third one is measured in full now, and over its 4K its runs are refused")
c.close()
EOF
stop_daemon
