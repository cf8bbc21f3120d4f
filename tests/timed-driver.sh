#!/bin/sh
# timed-driver.sh DRIVER ARGS...: runs automake's test driver (tap-driver.sh) as it was given,
# then writes the test's wall time in whole seconds beside its .trs, as <name>.time, so that
# .ci/run can list the slowest test programs of a run (automake's own files keep no time).
trs=
prev=
for a in "$@"; do
	[ "$prev" = --trs-file ] && trs=$a
	prev=$a
done
start=$(date +%s)
"$@"
rc=$?
[ -n "$trs" ] && echo $(($(date +%s) - start)) >"${trs%.trs}.time"
exit $rc
