#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The examples (examples/c/run-command.c on libsandbox, examples/python/run_command.py on the
# sandboxd package, python/; and copy-files.c, copy_files.py: a file in, a command, a result out)
# against a private daemon: each creates a sandbox, prints the "started" event
# before the result, runs `echo hello` with its output streamed (a command that waits for the test
# to see its first line proves the output arrives while it runs), passes a failing exit code on,
# destroys its sandbox, and
# reports daemon errors (an unreachable socket, limit_unenforceable) with a non-zero status.
# best_effort is asked for through SANDBOX_BEST_EFFORT=1 or --best-effort: this kind of host
# offers no cgroup v2 controller.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

C_EXAMPLE=$top_builddir/examples/c/run-command
PY_EXAMPLE=$top_srcdir/examples/python/run_command.py

start_daemon || exit 0

# example NAME ARGS...: runs one example against $SOCK; stdout in $T/out, stderr in $T/err,
# status in $rc.
example() {
        local name=$1
        shift
        case $name in
        c) set -- "$C_EXAMPLE" "$@" ;;
        python) set -- python3 "$PY_EXAMPLE" "$@" ;;
        esac
        SANDBOXD_SOCKET=${EX_SOCKET:-$SOCK} timeout -k 5 60 "$@" >"$T/out" 2>"$T/err"
        rc=$?
}

no_sandbox_left() {
        is "$(ctl list -q)" "" "$1: sandboxctl list -q is empty afterwards"
        is "$(jget "$(rpc '{"id":1,"op":"health"}')" .sandboxes)" 0 "$1: health counts 0 sandboxes"
        is "$(cg_child_count)" 0 "$1: no sandbox cgroup is left"
}

# check_hello NAME: the output of a successful `echo hello`.
check_hello() {
        local name=$1 out id started
        out=$(cat "$T/out")
        is "$rc" 0 "$name: echo hello exits 0"
        [ "$rc" = 0 ] || diag "$(cat "$T/err")"
        id=$(sed -n 's/^created: //p' "$T/out")
        like "$id" '^sbx-[0-9a-f]{12}$' "$name: prints the id of the sandbox it created"
        started=$(grep -n '^started: ' "$T/out")
        like "$started" "^[0-9]+:started: run run-[0-9a-f]+ in $id\$" "$name: prints the started event, naming the run and the sandbox"
        like "$out" $'started: [^\n]*\nhello\nexit_code: 0\nreason: exited\n' \
                "$name: the started event, then the streamed output hello, then the result: exit code 0, reason exited"
        like "$out" $'\ndestroyed: '"$id"'$' "$name: destroys the sandbox last"
        is "$(jget "$(rpc "{\"id\":1,\"op\":\"inspect\",\"sandbox\":\"$id\"}")" .error.code)" not_found \
                "$name: inspect of the destroyed sandbox is not_found"
        no_sandbox_left "$name"
}

check_failure() {
        local name=$1 out
        out=$(cat "$T/out")
        isnt_zero "$rc" "$name: a command exiting 3 makes the example exit non-zero"
        like "$out" $'\nexit_code: 3\nreason: exited\n' "$name: prints exit_code 3, reason exited"
        like "$out" $'\ndestroyed: sbx-' "$name: destroys the sandbox after a failing command too"
        no_sandbox_left "$name (failing command)"
}

# check_streaming NAME: the command prints "one", then waits until /work/go exists, which the
# test creates only once the example has printed "one": without streaming it would never end.
check_streaming() {
        local name=$1 pid id
        case $name in
        c) set -- "$C_EXAMPLE" ;;
        python) set -- python3 "$PY_EXAMPLE" ;;
        esac
        rm -f "$T/stream.out"
        SANDBOXD_SOCKET=$SOCK SANDBOX_BEST_EFFORT=1 timeout -k 5 90 "$@" \
                sh -c 'echo one; while [ ! -e /work/go ]; do sleep 0.1; done; echo two' >"$T/stream.out" 2>"$T/err" &
        pid=$!
        _first_line_out() { grep -qx one "$T/stream.out" 2>/dev/null; }
        if wait_until 60 _first_line_out; then
                ok "$name: the first line is printed while the command still runs"
        else
                nok "$name: the first line is printed while the command still runs"
        fi
        id=$(sed -n 's/^created: //p' "$T/stream.out")
        [ -n "$id" ] && [ -d "$T/state/sandboxes/$id/work" ] && touch "$T/state/sandboxes/$id/work/go"
        wait "$pid"
        rc=$?
        is "$rc" 0 "$name: once let go, the command ends and the example exits 0"
        like "$(cat "$T/stream.out")" $'started: [^\n]*\none\ntwo\nexit_code: 0\n' "$name: both lines came through, in order, before the result"
        no_sandbox_left "$name (streamed)"
}

isnt_zero() {
        if [ "$1" != 0 ]; then ok "$2"; else nok "$2"; fi
}

HELLO=$(rpc '{"id":1,"op":"hello"}')
ENFORCES_ALL=$(jget "$HELLO" '.capabilities.cgroup | .memory and .pids and .cpu')

for name in c python; do
        if [ "$name" = c ] && [ ! -x "$C_EXAMPLE" ]; then
                nok "the C example is built at $C_EXAMPLE (make check builds it)"
                continue
        fi
        SANDBOX_BEST_EFFORT=1 example "$name"
        diag "$name example output:" "$(cat "$T/out")"
        check_hello "$name"

        example "$name" --best-effort printf 'hello\n'
        check_hello "$name --best-effort printf"

        SANDBOX_BEST_EFFORT=1 example "$name" sh -c 'echo out; exit 3'
        check_failure "$name"

        check_streaming "$name"

        example "$name" --best-effort printf 'a\377b\n'
        is "$(sed -n '3p' "$T/out" | od -An -tx1 | tr -d ' ')" 61ff620a \
                "$name: output that is not UTF-8 (streamed as base64) comes out as the same bytes"

        if [ "$ENFORCES_ALL" = false ]; then
                example "$name"
                isnt_zero "$rc" "$name: without best_effort on this host: a non-zero exit"
                like "$(cat "$T/err")" 'create: limit_unenforceable' "$name: ...and the error code on stderr"
                no_sandbox_left "$name (refused create)"
        fi

        EX_SOCKET=$T/nonexistent.sock example "$name"
        isnt_zero "$rc" "$name: an unreachable socket: a non-zero exit"
        like "$(cat "$T/err")" 'connect' "$name: ...and a message on stderr"
done

# ---- copy-files: a file in, a command on it, its result out ----------------------------
C_COPY=$top_builddir/examples/c/copy-files
PY_COPY=$top_srcdir/examples/python/copy_files.py
printf 'pear\nApple\nfig\n\nbanana\n' >"$T/fruit"
head -c 8388608 /dev/urandom >"$T/random"
for name in c python; do
        case $name in
        c) copy=("$C_COPY") ;;
        python) copy=(python3 "$PY_COPY") ;;
        esac
        rm -f "$T/sorted" "$T/random.out"
        SANDBOXD_SOCKET=$SOCK SANDBOX_BEST_EFFORT=1 timeout -k 5 60 "${copy[@]}" "$T/fruit" "$T/sorted" >"$T/out" 2>"$T/err"
        rc=$?
        is "$rc" 0 "$name copy-files: sort of a file copied in exits 0"
        [ "$rc" = 0 ] || diag "$(cat "$T/err")"
        is "$(od -An -c "$T/sorted" | tr -s ' ')" "$(LC_ALL=C sort "$T/fruit" | od -An -c | tr -s ' ')" \
                "$name copy-files: the result copied out is the input sorted, byte for byte"
        like "$(cat "$T/out")" $'created: sbx-[0-9a-f]+\ncopied in: [^\n]* -> /work/input \(23 bytes\)\nran: exit_code 0, reason exited\ncopied out: /work/output -> [^\n]* \(23 bytes\)\ndestroyed: sbx-' \
                "$name copy-files: prints each step with its byte counts, and destroys its sandbox"
        SANDBOXD_SOCKET=$SOCK SANDBOX_BEST_EFFORT=1 timeout -k 5 60 "${copy[@]}" "$T/random" "$T/random.out" \
                cp /work/input /work/output >"$T/out" 2>"$T/err"
        is "$?" 0 "$name copy-files: 8 MiB of random bytes in and out through cp exits 0"
        check "$name copy-files: the 8 MiB come back identical" cmp -s "$T/random" "$T/random.out"
        SANDBOXD_SOCKET=$SOCK SANDBOX_BEST_EFFORT=1 timeout -k 5 60 "${copy[@]}" "$T/fruit" "$T/never" \
                sh -c 'echo broken >&2; exit 4' >"$T/out" 2>"$T/err"
        isnt_zero "$?" "$name copy-files: a failing command makes it exit non-zero"
        like "$(cat "$T/out")" $'ran: exit_code 4, reason exited\ndestroyed: sbx-' "$name copy-files: ...after printing the exit code, and it destroys its sandbox"
        [ ! -e "$T/never" ]
        is "$?" 0 "$name copy-files: nothing is copied out after a failing command"
        SANDBOXD_SOCKET=$SOCK SANDBOX_BEST_EFFORT=1 timeout -k 5 60 "${copy[@]}" "$T/no-such-file" "$T/never" >"$T/out" 2>"$T/err"
        isnt_zero "$?" "$name copy-files: a missing input file: a non-zero exit"
        like "$(cat "$T/err")" 'no-such-file' "$name copy-files: ...naming the file on stderr"
        no_sandbox_left "$name copy-files"
done

# ---- the bash completion, on this daemon's sandboxes ----------------------------------
# (tests/t-completion.sh covers the rest of it without a daemon.)
id=$(ctl create --best-effort --name ex-build)
COMP_WORDS=("$SANDBOXCTL" --socket "$SOCK" inspect "")
COMP_CWORD=4
. "$top_srcdir/contrib/bash-completion/sandboxctl"
_sandboxctl
is "$(printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ')" "ex-build $id " \
        "completion: inspect <TAB> offers the live sandbox's id and name (list -q, --json list)"
ctl destroy "$id" >/dev/null

stop_daemon
