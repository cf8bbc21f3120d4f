#!/bin/busybox sh
# /init of the test initramfs (busybox sh; run-vm.sh copies this file in).
#
# It turns the host's root filesystem, exported read-only over 9p, into a
# writable root (overlay with its upper layer on tmpfs), adds the units that
# run the tests, and hands over to the host's own systemd as PID 1.
#
# Mounts prepared for the new root:
#   /        overlay: lower = host root (9p "hostroot", ro), upper = tmpfs
#   /vmhost  the host root itself (read-only): host paths under /tmp, which
#            the guest's fresh /tmp hides, stay reachable as /vmhost/tmp/...
#   /vmout   the writable 9p export "vmout" (a host temp dir): config in,
#            results out
#   /tmp     a fresh tmpfs

/bin/busybox mkdir -p /bin /sbin /proc /sys /dev
/bin/busybox --install -s /bin

mount -t devtmpfs devtmpfs /dev
# The cpio carries no /dev/console node (building it needs no root), so the
# kernel started us without stdio: attach to the serial console now.
exec </dev/console >/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys

die() {
	echo "vm-init: FATAL: $*"
	# No results were written: the host sees qemu exit without a "done"
	# marker and reports the console tail.
	poweroff -f
	sleep 5
	exit 1
}

echo "vm-init: loading modules, mounting the host root"

# Modules, in dependency order (run-vm.sh wrote the list).
while read -r ko; do
	insmod "/modules/$ko" || die "insmod $ko failed"
done </modules/order

mkdir -p /ro /rw /newroot
# cache=loose: the lower layer is read-only and does not change during a
# run; caching makes systemd's start-up over 9p a lot faster.
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose \
	hostroot /ro || die "cannot mount the host root over 9p"
mount -t tmpfs -o mode=0755 tmpfs /rw || die "tmpfs"
mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/ro,upperdir=/rw/upper,workdir=/rw/work \
	/newroot || die "overlay mount failed"

mkdir -p /newroot/vmout /newroot/vmhost
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 vmout /newroot/vmout ||
	die "cannot mount the results export"
mount --bind /ro /newroot/vmhost || die "bind /vmhost"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /newroot/tmp || die "tmpfs /tmp"

# The host is a Docker container and its root has /.dockerenv: systemd would
# then believe it runs in a container, read its options from its own argv
# instead of the kernel command line, and skip units that do not run in
# containers. This VM is a real machine: hide the marker (whiteout).
rm -f /newroot/.dockerenv /newroot/run/.containerenv
# sandboxd's configuration and state on the host (a developer's daemon, a quickstart) are not the
# VM's: whited out in the overlay (the host's copies are untouched), the VM starts from what its
# stage installs, as a fresh machine does, and a host that changes them while the VM boots (over
# 9p with cache=loose) cannot change what the tests see.
rm -rf /newroot/etc/sandboxd /newroot/var/lib/sandboxd || die "cannot hide the host's /etc/sandboxd and /var/lib/sandboxd"
# A mark in the overlay's upper layer only, never on the host: tests that must remove what the
# host's root holds (t-deb.sh's purge of /var/lib/sandboxd) do so only where they find it.
echo "the root of a sandboxd test VM: the host's, under a throwaway overlay" >/newroot/.sandboxd-test-vm

UNITDIR=/newroot/etc/systemd/system

# The host's own boot-time units that have no business in a test VM: the
# timers would start maintenance work (apt, man-db, fstrim...), the rest are
# services for a real host (AppArmor, NTP, pstore, gettys, PostgreSQL). A
# symlink to /dev/null in /etc masks a unit. The list is also in README.md.
mask() {
	for u in "$@"; do
		rm -f "$UNITDIR/$u"
		ln -s /dev/null "$UNITDIR/$u"
	done
}
mask \
	apparmor.service systemd-timesyncd.service systemd-pstore.service \
	postgresql.service e2scrub_reap.service \
	getty@tty1.service serial-getty@ttyS0.service getty.target \
	apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer \
	e2scrub_all.timer fstrim.timer man-db.timer

# The runner. Type=exec (not oneshot): its start job completes as soon as the
# script is running, so the boot transaction finishes and a test can wait for
# `systemctl is-system-running --wait`. The VM powers off when it ends, either
# way; -force skips the orderly stop of every unit (a wedged daemon must not
# hang the shutdown) -- results are on the 9p export already (synced).
cat >"$UNITDIR/sandboxd-vmtest.service" <<'EOF'
[Unit]
Description=sandboxd system tests (tests/vm/guest-run.sh)
After=basic.target
SuccessAction=poweroff-force
FailureAction=poweroff-force

[Service]
Type=exec
ExecStart=/bin/bash /vmout/guest-run.sh
StandardInput=null
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity
EOF

cat >"$UNITDIR/sandboxd-vmtest.target" <<'EOF'
[Unit]
Description=sandboxd system tests
Requires=basic.target
After=basic.target
Wants=sandboxd-vmtest.service
AllowIsolate=yes
EOF

echo "vm-init: starting systemd"
mount --move /dev /newroot/dev
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys

# The target is also named on the kernel command line (run-vm.sh), which is
# where this systemd actually reads it from.
exec switch_root /newroot /lib/systemd/systemd systemd.unit=sandboxd-vmtest.target
