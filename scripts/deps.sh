#!/bin/bash
# Installs, from Debian 12's packages, everything sandboxd needs to build, run and be tested
# (the real-systemd VM tests included). Safe to run again.
set -euo pipefail

# Checked on a minimal Debian 12 root (mmdebstrap --variant=minbase; .ci/fresh-root does it on
# every CI run): nothing here may be left to what a developer's machine happens to have.
packages=(
	# build
	build-essential autoconf automake libtool autoconf-archive pkgconf clang
	libsystemd-dev libjson-c-dev libcgroup-dev libseccomp-dev
	# the file helper's tar codec (file.put, file.get)
	libarchive-dev
	# egress for sandboxes: NAT and filter rules (libnftables); nft(8) lets t-egress.sh read them
	libnftables-dev nftables
	# sha256 of OCI image blobs (image.import)
	libssl-dev
	# the ASan/UBSan build's runtime (clang links libclang_rt.asan*.a from it)
	libclang-rt-14-dev
	# the run helper is built with musl where it is installed (configure.ac says why)
	musl-tools
	# tests; man-db and bash-completion for t-docs.sh and t-completion.sh
	systemd jq python3 procps psmisc util-linux iproute2 tmux man-db bash-completion
	# t-images.sh: a .tar.zst to import (its tiny rootfs is the static busybox below)
	zstd
	# the README's raw protocol example
	socat
	# storage = image:SIZE (mkfs.xfs -m reflink=1), image:SIZE:btrfs (mkfs.btrfs); t-quota.sh's ext4 -O project,quota
	xfsprogs e2fsprogs btrfs-progs
	# t-metrics.sh: a real Prometheus scrapes the metrics endpoint (docs/metrics.md)
	prometheus
	# the Python package: mypy for t-python-types.sh; pip, setuptools and wheel for t-python.sh's
	# `pip install ./python`
	mypy python3-pip python3-setuptools python3-wheel
	# the Debian packages (scripts/build-deb.sh, which .ci/run runs), python3-sandboxd with pybuild;
	# t-deb.sh (in the VM, which boots this root) scrapes the packaged metrics socket with curl
	debhelper dpkg-dev dh-python python3-all pybuild-plugin-pyproject curl
	# sandboxd-oci's engines (tests/t-oci*.sh): podman with conmon and crun, containerd with ctr
	# and its runc shim
	podman conmon crun containerd
	# the peer that `make bench` measures beside sandboxd (docs/performance.md)
	bubblewrap
	# the real-systemd VM: qemu (TCG), a Debian kernel and busybox for the initramfs; the VM
	# boots this machine's root, so dbus here is the guest's bus (systemd-run --wait needs it)
	qemu-system-x86 busybox-static linux-image-amd64 kmod dbus
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	# Another apt on this machine (a second checkout's CI, an upgrade) holds the lock for a while.
	apt-get -o DPkg::Lock::Timeout=600 update -qq
	apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
