#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Sessions of a non-root user (root is not capped): `sandboxctl exec` closes the session it
# opened when the command ends, so that many in a row all succeed; an exited session does not
# count against max_sessions_per_uid (the oldest unattached ones make room); a running one does;
# `sandboxctl sessions SBX` lists them and `sandboxctl session close ID` closes one.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

U=65534 CAP=4
mkdir -p "$T"
printf 'max_sessions_per_uid = %s\n' $CAP >"$T/sandboxd.conf"
start_daemon --config "$T/sandboxd.conf" || exit 0
chmod 0755 "$T" && chmod 0666 "$SOCK"
check "the client and sandboxctl are copied where uid $U may run them" other_user_files
u_ctl() { as_other $U --regid=$U --clear-groups -- timeout -k 5 60 "$OTHER_SANDBOXCTL" --socket "$SOCK" "$@"; }
session_exited() { u_ctl sessions s1 | grep -q "^$1 *exited"; }
u_rpc() { as_other $U --regid=$U --clear-groups -- timeout 35 python3 "$OTHER_CLIENT" "$SOCK" call "$1" --timeout 30; }

sbx=$(jget "$(u_rpc '{"op":"create","best_effort":true,"name":"s1"}')" .sandbox.id)
like "$sbx" '^sbx-' "uid $U creates a sandbox ($sbx)"

# 1. sandboxctl exec, many more times than the cap.
fails=0
for i in $(seq 1 $((CAP * 3))); do
        out=$(u_ctl exec s1 -- echo "n$i" 2>"$T/exec.err")
        [ "$out" = "n$i" ] || { fails=$((fails + 1)); diag "exec $i: '$out' $(cat "$T/exec.err")"; }
done
is "$fails" 0 "$((CAP * 3)) sandboxctl exec in a row as uid $U all succeed (max_sessions_per_uid = $CAP)"
is "$(u_ctl sessions -q s1)" "" "sandboxctl exec closed each session it opened: none is left"
is "$(u_ctl sessions s1)" "No sessions." "sandboxctl sessions says so"

# 2. Exited sessions opened over the protocol (nobody closes them) do not count.
fails=0
for i in $(seq 1 $((CAP + 2))); do
        r=$(u_rpc '{"op":"pty.open","sandbox":"s1","pty":false,"argv":["true"]}')
        [ "$(jget "$r" .ok)" = true ] || { fails=$((fails + 1)); diag "pty.open $i: $r"; }
        p=$(jget "$r" .session)
        # As the owner: the name s1 is uid $U's (root's lookup of it finds nothing).
        wait_until 10 session_exited "$p" || { fails=$((fails + 1)); diag "pty.open $i: $p is not listed as exited"; }
done
is "$fails" 0 "$((CAP + 2)) sessions whose program exited: each pty.open succeeds"
n=$(u_ctl sessions s1 | grep -c ' exited ')
check "the exited ones are listed, at most $CAP kept ($n)" [ "$n" -ge 1 ] && [ "$n" -le $CAP ]

# 3. Running sessions still count; session close ends one.
ids=()
for i in $(seq 1 $CAP); do
        ids+=("$(jget "$(u_rpc '{"op":"pty.open","sandbox":"s1","pty":false,"argv":["sleep","1000"]}')" .session)")
done
like "${ids[*]}" "^(pty-[0-9a-f]{12} ?){$CAP}\$" "$CAP sessions running sleep 1000"
# Each session's helper is a clone of the daemon: named for what it is, not shown as the daemon.
is "$(daemon_children_named sandbox-session)" "$CAP" "each running session's helper is named sandbox-session"
_as_daemon() {
        local p n=0
        for p in $(cat "/proc/$DAEMON_PID/task/"*/children 2>/dev/null); do
                cmp -s "/proc/$p/cmdline" "/proc/$DAEMON_PID/cmdline" && n=$((n + 1))
        done
        echo "$n"
}
is "$(_as_daemon)" 0 "none of the daemon's children has the daemon's command line (pgrep -f finds the daemon alone)"
r=$(u_rpc '{"op":"pty.open","sandbox":"s1","pty":false,"argv":["sleep","1000"]}')
is "$(jget "$r" .error.code)" resource_exhausted "a running session past the cap is refused"
like "$(jget "$r" .error.message)" "maximum of $CAP running sessions" "the message says running sessions ($(jget "$r" .error.message))"
is "$(u_ctl sessions s1 | grep -c ' running ')" $CAP "sandboxctl sessions lists the $CAP running ones"
out=$(u_ctl session close "${ids[0]}")
like "$out" "^closed ${ids[0]} \\(closed, exit code 129, signal HUP\\)" "sandboxctl session close ends one ($out)"
left=$(u_ctl sessions -q s1 | sort | tr '\n' ' ')
is "$left" "$(printf '%s\n' "${ids[@]:1}" | sort | tr '\n' ' ')" "it is gone from the list, the other $((CAP - 1)) are there"
r=$(u_rpc '{"op":"pty.open","sandbox":"s1","pty":false,"argv":["true"]}')
is "$(jget "$r" .ok)" true "which makes room for another"
u_ctl session close nosuch-session >/dev/null 2>"$T/close.err"
is "$?" 1 "session close of an unknown id exits 1"
like "$(cat "$T/close.err")" "not_found" "and says not_found ($(cat "$T/close.err"))"
