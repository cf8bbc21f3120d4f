#!/bin/sh
# Self-test for tests/vm failure paths: valid TAP, then a non-zero exit, so
# run-vm.sh must add "not ok - exits-1.sh: exited with status 1".
echo "1..1"
echo "ok 1 - this line passes"
echo "something on stderr" >&2
exit 1
