#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# sandboxctl doctor on this kind of host (hybrid cgroups: cgroup2 beside v1, with none of memory,
# pids, cpu free for it): with a private daemon the verdict is best-effort (exit 1) and the fix
# names the kernel command line; without a socket it is "cannot run" (exit 2) and says how to
# start one; a socket the caller may not use names the group to join. The full verdict (exit 0)
# is checked under real systemd in tests/system/t-doctor.sh.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0

# doctor ARGS...: stdout in $T/out, status in $rc.
doctor() {
        timeout -k 5 60 "$SANDBOXCTL" --socket "$SOCK" "$@" doctor --state-dir "$T/state" >"$T/out" 2>"$T/err"
        rc=$?
}

v2_has_all=0
grep -qw memory "$CG_MOUNT/cgroup.controllers" && grep -qw pids "$CG_MOUNT/cgroup.controllers" &&
        grep -qw cpu "$CG_MOUNT/cgroup.controllers" && v2_has_all=1

# ---- with the daemon ---------------------------------------------------------------------
doctor
out=$(cat "$T/out")
diag "$out"
if [ "$v2_has_all" = 1 ]; then
        is "$rc" 0 "doctor exits 0 where cgroup v2 offers memory, pids and cpu"
else
        is "$rc" 1 "doctor exits 1 (best-effort) where cgroup v2 lacks memory, pids or cpu"
        like "$out" $'\n''verdict: sandboxes can run here, but only best-effort' "the verdict says best-effort in words"
        like "$out" 'warn  controllers +[a-z, ]+ not available in cgroup v2 at '"$CG_MOUNT" "the controllers line names what is missing and where"
        if grep -qE '^(memory|pids|cpu)[[:space:]]+[1-9]' /proc/cgroups; then
                like "$out" 'fix: the [a-z, ]+ controllers? (is|are) bound to cgroup v1 \(hybrid mode\); enable (it|them) for cgroup v2: boot with systemd.unified_cgroup_hierarchy=1' \
                        "the fix says they are bound to cgroup v1 and which boot option frees them"
        fi
        like "$out" 'warn  limits +sandboxd cannot enforce [a-z, ]+ limits' "the daemon's own view of what it enforces is reported"
        like "$out" "fix: see the fix of 'controllers' above, then restart sandboxd" \
                "the limits fix points at the one fix above (controllers), not at delegation, which is ok here"
fi
like "$out" 'ok    cgroup2 +cgroup v2 at '"$CG_MOUNT" "the cgroup2 mount is found where the tests found it"
like "$out" 'ok    socket +'"$SOCK"' \(mode 0[0-7]+, root:[a-z0-9]+\) lets uid 0 connect' "the socket, its mode and owner are reported"
like "$out" 'ok    daemon +sandboxd [0-9.]+ \(protocol [0-9]+\) answers' "the daemon answers hello"
like "$out" 'ok    delegation +sandboxd owns '"$CG" "delegation is checked on the cgroup the daemon says it owns"
for f in clone3 CLONE_INTO_CGROUP pidfd_open openat2 cgroup.kill; do
        like "$out" "ok    $f " "the kernel probe for $f passes here"
done
like "$out" 'ok    userns +user, mount, pid, ipc, uts, net and cgroup namespaces can be created' "namespaces can be created"
like "$out" 'ok    disk +[0-9.]+[KMGT]?i?B? free of ' "free disk space of the state directory is reported"
like "$out" 'ok    images +images work: the image store .*/images can be idmapped' "images: the store's filesystem can be idmapped here (doctor says so)"

doctor --json
is "$rc" "$([ "$v2_has_all" = 1 ] && echo 0 || echo 1)" "with --json the exit status is the same"
is "$(jq -r .exit_status "$T/out")" "$rc" "the JSON report carries the exit status"
is "$(jq -r .verdict "$T/out")" "$([ "$v2_has_all" = 1 ] && echo full || echo best_effort)" "the JSON verdict matches"
is "$(jq -r '[.checks[].name] | join(" ")' "$T/out")" \
        "cgroup2 controllers socket daemon delegation placement limits disk-limits userns clone3 CLONE_INTO_CGROUP pidfd_open openat2 cgroup.kill mounts images egress disk" \
        "the JSON report lists every check, in order"
is "$(jq -r '.checks[] | select(.name == "placement") | .message' "$T/out" | cut -d' ' -f1-4)" "the sandboxes are in" \
        "placement: without systemd, doctor says the sandboxes are in the daemon's subtree"
is "$(jq -r '[.checks[] | select(.status != "ok" and .fix == null)] | length' "$T/out")" 0 \
        "every check that is not ok carries a fix"
is "$(jq -r '[.checks[] | select(.status == "ok" and .fix != null)] | length' "$T/out")" 0 \
        "no check that is ok carries a fix"
is "$(jq -r '[.checks[] | select(.fix != null) | .name] as $fixed |
        [.checks[] | select(.name == "limits") | (.fix // "") | scan("\u0027([a-z]+)\u0027") | .[0]] - $fixed | join(" ")' "$T/out")" "" \
        "the checks whose fixes the limits fix points at all have one"

# ---- a second daemon: egress is the first's, and the fix says so -------------------------
# One sandboxd per network namespace gives egress (an abstract socket lock): a second one started
# now finds it taken, by the first or by any other on this host.
CG2=$CG_MOUNT/sandboxd-test-doctor2-$$
mkdir -p "$T/state2"
"$SANDBOXD" --listen "$T/sock2" --state-dir "$T/state2" --cgroup-root "$CG2" --pool-size 0 --stop-sandboxes >>"$T/daemon2.log" 2>&1 &
pid2=$!
wait_until 30 sh -c "python3 '$TESTS_DIR/client.py' '$T/sock2' call '{\"op\":\"health\"}' --timeout 5 | grep -q '\"ok\":true'"
timeout -k 5 60 "$SANDBOXCTL" --socket "$T/sock2" --json doctor --state-dir "$T/state2" >"$T/out" 2>"$T/err"
msg=$(jq -r '.checks[] | select(.name == "egress") | .message' "$T/out")
fix=$(jq -r '.checks[] | select(.name == "egress") | .fix' "$T/out")
kill "$pid2" 2>/dev/null; wait "$pid2" 2>/dev/null
find "$CG2" -depth -type d -exec rmdir {} + 2>/dev/null
like "$msg" "another sandboxd gives egress" "a second daemon's egress check says another sandboxd gives egress ($msg)"
like "$fix" "stop the other instance" "its fix says to stop the other instance ($fix)"
check "and does not say to install libnftables, which is not the cause" sh -c "! printf '%s' '$fix' | grep -q libnftables"

# ---- without a daemon: cannot run, and how to start it -----------------------------------
timeout -k 5 60 "$SANDBOXCTL" --socket "$T/none.sock" doctor --state-dir "$T/state" >"$T/out" 2>&1
rc=$?
out=$(cat "$T/out")
is "$rc" 2 "doctor exits 2 when there is no socket"
like "$out" "fail  socket +no socket at $T/none.sock" "the missing socket is named"
if [ -d /run/systemd/system ]; then
        like "$out" 'fix: start sandboxd.s socket: sudo systemctl enable --now sandboxd.socket' "the fix says how to start it"
else
        like "$out" "fix: start sandboxd \\(no systemd here\\): sudo sandboxd --listen $T/none.sock" \
                "the fix says how to start it without systemd (PID 1 is not systemd here)"
fi
like "$out" 'controllers' "the host checks run without the daemon"
# A socket nobody listens on (sandboxd stopped): the fix names the command that starts it on
# this host, as the other verbs do, not systemctl where PID 1 is not systemd.
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$T/stale.sock"
timeout -k 5 60 "$SANDBOXCTL" --socket "$T/stale.sock" doctor --state-dir "$T/state" >"$T/out" 2>&1
out=$(cat "$T/out")
like "$out" "fail  daemon +sandboxd does not answer at $T/stale.sock" "a stale socket: the daemon does not answer"
if [ -d /run/systemd/system ]; then
        like "$out" 'fix: nothing listens there: sudo systemctl restart sandboxd.socket' "its fix restarts the socket unit"
else
        like "$out" "fix: nothing listens there \\(a stale socket: sandboxd stopped\\?\\): start it again \\(no systemd here\\): sudo sandboxd --listen $T/stale.sock" \
                "its fix starts sandboxd on that socket, not systemctl (PID 1 is not systemd here)"
        check "and names no systemctl" sh -c "! grep -q systemctl '$T/out'"
fi

# ---- a socket the caller may not use ------------------------------------------------------
if id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
        mkdir -p "$T/priv" && chmod 0755 "$T" "$T/priv"
        python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$T/priv/s.sock"
        groupadd -f sbxtdoctor 2>/dev/null
        chgrp sbxtdoctor "$T/priv/s.sock" && chmod 0660 "$T/priv/s.sock"
        as_other nobody --regid=nogroup --clear-groups -- \
                "$OTHER_SANDBOXCTL" --socket "$T/priv/s.sock" doctor --state-dir /tmp >"$T/out" 2>&1
        rc=$?
        out=$(cat "$T/out")
        groupdel sbxtdoctor 2>/dev/null
        is "$rc" 2 "doctor exits 2 when the caller may not connect"
        like "$out" "fail  socket +$T/priv/s.sock \\(mode 0660, root:sbxtdoctor\\) does not let uid [0-9]+ connect" \
                "the socket's mode and group are named"
        like "$out" 'fix: add your user to the .sbxtdoctor. group: sudo usermod -aG sbxtdoctor nobody, then log in again' \
                "the fix names the group to join"
else
        ok "# SKIP no nobody user or setpriv"
fi
