## tests/vm: the system tests (tests/system/t-*.sh) inside a real systemd booted in qemu on this
## machine's own root filesystem. `make check-vm` installs into a staging tree, boots, and
## reports through the TAP driver like any other test (see tests/vm/README.md).
## t-user-state-before.sh runs first and t-user-state-after.sh last: the sandboxes a user made
## before are neither counted nor touched by the scripts between them.
VM_SYSTEM_TESTS = tests/system/t-user-state-before.sh \
	tests/system/t-systemd.sh tests/system/t-durability.sh tests/system/t-isolation.sh \
	tests/system/t-doctor.sh tests/system/t-readme.sh tests/system/t-top.sh tests/system/t-metrics.sh \
	tests/system/t-snapshot.sh tests/system/t-frozen.sh tests/system/t-mounts.sh tests/system/t-files.sh \
	tests/system/t-ports.sh tests/system/t-restart.sh tests/system/t-restart-all.sh tests/system/t-restart-scopes.sh tests/system/t-restart-loop.sh tests/system/t-images.sh tests/system/t-overlay-root.sh tests/system/t-egress.sh \
	tests/system/t-quota.sh tests/system/t-restart-image.sh tests/system/t-quota-state.sh tests/system/t-oci.sh tests/system/t-oci-sandbox.sh tests/system/t-btrfs.sh \
	tests/system/t-user-state-after.sh
## check-vm-deb: the Debian packages (scripts/build-deb.sh) in a VM of their own, with nothing
## staged (t-deb.sh purges what it installed, and the packages' units replace a staged daemon's):
## t-deb.sh installs and purges DEB_DIR's; t-restart-all.sh installs them and upgrades to
## DEB_UPGRADE_DIR's (the same tree rebuilt with a higher version) under its three kinds of
## restart; t-restart-deb.sh does that upgrade with a sandbox's scope, init and server. Run by
## .ci/run (and by hand: README, "Debian packages"); where a set is missing, each test skips
## (fails with SANDBOXD_TEST_MUST_WORK=1).
VM_DEB_TESTS = tests/system/t-deb.sh tests/system/t-restart-all.sh tests/system/t-restart-deb.sh
EXTRA_DIST += tests/vm/run-vm.sh tests/vm/guest-init.sh tests/vm/guest-run.sh tests/vm/vm-check.sh \
	tests/vm/vm-check-deb.sh \
	tests/vm/README.md tests/system/lib.sh tests/system/quota-lib.sh tests/system/restart-lib.sh tests/system/sbx-call.py tests/system/t-deb.sh tests/system/t-restart-deb.sh $(VM_SYSTEM_TESTS)

check-vm:
	rm -rf $(abs_top_builddir)/vm-stage
	$(MAKE) $(AM_MAKEFLAGS) install DESTDIR=$(abs_top_builddir)/vm-stage >/dev/null
	SANDBOXD_TEST_TIMEOUT=0 $(MAKE) $(AM_MAKEFLAGS) check TESTS=tests/vm/vm-check.sh \
		VM_SYSTEM_TESTS_ABS="$(addprefix $(abs_top_srcdir)/,$(VM_SYSTEM_TESTS))"

check-vm-deb:
	SANDBOXD_TEST_TIMEOUT=0 $(MAKE) $(AM_MAKEFLAGS) check TESTS=tests/vm/vm-check-deb.sh \
		VM_SYSTEM_TESTS_ABS="$(addprefix $(abs_top_srcdir)/,$(VM_DEB_TESTS))"

clean-local: clean-vm-stage
clean-vm-stage:
	rm -rf $(abs_top_builddir)/vm-stage $(abs_top_builddir)/vm-stage-none
