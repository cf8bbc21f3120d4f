#!/bin/bash
# Installs, from Debian 12's packages, everything sandboxd needs to build, run and be tested
# (the real-systemd VM tests included). Safe to run again.
set -euo pipefail

packages=(
	# build
	build-essential autoconf automake libtool autoconf-archive pkgconf clang
	libsystemd-dev libjson-c-dev libcgroup-dev libseccomp-dev
	# the run helper is built with musl where it is installed (configure.ac says why)
	musl-tools
	# tests
	systemd jq python3 procps psmisc util-linux tmux
	# the real-systemd VM: qemu (TCG), a Debian kernel and busybox for the initramfs
	qemu-system-x86 busybox-static linux-image-amd64 kmod
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
