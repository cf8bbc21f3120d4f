#!/bin/sh
# Self-test for tests/vm failure paths: prints part of its plan and hangs.
# Run with VM_TEST_TIMEOUT=10: run-vm.sh must report a timeout.
echo "1..2"
echo "ok 1 - first test passes"
sleep 100000
