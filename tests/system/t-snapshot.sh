#!/bin/bash
# Snapshots under a real systemd, with memory, pids and cpu enforced: the freeze of a sandbox
# whose cgroup has controllers, a restore that gives the sandbox a new cgroup with the same
# limits (and run cgroups that still get theirs), and a fork whose limits are its own.
# Its sandboxes are named for this run and used by id: one a user made is never touched.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock

r=$(call '{"op":"create","name":"snapvm-'"$$"'","limits":{"memory":"64M","pids":32,"cpus":0.5}}')
[ "$(jqr .ok "$r")" = true ]
ok $? "a sandbox with enforced limits"
sid=$(jqr .sandbox.id "$r")
scg=$(jqr .sandbox.cgroup "$r")
sdir=$(dirname "$(jqr .sandbox.workdir "$r")")
r=$(call '{"op":"run","sandbox":"'"$sid"'","command":"mkdir -p /work/d && echo v1 > /work/d/f && ln -s / /work/root && mkfifo /work/p"}')
[ "$(jqr .exit_code "$r")" = 0 ]
ok $? "a tree in its workspace"

r=$(call '{"op":"snapshot","sandbox":"'"$sid"'","label":"vm"}')
diag "snapshot: $(jqr -c . "$r")"
[ "$(jqr .ok "$r")" = true ] && [ "$(jqr .frozen "$r")" = true ] && [ -f "$sdir/snapshots/$(jqr .snapshot.id "$r")/meta.json" ]
ok $? "snapshot freezes a sandbox whose cgroup has controllers, and answers"
snap=$(jqr .snapshot.id "$r")
[ "$(sed -n 's/^frozen //p' "$scg/cgroup.events")" = 0 ]
ok $? "the sandbox is thawed after it"

call '{"op":"run","sandbox":"'"$sid"'","command":"echo v2 > /work/d/f; sleep 1000 >/dev/null 2>&1 &"}' >/dev/null
r=$(call "{\"op\":\"snapshot.restore\",\"sandbox\":\"$sid\",\"snapshot\":\"$snap\"}")
diag "restore: $(jqr -c . "$r")"
[ "$(jqr .ok "$r")" = true ]
ok $? "snapshot.restore succeeds with controllers enabled"
r=$(call '{"op":"run","sandbox":"'"$sid"'","command":"cat /work/d/f; pgrep -c sleep || true"}')
[ "$(jqr .stdout "$r")" = "v1
0" ]
ok $? "the workspace is the snapshot's and the old processes are gone"
[ "$(cat "$scg/memory.max")" = 67108864 ] && [ "$(cat "$scg/pids.max")" = 32 ] && [ "$(cat "$scg/cpu.max")" = "50000 100000" ]
ok $? "the sandbox's new cgroup has its limits"
grep -qw memory "$scg/cgroup.subtree_control" && grep -qw pids "$scg/cgroup.subtree_control"
ok $? "and controllers for its runs"
r=$(call '{"op":"run","sandbox":"'"$sid"'","memory":"16M","argv":["python3","-c","b=[]\nwhile True: b.append(bytearray(1<<20))"],"timeout_s":60}')
[ "$(jqr .reason "$r")" = oom ]
ok $? "a run's own memory limit still holds after the restore (reason $(jqr .reason "$r"))"

r=$(call "{\"op\":\"create\",\"name\":\"snapfork-$$\",\"limits\":{\"memory\":\"32M\"},\"from_snapshot\":\"$sid/$snap\"}")
[ "$(jqr .sandbox.state "$r")" = ready ]
fid=$(jqr .sandbox.id "$r")
ok $? "create from_snapshot with limits"
fcg=$(jqr .sandbox.cgroup "$r")
[ "$(cat "$fcg/memory.max")" = 33554432 ]
ok $? "the fork has its own memory.max"
r=$(call '{"op":"run","sandbox":"'"$fid"'","command":"cat /work/d/f; stat -c %u /work/d/f; readlink /work/root; test -p /work/p && echo fifo"}')
[ "$(jqr .stdout "$r")" = "v1
1000
/
fifo" ]
ok $? "its workspace is the snapshot, owned by the same uid inside (1000), in its own range outside"

call '{"op":"destroy","sandbox":"'"$fid"'"}' >/dev/null
r=$(call '{"op":"destroy","sandbox":"'"$sid"'"}')
[ "$(jqr .destroyed "$r")" = true ] && [ ! -d "$sdir" ]
ok $? "destroy takes the snapshots along"
done_testing
