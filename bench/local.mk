## bench/: sandboxd-bench, the benchmark (docs/performance.md). Built and run only by
## `make bench`, never by `make all` or `make check`: it needs root, a cgroup2 mount and minutes.
## BENCH_ARGS passes options to the program, e.g. make bench BENCH_ARGS='--runs 2000 --sandboxes 1000';
## ANCHORS=/path/to/anchors/run.sh also measures the peers against the same daemon (see run-bench.sh).
EXTRA_PROGRAMS = bench/sandboxd-bench
bench_sandboxd_bench_SOURCES = \
	bench/sandboxd-bench.c bench/bench.h \
	bench/scenarios.c \
	bench/scenario-files.c \
	bench/scenario-ports.c \
	bench/scenario-images.c \
	bench/scenario-egress.c \
	bench/util.c \
	bench/stats.c bench/stats.h
bench_sandboxd_bench_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) -pthread
bench_sandboxd_bench_LDADD = lib/libsandbox.la $(JSONC_LIBS) -lm -lpthread
EXTRA_DIST += bench/run-bench.sh bench/compare.sh bench/storage-copies.sh bench/restart-latency.py bench/vm-restart-bench.sh \
	bench/egress-names.sh
CLEANFILES += bench/sandboxd-bench$(EXEEXT)

BENCH_ARGS =
# bench/ is also a directory of the build tree, so the target needs forcing; .PHONY cannot be used
# here (tests/unit.mk declares it under a condition, and automake refuses to mix the two).
bench: bench/sandboxd-bench$(EXEEXT) daemon/sandboxd$(EXEEXT) ctl/sandboxctl$(EXEEXT) bench-force
	SANDBOXD='$(abs_top_builddir)/daemon/sandboxd' BENCH='$(abs_top_builddir)/bench/sandboxd-bench' \
		BUILDDIR='$(abs_top_builddir)' ANCHORS='$(ANCHORS)' \
		$(SHELL) '$(abs_top_srcdir)/bench/run-bench.sh' $(BENCH_ARGS)
# The same scenarios against the daemon of another revision, alternating (bench/compare.sh):
## make bench-compare REV=d776a6b BENCH_ARGS='--runs 300 --clients 1 --only run,throwaway,floor'
bench-compare: bench/sandboxd-bench$(EXEEXT) daemon/sandboxd$(EXEEXT) ctl/sandboxctl$(EXEEXT) bench-force
	BUILDDIR='$(abs_top_builddir)' $(SHELL) '$(abs_top_srcdir)/bench/compare.sh' '$(REV)' $(BENCH_ARGS)
# Snapshot, fork and restore of a 1 GB workspace on the state directory and on storage = image.
bench-storage: daemon/sandboxd$(EXEEXT) bench-force
	$(SHELL) '$(abs_top_srcdir)/bench/storage-copies.sh' '$(abs_top_builddir)' $(BENCH_RUNS)
BENCH_RUNS = 5
# Under the fd-store stand-in (tests/fake-fdstore.py, as a restart under systemd): restart to the
# first answered health with each of BENCH_SANDBOXES sandboxes alive, BENCH_RESTARTS times, and
# `run true` in them before and after (bench/restart-latency.py fdstore; standalone, no store:
# restart-latency.py standalone; under systemd, in the VM: bench/vm-restart-bench.sh).
bench-restart: daemon/sandboxd$(EXEEXT) bench-force
	python3 '$(abs_top_srcdir)/bench/restart-latency.py' fdstore $(BENCH_SANDBOXES) $(BENCH_RESTARTS) \
		'$(abs_top_builddir)/daemon/sandboxd' "$$(sed -n 's/^[^ ]* [^ ]* [^ ]* [^ ]* \([^ ]*\) .* - cgroup2 .*/\1/p' /proc/self/mountinfo | head -n1)" \
		$(BENCH_RESTART_RUNS)
BENCH_SANDBOXES = 1,100,1000
BENCH_RESTARTS = 10
BENCH_RESTART_RUNS = 200
# Egress by name (bench/egress-names.sh, in network namespaces of its own): a connect by name, the
# first one (with the resolve through the relay) and later ones, beside one to an allowed address
# and the host's own without sandboxd; then throughput through the SNI relay beside a direct
# connection, where the daemon takes match-sni entries.
bench-egress-names: daemon/sandboxd$(EXEEXT) ctl/sandboxctl$(EXEEXT) bench-force
	bash '$(abs_top_srcdir)/bench/egress-names.sh' '$(abs_top_builddir)' $(BENCH_EGRESS_ROUNDS) $(BENCH_EGRESS_PER)
BENCH_EGRESS_ROUNDS = 10
BENCH_EGRESS_PER = 40
bench-force:
