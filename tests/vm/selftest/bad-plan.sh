#!/bin/sh
# Self-test for tests/vm failure paths: exits 0 but the plan does not match.
echo "1..3"
echo "ok 1 - one"
echo "ok 2 - two # SKIP not here"
