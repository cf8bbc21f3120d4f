#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The pool of ready sandboxes (pool_size, docs/sandboxd.conf.md): it fills in the background, its
# sandboxes belong to no one and are invisible to every client (root included), a throwaway run
# that asks for the default limits gets one of them, anything else gets a fresh sandbox, a
# sandbox leaves the pool once and is destroyed after its run (never given to a second run),
# the pool refills to its size and never beyond, and a stopping daemon removes it.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

POOL_SIZE=2 start_daemon || exit 0

# The pool's sandboxes, by their cgroups: the ready ones have their init's leaf.
pool_ids() { (cd "$CG/sandboxes" 2>/dev/null && for d in sbx-*; do [ -d "$d/init" ] && echo "$d"; done) | sort; }
# ... and nothing else: each has exactly three cgroups (its own, its init's leaf and its run's,
# made ahead: docs/architecture.md, "The next run, made ahead").
_pool_is() { [ "$(pool_ids | wc -l)" = "$1" ] && [ "$(cg_child_count)" = $(($1 * 3)) ]; }

check "the pool fills to pool_size (2) in the background" wait_until 30 _pool_is 2
P0=$(pool_ids)
is "$(jget "$(rpc '{"op":"list"}')" '.sandboxes | length')" 0 "list (as root) shows no pooled sandbox"
is "$(jget "$(rpc '{"op":"health"}')" .sandboxes)" 0 "health counts no pooled sandbox"
p=$(echo "$P0" | head -n1)
for op in inspect destroy; do
	is "$(jget "$(rpc "{\"op\":\"$op\",\"sandbox\":\"$p\"}")" .error.code)" not_found "$op of a pooled sandbox by its id: not_found"
done
is "$(jget "$(rpc "{\"op\":\"run\",\"sandbox\":\"$p\",\"argv\":[\"true\"]}")" .error.code)" not_found \
	"run in a pooled sandbox by its id: not_found"

r=$(rpc '{"op":"run","best_effort":true,"argv":["sh","-c","echo hi; id -u"]}')
is "$(jget "$r" .stdout)" "hi
1000" "a throwaway run in a pooled sandbox runs as the sandbox's unprivileged user"
s1=$(jget "$r" .sandbox)
check "the throwaway run with the default limits got a pooled sandbox" grep -qx "$s1" <<<"$P0"
_gone() { [ ! -e "$CG/sandboxes/$1" ] && [ ! -e "$T/state/sandboxes/$1" ]; }
check "that sandbox is destroyed after the run (cgroup and workspace)" wait_until 30 _gone "$s1"
_refilled() { _pool_is 2 && ! pool_ids | grep -qx "$s1"; }
check "the pool refills to 2, with a new sandbox" wait_until 30 _refilled

r=$(rpc '{"op":"run","best_effort":true,"argv":["cat","/proc/self/status"]}')
s2=$(jget "$r" .sandbox)
is "$(jget "$r" .exit_code)" 0 "a second throwaway run"
check "it got another sandbox than the first (none is given twice)" [ "$s2" != "$s1" ]
Pr=$(wait_until 30 _pool_is 2; pool_ids)
r=$(rpc '{"op":"run","best_effort":true,"user":"root","argv":["id","-u"]}')
is "$(jget "$r" .stdout)" "0" "a throwaway run asking for root is root of its user namespace"
check "it got a fresh sandbox: the pool's are made for the default user (their mounts unlocked)" \
	bash -c '! grep -qx "$1" <<<"$2"' _ "$(jget "$r" .sandbox)" "$Pr"

P1=$(wait_until 30 _pool_is 2; pool_ids)
r=$(rpc '{"op":"run","best_effort":true,"limits":{"memory":"64M"},"argv":["true"]}')
is "$(jget "$r" .exit_code)" 0 "a throwaway run with other limits"
s3=$(jget "$r" .sandbox)
check "it got a fresh sandbox, not a pooled one" bash -c '! grep -qx "$1" <<<"$2"' _ "$s3" "$P1"
is "$(pool_ids)" "$P1" "the pool is untouched by it"
r=$(rpc '{"op":"run","best_effort":true,"workspace":"disk","argv":["true"]}')
is "$(jget "$r" .exit_code)" 0 "a throwaway run with its workspace on disk"
check "it got a fresh sandbox too: the pool's workspaces are in memory" bash -c '! grep -qx "$1" <<<"$2"' _ "$(jget "$r" .sandbox)" "$P1"
is "$(pool_ids)" "$P1" "the pool is untouched by it"
r=$(rpc '{"op":"run","argv":["true"]}')
is "$(jget "$r" .error.code)" limit_unenforceable \
	"without best_effort on this host: limit_unenforceable, as without a pool"
r=$(rpc '{"op":"run","best_effort":true,"limits":{"memory":"1"},"argv":["true"]}')
is "$(jget "$r" .error.field)" limits.memory "an invalid request is refused as without a pool (limits.memory)"
is "$(pool_ids)" "$P1" "the refused requests left the pool untouched"

run_py "a burst of throwaway runs" 120 <<'PYEOF'
import os, threading
from client import Conn, check, is_
sock = os.environ["SOCK"]
ids, lock = [], threading.Lock()
def worker():
    c = Conn(sock, 60)
    for _ in range(10):
        r = c.call({"op": "run", "best_effort": True, "argv": ["true"]})
        with lock:
            ids.append(r.get("sandbox") if r.get("ok") and r.get("exit_code") == 0 else None)
    c.close()
ts = [threading.Thread(target=worker) for _ in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
is_(len([i for i in ids if i]), 40, "40 throwaway runs from 4 clients succeeded")
is_(len(set(ids)), 40, "each had a sandbox of its own")
PYEOF
check "afterwards the pool is back at 2, never more" wait_until 30 _pool_is 2
_no_trash() { [ "$(ls -A "$T/state/sandboxes" | wc -l)" = 0 ]; }
check "nothing is left in the state dir: the pool's and the throwaway runs' workspaces are in memory" wait_until 30 _no_trash
stop_daemon
