#!/bin/bash
# A package upgrade with sandboxes alive (issue 22): `dpkg -i` installs the Debian packages of
# DEB_DIR (scripts/build-deb.sh) and the packaged daemon runs (a staged daemon already running is
# restarted into it); then `dpkg -i` of the same tree rebuilt with a higher version (DEB_UPGRADE_DIR,
# DEB_VERSION=0.1.0+ci2 for build-deb.sh) is a real upgrade: the old prerm and the
# new postinst run (debian/rules: --restart-after-upgrade, postinst try-restarts the service), and
# a background HTTP server in a sandbox answers after it with the same pid inside and the same
# init, in the same scope, the init's pidfd back from the fd store. CI runs it in its own VM
# (`make check-vm-deb`, after t-deb.sh); by hand:
#   DEB_DIR=... DEB_UPGRADE_DIR=... make check-vm-deb
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/restart-lib.sh"

need_debs "$DEB_DIR" libsandbox0 sandboxd
need_debs "$DEB_UPGRADE_DIR" libsandbox0 sandboxd
debs=("$DEB_DIR"/libsandbox0_*.deb "$DEB_DIR"/sandboxd_*.deb)
upgrade=("$DEB_UPGRADE_DIR"/libsandbox0_*.deb "$DEB_UPGRADE_DIR"/sandboxd_*.deb)
v0=$(deb_version "${debs[1]}") v1=$(deb_version "${upgrade[1]}")
dpkg --compare-versions "$v1" gt "$v0"
ok $? "the rebuilt packages are a higher version ($v1 over $v0)"

# As t-deb.sh: no man-db re-index over 9p, no container's policy-rc.d forbidding restarts.
rm -f /var/lib/man-db/auto-update /usr/sbin/policy-rc.d
# The first install over a staged one replaces its unit (ExecStart= of /usr/sbin) and does not
# restart a running service: then a restart by hand runs the packaged daemon. Over nothing, the
# socket is started and the first connection starts the packaged daemon.
# timeout: under TCG on a loaded host an install takes minutes (ldconfig and py3compile over 9p,
# daemon-reloads)
out=$(timeout 480 dpkg -i "${debs[@]}" 2>&1)
ok $? "dpkg -i of the packages ($v0) (exit $?)"
diag "$(tail -n 3 <<<"$out")"
if systemctl is-active --quiet sandboxd.service && [ "$(readlink "/proc/$(mainpid)/exe")" != /usr/sbin/sandboxd ]; then
	old=$(mainpid)
	systemctl restart sandboxd.service
	wait_up "$old"
fi
wait_up x && [ "$(readlink "/proc/$(mainpid)/exe")" = /usr/sbin/sandboxd ] && [ "$(installed_version sandboxd)" = "$v0" ]
ok $? "the packaged daemon $v0 runs ($(readlink "/proc/$(mainpid)/exe"), sandboxd $(installed_version sandboxd) installed)"

sandbox_with_server "deb-$$"

# The upgrade: the old prerm (which does not stop the service) and the new postinst's try-restart.
old=$(mainpid) store0=$(store)
out=$(timeout 480 dpkg -i "${upgrade[@]}" 2>&1)
ok $? "dpkg -i of the rebuilt packages ($v1): an upgrade (exit $?)"
diag "$(tail -n 3 <<<"$out")"
[ "$(installed_version sandboxd)" = "$v1" ] && [ "$(installed_version libsandbox0)" = "$v1" ]
ok $? "sandboxd and libsandbox0 $v1 are installed (dpkg-query: $(installed_version sandboxd), $(installed_version libsandbox0))"
check "the package's upgrade restarted the daemon" wait_up "$old"
survived "dpkg -i"
# preinst did not stop the service (debian/rules: --restart-after-upgrade): the store was kept.
r=$(call "{\"op\":\"inspect\",\"sandbox\":\"$id\"}")
[ "$(jqr .sandbox.restored_init "$r")" = "fd store" ] && [ "$(store)" = "$store0" ]
ok $? "the upgrade was a restart, not a stop and a start: the init's pidfd came back from the fd store ($(jqr .sandbox.restored_init "$r"); store $store0 -> $(store))"
call "{\"op\":\"destroy\",\"sandbox\":\"$id\"}" >/dev/null
done_testing
