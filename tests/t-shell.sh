#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# sandboxctl shell / attach driven like a person would, inside tmux: type a command, resize the
# window and see it inside, interrupt sleep 1000 with Ctrl-C, detach with Ctrl-] (or the key of
# --detach-key), attach again,
# exit with a code that becomes sandboxctl's, and find the local terminal as it was.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

command -v tmux >/dev/null || skip_all "tmux is not installed (scripts/deps.sh installs it)"
start_daemon || exit 0
sbx=$(jget "$(rpc '{"op":"create","best_effort":true}')" .sandbox.id)
# One tmux server per step (-L), so that a server still shutting down is never reused.
tm_server=0
TM="tmux -L sbxtest-$$-$tm_server -f /dev/null"
tm_new() {
        $TM kill-server 2>/dev/null
        tm_server=$((tm_server + 1))
        TM="tmux -L sbxtest-$$-$tm_server -f /dev/null"
        $TM new-session -d -s t -x 100 -y 30 "$1"
        $TM set-option -t t status off >/dev/null
}

# The pane runs sandboxctl under a shell that records its status and whether the terminal
# settings came back as they were.
pane_cmd() {
        printf 'before=$(stty -g); %s --socket %s %s 2>>%s; st=$?; after=$(stty -g); ' "$SANDBOXCTL" "$SOCK" "$1" "$T/stderr"
        printf 'same=no; [ "$before" = "$after" ] && same=yes; echo "STATUS=$st SAME=$same" >%s; ' "$2"
        printf 'sleep 2'
}
screen() { $TM capture-pane -p -t t 2>/dev/null; }
screen_has() { screen | grep -q -- "$1"; }
type_line() { $TM send-keys -t t -l "$1" && $TM send-keys -t t Enter; }
sleeping() {
        local p
        for p in $(cat $(find "$CG/sandboxes/$sbx" -name cgroup.procs) 2>/dev/null); do
                tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null
                echo
        done | grep -q '^sleep 1000'
}

tm_new "$(pane_cmd "shell $sbx" "$T/status1")"
$TM resize-window -t t -x 100 -y 30 2>/dev/null
check "the shell's prompt appears ($: the unprivileged user)" wait_until 20 screen_has '\$$'
type_line 'echo hello-$((6*7))'
check "a typed command runs in the sandbox" wait_until 20 screen_has 'hello-42'
type_line 'stty size'
check "stty size inside matches the window (30 100)" wait_until 20 screen_has '^30 100'
$TM resize-window -t t -x 120 -y 40
type_line 'clear; stty size'
check "after resizing the window, stty size inside says 40 120" wait_until 20 screen_has '^40 120'
type_line 'sleep 1000'
check "sleep 1000 runs" wait_until 20 sleeping
$TM send-keys -t t C-c
type_line 'echo after-$?'
check "Ctrl-C interrupts it (status 130 inside)" wait_until 20 screen_has 'after-130'
type_line 'exit 3'
check "the shell exits" wait_until 20 test -s "$T/status1"
is "$(cat "$T/status1" 2>/dev/null)" "STATUS=3 SAME=yes" "sandboxctl exits with the shell's status 3; the terminal is restored"

# Detach and attach again.
tm_new "$(pane_cmd "shell $sbx" "$T/status2")"
check "a second shell" wait_until 20 screen_has '\$$'
type_line 'echo first-$((1+1))'
check "runs a command" wait_until 20 screen_has 'first-2'
$TM send-keys -t t C-]
check "Ctrl-] detaches" wait_until 20 test -s "$T/status2"
is "$(cat "$T/status2" 2>/dev/null)" "STATUS=0 SAME=yes" "a detach exits 0 with the terminal restored"
session=$(grep -o 'pty-[0-9a-f]*' "$T/stderr" | tail -n 1)
like "$session" '^pty-[0-9a-f]{12}$' "sandboxctl named the session ($session)"
tm_new "$(pane_cmd "attach --from-seq 0 $session" "$T/status3")"
check "sandboxctl attach --from-seq 0 replays the output from its first byte" wait_until 20 screen_has 'first-2'
type_line 'exit 4'
check "the attached shell exits" wait_until 20 test -s "$T/status3"
is "$(cat "$T/status3" 2>/dev/null)" "STATUS=4 SAME=yes" "sandboxctl attach exits with the shell's status 4"

# Another detach key: Ctrl-] then reaches the program, Ctrl-Q detaches.
tm_new "$(pane_cmd "shell --detach-key ctrl-q $sbx" "$T/status4")"
check "a shell with --detach-key ctrl-q" wait_until 20 screen_has '\$$'
type_line 'cat -v'
$TM send-keys -t t C-] Enter
check "Ctrl-] goes to the program (cat -v shows ^])" wait_until 20 screen_has '^\^]$'
$TM send-keys -t t C-c
$TM send-keys -t t C-q
check "Ctrl-Q detaches" wait_until 20 test -s "$T/status4"
is "$(cat "$T/status4" 2>/dev/null)" "STATUS=0 SAME=yes" "the detach exits 0 with the terminal restored"
ctl shell --detach-key ctrl-1 "$sbx" </dev/null 2>"$T/err"
is "$?" 125 "--detach-key ctrl-1: refused (status 125)"
like "$(cat "$T/err")" "not ctrl-X" "with a message saying what a key is"
$TM kill-server 2>/dev/null

# A script piping into shell: the commands run, the status comes through, and the session is
# named on stderr (no detach key: the keys are not a terminal's), as sandboxctl(1) says.
out=$(printf 'echo piped; exit 2\n' | ctl shell "$sbx" 2>"$T/err")
is "$?" 2 "shell with a pipe on stdin: the shell's exit status"
like "$out" "piped" "and its output"
like "$(cat "$T/err")" '^sandboxctl: session pty-[0-9a-f]+$' "and the session on stderr, without a detach key ($(cat "$T/err"))"

# exec: -it like shell; without -t pipes, with stdin, stdout and stderr apart.
out=$(printf 'abc\n' | ctl exec -i "$sbx" -- sh -c 'read x; echo out:$x; echo err:$x >&2; exit 5' 2>"$T/err")
is "$?:$out:$(cat "$T/err")" "5:out:abc:err:abc" "exec -i (pipes): stdin in, stdout and stderr apart, exit status through"
out=$(ctl exec "$sbx" -- sh -c 'cat; echo done')
is "$?:$out" "0:done" "exec without -i: the command's stdin is empty"
# exec -t, no -i, no terminal of ours: the session's terminal gets its end of input (Ctrl-D), so a
# shell reading it ends, as on an empty stdin.
out=$(printf 'echo never\n' | ctl exec -t "$sbx" -- sh -c 'read x || echo eof; exit 3' 2>"$T/err")
is "$?" 3 "exec -t with a pipe on stdin and no -i: the program's input ends at once, its status comes through"
like "$out" "eof" "it read end of input, not the pipe's line ($out)"
# attach with stdin not a terminal: it says it stays until the session ends, and it does.
s=$(jget "$(rpc "{\"op\":\"pty.open\",\"sandbox\":\"$sbx\",\"argv\":[\"sh\",\"-c\",\"sleep 1; echo late; exit 4\"]}")" .session)
out=$(ctl attach "$s" </dev/null 2>"$T/err")
is "$?" 4 "attach </dev/null stays until the session ends, and exits with its status"
like "$out" "late" "with its output"
like "$(cat "$T/err")" "stdin is not a terminal: attached until session $s ends" "and says once why it stays ($(cat "$T/err"))"
ctl exec "$sbx" -- /nonexistent/x 2>"$T/err"
is "$?" 125 "exec of a missing program: status 125"
like "$(cat "$T/err")" "spawn_failed" "and the error says spawn_failed"
stop_daemon
