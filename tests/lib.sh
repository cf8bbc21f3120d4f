# SPDX-License-Identifier: LGPL-2.1-or-later
# Shared helpers of the host integration tests (tests/t-*.sh), sourced by each of them.
#
# What a test gets:
#   TAP:      ok DESC, nok DESC, check DESC CMD..., is GOT EXPECTED DESC, like GOT ERE DESC, unlike GOT ERE DESC,
#             diag TEXT..., skip_all REASON.  The plan is printed at the end ("1..N"), always,
#             and the script always exits 0: failures are "not ok" lines, never the exit status
#             (the tap-driver would call a non-zero exit an ERROR).
#   Daemon:   start_daemon [ARGS...], start_daemon_activated [ARGS...], stop_daemon,
#             DAEMON_PID, SOCK ($T/sock), CG (this test's own cgroup2 directory), T (temp dir).
#             The daemon keeps no pool of ready sandboxes (--pool-size 0) unless POOL_SIZE is
#             set, so that a test's counts of cgroups and workspaces are its own sandboxes'.
#   Protocol: rpc JSON (prints the final reply; tests/client.py), jget JSON JQ-FILTER,
#             run_py NAME [TIMEOUT] [ARGS...] <<'EOF' ... EOF  (a Python snippet whose
#             "PASS desc"/"FAIL desc" lines become TAP results; see tests/client.py for the
#             Conn class and the check()/is_() helpers it can import).
#   CLI:      ctl ARGS... = sandboxctl --socket $SOCK ARGS...
#   Others:   other_user_files (copies of client.py, sandboxctl, sandboxd that any uid may run:
#             OTHER_CLIENT, OTHER_SANDBOXCTL, OTHER_SANDBOXD), as_other UID [OPTS] -- CMD...
#   Probes:   daemon_fds, daemon_rss_kb, daemon_children_named NAME, cg_child_count,
#             cg_procs, cg_procs_but_warm, wait_until TIMEOUT CMD...
# Everything the test made (the daemon, $T, the cgroup directories) is removed by an EXIT trap,
# also when the test dies half-way.

: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
if [ -z "${top_builddir:-}" ]; then
        if [ -x "$top_srcdir/build/daemon/sandboxd" ]; then
                top_builddir=$top_srcdir/build
        else
                top_builddir=$top_srcdir
        fi
fi
TESTS_DIR=$top_srcdir/tests
SANDBOXD=$top_builddir/daemon/sandboxd
SANDBOXCTL=$top_builddir/ctl/sandboxctl
TEST_NAME=$(basename "$0" .sh)
export PYTHONDONTWRITEBYTECODE=1

_tap_n=0
_tap_failed=0
_tap_done=0
DAEMON_PID=
T=
CG=

# ---- TAP ---------------------------------------------------------------------------------

diag() {
        local line
        printf '%s\n' "$*" | while IFS= read -r line; do printf '# %s\n' "$line"; done
}

ok() {
        _tap_n=$((_tap_n + 1))
        printf 'ok %d - %s\n' "$_tap_n" "$*"
}

nok() {
        _tap_n=$((_tap_n + 1))
        _tap_failed=$((_tap_failed + 1))
        printf 'not ok %d - %s\n' "$_tap_n" "$*"
}

# check DESC CMD... : ok when CMD succeeds.
check() {
        local desc=$1
        shift
        if "$@"; then ok "$desc"; else nok "$desc"; fi
}

# is GOT EXPECTED DESC
is() {
        if [ "$1" = "$2" ]; then
                ok "$3"
        else
                nok "$3"
                diag "got:      '$1'" "expected: '$2'"
        fi
}

# like GOT ERE DESC (unlike: GOT must not match)
like() {
        if [[ $1 =~ $2 ]]; then
                ok "$3"
        else
                nok "$3"
                diag "got:      '$(printf '%s' "$1" | head -c 2000)'" "expected to match: $2"
        fi
}
unlike() {
        if [[ $1 =~ $2 ]]; then
                nok "$3"
                diag "got:      '$(printf '%s' "$1" | head -c 2000)'" "expected not to match: $2"
        else
                ok "$3"
        fi
}

skip_all() {
        printf '1..0 # SKIP %s\n' "$*"
        _tap_done=1
        exit 0
}

_finish_plan() {
        [ "$_tap_done" = 1 ] && return
        _tap_done=1
        printf '1..%d\n' "$_tap_n"
        [ "$_tap_failed" -gt 0 ] && diag "$_tap_failed of $_tap_n failed"
        return 0
}

# ---- Environment -------------------------------------------------------------------------

cgroup2_mount() {
        # "36 25 0:31 / /sys/fs/cgroup/unified rw,... - cgroup2 cgroup2 rw": the fs type after " - ".
        sed -n 's/^[^ ]* [^ ]* [^ ]* [^ ]* \([^ ]*\) .* - cgroup2 .*/\1/p' /proc/self/mountinfo | head -n1
}

_require() {
        [ "$(id -u)" = 0 ] || skip_all "must run as root (sandboxd creates user namespaces and cgroups)"
        [ -x "$SANDBOXD" ] || skip_all "no daemon binary at $SANDBOXD (build the tree first)"
        command -v python3 >/dev/null || skip_all "python3 is not installed"
        command -v jq >/dev/null || skip_all "jq is not installed"
        CG_MOUNT=$(cgroup2_mount)
        [ -n "$CG_MOUNT" ] || skip_all "no cgroup2 hierarchy is mounted"
}

# ---- Cleanup -----------------------------------------------------------------------------

# Removes $CG bottom-up; processes still inside are a failure of whoever left them, so they are
# killed first only when asked to ("force").
_cg_remove_tree() {
        local force=$1 d
        [ -n "$CG" ] && [ -d "$CG" ] || return 0
        if [ "$force" = force ]; then
                [ -e "$CG/cgroup.kill" ] && echo 1 >"$CG/cgroup.kill" 2>/dev/null
                wait_until 5 _cg_unpopulated
        fi
        find "$CG" -depth -mindepth 1 -type d 2>/dev/null | while IFS= read -r d; do
                rmdir "$d" 2>/dev/null
        done
        rmdir "$CG" 2>/dev/null
        [ ! -d "$CG" ]
}

_cg_unpopulated() {
        ! grep -q '^populated 1' "$CG/cgroup.events" 2>/dev/null
}

# v1_sandbox_dirs: directories named like sandbox*/sbx* in any cgroup hierarchy other than the
# cgroup2 one (HOST.md: the v1 hierarchies are the machine's own and must never be touched).
v1_sandbox_dirs() {
        local m
        for m in $(awk '$3 == "cgroup" { print $2 }' /proc/self/mounts); do
                find "$m" -mindepth 1 -maxdepth 6 -type d \( -iname '*sandbox*' -o -iname '*sbx*' \) 2>/dev/null
        done
}

# _daemon_end: the daemon, if it still runs, gets SIGTERM, 10 s, then SIGKILL; DAEMON_PID is
# cleared. For cleanups (stop_daemon is the one that checks how it went).
_daemon_end() {
        if [ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
                kill -TERM "$DAEMON_PID" 2>/dev/null
                wait_until 10 _daemon_gone
                kill -KILL "$DAEMON_PID" 2>/dev/null
                wait "$DAEMON_PID" 2>/dev/null
        fi
        DAEMON_PID=
}

# _descendants: this shell's processes, all generations, with their state and where they wait
# (not the ones that list them).
_descendants() {
        local self=$BASHPID
        ps -eo pid=,ppid=,stat=,wchan:24=,etime=,args= 2>/dev/null | awk -v top=$$ -v self="$self" '
                { line[$1] = $0; parent[$1] = $2 }
                END {
                        for (p in line) {
                                for (q = parent[p]; q != "" && q != 0 && q != top; q = parent[q]) ;
                                if (q == top && p != self && parent[p] != self) print line[p]
                        }
                }' | sort -n | head -n 40
}

_cleanup() {
        local rc=$?
        set +e
        # Stopped by a signal or a failure before the end (timed-driver.sh's timeout, say): what
        # was still running and what the daemon said last, before both are gone.
        if [ "$rc" != 0 ] && [ "$_tap_done" != 1 ]; then
                diag "still running under this test:"
                diag "$(_descendants)"
                [ -n "$T" ] && [ -s "$T/daemon.log" ] && diag "the daemon's last lines:" && diag "$(tail -n 20 "$T/daemon.log")"
        fi
        _daemon_end
        if [ -n "$CG" ] && [ -d "$CG" ]; then
                if ! _cg_remove_tree force; then
                        nok "cleanup: remove the test cgroup $CG"
                        diag "$(find "$CG" -type d 2>/dev/null)"
                fi
        fi
        if [ -n "$T" ] && [ -d "$T" ]; then
                # SBX_TEST_KEEP_DIR: where the daemon's log is copied before the directory goes (to debug).
                [ -n "${SBX_TEST_KEEP_DIR:-}" ] && cp "$T/daemon.log" "$SBX_TEST_KEEP_DIR/" 2>/dev/null
                rm -rf --one-file-system "$T"
        fi
        [ "$rc" != 0 ] && [ "$_tap_done" != 1 ] && diag "the test script stopped with status $rc"
        if [ "$_tap_done" != 1 ]; then
                local v1
                v1=$(v1_sandbox_dirs)
                is "$v1" "" "no cgroup v1 hierarchy has a sandbox*/sbx* directory"
        fi
        _finish_plan
        exit 0
}

_setup() {
        _require
        T=$(mktemp -d "${TMPDIR:-/tmp}/sbxt-$TEST_NAME.XXXXXX") || skip_all "mktemp failed"
        chmod 0755 "$T"
        SOCK=$T/sock
        OTHER_DIR=$T/other-user OTHER_CLIENT=$T/other-user/client.py
        OTHER_SANDBOXCTL=$T/other-user/sandboxctl OTHER_SANDBOXD=$T/other-user/sandboxd
        CG=$CG_MOUNT/sandboxd-test-$TEST_NAME-$$
        export SOCK CG T TESTS_DIR
        trap _cleanup EXIT
        trap 'exit 1' INT TERM HUP
}

# ---- Another user ------------------------------------------------------------------------

# other_user_files: $T/other-user, readable by every user, holding copies of what a test runs
# as another uid (client.py, ptyclient.py, sandboxctl, sandboxd and the build's libraries), so
# that no such test depends on where the checkout is (a checkout under /root, mode 0700, is not
# readable by uid 65534). The copies are OTHER_CLIENT (client.py), OTHER_SANDBOXCTL and
# OTHER_SANDBOXD (programs that run the copies), set by _setup; as_other makes them when it is
# first called. Status 1 when something could not be copied.
other_user_files() {
        local d=$OTHER_DIR prog real
        [ -f "$d/.done" ] && return 0
        mkdir -p "$d/bin" "$d/lib" || return 1
        cp "$TESTS_DIR/client.py" "$TESTS_DIR/ptyclient.py" "$d/" || return 1
        for prog in ctl/sandboxctl daemon/sandboxd; do
                # A libtool build runs its programs through a wrapper script that sets the library path
                # to the build tree: copy the real program from .libs/ and the libraries instead.
                real=$top_builddir/$(dirname "$prog")/.libs/$(basename "$prog")
                [ -f "$real" ] || real=$top_builddir/$prog
                cp "$real" "$d/bin/" || return 1
                printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib exec %s/bin/%s "$@"\n' "$d" "$d" "$(basename "$prog")" >"$d/$(basename "$prog")"
        done
        for real in "$top_builddir"/lib/.libs/*.so*; do
                [ -e "$real" ] && { cp -P "$real" "$d/lib/" || return 1; }
        done
        chmod -R a+rX "$d" && chmod 0755 "$T" "$d/sandboxctl" "$d/sandboxd" && touch "$d/.done"
}

# as_other UID [setpriv options...] -- COMMAND...: COMMAND as UID (and gid UID unless the options
# say otherwise), from a working directory that uid may read.
as_other() {
        local uid=$1
        shift
        local opts=()
        while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
        shift
        other_user_files || { diag "could not copy the test's programs to $T/other-user"; return 125; }
        (cd "$OTHER_DIR" && setpriv --reuid="$uid" "${opts[@]}" -- "$@")
}

# ---- Waiting -----------------------------------------------------------------------------

# wait_until SECONDS CMD... : polls CMD up to SECONDS * 10 times, 0.1 s apart; status 0 when it
# succeeded. The time CMD itself takes comes on top: a bound that stays generous under ASan and
# load (an rpc-based CMD makes "60" about two minutes), for hang detectors, not measurements.
wait_until() {
        local limit=$1 i=0
        shift
        while [ "$i" -lt $((limit * 10)) ]; do
                "$@" && return 0
                sleep 0.1
                i=$((i + 1))
        done
        "$@"
}

# wait_ready SANDBOX [SECONDS]: until root's inspect says ready (default 60 s); SANDBOX by id, or
# by a name of root's own (names are per owner). A sandbox that a start must make again (its init
# did not outlive the daemon) is "creating" for a while after the daemon answers, longer under
# ASan on a loaded machine: "it is back" means it became ready.
_sandbox_ready() { [ "$(jget "$(rpc "{\"op\":\"inspect\",\"sandbox\":\"$1\"}" 10)" .sandbox.state)" = ready ]; }
wait_ready() {
        wait_until "${2:-60}" _sandbox_ready "$1"
}

_daemon_gone() {
        ! kill -0 "$DAEMON_PID" 2>/dev/null
}

# ---- Protocol ----------------------------------------------------------------------------

# rpc JSON [TIMEOUT]: the final reply to one request on a fresh connection.
rpc() {
        local t=${2:-30}
        timeout -k 5 $((t + 5)) python3 "$TESTS_DIR/client.py" "$SOCK" call "$1" --timeout "$t"
}

# jget JSON FILTER: jq -r FILTER, or "" when the JSON cannot be read.
jget() {
        printf '%s' "$1" | jq -r "$2" 2>/dev/null
}

# run_py NAME [TIMEOUT] [ARGS...] <<'EOF' ... EOF
run_py() {
        local name=$1 t=${2:-60} rc line
        shift 2 2>/dev/null || shift $#
        DAEMON_PID=$DAEMON_PID PYTHONPATH=$TESTS_DIR timeout -k 5 "$t" python3 -u - "$@" >"$T/py.out" 2>"$T/py.err"
        rc=$?
        while IFS= read -r line; do
                case $line in
                "PASS "*) ok "${line#PASS }" ;;
                "FAIL "*) nok "${line#FAIL }" ;;
                *) printf '# %s\n' "$line" ;;
                esac
        done <"$T/py.out"
        if [ "$rc" = 0 ]; then
                ok "$name: the checks ran to the end"
        else
                nok "$name: the checks stopped (status $rc; 124 is a timeout)"
                diag "$(tail -n 20 "$T/py.err")"
        fi
}

ctl() {
        timeout -k 5 60 "$SANDBOXCTL" --socket "$SOCK" "$@"
}

# ---- The daemon --------------------------------------------------------------------------

_health_ok() {
        rpc '{"id":"ready","op":"health"}' 5 2>/dev/null | grep -q '"ok":true'
}

_wait_ready() {
        local i
        for i in $(seq 1 150); do
                kill -0 "$DAEMON_PID" 2>/dev/null || return 1
                [ -S "$SOCK" ] && _health_ok && return 0
                sleep 0.1
        done
        return 1
}

_daemon_failed_to_start() {
        nok "$1"
        diag "$(tail -n 30 "$T/daemon.log" 2>/dev/null)"
        if [ -n "$DAEMON_PID" ]; then
                kill -KILL "$DAEMON_PID" 2>/dev/null
                wait "$DAEMON_PID" 2>/dev/null
        fi
        DAEMON_PID=
        return 1
}

# start_daemon [ARGS...]: sandboxd --listen $SOCK with this test's state dir and cgroup, as a
# child of the test; returns once the socket answers "health". A stop kills every sandbox
# (--stop-sandboxes, which stop_daemon checks) unless KEEP_SANDBOXES=1: the tests of restarts
# that keep the processes (t-restart-standalone.sh).
_stop_opt() {
        [ "${KEEP_SANDBOXES:-0}" = 1 ] || echo --stop-sandboxes
}

start_daemon() {
        mkdir -p "$T/state"
        # shellcheck disable=SC2046
        "$SANDBOXD" --listen "$SOCK" --state-dir "$T/state" --cgroup-root "$CG" --pool-size "${POOL_SIZE:-0}" $(_stop_opt) "$@" >>"$T/daemon.log" 2>&1 &
        DAEMON_PID=$!
        export DAEMON_PID
        _wait_ready || _daemon_failed_to_start "sandboxd started and answers health on $SOCK"
}

# start_daemon_activated [ARGS...]: the same through systemd-socket-activate (the daemon takes
# its listening socket from sd_listen_fds); ACTIVATE_ARGS: more of systemd-socket-activate's
# options (more -l sockets, --fdname=...).
start_daemon_activated() {
        mkdir -p "$T/state"
        # shellcheck disable=SC2086
        systemd-socket-activate -l "$SOCK" ${ACTIVATE_ARGS:-} \
                "$SANDBOXD" --state-dir "$T/state" --cgroup-root "$CG" --pool-size "${POOL_SIZE:-0}" $(_stop_opt) "$@" >>"$T/daemon.log" 2>&1 &
        DAEMON_PID=$!
        export DAEMON_PID
        _wait_ready || _daemon_failed_to_start "socket-activated sandboxd answers health on $SOCK"
}

# stop_daemon: SIGTERM, wait, then remove this test's cgroup directories bottom-up. The daemon
# must have emptied and removed every sandbox cgroup and left its own leaf.
stop_daemon() {
        local rc left
        [ -n "$DAEMON_PID" ] || return 0
        kill -TERM "$DAEMON_PID" 2>/dev/null
        if wait_until 15 _daemon_gone; then
                wait "$DAEMON_PID"
                rc=$?
        else
                nok "sandboxd exits within 15 s of SIGTERM"
                kill -KILL "$DAEMON_PID" 2>/dev/null
                wait "$DAEMON_PID" 2>/dev/null
                rc=killed
        fi
        is "$rc" 0 "sandboxd exits with status 0 on SIGTERM"
        [ "$rc" = 0 ] || diag "$(tail -n 20 "$T/daemon.log")"
        DAEMON_PID=
        [ -d "$CG" ] || { nok "the daemon's cgroup $CG exists"; return 1; }
        # The daemon waited for its workspace removers at the stop (remove_async_stop()) and they die
        # with it; the leaf may take a moment to show them gone.
        wait_until 10 _cg_leaf_empty "$CG/daemon"
        left=$(find "$CG/sandboxes" -mindepth 1 -type d 2>/dev/null | wc -l)
        is "$left" 0 "no sandbox cgroup is left after the daemon stopped"
        [ "$left" = 0 ] || diag "$(find "$CG/sandboxes" -mindepth 1 -type d; cat $(find "$CG/sandboxes" -name cgroup.procs) 2>/dev/null)"
        find "$CG/sandboxes" -depth -mindepth 1 -type d -exec rmdir {} + 2>/dev/null
        check "rmdir $CG/sandboxes" rmdir "$CG/sandboxes"
        if rmdir "$CG/daemon" 2>/dev/null; then
                ok "rmdir $CG/daemon (no process left in the daemon's leaf)"
        else
                nok "rmdir $CG/daemon (no process left in the daemon's leaf)"
                diag "processes: $(tr '\n' ' ' <"$CG/daemon/cgroup.procs" 2>/dev/null)"
                for p in $(cat "$CG/daemon/cgroup.procs" 2>/dev/null); do diag "$p: $(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null)"; done
        fi
        check "rmdir $CG" rmdir "$CG"
}

_cg_leaf_empty() {
        [ ! -s "$1/cgroup.procs" ]
}

# ---- Probes ------------------------------------------------------------------------------

# The daemon's fds, less the network namespaces it keeps for the next sandboxes (their number
# depends on how many sandboxes went, not on a leak: health's netns.idle, daemon/host/netns-pool.h).
daemon_fds() {
        find "/proc/$DAEMON_PID/fd" -mindepth 1 -printf '%l\n' 2>/dev/null | grep -vc '^net:\['
}

daemon_rss_kb() {
        awk '/^VmRSS:/ { print $2 }' "/proc/$DAEMON_PID/status" 2>/dev/null
}

# Whether the daemon under test is a sanitizer (ASan) build, whose quarantine keeps freed memory
# resident: RSS says nothing there (the gcc build checks it; LeakSanitizer checks this one at exit).
daemon_is_asan() {
        grep -q __asan_init "$SANDBOXD" 2>/dev/null
}

# check_rss_within BASE_KB NOW_KB LIMIT_KB DESC: NOW - BASE < LIMIT, skipped in an ASan build.
check_rss_within() {
        if daemon_is_asan; then
                ok "$4 # SKIP an ASan build holds freed memory in quarantine"
        else
                check "$4" [ $(($2 - $1)) -lt "$3" ]
        fi
}

# daemon_children_named COMM: how many of the daemon's children have that name.
daemon_children_named() {
        local n=0 p
        for p in $(cat "/proc/$DAEMON_PID/task/"*/children 2>/dev/null); do
                [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$1" ] && n=$((n + 1))
        done
        echo "$n"
}

# cg_child_count: cgroups below $CG/sandboxes (sandboxes and their runs).
cg_child_count() {
        find "$CG/sandboxes" -mindepth 1 -type d 2>/dev/null | wc -l
}

# cg_procs [DIR]: every pid in the cgroup subtree (default: $CG/sandboxes).
cg_procs() {
        find "${1:-$CG/sandboxes}" -name cgroup.procs -exec cat {} + 2>/dev/null
}
# cg_procs_but_warm [DIR]: the same but for the daemon's helpers waiting, warm, for a sandbox's
# next run (docs/architecture.md, "The next run, made ahead"): the processes of runs and sessions
# and the inits.
cg_procs_but_warm() {
        local p
        for p in $(cg_procs "$@"); do
                [ "$(cat "/proc/$p/comm" 2>/dev/null)" = sandboxd-warm ] || echo "$p"
        done
}

# daemon_fd_baseline: the daemon's fd count at rest, once sd-event has made the timerfd it keeps
# for its first timer (a request split over two writes arms the partial-line timer).
daemon_fd_baseline() {
        timeout 20 python3 - <<'EOF' >/dev/null 2>&1
import os, sys, time
sys.path.insert(0, os.environ["TESTS_DIR"])
from client import Conn
c = Conn(os.environ["SOCK"])
c.send_raw(b'{"id":1,"op":')
time.sleep(0.2)
c.send_raw(b'"health"}\n')
c.recv_line(10)
c.close()
EOF
        sleep 0.3
        daemon_fds
}

# wait_fds N: the daemon's fd count comes back to N within 5 s.
_fds_are() { [ "$(daemon_fds)" = "$1" ]; }
wait_fds() { wait_until 5 _fds_are "$1"; }

_setup

# The daemon under tests/fake-fdstore.py, a stand-in for systemd's fd store (the restart tests):
# MGR is the stand-in's pid, $T/store lists what it holds, $T/daemon.pid the daemon it started
# last (it starts the next one when that one exits); daemon_up [OLD_PID] waits for one that answers
# and is not OLD_PID, and sets DAEMON_PID.
start_under_fake_fdstore() { # [DAEMON ARGS...]
        mkdir -p "$T/state"
        python3 "$TESTS_DIR/fake-fdstore.py" "$T/notify" "$T/store" "$T/daemon.pid" -- \
                "$SANDBOXD" --listen "$SOCK" --state-dir "$T/state" --cgroup-root "$CG" --pool-size 0 "$@" >>"$T/daemon.log" 2>&1 &
        MGR=$!
}
_pid_file() { [ -s "$T/daemon.pid" ] && [ "$(cat "$T/daemon.pid")" != "${1:-}" ]; }
daemon_up() { # OLD_PID: the one it must not be
        wait_until 10 _pid_file "${1:-}" && DAEMON_PID=$(cat "$T/daemon.pid") && wait_until 15 _health_ok
}
