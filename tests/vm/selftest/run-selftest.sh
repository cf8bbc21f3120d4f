#!/bin/bash
# run-selftest.sh [good|fail|fake|all]
# Runs tests/vm/run-vm.sh on the self-test scripts and prints its TAP.
#   good  empty stage + guest-basics.sh (what a healthy VM looks like)
#   fake  stage from make-fake-stage.sh + install-check.sh + guest-basics.sh
#   fail  empty stage + the failure paths (exit 1, hang with a 20 s
#         timeout, bad plan, whole-file skip); ends with "not ok" lines
#   all   fake stage + every script above, in one VM (default)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
stage=$(mktemp -d "${TMPDIR:-/tmp}/sandboxd-vm-stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT

fails=("$here/exits-1.sh" "$here/hangs.sh" "$here/bad-plan.sh" "$here/skip-all.sh")
case ${1:-all} in
good) set -- "$here/guest-basics.sh" ;;
fake)
	"$here/make-fake-stage.sh" "$stage"
	set -- "$here/install-check.sh" "$here/guest-basics.sh"
	;;
fail) set -- "${fails[@]}" ;;
all)
	"$here/make-fake-stage.sh" "$stage"
	set -- "$here/install-check.sh" "$here/guest-basics.sh" "${fails[@]}"
	;;
*) echo "usage: $0 [good|fail|fake|all]" >&2; exit 2 ;;
esac
# hangs.sh sleeps forever: do not wait the default 300 s for it.
case " $* " in
*/hangs.sh*) export VM_TEST_TIMEOUT=${VM_TEST_TIMEOUT:-20} ;;
esac
"$here/../run-vm.sh" "$stage" "$@"
