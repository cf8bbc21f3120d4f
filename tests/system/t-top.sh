#!/bin/bash
# sandboxctl top where memory and pids are enforced: the usage of list carries numbers (on the
# host they are null), and top shows used/limit for both. Its sandbox is named for this run and
# picked out by id: the others listed are not its own.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock

name=top-vm-$$
id=$(sandboxctl create --name "$name" --memory 64M --pids 32 2>&1)
ok $? "create a sandbox with memory and pids limits"
r=$(call '{"op":"list","usage":true}')
[ "$(jqr '.sandboxes[] | select(.id == "'"$id"'") | (.usage.memory_bytes > 0) and (.usage.pids >= 1) and (.usage.cpu_s >= 0)' "$r")" = true ]
ok $? "list with usage: memory_bytes and pids are numbers where the controllers are enforced"
diag "usage: $(jqr '.sandboxes[] | select(.id == "'"$id"'") | .usage' "$r" | tr -d ' \n')"
json=$(sandboxctl --json top --once)
[ "$(jqr '.sandboxes[] | select(.id == "'"$id"'") | (.memory_bytes > 0) and (.pids >= 1)' "$json")" = true ]
ok $? "top --json reports them"
out=$(sandboxctl top --once --sort mem)
diag "$out"
grep -qE "^$id +$name +ready +[0-9.]+[KMG]?/64M +[0-9]+/32 +[0-9.]+ " <<<"$out"
ok $? "top shows memory and pids as used/limit"
sandboxctl destroy "$id" >/dev/null
ok $? "destroy it"
done_testing
