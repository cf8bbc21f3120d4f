#!/bin/sh
# timed-driver.sh DRIVER ARGS... -- TEST...: runs automake's test driver (tap-driver.sh) as it was
# given, with two additions:
# - the test runs under `timeout`, ${SANDBOXD_TEST_TIMEOUT:-600} seconds, so a test that hangs
#   fails alone, with its log, instead of holding up the whole suite until CI's own limit ends
#   everything; timeout signals the test's whole process group, so the daemons a test started in
#   the background stop with it. check-vm and check-vm-deb pass 0 (no limit): run-vm.sh bounds
#   the VM's boot and each of its scripts itself;
# - it writes the test's wall time in whole seconds beside its .trs, as <name>.time, so that
#   .ci/run can list the slowest test programs of a run (automake's own files keep no time).
trs=
prev=
n=0
for a in "$@"; do
	n=$((n + 1))
	[ "$prev" = --trs-file ] && trs=$a
	[ "$a" = -- ] && break
	prev=$a
done
limit=${SANDBOXD_TEST_TIMEOUT:-600}
# "$@" becomes: the driver's own arguments up to and including --, then timeout, then the test.
i=0
for a in "$@"; do
	i=$((i + 1))
	set -- "$@" "$a"
	[ "$i" = "$n" ] && [ "$a" = -- ] && set -- "$@" timeout -k 15 "$limit"
done
shift "$i"
start=$(date +%s)
"$@"
rc=$?
[ -n "$trs" ] && echo $(($(date +%s) - start)) >"${trs%.trs}.time"
exit $rc
