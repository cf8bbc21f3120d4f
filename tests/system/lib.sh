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

call() { python3 "$here/sbx-call.py" "$@"; }
# jqr FILTER JSON: a field of a reply
jqr() { jq -r "$1" <<<"$2"; }
