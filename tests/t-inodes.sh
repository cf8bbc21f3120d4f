#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Disk is counted in files (inodes) too (issue 17, 8): the state directory is a tmpfs of 2000
# inodes. A sandbox over limits.files has its runs refused by the sweep until it is back under;
# limits.files defaults to one file per 4 KiB of limits.disk; a workspace that cannot be made
# because the filesystem has no inode left is resource_exhausted (field disk), never internal;
# below min_free_files new sandboxes are refused; over files_budget and disk_budget the oldest
# snapshots go, then runs are refused.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

mkdir -p "$T/state"
mount -t tmpfs -o size=64m,nr_inodes=2000,mode=0755 sbxt-inodes "$T/state" 2>/dev/null ||
        skip_all "cannot mount a tmpfs (needs CAP_SYS_ADMIN)"
# The daemon goes first, then the mount, then what lib.sh removes.
_inodes_cleanup() {
        local rc=$?
        _daemon_end
        umount -l "$T/state" 2>/dev/null
        (exit "$rc")
        _cleanup
}
trap _inodes_cleanup EXIT
export STATE=$T/state

printf 'sweep_interval = 0\nmin_free_disk = 0\nmin_free_files = 0\n' >"$T/a.conf"
start_daemon --config "$T/a.conf" || exit 0

run_py "limits.files and the sweep" 120 <<'EOF'
import os, shutil
from client import Conn, check, is_
c = Conn(os.environ["SOCK"], 60)

def entry(sw, sid):
    return next((e for e in sw.get("sandboxes", []) if e.get("id") == sid), {})

a = c.call({"op": "create", "best_effort": True, "name": "onem", "limits": {"disk": "1M"}})
is_(((a.get("sandbox") or {}).get("limits") or {}).get("files"), 256, "limits.disk 1M: limits.files defaults to 256 (one per 4 KiB)")
b = c.call({"op": "create", "best_effort": True, "name": "many", "limits": {"files": 100}})
B, wd = b["sandbox"]["id"], b["sandbox"]["workdir"]
is_(b["sandbox"]["limits"].get("files"), 100, "limits.files 100 is taken")
r = c.call({"op": "create", "best_effort": True, "limits": {"files": 1.0}})
is_(((r.get("error") or {}).get("code"), (r.get("error") or {}).get("field")), ("invalid_request", "limits.files"),
    "limits.files 1.0 is no integer: invalid_request")

# 150 empty files: no bytes to speak of, but more files than the limit.
r = c.call({"op": "run", "sandbox": B, "command": "i=0; while [ $i -lt 150 ]; do : >/work/f$i; i=$((i+1)); done"})
is_((r.get("ok"), r.get("exit_code")), (True, 0), "150 empty files made in the sandbox")
sw = c.call({"op": "sweep"}, 60)
e = entry(sw, B)
check(e.get("runs_refused") is True and e.get("files", 0) >= 150 and e.get("files_limit") == 100,
      "the sweep refuses the runs of a sandbox over limits.files (%s files, %s bytes)" % (e.get("files"), e.get("bytes")), e)
acts = [x for x in sw.get("actions", []) if x.get("sandbox") == B]
check(any(x.get("action") == "refuse_runs" and x.get("files_limit") == 100 and x.get("files", 0) >= 150 for x in acts),
      "its action is refuse_runs with files and files_limit", acts)
check(entry(sw, a["sandbox"]["id"]).get("runs_refused") is False, "the sandbox under its limits is not refused")
r = c.call({"op": "run", "sandbox": B, "argv": ["true"]})
err = r.get("error") or {}
check(err.get("code") == "resource_exhausted" and err.get("field") == "disk" and "files" in err.get("message", ""),
      "a run in it: resource_exhausted, field disk, naming the files", r)
i = c.call({"op": "inspect", "sandbox": B})
check((i.get("sandbox") or i).get("disk_files", 0) >= 150, "inspect: disk_files", i)

for n in range(100):
    os.unlink(os.path.join(wd, "f%d" % n))
sw = c.call({"op": "sweep"}, 60)
e = entry(sw, B)
is_(e.get("runs_refused"), False, "back under limits.files: runs accepted again")
check(any(x.get("action") == "accept_runs" and x.get("sandbox") == B for x in sw.get("actions", [])), "action accept_runs", sw.get("actions"))
r = c.call({"op": "run", "sandbox": B, "argv": ["true"]})
is_(r.get("exit_code"), 0, "and a run in it works")
# A snapshot doubles the files: over the limit, it is what goes first.
snap = c.call({"op": "snapshot", "sandbox": B}, 60)
check(snap.get("ok"), "a snapshot of its 50 files", snap)
sw = c.call({"op": "sweep"}, 60)
ev = [x for x in sw.get("actions", []) if x.get("action") == "evict_snapshot" and x.get("sandbox") == B]
check(len(ev) == 1 and ev[0].get("reason") == "limits.files", "with it the sandbox is over limits.files: the snapshot is evicted", sw.get("actions"))
is_(entry(sw, B).get("runs_refused"), False, "and that is enough: runs are not refused")
c.close()
EOF

run_py "a filesystem out of inodes" 180 <<'EOF'
import os
from client import Conn, check, is_
c = Conn(os.environ["SOCK"], 60)
st = os.environ["STATE"]
f = c.call({"op": "create", "best_effort": True, "name": "filler"})
F = f["sandbox"]["id"]
r = c.call({"op": "run", "sandbox": F, "timeout_s": 120,
            "command": "i=0; while true >/work/g$i; do i=$((i+1)); done 2>/dev/null; echo $i"}, 150)
check(r.get("ok") and int((r.get("stdout") or "0").strip() or 0) > 100, "a sandbox without limits fills every inode", r)
is_(os.statvfs(st).f_favail, 0, "no inode is left on the state filesystem")
for req, what in (({"op": "create", "best_effort": True}, "create"),
                  ({"op": "run", "best_effort": True, "workspace": "disk", "argv": ["true"]}, "a throwaway run with a disk workspace")):
    r = c.call(req, 30)
    err = r.get("error") or {}
    check(err.get("code") == "resource_exhausted" and err.get("field") == "disk",
          "%s with no inode left: resource_exhausted, field disk (not internal)" % what, r)
r = c.call({"op": "snapshot", "sandbox": "many"}, 60)
err = r.get("error") or {}
check(err.get("code") == "resource_exhausted" and err.get("field") == "disk", "a snapshot with no inode left: resource_exhausted, field disk", r)
is_(c.call({"op": "health"}).get("status"), "ok", "the daemon is healthy")
# Leave a few hundred free for the restart below.
for n in range(400):
    try:
        os.unlink(os.path.join(f["sandbox"]["workdir"], "g%d" % n))
    except FileNotFoundError:
        pass
check(0 < os.statvfs(st).f_favail < 1000, "some inodes free again (%d)" % os.statvfs(st).f_favail)
c.close()
EOF

stop_daemon
printf 'sweep_interval = 0\nmin_free_disk = 0\nmin_free_files = 1000\nfiles_budget = 1000\n' >"$T/b.conf"
start_daemon --config "$T/b.conf" || exit 0
is "$(jget "$(rpc '{"op":"inspect","sandbox":"many"}')" .sandbox.limits.files)" 100 "limits.files is kept across a restart"
r=$(rpc '{"op":"create","best_effort":true}')
is "$(jget "$r" .error.code)/$(jget "$r" .error.field)" "resource_exhausted/disk" \
        "below min_free_files: create is resource_exhausted, field disk"
like "$(jget "$r" .error.message)" "min_free_files" "the refusal names min_free_files"
r=$(rpc '{"op":"sweep"}' 60)
check "the sweep reports free_files" [ "$(jget "$r" .free_files)" -gt 0 ]
is "$(jget "$r" '.budget_exceeded') $(jget "$r" '.files_budget')" "true 1000" \
        "over files_budget (the filler's ~1500 files): budget_exceeded"
is "$(jget "$r" '[.actions[] | select(.action == "refuse_new")][0].files_budget')" 1000 "the action is refuse_new, with files_budget"
r=$(rpc '{"op":"run","sandbox":"many","argv":["true"]}')
is "$(jget "$r" .error.code)/$(jget "$r" .error.field)" "resource_exhausted/disk" "over files_budget: a run is refused"
like "$(jget "$r" .error.message)" "files_budget" "naming files_budget"
is "$(jget "$(rpc '{"op":"destroy","sandbox":"filler"}' 60)" .ok)" true "the filler is destroyed"
stop_daemon

# disk_budget in bytes still works beside the files: the oldest snapshot goes first, then new
# sandboxes and runs are refused.
printf 'sweep_interval = 0\nmin_free_disk = 0\nmin_free_files = 0\ndisk_budget = 6M\n' >"$T/c.conf"
# As an older daemon wrote it: no limits.files in the record of "onem" (limits.disk 1M).
cat >"$T/strip.py" <<'EOF'
import glob, json, sys
found = False
for p in glob.glob(sys.argv[1] + "/**/meta.json", recursive=True):
    m = json.load(open(p))
    if m.get("name") == "onem":
        del m["limits"]["files"]
        json.dump(m, open(p, "w"))
        found = True
sys.exit(0 if found else 1)
EOF
check "the record of onem loses limits.files" python3 "$T/strip.py" "$T/state"
start_daemon --config "$T/c.conf" || exit 0
is "$(jget "$(rpc '{"op":"inspect","sandbox":"onem"}')" .sandbox.limits.files)" 256 \
        "a record without limits.files gets the one its limits.disk implies"
run_py "disk_budget" 120 <<'EOF'
import os
from client import Conn, check, is_
c = Conn(os.environ["SOCK"], 60)
# "many" holds 51 files under its limits.files 100: a snapshot of it would be evicted by that.
is_(c.call({"op": "destroy", "sandbox": "many"}, 60).get("ok"), True, "the sandbox with a file limit is destroyed")
is_(c.call({"op": "create", "best_effort": True, "name": "many"}).get("ok"), True, "one without limits is made")
r = c.call({"op": "run", "sandbox": "many", "command": "head -c 4M /dev/zero >/work/big"})
is_(r.get("exit_code"), 0, "4M written in the sandbox")
snap = c.call({"op": "snapshot", "sandbox": "many"}, 60)
check(snap.get("ok"), "a snapshot of it", snap)
sw = c.call({"op": "sweep"}, 60)
ev = [a for a in sw.get("actions", []) if a.get("action") == "evict_snapshot"]
check(len(ev) == 1 and ev[0].get("reason") == "disk_budget" and sw.get("budget_exceeded") is False,
      "8M over a 6M disk_budget: the snapshot is evicted, and that is enough", sw.get("actions"))
is_(sw.get("files_budget"), 1536, "files_budget defaults to one per 4 KiB of disk_budget")
r = c.call({"op": "run", "sandbox": "many", "command": "head -c 4M /dev/zero >/work/big2"})
is_(r.get("exit_code"), 0, "4M more written")
sw = c.call({"op": "sweep"}, 60)
check(sw.get("budget_exceeded") is True and any(a.get("action") == "refuse_new" and a.get("budget") == 6 << 20 for a in sw.get("actions", [])),
      "over disk_budget without snapshots: refuse_new", sw.get("actions"))
r = c.call({"op": "run", "sandbox": "many", "argv": ["true"]})
e = r.get("error") or {}
check(e.get("code") == "resource_exhausted" and e.get("field") == "disk" and "disk_budget" in e.get("message", ""),
      "a run is refused, naming disk_budget", r)
c.close()
EOF
stop_daemon
