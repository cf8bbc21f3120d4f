#!/bin/bash
# sandboxctl doctor under a real systemd with a unified hierarchy and Delegate=yes: every check
# passes and the verdict is "full" (exit 0); a user outside the socket's group is told which
# group to join (exit 2). The host test (tests/t-doctor.sh) covers the best-effort side.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock

out=$(sandboxctl doctor 2>&1)
rc=$?
while IFS= read -r line; do diag "$line"; done <<<"$out"
[ "$rc" = 0 ]
ok $? "doctor exits 0: sandboxes can run with every limit enforced"
grep -q '^verdict: sandboxes can run here with every limit enforced (full)$' <<<"$out"
ok $? "the verdict says so in words"
grep -qE '^ok +cgroup2 +cgroup v2 at /sys/fs/cgroup \(unified hierarchy\)' <<<"$out"
ok $? "cgroup2 is found unified at /sys/fs/cgroup"
grep -qE '^ok +delegation +sandboxd owns /sys/fs/cgroup/system.slice/sandboxd.service, where memory, pids, cpu are available' <<<"$out"
ok $? "the delegated cgroup of sandboxd.service offers memory, pids and cpu"
grep -qE '^ok +limits +sandboxd enforces memory, pids and cpu limits' <<<"$out"
ok $? "the daemon enforces every limit"
grep -qE '^(ok|warn) +disk +.* \(state directory /var/lib/sandboxd\)' <<<"$out"
ok $? "the disk check looks at the daemon's own state directory (from hello)"

json=$(sandboxctl --json doctor 2>/dev/null)
[ "$(jqr '[.verdict, .exit_status, ([.checks[] | select(.impact != "none")] | length)] | map(tostring) | join(" ")' "$json")" = "full 0 0" ]
ok $? "--json: verdict full, exit_status 0, no check with an impact"

out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups sandboxctl doctor 2>&1)
rc=$?
[ "$rc" = 2 ]
ok $? "a user outside the socket's group: doctor exits 2"
grep -qE "^fail +socket +/run/sandboxd/sandboxd.sock \\(mode 0660, root:sandboxd\\) does not let uid [0-9]+ connect" <<<"$out"
ok $? "it names the socket's mode and group"
grep -q "fix: add your user to the 'sandboxd' group: sudo usermod -aG sandboxd nobody, then log in again" <<<"$out"
ok $? "and says which group to join"

done_testing
