## Host integration tests of the pool, of running out of fds and of load and abuse (root; the
## same tests/lib.sh harness as tests/integration.mk). Bounded in time; loopback only.
PERF_TESTS = \
	tests/t-fds.sh \
	tests/t-load.sh \
	tests/t-pool.sh \
	tests/t-pool-create.sh
TESTS += $(PERF_TESTS)
EXTRA_DIST += $(PERF_TESTS)
