#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The manual pages in docs/man/ are the sources `make install` installs: every sandboxctl verb
# has its section in sandboxctl(1), every option of sandboxd is in sandboxd(8), every operation
# of the daemon's table is in sandboxd-protocol(7) and docs/protocol.md, and each page is roff
# that man(1) renders without a warning. Needs no daemon; prints TAP, exits 0.
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
SANDBOXCTL=$top_builddir/ctl/sandboxctl
SANDBOXD=$top_builddir/daemon/sandboxd
[ -x "$SANDBOXCTL" ] || { SANDBOXCTL=$top_srcdir/build/ctl/sandboxctl; SANDBOXD=$top_srcdir/build/daemon/sandboxd; }
MAN=$top_srcdir/docs/man

n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; fi; }
trap 'echo "1..$n"; exit 0' EXIT

verbs=$("$SANDBOXCTL" --help | awk '/^Verbs:/ { v = 1; next } v && /^  [a-z]/ { print $1 } v && /^$/ { exit }')
check "sandboxctl --help lists verbs" test -n "$verbs"
for v in $verbs; do
        check "sandboxctl(1) has a section for $v" grep -qx "\\.SS $v" "$MAN/sandboxctl.1"
done

# A usage line that shows short flags ("cp [-L] SRC DST") shows them all.
for v in $verbs; do
        h=$("$SANDBOXCTL" "$v" --help)
        usage=$(printf '%s\n' "$h" | head -n 1)
        printf '%s' "$usage" | grep -q '\[-[a-zA-Z]\]' || continue
        for f in $(printf '%s\n' "$h" | sed -n 's/^  \(-[a-gi-zA-Z]\) --[a-z-]*  .*/\1/p'); do
                check "sandboxctl $v --help: the usage line shows $f ($usage)" grep -q -- "\[$f\]" <<<"$usage"
        done
done

for o in $("$SANDBOXD" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
        check "sandboxd(8) documents $o" grep -q -- "$(printf '%s' "$o" | sed 's/-/\\\\-/g')" "$MAN/sandboxd.8"
done

for op in $(sed -n 's/^ *{ "\([a-z_.]*\)", op_.*/\1/p' "$top_srcdir/daemon/server/ops.c"); do
        check "sandboxd-protocol(7) documents the $op operation" grep -qx "\\.B $op" "$MAN/sandboxd-protocol.7"
        check "docs/protocol.md documents the $op operation" grep -q "^### \`$op\`" "$top_srcdir/docs/protocol.md"
done

# What the docs call missing must be missing: a method of the Python package named on a line
# that says "not there yet" (or "not yet") is a stale sentence.
for doc in "$top_srcdir/docs/python.md" "$top_srcdir/docs/fleet.md" "$top_srcdir/README.md"; do
        for name in $(grep -iE 'not (there )?yet' "$doc" | grep -oE '`[a-z_]+`' | tr -d '`' | sort -u); do
                check "$(basename "$doc") does not call $name missing: the package has no such method" \
                        sh -c "! grep -qE 'def $name\(' '$top_srcdir'/python/sandboxd/*.py"
        done
done
check "docs/python.md's put_tree and get_tree are described, not called missing" \
        sh -c "! grep -iE 'not (there )?yet' '$top_srcdir/docs/python.md' | grep -qE 'put_tree|get_tree'"

# pip's build isolation fetches setuptools: the docs say how to install without the network.
check "docs/python.md says how to pip install offline (--no-build-isolation)" \
        grep -q 'pip install --no-build-isolation ./python' "$top_srcdir/docs/python.md"
check "README.md says it too" grep -q 'pip install --no-build-isolation ./python' "$top_srcdir/README.md"
# Only an id is "already gone": a name that names nothing is not_found (the daemon forgets names).
check "sandboxctl(1) says destroy's \"already gone\" holds by id, a name is not_found" \
        sh -c "sed -n '/^\\.SS destroy\$/,/^\\.SS /p' '$MAN/sandboxctl.1' | grep -q 'by its id' &&
               sed -n '/^\\.SS destroy\$/,/^\\.SS /p' '$MAN/sandboxctl.1' | grep -q 'not_found'"
check "docs/python.md says destroy of a name that names nothing raises NotFound" \
        sh -c "grep '^| \`destroy(sandbox)\`' '$top_srcdir/docs/python.md' | grep -q NotFound"
# A venv of another Python (pyenv's, first on some PATHs) has neither Debian's setuptools nor its
# wheel: --no-build-isolation fails there with "invalid command 'bdist_wheel'".
for doc in "$top_srcdir/docs/python.md" "$top_srcdir/README.md"; do
        check "$(basename "$doc") makes the venv with Debian's /usr/bin/python3" \
                sh -c "grep -q -- '-m venv' '$doc' && ! grep -E -- '-m venv' '$doc' | grep -vq '/usr/bin/python3 -m venv'"
done

if command -v man >/dev/null; then
        for page in "$MAN"/*.[1-8]; do
                warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
                check "$(basename "$page") renders without warnings" test -z "$warnings"
                [ -z "$warnings" ] || printf '# %s\n' "$warnings"
        done
elif [ "${SANDBOXD_TEST_MUST_WORK:-0}" = 1 ]; then
        nok "man is installed (package man-db; scripts/deps.sh installs it): the pages' rendering is not checked"
else
        ok "# SKIP man is not installed (package man-db; scripts/deps.sh installs it): the pages' rendering is not checked"
fi
