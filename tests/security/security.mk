## tests/security/: the run filter (daemon/exec/syscall-filter.c, docs/security.md) tried from inside a
## sandbox. probe is linked statically (without the sanitizers, which cannot be) so that it runs
## from the sandbox's workspace whatever the sandbox's library paths are.
check_PROGRAMS += tests/security/probe
tests_security_probe_SOURCES = tests/security/probe.c
tests_security_probe_CFLAGS = $(WARN_CFLAGS)
tests_security_probe_LDFLAGS = -all-static

SECURITY_TESTS = tests/security/t-seccomp.sh tests/security/t-escape.sh tests/security/t-files-race.sh \
	tests/security/t-copy-out.sh
TESTS += $(SECURITY_TESTS)
EXTRA_DIST += $(SECURITY_TESTS)
