#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The Python package (python/sandboxd, docs/python.md) against a private daemon: every method of
# Client, Sandbox, RunStream, Session and their asyncio twins, the error classes (one per code of
# docs/protocol.md), a disconnect mid-stream from either side, runs in flight at once from threads
# and from asyncio tasks (the runner-sidecar adapter, python -m sandboxd.sidecar, is t-sidecar.sh's).
# The checks are tests/python-client.py; `pip install` of the package into a scratch directory is
# checked here. The package is imported from the source tree (no bytecode is written there).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

RUNS_PER_CONN=12
printf 'max_stdin_bytes = 64K\nmax_runs_per_connection = %d\n' "$RUNS_PER_CONN" >"$T/sandboxd.conf"
start_daemon --config "$T/sandboxd.conf" || exit 0

PKG=$top_srcdir/python
export RUNS_PER_CONN top_srcdir
timeout -k 5 400 env PYTHONPATH="$PKG:$TESTS_DIR" python3 -u "$TESTS_DIR/python-client.py" >"$T/py.out" 2>"$T/py.err"
rc=$?
while IFS= read -r line; do
        case $line in
        "PASS "*) ok "${line#PASS }" ;;
        "FAIL "*) nok "${line#FAIL }" ;;
        *) printf '# %s\n' "$line" ;;
        esac
done <"$T/py.out"
if [ "$rc" = 0 ]; then
        ok "tests/python-client.py ran to the end"
else
        nok "tests/python-client.py ran to the end (status $rc; 124 is a timeout)"
        diag "$(tail -n 30 "$T/py.err")"
fi

# pip install ./python, as the README says, into a scratch target: the installed package (not
# the tree's) imports, carries py.typed, and answers hello.
PIP_PY=
for py in python3 /usr/bin/python3; do
        "$py" -c 'import setuptools, wheel' 2>/dev/null && "$py" -m pip --version >/dev/null 2>&1 && { PIP_PY=$py; break; }
done
if [ -n "$PIP_PY" ]; then
        cp -r "$PKG" "$T/pkg-src" && chmod -R u+w "$T/pkg-src"  # writable even from a read-only tree (distcheck)
        if timeout -k 5 300 "$PIP_PY" -m pip install --quiet --no-cache-dir --no-build-isolation --no-deps --no-index \
                --target "$T/pip-target" "$T/pkg-src" >"$T/pip.log" 2>&1; then
                ok "pip install ./python ($PIP_PY, offline: the build backend is the system's setuptools)"
        else
                nok "pip install ./python ($PIP_PY)"
                diag "$(tail -n 20 "$T/pip.log")"
        fi
        check "the installed package has py.typed" test -f "$T/pip-target/sandboxd/py.typed"
        got=$(cd "$T" && PYTHONPATH="$T/pip-target" "$PIP_PY" -c 'import sandboxd, sys; print(sandboxd.__file__); print(sandboxd.Client(sys.argv[1]).hello().protocol)' "$SOCK" 2>&1)
        like "$got" "^$T/pip-target/sandboxd/__init__.py"$'\n'"1\$" "the installed package imports from where pip put it and speaks to the daemon"
elif [ "${SANDBOXD_TEST_MUST_WORK:-0}" = 1 ]; then
        nok "a python3 with pip, setuptools and wheel (python3-pip, python3-setuptools, python3-wheel; scripts/deps.sh installs them): pip install ./python is not checked"
else
        ok "# SKIP no python3 with pip, setuptools and wheel (python3-pip, python3-setuptools, python3-wheel): pip install ./python is not checked"
fi

stop_daemon
