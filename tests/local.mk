## tests/: TAP unit tests (test-*.c), host integration tests (t-*.sh), fuzz corpus replay,
## and the real-systemd VM tests (tests/vm, `make check-vm`).
# timed-driver.sh writes each test's wall time to <test>.time (.ci/run lists the slowest).
LOG_DRIVER = env AM_TAP_AWK='$(AWK)' $(SHELL) $(top_srcdir)/tests/timed-driver.sh \
	$(SHELL) $(top_srcdir)/build-aux/tap-driver.sh
TEST_EXTENSIONS = .sh
SH_LOG_DRIVER = $(LOG_DRIVER)
MOSTLYCLEANFILES = $(TEST_LOGS:.log=.time)
EXTRA_DIST += tests/timed-driver.sh
AM_TESTS_ENVIRONMENT = \
	top_srcdir='$(abs_top_srcdir)'; top_builddir='$(abs_top_builddir)'; \
	VM_SYSTEM_TESTS_ABS='$(VM_SYSTEM_TESTS_ABS)'; \
	export top_srcdir top_builddir VM_SYSTEM_TESTS_ABS;

include tests/unit.mk
include tests/integration.mk
include tests/vm/vm.mk
include tests/perf.mk
include tests/security/security.mk
include tests/security/visibility.mk
