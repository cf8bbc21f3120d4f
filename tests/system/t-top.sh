#!/bin/bash
# sandboxctl top where memory and pids are enforced: the usage of list carries numbers (on the
# host they are null), and top shows used/limit for both.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock

id=$(sandboxctl create --name top-vm --memory 64M --pids 32 2>&1)
ok $? "create a sandbox with memory and pids limits"
r=$(call '{"op":"list","usage":true}')
[ "$(jqr '.sandboxes[] | select(.name == "top-vm") | (.usage.memory_bytes > 0) and (.usage.pids >= 1) and (.usage.cpu_s >= 0)' "$r")" = true ]
ok $? "list with usage: memory_bytes and pids are numbers where the controllers are enforced"
diag "usage: $(jqr '.sandboxes[] | select(.name == "top-vm") | .usage' "$r" | tr -d ' \n')"
json=$(sandboxctl --json top --once)
[ "$(jqr '.sandboxes[] | select(.name == "top-vm") | (.memory_bytes > 0) and (.pids >= 1)' "$json")" = true ]
ok $? "top --json reports them"
out=$(sandboxctl top --once --sort mem)
diag "$out"
grep -qE "^$id +top-vm +ready +[0-9.]+[KMG]?/64M +[0-9]+/32 +[0-9.]+ " <<<"$out"
ok $? "top shows memory and pids as used/limit"
sandboxctl destroy top-vm >/dev/null
ok $? "destroy it"
done_testing
