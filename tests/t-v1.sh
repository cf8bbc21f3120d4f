#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Runs after the other integration tests (tests/integration.mk orders it last): on a hybrid
# host, no cgroup v1 hierarchy may have gained a sandbox directory (HOST.md), and no test may
# have left its cgroup2 directory behind.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

dirs=$(find /sys/fs/cgroup -mindepth 2 -maxdepth 6 -type d -not -path "$CG_MOUNT*" \
        \( -iname '*sandbox*' -o -iname '*sbx*' \) 2>/dev/null)
is "$dirs" "" "no directory named like sandbox*/sbx* in a cgroup v1 hierarchy under /sys/fs/cgroup"
is "$(v1_sandbox_dirs)" "" "no such directory in any mounted cgroup v1 hierarchy"

# sandboxd-test-<name>-<pid>: left behind when its test is over (its shell is gone).
left=
for d in "$CG_MOUNT"/sandboxd-test-*; do
        [ -d "$d" ] || continue
        pid=${d##*-}
        [ "$d" = "$CG" ] && continue
        kill -0 "$pid" 2>/dev/null || left="$left $d"
done
is "$left" "" "no finished test left its cgroup in $CG_MOUNT"
