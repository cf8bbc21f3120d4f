#!/bin/bash
# Entry point of `make check-vm-deb` (run by the TAP driver): boots the VM with nothing staged and
# the Debian packages' tests (VM_DEB_TESTS in vm.mk), which install DEB_DIR's and DEB_UPGRADE_DIR's
# packages themselves; run-vm.sh hands both to the guest. A test report of its own
# (vm-check-deb.trs), beside check-vm's.
set -u
# Each script installs packages (ldconfig, py3compile, systemd reloads: minutes under TCG).
export VM_TEST_TIMEOUT=${VM_TEST_TIMEOUT:-1200}
stage=$top_builddir/vm-stage-none
rm -rf "$stage" && mkdir -p "$stage" || exit 1
# shellcheck disable=SC2086
exec "$top_srcdir/tests/vm/run-vm.sh" "$stage" ${VM_SYSTEM_TESTS_ABS:?}
