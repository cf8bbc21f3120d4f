#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The Python package's types: `mypy --strict python/sandboxd` finds nothing (Debian's mypy).
# Needs no daemon; prints TAP, exits 0. mypy's cache goes to a temporary directory, never into
# the source tree (read-only under distcheck).
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sbxt-mypy.XXXXXX")
trap 'rm -rf "$tmp"; echo "1..$n"; exit 0' EXIT

if command -v mypy >/dev/null; then
        if out=$(cd "$top_srcdir/python" && timeout -k 5 600 mypy --strict --cache-dir "$tmp/cache" sandboxd 2>&1); then
                ok "mypy --strict python/sandboxd: $(printf '%s' "$out" | tail -n 1)"
        else
                nok "mypy --strict python/sandboxd"
                printf '%s\n' "$out" | sed 's/^/# /'
        fi
elif [ "${SANDBOXD_TEST_MUST_WORK:-0}" = 1 ]; then
        nok "mypy is installed (package mypy; scripts/deps.sh installs it): the Python package is not type-checked"
else
        ok "# SKIP mypy is not installed (package mypy; scripts/deps.sh installs it): the Python package is not type-checked"
fi
