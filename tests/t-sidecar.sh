#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# python3 -m sandboxd.sidecar as a drop-in for DeepTutor's runner contract (docs/python.md,
# "DeepTutor"): the requests its RunnerSidecarBackend sends, byte for byte as captured from it
# (tests/fixtures/deeptutor/*.http), replayed against the sidecar and a real daemon; the
# contract's fields, types, defaults and refusals; and what a web page or a crowd of slow
# connections can do to it (nothing runs, it keeps answering, its threads stay bounded).
# The checks are tests/sidecar.py.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

# The fixtures' workspace: DeepTutor mounts a directory at its own path, and sandboxd takes mount
# targets beneath /srv (among others), so the captured requests name this one.
WS=/srv/sbxt-sidecar-ws
rm -rf "$WS"
if ! mkdir -p "$WS/task" "$WS/data" 2>/dev/null; then
        skip_all "cannot make $WS for the captured requests' mounts"
fi
start_daemon || exit 0
export WS top_srcdir
timeout -k 5 300 env PYTHONPATH="$top_srcdir/python:$TESTS_DIR" python3 -u "$TESTS_DIR/sidecar.py" >"$T/py.out" 2>"$T/py.err"
rc=$?
while IFS= read -r line; do
        case $line in
        "PASS "*) ok "${line#PASS }" ;;
        "FAIL "*) nok "${line#FAIL }" ;;
        *) printf '# %s\n' "$line" ;;
        esac
done <"$T/py.out"
if [ "$rc" = 0 ]; then
        ok "tests/sidecar.py ran to the end"
else
        nok "tests/sidecar.py ran to the end (status $rc; 124 is a timeout)"
        diag "$(tail -n 30 "$T/py.err")"
fi
stop_daemon
rm -rf "$WS"
