#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# run-bench.sh [sandboxd-bench OPTIONS...]: starts a private sandboxd on a temporary socket, state
# directory and cgroup2 directory, runs sandboxd-bench against it, then stops the daemon and
# removes everything it made (cgroup directories bottom-up with rmdir, the temp dir).
# Env: SANDBOXD, BENCH (the binaries; `make bench` sets both), BENCH_KEEP_LOG=1 keeps the log,
#   POOL_SIZE=N sets the daemon's pool_size; POOL_CREATE=N and POOL_IMAGES='NAME:N ...' its
#   pool_create and pool_images (the images scenario's pooled rows). SANDBOXCTL=PATH: the sandboxctl of the anchors rows
#   and of the files scenario's "beside" rows (default: the build tree's). TMPDIR: where the files
#   scenario makes its 1 GiB source and its copies (default /var/tmp).
#   ANCHORS=.../anchors/run.sh: afterwards, runs that peers' harness (its own env knobs: QUICK,
#   OUT, ...) with two EXTRA_ROWS that go through sandboxctl to this same daemon: a throwaway run
#   and a run in an existing sandbox; then the same two and bwrap 30 ms apart (spaced_rows).
#   BUILDDIR locates sandboxctl (the real binary in ctl/.libs,
#   not libtool's wrapper script, which costs ~50 ms per start).
# Never touches cgroup v1 hierarchies: the cgroup2 mount is found by fs type in mountinfo.
set -u
SANDBOXD=${SANDBOXD:-daemon/sandboxd}
BENCH=${BENCH:-bench/sandboxd-bench}
T= CG= DAEMON_PID=

die() { echo "run-bench: $*" >&2; exit 1; }

cgroup2_mount() {
	# "36 25 0:31 / /sys/fs/cgroup/unified rw,... - cgroup2 cgroup2 rw": the fs type after " - ".
	sed -n 's/^[^ ]* [^ ]* [^ ]* [^ ]* \([^ ]*\) .* - cgroup2 .*/\1/p' /proc/self/mountinfo | head -n1
}

cleanup() {
	local i d
	if [[ -n $DAEMON_PID ]] && kill -0 "$DAEMON_PID" 2>/dev/null; then
		kill -TERM "$DAEMON_PID"
		for ((i = 0; i < 150; i++)); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$DAEMON_PID" 2>/dev/null
		wait "$DAEMON_PID" 2>/dev/null
	fi
	if [[ -n $CG && -d $CG ]]; then
		# Whatever the daemon left running (it should have left nothing) goes first.
		[[ -e $CG/cgroup.kill ]] && echo 1 >"$CG/cgroup.kill" 2>/dev/null
		for ((i = 0; i < 50; i++)); do grep -q '^populated 1' "$CG/cgroup.events" 2>/dev/null || break; sleep 0.1; done
		find "$CG" -depth -mindepth 1 -type d 2>/dev/null | while IFS= read -r d; do rmdir "$d"; done
		rmdir "$CG" || echo "run-bench: could not remove $CG" >&2
	fi
	if [[ -n $T && -d $T ]]; then
		[[ ${BENCH_KEEP_LOG:-0} == 1 ]] && cp "$T/daemon.log" "${TMPDIR:-/tmp}/sandboxd-bench-daemon.log"
		rm -rf --one-file-system "$T"
	fi
}

# Sets CTL: $SANDBOXCTL when set (an installed sandboxctl, which finds libsandbox through
# ld.so.cache as an installed bwrap finds its libraries: the fair comparison), else the build
# tree's, with LD_LIBRARY_PATH (exported to every row, peers included: the loader then looks for
# each library in a dozen subdirectories of it first, about 0.1 ms a start for everyone).
find_sandboxctl() {
	local b=${BUILDDIR:-.}
	if [[ -n ${SANDBOXCTL:-} ]]; then
		CTL=$SANDBOXCTL
		return
	fi
	CTL=$b/ctl/sandboxctl
	if [[ -x $b/ctl/.libs/sandboxctl ]]; then
		CTL=$b/ctl/.libs/sandboxctl
		export LD_LIBRARY_PATH=$b/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	fi
}

run_anchors() {
	local ctl id
	find_sandboxctl
	ctl=$CTL
	id=$("$ctl" --socket "$T/sock" create ${BEST_EFFORT:-}) || { echo "run-bench: sandboxctl create failed" >&2; return 1; }
	echo "# anchors: $ANCHORS with sandboxctl $ctl (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})"
	EXTRA_ROWS="sandboxd|throwaway run (sandboxctl)|$ctl --socket $T/sock run ${BEST_EFFORT:-} --
sandboxd|run in an existing sandbox (sandboxctl)|$ctl --socket $T/sock run --sandbox $id --" bash "$ANCHORS"
	local rc=$?
	spaced_rows "$ctl" "$id" || rc=1
	"$ctl" --socket "$T/sock" destroy "$id" >/dev/null || rc=1
	return $rc
}

# The anchors' rows run back to back, which keeps two CPUs busy with making and destroying
# sandboxes: the pool is empty then. These rows run the same commands 30 ms apart (hyperfine
# --prepare 'sleep 0.03', not timed), as requests of an agent arrive, so that a throwaway run
# finds the pool refilled; bwrap gets the same spacing.
spaced_rows() {
	local ctl=$1 id=$2 j=$T/spaced.json bw
	command -v hyperfine >/dev/null || return 0
	bw=$(command -v bwrap) || return 0
	echo
	echo "# spaced: each run 30 ms after the previous one ended; ${RUNS:-40} runs after ${WARMUP:-5} warm-up"
	hyperfine -N --style none --warmup "${WARMUP:-5}" --runs "${RUNS:-40}" --prepare 'sleep 0.03' --export-json "$j" \
		"$bw --unshare-all --ro-bind / / --dev /dev --proc /proc /bin/true" \
		"$ctl --socket $T/sock run ${BEST_EFFORT:-} -- /bin/true" \
		"$ctl --socket $T/sock run --sandbox $id -- /bin/true" >/dev/null 2>"$T/spaced.err" ||
		{ cat "$T/spaced.err" >&2; return 1; }
	python3 - "$j" <<'EOF'
import json, sys
rows = ["bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc", "sandboxctl throwaway run",
        "sandboxctl run in an existing sandbox"]
res = json.load(open(sys.argv[1]))["results"]
bw = sorted(res[0]["times"])[len(res[0]["times"]) // 2]
print("| spaced 30 ms | /bin/true median ms | p99 ms | ratio to bwrap |")
print("|---|---:|---:|---:|")
for name, r in zip(rows, res):
    t = sorted(r["times"])
    med, p99 = t[len(t) // 2], t[min(len(t) - 1, int(len(t) * 0.99))]
    print("| %s | %.3f | %.3f | %.2f |" % (name, med * 1e3, p99 * 1e3, med / bw))
EOF
}

[[ $(id -u) == 0 ]] || die "must run as root (sandboxd creates user namespaces and cgroups)"
[[ -x $SANDBOXD ]] || die "no daemon at $SANDBOXD"
[[ -x $BENCH ]] || die "no benchmark program at $BENCH"
CG_MOUNT=$(cgroup2_mount)
[[ -n $CG_MOUNT ]] || die "no cgroup2 hierarchy is mounted"
[[ $(cat "$CG_MOUNT/cgroup.controllers" 2>/dev/null) == *memory* ]] || BEST_EFFORT=--best-effort

trap cleanup EXIT
trap 'exit 1' INT TERM HUP
T=$(mktemp -d "${TMPDIR:-/tmp}/sandboxd-bench.XXXXXX") || die "mktemp failed"
chmod 0755 "$T"
CG=$CG_MOUNT/sandboxd-bench-$$
# Room for --sandboxes up to 2000 (the defaults cap root at max_sandboxes = 2048 anyway).
printf 'max_sandboxes = 2048\nmax_connections = 4096\n' >"$T/sandboxd.conf"
# POOL_SIZE=N: the daemon's pool of ready sandboxes for throwaway runs (default: the daemon's, 2).
[[ -n ${POOL_SIZE:-} ]] && printf 'pool_size = %s\n' "$POOL_SIZE" >>"$T/sandboxd.conf"
# POOL_CREATE=N, POOL_IMAGES='NAME:N ...': its pools for create (none by default); the images
# scenario's pooled rows want POOL_CREATE=20 POOL_IMAGES=bench-busybox:20.
[[ -n ${POOL_CREATE:-} ]] && printf 'pool_create = %s\n' "$POOL_CREATE" >>"$T/sandboxd.conf"
[[ -n ${POOL_IMAGES:-} ]] && printf 'pool_images = %s\n' "$POOL_IMAGES" >>"$T/sandboxd.conf"
mkdir -p "$T/state"
"$SANDBOXD" --listen "$T/sock" --config "$T/sandboxd.conf" --state-dir "$T/state" --cgroup-root "$CG" \
	>"$T/daemon.log" 2>&1 &
DAEMON_PID=$!
for ((i = 0; i < 100; i++)); do [[ -S $T/sock ]] && break; sleep 0.1; done
[[ -S $T/sock ]] || { cat "$T/daemon.log" >&2; die "sandboxd did not create $T/sock"; }

echo "# $(date -u +%FT%TZ); $(uname -r); $(nproc) CPUs; $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
# The files scenario's "beside" rows run this sandboxctl.
find_sandboxctl
export SANDBOXD_BENCH_CTL=$CTL
echo "# $BENCH --socket \$T/sock --daemon-pid $DAEMON_PID ${BEST_EFFORT:-} $*"
"$BENCH" --socket "$T/sock" --daemon-pid "$DAEMON_PID" ${BEST_EFFORT:-} "$@"
rc=$?
((rc == 0)) || tail -n 20 "$T/daemon.log" >&2
[[ -n ${ANCHORS:-} ]] && { run_anchors || rc=1; }
exit $rc
