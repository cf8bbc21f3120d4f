#!/bin/bash
# Builds the Debian packages (sandboxd, libsandbox0, libsandbox-dev, python3-sandboxd) from this
# tree, in a copy made of the files git knows (tracked, and untracked but not ignored: uncommitted
# edits are in, build directories are out), then runs lintian on them.
#
#   scripts/build-deb.sh [OUTDIR]      (default OUTDIR: ./deb-out)
#
# Needs: dpkg-dev, debhelper, fakeroot (none when run as root), lintian (optional), and the
# Build-Depends of debian/control (`apt-get build-dep ./` or scripts/deps.sh for the libraries).
# Extra dpkg-buildpackage options go through $DPKG_BUILDPACKAGE_OPTS (e.g. "-Pnocheck").
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$top/deb-out}" && cd "${1:-$top/deb-out}" && pwd)
version=$(dpkg-parsechangelog -l "$top/debian/changelog" -S Version)
work=$(mktemp -d "${TMPDIR:-/tmp}/sandboxd-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT

src=$work/sandboxd-$version
mkdir -p "$src"
(cd "$top" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$src" 2>/dev/null || true)
# Files deleted in the working tree but still tracked are not copied: cp names them; ignore.
[ -f "$src/debian/control" ] || { echo "build-deb: no debian/ in the copy" >&2; exit 1; }

echo "build-deb: building sandboxd $version in $src"
(cd "$src" && dpkg-buildpackage -us -uc -b ${DPKG_BUILDPACKAGE_OPTS:-})
mv "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo "$out"/
ls -l "$out"

if command -v lintian >/dev/null; then
        echo "build-deb: lintian"
        lintian --info --display-info --pedantic "$out/sandboxd_${version}_$(dpkg --print-architecture).changes" || true
fi
