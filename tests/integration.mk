## Host integration tests (root): each t-*.sh starts its own sandboxd on a socket in a temp dir,
## with its own state dir and its own cgroup2 directory (tests/lib.sh), and prints TAP.
## They need python3 and jq; systemd-socket-activate for t-activation.sh and t-metrics.sh,
## prometheus for t-metrics.sh (scripts/deps.sh installs it). Without root they
## print "1..0 # SKIP".
## The slowest first (.ci/run lists them): under make -j2, a long test started last runs alone.
INTEGRATION_TESTS = \
	tests/t-snapshot.sh \
	tests/t-sessions.sh \
	tests/t-frozen.sh \
	tests/t-run.sh \
	tests/t-images.sh \
	tests/t-files-progress.sh \
	tests/t-oci.sh \
	tests/t-oracle.sh \
	tests/t-restart.sh \
	tests/t-egress.sh \
	tests/t-egress-names.sh \
	tests/t-egress-sni.sh \
	tests/t-egress-update.sh \
	tests/t-access.sh \
	tests/t-activation.sh \
	tests/t-durability.sh \
	tests/t-errors.sh \
	tests/t-files.sh \
	tests/t-files-big.sh \
	tests/t-files-tar.sh \
	tests/t-files-chunks.sh \
	tests/t-kill-fallback.sh \
	tests/t-layers.sh \
	tests/t-mounts.sh \
	tests/t-netns.sh \
	tests/t-oci-sandbox.sh \
	tests/t-overlay-root.sh \
	tests/t-ports.sh \
	tests/t-conf.sh \
	tests/t-ctl-escapes.sh \
	tests/t-dev.sh \
	tests/t-doctor.sh \
	tests/t-inodes.sh \
	tests/t-leak.sh \
	tests/t-listen.sh \
	tests/t-metrics.sh \
	tests/t-oci-run.sh \
	tests/t-signals.sh \
	tests/t-warm.sh \
	tests/t-protocol.sh \
	tests/t-pty.sh \
	tests/t-python.sh \
	tests/t-sidecar.sh \
	tests/t-python-types.sh \
	tests/t-python-fields.sh \
	tests/t-restart-standalone.sh \
	tests/t-restart-runs.sh \
	tests/t-restart-sessions.sh \
	tests/t-restart-image.sh \
	tests/t-restart-hold.sh \
	tests/t-rlimits.sh \
	tests/t-readme.sh \
	tests/t-shell.sh \
	tests/t-snapshot-small.sh \
	tests/t-socket-fds.sh \
	tests/t-stream.sh \
	tests/t-sweep.sh \
	tests/t-quota.sh \
	tests/t-btrfs.sh \
	tests/t-teardown.sh \
	tests/t-top.sh \
	tests/t-v1.sh
TESTS += $(INTEGRATION_TESTS)
## t-files-chunks.sh's client: libsandbox's chunked writes (sbx_file_write, sbx_file_write_from).
check_PROGRAMS += tests/file-write-tool
tests_file_write_tool_SOURCES = tests/file-write-tool.c
tests_file_write_tool_CFLAGS = $(UNIT_CFLAGS)
tests_file_write_tool_LDADD = lib/libsandbox.la $(UNIT_LDADD)
## t-oci-run.sh's client: a "tty" run's master taken from its started line (sbx_client_line_fds).
check_PROGRAMS += tests/oci-tty-client
tests_oci_tty_client_SOURCES = tests/oci-tty-client.c
tests_oci_tty_client_CFLAGS = $(UNIT_CFLAGS)
tests_oci_tty_client_LDADD = lib/libsandbox.la $(UNIT_LDADD)
## t-teardown.sh's filesystem that never answers (raw /dev/fuse, no libfuse).
check_PROGRAMS += tests/fuse-hang
tests_fuse_hang_SOURCES = tests/fuse-hang.c
tests_fuse_hang_CFLAGS = $(WARN_CFLAGS)
EXTRA_DIST += $(INTEGRATION_TESTS) tests/lib.sh tests/client.py tests/ptyclient.py tests/python-client.py \
	tests/metrics.py tests/fake-fdstore.py tests/egress-remote.py tests/egress-sni-remote.py tests/egress-sni-client.py tests/egress-lib.sh tests/sidecar.py tests/readme-using-it.sh \
	tests/fixtures/deeptutor/argv.http tests/fixtures/deeptutor/env.http tests/fixtures/deeptutor/memory-hog.http tests/fixtures/deeptutor/mount-readonly.http \
	tests/fixtures/deeptutor/output.http tests/fixtures/deeptutor/plain.http tests/fixtures/deeptutor/timeout.http tests/fixtures/deeptutor/workdir-inside.http tests/fixtures/deeptutor/workdir-outside.http

## t-v1.sh checks what the others may have done to the cgroup v1 hierarchies: it runs after them,
## also under make -j.
tests/t-v1.log: $(filter-out tests/t-v1.log,$(INTEGRATION_TESTS:.sh=.log))
