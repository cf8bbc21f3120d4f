#!/bin/bash
# What an OCI runtime's update, pause and resume need of a sandbox under the packaged unit, with
# every controller (issue #24): sandbox.update writes memory.max, pids.max and cpu.max and the
# kernel holds the sandbox to the new memory.max (an allocation past it is an OOM kill), and
# survives a restart of the daemon; sandbox.freeze under systemd freezes the sandbox's cgroup (a
# busy loop accumulates no CPU time, a run is refused), sandbox.thaw resumes it. The host tests
# (tests/t-oci-sandbox.sh) cover the rest: this host has no memory, pids or cpu controller.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock
name=ocivm-$$ # a name of this run's own: what a user made is never touched

r=$(call '{"op":"create","name":"'"$name"'","user":"root","limits":{"memory":"256M","pids":64,"cpus":1}}')
[ "$(jqr .ok "$r")" = true ]
ok $? "a sandbox with enforced limits"
[ "$(jqr .ok "$r")" = true ] || diag "$r"
scg=$(jqr .sandbox.cgroup "$r")
[ "$(cat "$scg/memory.max")" = 268435456 ]
ok $? "its memory.max is 256M"

r=$(call '{"op":"sandbox.update","sandbox":"'"$name"'","limits":{"memory":"64M","pids":20,"cpus":0.5}}')
[ "$(jqr '.sandbox.limits | [.memory, .pids, .cpus] | tostring' "$r")" = '[67108864,20,0.5]' ]
ok $? "sandbox.update: the reply has the new limits"
[ "$(cat "$scg/memory.max")" = 67108864 ]
ok $? "memory.max is 64M now"
[ "$(cat "$scg/pids.max")" = 20 ]
ok $? "pids.max is 20 now"
[ "$(cat "$scg/cpu.max")" = "50000 100000" ]
ok $? "cpu.max is 50000 100000 now"
r=$(call '{"op":"run","sandbox":"'"$name"'","argv":["python3","-c","b = bytearray(120 << 20); print(len(b))"]}')
[ "$(jqr '[.reason, .oom_killed] | tostring' "$r")" = '["oom",true]' ]
ok $? "an allocation of 120M past the new memory.max ends in an OOM kill"
[ "$(jqr '[.reason, .oom_killed] | tostring' "$r")" = '["oom",true]' ] || diag "$r"

systemctl restart sandboxd.service
r=$(call '{"op":"inspect","sandbox":"'"$name"'"}')
[ "$(jqr '.sandbox.limits | [.memory, .pids] | tostring' "$r")" = '[67108864,20]' ]
ok $? "after a restart of the daemon, inspect says the updated limits (the record)"
scg=$(jqr .sandbox.cgroup "$r")
[ "$(cat "$scg/memory.max")" = 67108864 ]
ok $? "... and the sandbox's cgroup holds them"

# Freeze under systemd.
r=$(call '{"op":"run","sandbox":"'"$name"'","command":"while :; do :; done >/dev/null 2>&1 &"}')
cpu() { awk '$1 == "usage_usec" { print $2 }' "$scg/cpu.stat"; }
r=$(call '{"op":"sandbox.freeze","sandbox":"'"$name"'"}')
[ "$(jqr '[.ok, .frozen] | tostring' "$r")" = '[true,true]' ]
ok $? "sandbox.freeze answers once frozen"
grep -qx 'frozen 1' "$scg/cgroup.events"
ok $? "... its cgroup.events says frozen 1"
c1=$(cpu); sleep 1; c2=$(cpu)
[ "$c1" = "$c2" ]
ok $? "a busy loop in the frozen sandbox accumulates no CPU time ($c1 -> $c2 over 1 s)"
r=$(call '{"op":"run","sandbox":"'"$name"'","argv":["true"]}')
[ "$(jqr .error.code "$r")" = conflict ]
ok $? "a run in the frozen sandbox: conflict"
r=$(call '{"op":"sandbox.thaw","sandbox":"'"$name"'"}')
[ "$(jqr '[.ok, .frozen] | tostring' "$r")" = '[true,false]' ]
ok $? "sandbox.thaw answers once thawed"
c1=$(cpu); sleep 1; c2=$(cpu)
[ "$c2" -gt "$c1" ]
ok $? "the busy loop runs again ($c1 -> $c2 over 1 s)"
r=$(call '{"op":"sandbox.signal","sandbox":"'"$name"'","signal":"KILL"}')
[ "$(jqr .signalled "$r")" -ge 1 ]
ok $? "sandbox.signal KILL ends it"
r=$(call '{"op":"destroy","sandbox":"'"$name"'"}')
[ "$(jqr .ok "$r")" = true ]
ok $? "the sandbox is destroyed"
done_testing
