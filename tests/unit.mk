## tests/: unit tests of lib/ (TAP through tests/tap.h), and the request fuzz target: its corpus
## is replayed by `make check` with the normal compiler; under --enable-fuzzing (clang) a real
## libFuzzer binary is built and `make fuzz FUZZ_TIME=60` runs it.
UNIT_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
UNIT_LDADD = lib/libsbxcommon.la $(JSONC_LIBS)

check_PROGRAMS += tests/test-util tests/test-proto
TESTS += tests/test-util tests/test-proto

tests_test_util_SOURCES = tests/test-util.c tests/tap.h
tests_test_util_CFLAGS = $(UNIT_CFLAGS)
tests_test_util_LDADD = $(UNIT_LDADD)

tests_test_proto_SOURCES = tests/test-proto.c tests/tap.h
tests_test_proto_CFLAGS = $(UNIT_CFLAGS)
tests_test_proto_LDADD = $(UNIT_LDADD)

## fd passing and the file transfers' wire format (docs/design/files.md).
check_PROGRAMS += tests/test-fdpass tests/test-file-proto
TESTS += tests/test-fdpass tests/test-file-proto
tests_test_fdpass_SOURCES = tests/test-fdpass.c tests/tap.h
tests_test_fdpass_CFLAGS = $(UNIT_CFLAGS)
tests_test_fdpass_LDADD = $(UNIT_LDADD)
tests_test_file_proto_SOURCES = tests/test-file-proto.c tests/tap.h
tests_test_file_proto_CFLAGS = $(UNIT_CFLAGS)
tests_test_file_proto_LDADD = $(UNIT_LDADD)

## libsandbox's file calls against a stand-in daemon (a forked child speaking the design).
check_PROGRAMS += tests/test-client-file
TESTS += tests/test-client-file
tests_test_client_file_SOURCES = tests/test-client-file.c tests/tap.h
tests_test_client_file_CFLAGS = $(UNIT_CFLAGS)
tests_test_client_file_LDADD = lib/libsandbox.la $(UNIT_LDADD)

## The run helper's parent check, with the daemon's spawn code compiled in.
check_PROGRAMS += tests/test-spawn
TESTS += tests/test-spawn
tests_test_spawn_SOURCES = tests/test-spawn.c tests/tap.h daemon/exec/spawn.c daemon/exec/identity.c
tests_test_spawn_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_test_spawn_CFLAGS = $(UNIT_CFLAGS)
tests_test_spawn_LDADD = $(UNIT_LDADD)

## The corpus replay: the target compiled normally, one TAP line per corpus file.
check_PROGRAMS += tests/fuzz/fuzz-request-replay
TESTS += tests/fuzz/replay-request.sh
tests_fuzz_fuzz_request_replay_SOURCES = tests/fuzz/fuzz-replay.c tests/fuzz/fuzz-request.c tests/fuzz/fuzz.h \
	daemon/core/request-fields.c daemon/core/request-fields.h
tests_fuzz_fuzz_request_replay_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_fuzz_fuzz_request_replay_CFLAGS = $(UNIT_CFLAGS)
tests_fuzz_fuzz_request_replay_LDADD = $(UNIT_LDADD)
EXTRA_DIST += tests/fuzz/replay-request.sh tests/fuzz/corpus

## The fast path of the lines that carry file bytes against the general parser (differential).
check_PROGRAMS += tests/fuzz/fuzz-file-line-replay
TESTS += tests/fuzz/replay-file-line.sh
tests_fuzz_fuzz_file_line_replay_SOURCES = tests/fuzz/fuzz-replay.c tests/fuzz/fuzz-file-line.c tests/fuzz/fuzz.h
tests_fuzz_fuzz_file_line_replay_CFLAGS = $(UNIT_CFLAGS)
tests_fuzz_fuzz_file_line_replay_LDADD = $(UNIT_LDADD)
EXTRA_DIST += tests/fuzz/replay-file-line.sh

## image.import's archive side on any bytes: nothing escapes the root, no setuid, no device.
check_PROGRAMS += tests/fuzz/fuzz-image-layer-replay
TESTS += tests/fuzz/replay-image-layer.sh
tests_fuzz_fuzz_image_layer_replay_SOURCES = tests/fuzz/fuzz-replay.c tests/fuzz/fuzz-image-layer.c tests/fuzz/fuzz.h \
	daemon/exec/image-import.c daemon/exec/image-import.h daemon/exec/entry-name.c daemon/exec/entry-name.h daemon/exec/open-beneath.c daemon/exec/open-beneath.h daemon/exec/blob-digest.c daemon/exec/blob-digest.h daemon/exec/rm-rf.c daemon/exec/rm-rf.h daemon/exec/btrfs.c daemon/exec/btrfs.h
tests_fuzz_fuzz_image_layer_replay_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_fuzz_fuzz_image_layer_replay_CFLAGS = $(UNIT_CFLAGS) $(ARCHIVE_CFLAGS) $(CRYPTO_CFLAGS)
tests_fuzz_fuzz_image_layer_replay_LDADD = $(UNIT_LDADD) $(ARCHIVE_LIBS) $(CRYPTO_LIBS)
EXTRA_DIST += tests/fuzz/replay-image-layer.sh

## The SNI relay's parser of a connection's first bytes on any bytes (daemon/core/tls-hello.c).
check_PROGRAMS += tests/fuzz/fuzz-tls-hello-replay
TESTS += tests/fuzz/replay-tls-hello.sh
tests_fuzz_fuzz_tls_hello_replay_SOURCES = tests/fuzz/fuzz-replay.c tests/fuzz/fuzz-tls-hello.c tests/fuzz/fuzz.h \
	daemon/core/tls-hello.c daemon/core/tls-hello.h
tests_fuzz_fuzz_tls_hello_replay_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_fuzz_fuzz_tls_hello_replay_CFLAGS = $(UNIT_CFLAGS)
tests_fuzz_fuzz_tls_hello_replay_LDADD = $(UNIT_LDADD)
EXTRA_DIST += tests/fuzz/replay-tls-hello.sh

if FUZZING
## lib's sources are compiled into the target so that libFuzzer sees their coverage.
FUZZ_FLAGS = -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer -g
FUZZ_TIME = 60
FUZZ_ARGS =
noinst_PROGRAMS += tests/fuzz/fuzz-request
tests_fuzz_fuzz_request_SOURCES = tests/fuzz/fuzz-request.c tests/fuzz/fuzz.h \
	lib/util.c lib/json-check.c lib/proto.c daemon/core/request-fields.c daemon/core/request-fields.h
tests_fuzz_fuzz_request_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_fuzz_fuzz_request_CFLAGS = $(UNIT_CFLAGS) $(FUZZ_FLAGS)
tests_fuzz_fuzz_request_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_FLAGS)
tests_fuzz_fuzz_request_LDADD = $(JSONC_LIBS)

noinst_PROGRAMS += tests/fuzz/fuzz-file-line
tests_fuzz_fuzz_file_line_SOURCES = tests/fuzz/fuzz-file-line.c tests/fuzz/fuzz.h \
	lib/util.c lib/json-check.c lib/proto.c lib/file-proto.c
tests_fuzz_fuzz_file_line_CFLAGS = $(UNIT_CFLAGS) $(FUZZ_FLAGS)
tests_fuzz_fuzz_file_line_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_FLAGS)
tests_fuzz_fuzz_file_line_LDADD = $(JSONC_LIBS)

## New inputs go to tests/fuzz/work/request; crashes to tests/fuzz/work/crash-*. To keep going past a
## known crash: make fuzz FUZZ_ARGS='-fork=2 -ignore_crashes=1'.
fuzz: tests/fuzz/fuzz-request
	$(MKDIR_P) tests/fuzz/work/request
	tests/fuzz/fuzz-request -max_total_time=$(FUZZ_TIME) -max_len=4096 -timeout=10 \
		-artifact_prefix=tests/fuzz/work/ $(FUZZ_ARGS) tests/fuzz/work/request $(srcdir)/tests/fuzz/corpus/request

## make fuzz-file-line FUZZ_TIME=60: the fast path of file lines against the general parser.
fuzz-file-line: tests/fuzz/fuzz-file-line
	$(MKDIR_P) tests/fuzz/work/file-line
	tests/fuzz/fuzz-file-line -max_total_time=$(FUZZ_TIME) -max_len=8192 -timeout=10 \
		-artifact_prefix=tests/fuzz/work/file-line- $(FUZZ_ARGS) tests/fuzz/work/file-line \
		$(srcdir)/tests/fuzz/corpus/file-line

noinst_PROGRAMS += tests/fuzz/fuzz-image-layer
tests_fuzz_fuzz_image_layer_SOURCES = tests/fuzz/fuzz-image-layer.c tests/fuzz/fuzz.h \
	daemon/exec/image-import.c daemon/exec/image-import.h daemon/exec/entry-name.c daemon/exec/entry-name.h daemon/exec/open-beneath.c daemon/exec/open-beneath.h daemon/exec/blob-digest.c daemon/exec/blob-digest.h daemon/exec/rm-rf.c daemon/exec/rm-rf.h daemon/exec/btrfs.c daemon/exec/btrfs.h
tests_fuzz_fuzz_image_layer_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_fuzz_fuzz_image_layer_CFLAGS = $(UNIT_CFLAGS) $(ARCHIVE_CFLAGS) $(FUZZ_FLAGS)
tests_fuzz_fuzz_image_layer_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_FLAGS)
tests_fuzz_fuzz_image_layer_LDADD = $(ARCHIVE_LIBS) $(CRYPTO_LIBS)

## make fuzz-image-layer FUZZ_TIME=60: image.import's archive side (as root: owners are set).
fuzz-image-layer: tests/fuzz/fuzz-image-layer
	$(MKDIR_P) tests/fuzz/work/image-layer
	tests/fuzz/fuzz-image-layer -max_total_time=$(FUZZ_TIME) -max_len=65536 -timeout=10 \
		-artifact_prefix=tests/fuzz/work/image-layer- $(FUZZ_ARGS) tests/fuzz/work/image-layer \
		$(srcdir)/tests/fuzz/corpus/image-layer

noinst_PROGRAMS += tests/fuzz/fuzz-tls-hello
tests_fuzz_fuzz_tls_hello_SOURCES = tests/fuzz/fuzz-tls-hello.c tests/fuzz/fuzz.h daemon/core/tls-hello.c daemon/core/tls-hello.h
tests_fuzz_fuzz_tls_hello_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_fuzz_fuzz_tls_hello_CFLAGS = $(UNIT_CFLAGS) $(FUZZ_FLAGS)
tests_fuzz_fuzz_tls_hello_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_FLAGS)

## make fuzz-tls-hello FUZZ_TIME=60: the SNI relay's parser of ClientHellos and HTTP/1 requests.
fuzz-tls-hello: tests/fuzz/fuzz-tls-hello
	$(MKDIR_P) tests/fuzz/work/tls-hello
	tests/fuzz/fuzz-tls-hello -max_total_time=$(FUZZ_TIME) -max_len=20000 -timeout=10 \
		-artifact_prefix=tests/fuzz/work/tls-hello- $(FUZZ_ARGS) tests/fuzz/work/tls-hello \
		$(srcdir)/tests/fuzz/corpus/tls-hello
.PHONY: fuzz fuzz-file-line fuzz-image-layer fuzz-tls-hello check-vm
endif

## daemon/core/ring.c (and the pipe peek it uses) compiled into its test directly.
check_PROGRAMS += tests/test-ring
TESTS += tests/test-ring
tests_test_ring_SOURCES = tests/test-ring.c tests/tap.h tests/die-in-read.h daemon/core/ring.c daemon/core/ring.h \
	daemon/core/pipe-peek.c daemon/core/pipe-peek.h
tests_test_ring_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_test_ring_CFLAGS = $(UNIT_CFLAGS)
tests_test_ring_LDADD = $(UNIT_LDADD)

## copy_tree() of the daemon, on a hostile tree (root only; skipped otherwise).
check_PROGRAMS += tests/test-copy-tree
TESTS += tests/test-copy-tree
tests_test_copy_tree_SOURCES = tests/test-copy-tree.c tests/tap.h daemon/host/copy-tree.c daemon/host/copy-tree.h
tests_test_copy_tree_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_test_copy_tree_CFLAGS = $(UNIT_CFLAGS)
tests_test_copy_tree_LDADD = $(UNIT_LDADD)

## The reply/close rules (daemon/core/reply.h): a fake sink, then a connection on a socketpair
## with its event loop and nothing else of the daemon.
check_PROGRAMS += tests/test-reply
TESTS += tests/test-reply
tests_test_reply_SOURCES = tests/test-reply.c tests/tap.h daemon/core/reply.c daemon/core/reply.h \
	daemon/server/connection.c daemon/server/connection.h daemon/core/log.c daemon/core/log.h \
	daemon/core/metrics.c daemon/core/metrics.h
tests_test_reply_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_test_reply_CFLAGS = $(UNIT_CFLAGS) $(SYSTEMD_CFLAGS)
tests_test_reply_LDADD = $(UNIT_LDADD) $(SYSTEMD_LIBS)
## The daemon's modules on a Context and a Registry, without sockets: they link
## daemon/libsandboxd.la, every daemon source but main.c.
DAEMON_UNIT_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS) -DLIBEXECDIR=\"$(libexecdir)\"
DAEMON_UNIT_CFLAGS = $(AM_CFLAGS) $(SYSTEMD_CFLAGS) $(JSONC_CFLAGS) $(CGROUP_CFLAGS) $(SECCOMP_CFLAGS)

## The metrics endpoint's request reader (daemon/server/metrics-http.c).
check_PROGRAMS += tests/test-metrics-http
TESTS += tests/test-metrics-http
tests_test_metrics_http_SOURCES = tests/test-metrics-http.c tests/tap.h
tests_test_metrics_http_CPPFLAGS = $(DAEMON_UNIT_CPPFLAGS)
tests_test_metrics_http_CFLAGS = $(DAEMON_UNIT_CFLAGS)
tests_test_metrics_http_LDADD = $(DAEMON_LIBS)

check_PROGRAMS += tests/test-registry
TESTS += tests/test-registry
tests_test_registry_SOURCES = tests/test-registry.c tests/tap.h
tests_test_registry_CPPFLAGS = $(DAEMON_UNIT_CPPFLAGS)
tests_test_registry_CFLAGS = $(DAEMON_UNIT_CFLAGS)
tests_test_registry_LDADD = $(DAEMON_LIBS)

## An OCI layout's index and manifests as an import reads them (pure).
check_PROGRAMS += tests/test-oci-index
TESTS += tests/test-oci-index
tests_test_oci_index_SOURCES = tests/test-oci-index.c tests/tap.h daemon/core/oci-index.c daemon/core/oci-index.h \
	daemon/exec/blob-digest.c daemon/exec/blob-digest.h
tests_test_oci_index_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_test_oci_index_CFLAGS = $(UNIT_CFLAGS) $(CRYPTO_CFLAGS)
tests_test_oci_index_LDADD = $(UNIT_LDADD) $(CRYPTO_LIBS)

## `nft list set` read back (pure).
check_PROGRAMS += tests/test-nft-listing
TESTS += tests/test-nft-listing
tests_test_nft_listing_SOURCES = tests/test-nft-listing.c tests/tap.h daemon/core/nft-listing.c daemon/core/nft-listing.h
tests_test_nft_listing_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_test_nft_listing_CFLAGS = $(UNIT_CFLAGS)

## Connection tracking over ctnetlink (daemon/host/conntrack.c), in a network namespace of its own
## with a marking rule (root only; skipped otherwise).
check_PROGRAMS += tests/test-conntrack
TESTS += tests/test-conntrack
tests_test_conntrack_SOURCES = tests/test-conntrack.c tests/tap.h daemon/host/conntrack.c daemon/host/conntrack.h \
	daemon/host/netlink-msg.c daemon/host/netlink-msg.h \
	daemon/host/nftables.c daemon/host/nftables.h
tests_test_conntrack_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_test_conntrack_CFLAGS = $(UNIT_CFLAGS) $(NFTABLES_CFLAGS)
tests_test_conntrack_LDADD = $(UNIT_LDADD) $(NFTABLES_LIBS)

## One nftables set element looked up over nfnetlink (daemon/host/nft-element.c), in a network
## namespace of its own (root only; skipped otherwise).
check_PROGRAMS += tests/test-nft-element
TESTS += tests/test-nft-element
tests_test_nft_element_SOURCES = tests/test-nft-element.c tests/tap.h daemon/host/nft-element.c daemon/host/nft-element.h \
	daemon/host/netlink-msg.c daemon/host/netlink-msg.h \
	daemon/host/nftables.c daemon/host/nftables.h
tests_test_nft_element_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_test_nft_element_CFLAGS = $(UNIT_CFLAGS) $(NFTABLES_CFLAGS)
tests_test_nft_element_LDADD = $(UNIT_LDADD) $(NFTABLES_LIBS)

## A connection's first bytes from its segments, as the SNI check holds them (daemon/core/first-bytes.c; pure).
check_PROGRAMS += tests/test-first-bytes
TESTS += tests/test-first-bytes
tests_test_first_bytes_SOURCES = tests/test-first-bytes.c tests/tap.h daemon/core/first-bytes.c daemon/core/first-bytes.h
tests_test_first_bytes_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_test_first_bytes_CFLAGS = $(UNIT_CFLAGS)
tests_test_first_bytes_LDADD = $(UNIT_LDADD)

## A netfilter queue's messages on hostile bytes, and a datagram of messages of odd lengths read
## (daemon/host/nfqueue.c; pure, a socket pair for the datagram).
check_PROGRAMS += tests/test-nfqueue-parse
TESTS += tests/test-nfqueue-parse
tests_test_nfqueue_parse_SOURCES = tests/test-nfqueue-parse.c tests/tap.h tests/netlink-hostile.h daemon/host/nfqueue.c daemon/host/nfqueue.h \
	daemon/host/netlink-msg.c daemon/host/netlink-msg.h daemon/core/log.c daemon/core/log.h
tests_test_nfqueue_parse_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_test_nfqueue_parse_CFLAGS = $(UNIT_CFLAGS)
tests_test_nfqueue_parse_LDADD = $(UNIT_LDADD) $(SYSTEMD_LIBS)

## The parser of ctnetlink's dump messages, on hostile bytes (pure).
check_PROGRAMS += tests/test-conntrack-parse
TESTS += tests/test-conntrack-parse
tests_test_conntrack_parse_SOURCES = tests/test-conntrack-parse.c tests/tap.h tests/netlink-hostile.h daemon/host/conntrack.c daemon/host/conntrack.h \
	daemon/host/netlink-msg.c daemon/host/netlink-msg.h
tests_test_conntrack_parse_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_test_conntrack_parse_CFLAGS = $(UNIT_CFLAGS)
tests_test_conntrack_parse_LDADD = $(UNIT_LDADD)

## The DNS relay's message code (pure).
check_PROGRAMS += tests/test-dns-message
TESTS += tests/test-dns-message
tests_test_dns_message_SOURCES = tests/test-dns-message.c tests/tap.h daemon/core/dns-message.c daemon/core/dns-message.h
tests_test_dns_message_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_test_dns_message_CFLAGS = $(UNIT_CFLAGS)

## The SNI relay's parser of a connection's first bytes (pure).
check_PROGRAMS += tests/test-tls-hello
TESTS += tests/test-tls-hello
tests_test_tls_hello_SOURCES = tests/test-tls-hello.c tests/tap.h daemon/core/tls-hello.c daemon/core/tls-hello.h
tests_test_tls_hello_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_test_tls_hello_CFLAGS = $(UNIT_CFLAGS)

## A request's "network" and egress's nftables text (pure: daemon/sandbox/egress-spec.c, egress-rules.c).
check_PROGRAMS += tests/test-egress-spec tests/test-egress-rules
TESTS += tests/test-egress-spec tests/test-egress-rules
tests_test_egress_spec_SOURCES = tests/test-egress-spec.c tests/tap.h daemon/sandbox/egress-spec.c daemon/sandbox/egress-spec.h \
	daemon/core/dns-message.c daemon/core/dns-message.h
tests_test_egress_spec_CPPFLAGS = $(DAEMON_UNIT_CPPFLAGS)
tests_test_egress_spec_CFLAGS = $(DAEMON_UNIT_CFLAGS)
tests_test_egress_spec_LDADD = $(UNIT_LDADD)
tests_test_egress_rules_SOURCES = tests/test-egress-rules.c tests/tap.h daemon/sandbox/egress-rules.c daemon/sandbox/egress-rules.h \
	daemon/sandbox/egress-spec.c daemon/sandbox/egress-spec.h daemon/core/dns-message.c daemon/core/dns-message.h
tests_test_egress_rules_CPPFLAGS = $(DAEMON_UNIT_CPPFLAGS)
tests_test_egress_rules_CFLAGS = $(DAEMON_UNIT_CFLAGS)
tests_test_egress_rules_LDADD = $(UNIT_LDADD)

## What a disk sweep decides from its walk (pure: daemon/sandbox/sweep-plan.c).
check_PROGRAMS += tests/test-sweep-plan
TESTS += tests/test-sweep-plan
tests_test_sweep_plan_SOURCES = tests/test-sweep-plan.c tests/tap.h daemon/sandbox/sweep-plan.c daemon/sandbox/sweep-plan.h
tests_test_sweep_plan_CPPFLAGS = $(DAEMON_UNIT_CPPFLAGS)
tests_test_sweep_plan_CFLAGS = $(DAEMON_UNIT_CFLAGS)
tests_test_sweep_plan_LDADD = $(UNIT_LDADD)

## One skeleton for the daemon's children that work off the loop (daemon/host/child-job.c).
check_PROGRAMS += tests/test-child-job
TESTS += tests/test-child-job
tests_test_child_job_SOURCES = tests/test-child-job.c tests/tap.h
tests_test_child_job_CPPFLAGS = $(DAEMON_UNIT_CPPFLAGS)
tests_test_child_job_CFLAGS = $(DAEMON_UNIT_CFLAGS)
tests_test_child_job_LDADD = $(DAEMON_LIBS)

check_PROGRAMS += tests/test-pidfd
TESTS += tests/test-pidfd
tests_test_pidfd_SOURCES = tests/test-pidfd.c tests/tap.h
tests_test_pidfd_CPPFLAGS = $(DAEMON_UNIT_CPPFLAGS)
tests_test_pidfd_CFLAGS = $(DAEMON_UNIT_CFLAGS)
tests_test_pidfd_LDADD = $(DAEMON_LIBS)

check_PROGRAMS += tests/test-sandbox
TESTS += tests/test-sandbox
tests_test_sandbox_SOURCES = tests/test-sandbox.c tests/daemon-fixture.h tests/tap.h
tests_test_sandbox_CPPFLAGS = $(DAEMON_UNIT_CPPFLAGS)
tests_test_sandbox_CFLAGS = $(DAEMON_UNIT_CFLAGS)
tests_test_sandbox_LDADD = $(DAEMON_LIBS)

check_PROGRAMS += tests/test-pool
TESTS += tests/test-pool
tests_test_pool_SOURCES = tests/test-pool.c tests/daemon-fixture.h tests/tap.h
tests_test_pool_CPPFLAGS = $(DAEMON_UNIT_CPPFLAGS)
tests_test_pool_CFLAGS = $(DAEMON_UNIT_CFLAGS)
tests_test_pool_LDADD = $(DAEMON_LIBS)

## sandboxd-oci's config.json translation and refusals, on config.json files as podman and ctr
## write them (tests/oci/*.json).
check_PROGRAMS += tests/oci/test-oci-config
TESTS += tests/oci/test-oci-config
tests_oci_test_oci_config_SOURCES = tests/oci/test-oci-config.c tests/tap.h oci/config.c oci/config.h
tests_oci_test_oci_config_CFLAGS = $(UNIT_CFLAGS)
tests_oci_test_oci_config_LDADD = $(UNIT_LDADD)
EXTRA_DIST += tests/oci/podman-run.json tests/oci/podman-run-tty.json tests/oci/ctr-run.json

## A run's capture in a memfd, across a restart (daemon/sandbox/run-capture.c).
check_PROGRAMS += tests/test-run-capture
TESTS += tests/test-run-capture
tests_test_run_capture_SOURCES = tests/test-run-capture.c tests/tap.h tests/die-in-read.h daemon/sandbox/run-capture.c \
	daemon/sandbox/run-capture.h daemon/core/output.c daemon/core/output.h daemon/core/pipe-peek.c \
	daemon/core/pipe-peek.h
tests_test_run_capture_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_test_run_capture_CFLAGS = $(UNIT_CFLAGS)
tests_test_run_capture_LDADD = $(UNIT_LDADD)

## The holder's wire (daemon/server/hold.c): names and fds, 253 a message, hostile senders.
check_PROGRAMS += tests/test-hold
TESTS += tests/test-hold
tests_test_hold_SOURCES = tests/test-hold.c tests/tap.h
tests_test_hold_CPPFLAGS = $(DAEMON_UNIT_CPPFLAGS)
tests_test_hold_CFLAGS = $(DAEMON_UNIT_CFLAGS)
tests_test_hold_LDADD = $(DAEMON_LIBS)

## The fd store's table, taken by name at a restart, and the pidfd check (daemon/host/fdstore.c).
check_PROGRAMS += tests/test-fdstore
TESTS += tests/test-fdstore
tests_test_fdstore_SOURCES = tests/test-fdstore.c tests/tap.h daemon/host/fdstore.c daemon/host/fdstore.h daemon/host/pidfd.c daemon/host/pidfd.h \
	daemon/core/log.c daemon/core/log.h
tests_test_fdstore_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS)
tests_test_fdstore_CFLAGS = $(UNIT_CFLAGS)
tests_test_fdstore_LDADD = $(UNIT_LDADD) $(SYSTEMD_LIBS)

## A run's request to a warm helper, both ways (daemon/exec/spawn.c, warm_request_send/recv).
check_PROGRAMS += tests/test-warm-request
TESTS += tests/test-warm-request
tests_test_warm_request_SOURCES = tests/test-warm-request.c tests/tap.h
tests_test_warm_request_CPPFLAGS = $(DAEMON_UNIT_CPPFLAGS)
tests_test_warm_request_CFLAGS = $(DAEMON_UNIT_CFLAGS)
tests_test_warm_request_LDADD = $(DAEMON_LIBS)
