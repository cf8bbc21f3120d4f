#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The Python package's types: `mypy --strict python/sandboxd` finds nothing (Debian's mypy), and
# each blocking class has the same public methods as its asyncio twin (docs/python.md promises
# it; AsyncClient once lacked the image methods). Needs no daemon; prints TAP, exits 0. mypy's cache goes to a temporary directory, never into
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

# The blocking and asyncio faces: the same public methods, pair by pair.
pairs=$(cd "$top_srcdir/python" && python3 -c '
import inspect, sandboxd
for sync, aio in [("Client", "AsyncClient"), ("Sandbox", "AsyncSandbox"), ("RunStream", "AsyncRunStream"),
                  ("Session", "AsyncSession"), ("Files", "AsyncFiles"), ("Ports", "AsyncPorts")]:
    names = [{n for n, _ in inspect.getmembers(getattr(sandboxd, c), callable) if not n.startswith("_")} for c in (sync, aio)]
    # Only asyncio has: an awaitable constructor (Client() connects in __init__), and a stream that
    # sends its request when asked (the blocking one sends it as it is made).
    names[1] -= {"AsyncClient": {"connect"}, "AsyncRunStream": {"start"}}.get(aio, set())
    print(sync, aio, " ".join(sorted(names[0] ^ names[1])) or "-")
' 2>&1)
while read -r sync aio diff; do
        if [ "$diff" = - ]; then
                ok "$sync and $aio have the same public methods"
        else
                nok "$sync and $aio have the same public methods (only in one: $diff)"
        fi
done <<<"$pairs"

