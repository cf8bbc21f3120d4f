#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# bench/restart-latency.py's systemd mode inside the VM (tests/vm), as one TAP test whose rows are
# comments: tests/vm/run-vm.sh "$PWD/build/vm-stage" "$PWD/bench/vm-restart-bench.sh"
# (after make -C build install DESTDIR=$PWD/build/vm-stage). N=sandboxes alive, ROUNDS=restarts,
# RUNS=runs of `true` before and after them.
echo "1..1"
out=$(python3 "$(dirname "$0")/restart-latency.py" systemd "${N:-100}" "${ROUNDS:-5}" "${RUNS:-50}" 2>&1)
rc=$?
sed 's/^/# /' <<<"$out"
[ $rc = 0 ] && echo "ok 1 - restart latency measured" || echo "not ok 1 - restart-latency.py failed ($rc)"
