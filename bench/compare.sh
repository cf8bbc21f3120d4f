#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# compare.sh REV [sandboxd-bench OPTIONS...]: the cost of a change, measured the one way the run
# path's changes report it (issue 33). Builds REV once (a detached worktree and a build directory
# under $COMPARE_DIR, kept for the next comparison), then runs run-bench.sh ROUNDS times for each
# daemon, alternating which goes first, with this tree's sandboxd-bench as the one client of
# both (so only the daemon differs), and prints each row's median of each round, the median of
# the rounds' medians and the ratio this tree / REV, and the rounds' p99s.
# Env: BUILDDIR (this tree's build directory, default .), ROUNDS (default 3), COMPARE_DIR
#   (default /var/tmp/sandboxd-compare), CONFIGURE_ARGS (for REV's build, default none).
# make bench-compare REV=d776a6b BENCH_ARGS='--runs 300 --clients 1 --only run,throwaway,floor'
set -u
die() { echo "compare: $*" >&2; exit 1; }

rev_arg=${1:?usage: bench/compare.sh REV [sandboxd-bench OPTIONS...]}
shift
src=$(cd "$(dirname "$0")/.." && pwd)
builddir=$(cd "${BUILDDIR:-.}" && pwd)
rounds=${ROUNDS:-3}
rev=$(git -C "$src" rev-parse --verify "$rev_arg^{commit}") || die "no commit $rev_arg in $src"
base=${COMPARE_DIR:-/var/tmp/sandboxd-compare}/${rev:0:12}
[[ -x $builddir/daemon/sandboxd && -x $builddir/bench/sandboxd-bench ]] ||
	die "no daemon/sandboxd and bench/sandboxd-bench in $builddir (make bench/sandboxd-bench first)"

# REV's build, once: a worktree of its own (never the caller's checkout), configured plainly.
if [[ ! -x $base/build/daemon/sandboxd ]]; then
	echo "# building $rev in $base"
	mkdir -p "$base" || die "mkdir $base"
	if [[ ! -d $base/src ]]; then
		git -C "$src" worktree add --detach "$base/src" "$rev" >/dev/null 2>&1 || die "git worktree add $base/src $rev"
	fi
	(cd "$base/src" && autoreconf -fi >/dev/null 2>&1) || die "autoreconf of $rev"
	mkdir -p "$base/build" && (cd "$base/build" && "$base/src/configure" -q ${CONFIGURE_ARGS:-} &&
		make -j"$(nproc)" >/dev/null 2>&1) || die "the build of $rev failed (see $base/build)"
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/sandboxd-compare.XXXXXX") || die "mktemp"
trap 'rm -rf "$out"' EXIT
one() { # SIDE DAEMON ROUND
	SANDBOXD=$2 BENCH=$builddir/bench/sandboxd-bench BUILDDIR=$builddir ANCHORS= \
		bash "$src/bench/run-bench.sh" --json "${@:4}" >"$out/$1.$3.txt" 2>"$out/$1.$3.err" ||
		{ cat "$out/$1.$3.err" >&2; die "run-bench.sh failed ($1, round $3)"; }
}
for ((i = 1; i <= rounds; i++)); do
	if ((i % 2)); then
		one base "$base/build/daemon/sandboxd" "$i" "$@"
		one this "$builddir/daemon/sandboxd" "$i" "$@"
	else
		one this "$builddir/daemon/sandboxd" "$i" "$@"
		one base "$base/build/daemon/sandboxd" "$i" "$@"
	fi
	echo "# round $i of $rounds done"
done

echo "# $(date -u +%FT%TZ); $(uname -r); $(nproc) CPUs; this tree $(git -C "$src" rev-parse --short HEAD)$(git -C "$src" diff --quiet HEAD || echo +changes) against ${rev:0:12}; $rounds rounds, alternating; sandboxd-bench $*"
python3 - "$out" "$rounds" "${rev:0:12}" <<'EOF'
import json, statistics, sys
out, rounds, rev = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def rows(side, i):
    text = open("%s/%s.%d.txt" % (out, side, i)).read()
    return {r["scenario"]: r for r in json.loads(text[text.index("["):])}
data = {s: [rows(s, i) for i in range(1, rounds + 1)] for s in ("base", "this")}
print("| row | %s medians ms | this medians ms | median of medians %s / this | this / %s | p99 ms %s / this |" % (rev, rev, rev, rev))
print("|---|---|---|---:|---:|---|")
for name in data["this"][0]:
    if any(name not in r for side in data.values() for r in side):
        continue
    med = {s: [r[name]["median_ms"] for r in data[s]] for s in data}
    p99 = {s: max(r[name]["p99_ms"] for r in data[s]) for s in data}
    mb, mt = statistics.median(med["base"]), statistics.median(med["this"])
    print("| %s | %s | %s | %.3f / %.3f | %.2f | %.2f / %.2f |" % (
        name, " ".join("%.3f" % v for v in med["base"]), " ".join("%.3f" % v for v in med["this"]),
        mb, mt, mt / mb, p99["base"], p99["this"]))
EOF
