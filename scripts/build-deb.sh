#!/bin/bash
# Builds the Debian packages (sandboxd, libsandbox0, libsandbox-dev, python3-sandboxd) from this
# tree, in a copy made of the files git knows (tracked, and untracked but not ignored: uncommitted
# edits are in, build directories are out), then runs lintian on them.
#
#   scripts/build-deb.sh [OUTDIR]      (default OUTDIR: ./deb-out)
#   DEB_VERSION=0.1.0+ci2 scripts/build-deb.sh OUTDIR
#       the same tree rebuilt as a higher version (a changelog entry is added in the copy only):
#       what CI installs over the first build to test a real upgrade (`dpkg -i`, maintainer
#       scripts and all; tests/system/t-restart-deb.sh, t-restart-all.sh)
#
# Needs: dpkg-dev, debhelper, fakeroot (none when run as root), lintian (optional), and the
# Build-Depends of debian/control (`apt-get build-dep ./` or scripts/deps.sh for the libraries).
# Extra dpkg-buildpackage options go through $DPKG_BUILDPACKAGE_OPTS (e.g. "-Pnocheck").
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$top/deb-out}" && cd "${1:-$top/deb-out}" && pwd)
version=$(dpkg-parsechangelog -l "$top/debian/changelog" -S Version)
if [ -n "${DEB_VERSION:-}" ]; then
	dpkg --compare-versions "$DEB_VERSION" gt "$version" ||
		{ echo "build-deb: DEB_VERSION $DEB_VERSION is not higher than $version" >&2; exit 1; }
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/sandboxd-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT

src=$work/sandboxd-$version
mkdir -p "$src"
(cd "$top" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$src" 2>/dev/null || true)
# Files deleted in the working tree but still tracked are not copied: cp names them; ignore.
[ -f "$src/debian/control" ] || { echo "build-deb: no debian/ in the copy" >&2; exit 1; }
if [ -n "${DEB_VERSION:-}" ]; then
	{
		printf 'sandboxd (%s) unstable; urgency=medium\n\n  * Rebuilt as %s (scripts/build-deb.sh, DEB_VERSION).\n\n' "$DEB_VERSION" "$DEB_VERSION"
		printf ' -- %s  %s\n\n' "$(dpkg-parsechangelog -l "$top/debian/changelog" -S Maintainer)" "$(date -R)"
		cat "$top/debian/changelog"
	} >"$src/debian/changelog"
	version=$DEB_VERSION
	mv "$src" "$work/sandboxd-$version"
	src=$work/sandboxd-$version
fi

echo "build-deb: building sandboxd $version in $src"
# With Debian's own tools only: a python3.11 of pyenv (or a venv) first in $PATH has no `build`
# module, and pybuild runs whichever python3.X comes first (python3-sandboxd then fails to build).
(cd "$src" && PATH=/usr/sbin:/usr/bin:/sbin:/bin dpkg-buildpackage -us -uc -b ${DPKG_BUILDPACKAGE_OPTS:-})
mv "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo "$out"/
ls -l "$out"

if command -v lintian >/dev/null; then
        echo "build-deb: lintian"
        lintian --info --display-info --pedantic "$out/sandboxd_${version}_$(dpkg --print-architecture).changes" || true
fi
