## daemon/: sandboxd, in five folders, one per layer (docs/architecture.md, "Module map"). A file
## includes headers of its own folder and of the folders below it only (scripts/check-layers.sh,
## run by make check):
##   exec/     the child side, linked into sandboxd-run-helper: no sd-event, no json-c, no log
##   core/     daemon services with no kernel mechanism: log, configuration, replies, rings
##   host/     kernel mechanism on fds and paths: cgroups, namespaces, trees; no Sandbox
##   sandbox/  the domain: sandboxes, runs, sessions, snapshots, pool, sweep, state
##   server/   the socket face and the wiring: main, listeners, connections, ops
## Headers are included by bare name, as systemd's src/basic < src/shared < src/<daemon> are;
## the daemon's folders come before lib/ (lib/sandbox.h is the client library's header).
DAEMON_INCLUDES = -I$(top_srcdir)/daemon/server -I$(top_srcdir)/daemon/sandbox \
	-I$(top_srcdir)/daemon/host -I$(top_srcdir)/daemon/core -I$(top_srcdir)/daemon/exec
## Every daemon source but main.c, built once: sandboxd and the unit tests (tests/unit.mk) link it.
noinst_LTLIBRARIES += daemon/libsandboxd.la
daemon_libsandboxd_la_SOURCES = \
	daemon/sandbox/caller.c daemon/sandbox/caller.h \
	daemon/sandbox/context.c daemon/sandbox/context.h \
	daemon/sandbox/registry.c daemon/sandbox/registry.h \
	daemon/server/lifecycle.c daemon/server/lifecycle.h daemon/server/hold.c daemon/server/hold.h \
	daemon/core/conf.c daemon/core/conf.h \
	daemon/core/log.c daemon/core/log.h \
	daemon/core/reply.c daemon/core/reply.h \
	daemon/core/metrics.c daemon/core/metrics.h \
	daemon/server/manager.c daemon/server/manager.h \
	daemon/server/metrics-http.c daemon/server/metrics-http.h daemon/server/metrics-text.c daemon/server/metrics-text.h \
	daemon/server/connection.c daemon/server/connection.h \
	daemon/server/ops.c daemon/server/ops.h daemon/core/request-fields.c daemon/core/request-fields.h \
	daemon/server/op-hello.c daemon/server/op-sandbox.c daemon/server/op-run.c daemon/server/op-pty.c daemon/server/op-snapshot.c daemon/server/op-file.c daemon/server/op-file-chunk.c \
	daemon/host/cgroup.c daemon/host/cgroup.h daemon/host/cgroup-limits.c \
	daemon/sandbox/sandbox.c daemon/sandbox/sandbox.h daemon/sandbox/sandbox-internal.h daemon/sandbox/sandbox-restore.c daemon/sandbox/sandbox-json.c \
	daemon/sandbox/sandbox-request.c \
	daemon/sandbox/sandbox-control.c daemon/sandbox/sandbox-control.h \
	daemon/sandbox/sandbox-init.c \
	daemon/sandbox/sandbox-spare.c \
	daemon/sandbox/sandbox-teardown.c \
	daemon/exec/sandbox-setup.c daemon/exec/root-trees.c daemon/exec/sysctls.c daemon/exec/root-overlay.c daemon/exec/root-overlay.h daemon/exec/idmap.c daemon/exec/idmap.h \
	daemon/host/dev-template.c daemon/host/dev-template.h \
	daemon/exec/spawn.c daemon/exec/spawn.h \
	daemon/exec/identity.c daemon/exec/identity.h \
	daemon/exec/syscall-filter.c daemon/exec/syscall-filter.h \
	daemon/sandbox/run.c daemon/sandbox/run-keep.c daemon/sandbox/run-internal.h daemon/sandbox/run.h \
	daemon/sandbox/launch.c daemon/sandbox/launch.h \
	daemon/sandbox/file-op.c daemon/sandbox/file-op.h daemon/exec/file-helper.h \
	daemon/sandbox/file-inflow.c daemon/sandbox/file-inflow.h \
	daemon/sandbox/run-spec.c daemon/sandbox/run-spec.h \
	daemon/sandbox/run-capture.c daemon/sandbox/run-capture.h \
	daemon/exec/run-exec.c daemon/exec/run-exec.h \
	daemon/sandbox/pool.c daemon/sandbox/pool.h \
	daemon/host/netns-pool.c daemon/host/netns-pool.h daemon/host/fdstore.c daemon/host/fdstore.h \
	daemon/host/scope.c daemon/host/scope.h daemon/host/pidfd.c daemon/host/pidfd.h \
	daemon/core/output.c daemon/core/output.h \
	daemon/sandbox/session.c daemon/sandbox/session-input.c daemon/sandbox/session-keep.c daemon/sandbox/session-internal.h daemon/sandbox/session.h \
	daemon/core/ring.c daemon/core/ring.h \
	daemon/core/dns-message.c daemon/core/dns-message.h \
	daemon/core/nft-listing.c daemon/core/nft-listing.h \
	daemon/core/oci-index.c daemon/core/oci-index.h \
	daemon/core/pipe-peek.c daemon/core/pipe-peek.h \
	daemon/exec/rm-rf.c daemon/exec/rm-rf.h daemon/exec/btrfs.c daemon/exec/btrfs.h daemon/host/child-job.c daemon/host/child-job.h daemon/host/remove-async.c daemon/host/remove-async.h \
	daemon/exec/mount-source.c daemon/exec/mount-source.h daemon/host/mount-open.c daemon/host/mount-open.h \
	daemon/sandbox/state.c daemon/sandbox/state.h \
	daemon/sandbox/run-record.c daemon/sandbox/run-record.h \
	daemon/sandbox/run-result.c daemon/sandbox/run-result.h \
	daemon/host/disk-usage.c daemon/host/disk-usage.h \
	daemon/sandbox/sweep.c daemon/sandbox/sweep.h daemon/sandbox/sweep-plan.c daemon/sandbox/sweep-plan.h daemon/host/sweep-walk.c daemon/host/sweep-walk.h daemon/server/op-sweep.c \
	daemon/server/idle-exit.c daemon/server/idle-exit.h \
	daemon/host/copy-tree.c daemon/host/copy-tree.h \
	daemon/host/project-quota.c daemon/host/project-quota.h daemon/host/storage-image.c daemon/host/storage-image.h \
	daemon/sandbox/disk-quota.c daemon/sandbox/disk-quota.h daemon/sandbox/storage.c daemon/sandbox/storage.h \
	daemon/sandbox/snapshot.c daemon/sandbox/snapshot.h \
	daemon/sandbox/snapshot-job.c daemon/sandbox/snapshot-job-child.c daemon/sandbox/snapshot-job-internal.h daemon/sandbox/snapshot-job.h \
	daemon/sandbox/port.c daemon/sandbox/port.h daemon/host/port-forward.c daemon/host/port-forward.h daemon/server/op-port.c \
	daemon/sandbox/image.c daemon/sandbox/image-child.c daemon/sandbox/image-internal.h daemon/sandbox/image.h daemon/exec/image-import.c daemon/exec/image-import.h daemon/exec/entry-name.c daemon/exec/entry-name.h daemon/exec/open-beneath.c daemon/exec/open-beneath.h daemon/exec/blob-digest.c daemon/exec/blob-digest.h \
	daemon/server/op-image.c \
	daemon/sandbox/egress.c daemon/sandbox/egress.h daemon/sandbox/egress-dns.c daemon/sandbox/egress-dns.h \
	daemon/sandbox/egress-update.c daemon/sandbox/egress-teardown.c daemon/sandbox/egress-child.c daemon/sandbox/egress-sni-child.c daemon/sandbox/egress-internal.h daemon/sandbox/egress-sni.c daemon/sandbox/egress-sni.h daemon/sandbox/egress-spec.c daemon/sandbox/egress-spec.h daemon/sandbox/egress-rules.c daemon/sandbox/egress-rules.h daemon/sandbox/egress-types.h daemon/core/tls-hello.c daemon/core/tls-hello.h \
	daemon/core/first-bytes.c daemon/core/first-bytes.h \
	daemon/host/nft-element.c daemon/host/nft-element.h \
	daemon/host/veth.c daemon/host/veth.h daemon/host/nftables.c daemon/host/nftables.h \
	daemon/host/conntrack.c daemon/host/conntrack.h daemon/host/netlink-msg.c daemon/host/netlink-msg.h daemon/host/nfqueue.c daemon/host/nfqueue.h
daemon_libsandboxd_la_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS) -DLIBEXECDIR=\"$(libexecdir)\"
daemon_libsandboxd_la_CFLAGS = $(AM_CFLAGS) $(SYSTEMD_CFLAGS) $(JSONC_CFLAGS) $(CGROUP_CFLAGS) $(SECCOMP_CFLAGS) $(ARCHIVE_CFLAGS) $(CRYPTO_CFLAGS) $(NFTABLES_CFLAGS)
DAEMON_LIBS = daemon/libsandboxd.la lib/libsbxcommon.la $(SYSTEMD_LIBS) $(JSONC_LIBS) $(CGROUP_LIBS) $(SECCOMP_LIBS) $(ARCHIVE_LIBS) $(CRYPTO_LIBS) $(NFTABLES_LIBS)

sbin_PROGRAMS += daemon/sandboxd
daemon_sandboxd_SOURCES = daemon/server/main.c
daemon_sandboxd_CFLAGS = $(AM_CFLAGS) $(SYSTEMD_CFLAGS) $(JSONC_CFLAGS) $(CGROUP_CFLAGS) $(SECCOMP_CFLAGS)
daemon_sandboxd_LDADD = $(DAEMON_LIBS)

## The configuration file, every key commented out at its default (sandboxd.conf(5)). Installed
## only where none is: `make install` never replaces an administrator's file, and uninstall
## removes it only while it is still the untouched example.
sandboxdconfdir = $(sysconfdir)/sandboxd
EXTRA_DIST += daemon/sandboxd.conf

install-data-local: install-sandboxd-conf
install-sandboxd-conf:
	$(MKDIR_P) '$(DESTDIR)$(sandboxdconfdir)'
	test -e '$(DESTDIR)$(sandboxdconfdir)/sandboxd.conf' || \
		$(INSTALL_DATA) $(srcdir)/daemon/sandboxd.conf '$(DESTDIR)$(sandboxdconfdir)/sandboxd.conf'

uninstall-local: uninstall-sandboxd-conf
uninstall-sandboxd-conf:
	if cmp -s $(srcdir)/daemon/sandboxd.conf '$(DESTDIR)$(sandboxdconfdir)/sandboxd.conf'; then \
		rm -f '$(DESTDIR)$(sandboxdconfdir)/sandboxd.conf'; fi

# The run helper: exec'd for every run (daemon/exec/run-exec.h). Static where the toolchain allows
# (configure's HELPER_LDFLAGS), so that starting it maps no shared library.
libexec_PROGRAMS += daemon/sandboxd-run-helper
daemon_sandboxd_run_helper_SOURCES = \
	daemon/exec/run-helper.c \
	daemon/exec/run-exec.c daemon/exec/run-exec.h \
	daemon/exec/identity.c daemon/exec/identity.h \
	daemon/exec/sandbox-setup.c daemon/exec/root-trees.c daemon/exec/sysctls.c daemon/exec/root-overlay.c daemon/exec/root-overlay.h daemon/exec/idmap.c daemon/exec/idmap.h \
	daemon/exec/rm-rf.c daemon/exec/rm-rf.h daemon/exec/btrfs.c daemon/exec/btrfs.h \
	daemon/exec/mount-source.c daemon/exec/mount-source.h \
	daemon/exec/spawn.c daemon/exec/spawn.h daemon/exec/syscall-filter.h daemon/exec/mount-compat.h
daemon_sandboxd_run_helper_LDFLAGS = $(AM_LDFLAGS) $(HELPER_LDFLAGS)

# The file helper: exec'd for each file operation (daemon/exec/file-helper.h). Dynamically linked
# (glibc, and libarchive as the tar codec of file.put/file.get: docs/design/files.md, section 5.2).
libexec_PROGRAMS += daemon/sandboxd-file-helper
daemon_sandboxd_file_helper_SOURCES = \
	daemon/exec/file-helper.c daemon/exec/file-helper-write.c daemon/exec/file-helper-internal.h daemon/exec/file-helper.h \
	daemon/exec/file-tar.c daemon/exec/file-tar.h daemon/exec/entry-name.c daemon/exec/entry-name.h daemon/exec/open-beneath.c daemon/exec/open-beneath.h \
	daemon/exec/dir-names.c daemon/exec/dir-names.h \
	daemon/exec/run-exec.c daemon/exec/run-exec.h \
	daemon/exec/identity.c daemon/exec/identity.h \
	daemon/exec/sandbox-setup.c daemon/exec/root-trees.c daemon/exec/sysctls.c daemon/exec/root-overlay.c daemon/exec/root-overlay.h daemon/exec/idmap.c daemon/exec/idmap.h \
	daemon/exec/rm-rf.c daemon/exec/rm-rf.h daemon/exec/btrfs.c daemon/exec/btrfs.h \
	daemon/exec/spawn.c daemon/exec/spawn.h daemon/exec/syscall-filter.h daemon/exec/mount-compat.h
daemon_sandboxd_file_helper_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS) -DLIBEXECDIR=\"$(libexecdir)\"
daemon_sandboxd_file_helper_CFLAGS = $(AM_CFLAGS) $(ARCHIVE_CFLAGS)
# -z now: every symbol bound at exec, before the sandbox's view replaces the host's (5.1 item 1).
daemon_sandboxd_file_helper_LDFLAGS = $(AM_LDFLAGS) $(DAEMON_LDFLAGS)
daemon_sandboxd_file_helper_LDADD = $(ARCHIVE_LIBS)
if HELPER_MUSL
# Built with musl (configure.ac says why): GNU make target variables for the helper and its
# objects (named through a variable, so that automake keeps its own link rule).
daemon_sandboxd_run_helper_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS) -DLIBEXECDIR=\"$(libexecdir)\" $(MUSL_HELPER_CPPFLAGS)
musl_helper_targets = daemon/sandboxd-run-helper$(EXEEXT) $(daemon_sandboxd_run_helper_OBJECTS)
$(musl_helper_targets): CC = $(MUSL_GCC)
else
daemon_sandboxd_run_helper_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS) -DLIBEXECDIR=\"$(libexecdir)\"
endif
daemon_sandboxd_CPPFLAGS = $(DAEMON_INCLUDES) $(AM_CPPFLAGS) -DLIBEXECDIR=\"$(libexecdir)\"
daemon_sandboxd_LDFLAGS = $(AM_LDFLAGS) $(DAEMON_LDFLAGS)
