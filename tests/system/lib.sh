# Helpers for the system tests that run inside the real-systemd VM (tests/vm): TAP output and a
# raw protocol client. Sourced by tests/system/t-*.sh.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
n=0
failed=0

ok() { # cond-exit-status description
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi
}
check() { # description command...
	local d=$1
	shift
	"$@" >/dev/null 2>&1
	ok $? "$d"
}
diag() { echo "# $*"; }
done_testing() { echo "1..$n"; exit 0; }

# call REQUEST...: each reply as a JSON line (SBX_TIMEOUT: seconds for all, default 120). The
# installed sandboxctl's `call`: a python3 client costs ~0.7 s a call more in a TCG guest, where
# the suite makes hundreds. sbx-call.py is the same client for a guest without sandboxctl.
call() {
	if command -v sandboxctl >/dev/null; then
		sandboxctl call --timeout "${SBX_TIMEOUT:-120}" "$@"
	else
		python3 "$here/sbx-call.py" "$@"
	fi
}
# jqr FILTER JSON: a field of a reply
jqr() { jq -r "$1" <<<"$2"; }

# The packages scripts/build-deb.sh builds: DEB_DIR holds the first build, DEB_UPGRADE_DIR
# the same tree rebuilt with a higher version (DEB_VERSION=0.1.0+ci2), installed over it as an
# upgrade. Prints "1..0 # SKIP" and exits where there are none, or fails where they must be
# there (SANDBOXD_TEST_MUST_WORK=1, as CI sets it: a package build that failed is a failure).
DEB_DIR=${DEB_DIR:-$here/../../deb-out}
DEB_UPGRADE_DIR=${DEB_UPGRADE_DIR:-}
need_debs() { # DIR PACKAGE...
	local dir=$1 p
	shift
	for p in "$@"; do
		ls "$dir/${p}"_*.deb >/dev/null 2>&1 && continue
		if [ "${SANDBOXD_TEST_MUST_WORK:-0}" = 1 ]; then
			echo "not ok 1 - no ${p}_*.deb in ${dir:-(DEB_UPGRADE_DIR unset)} (scripts/build-deb.sh makes them; CI must build them)"
			echo "1..1"
		else
			echo "1..0 # SKIP no ${p}_*.deb in ${dir:-(DEB_UPGRADE_DIR unset)} (scripts/build-deb.sh makes them)"
		fi
		exit 0
	done
}
deb_version() { dpkg-deb -f "$1" Version; }
installed_version() { dpkg-query -W -f '${Version}' "$1" 2>/dev/null; }
