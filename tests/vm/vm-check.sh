#!/bin/bash
# Entry point of `make check-vm` (run by the TAP driver): boots the VM with the staged install
# and the system tests. top_builddir/top_srcdir come from the test environment.
set -u
tests=${VM_SYSTEM_TESTS_ABS:-$top_srcdir/tests/system/t-systemd.sh}
# shellcheck disable=SC2086
exec "$top_srcdir/tests/vm/run-vm.sh" "$top_builddir/vm-stage" $tests
