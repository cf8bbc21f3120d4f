## daemon/: sandboxd. One file per concern; one handler file per group of operations.
sbin_PROGRAMS += daemon/sandboxd
daemon_sandboxd_SOURCES = \
	daemon/main.c \
	daemon/conf.c daemon/conf.h \
	daemon/log.c daemon/log.h \
	daemon/manager.c daemon/manager.h \
	daemon/connection.c daemon/connection.h \
	daemon/ops.c daemon/ops.h daemon/request-fields.c daemon/request-fields.h \
	daemon/op-hello.c daemon/op-sandbox.c daemon/op-run.c daemon/op-pty.c daemon/op-snapshot.c \
	daemon/cgroup.c daemon/cgroup.h daemon/cgroup-limits.c \
	daemon/sandbox.c daemon/sandbox.h \
	daemon/sandbox-setup.c \
	daemon/dev-template.c daemon/dev-template.h \
	daemon/spawn.c daemon/spawn.h \
	daemon/identity.c daemon/identity.h \
	daemon/syscall-filter.c daemon/syscall-filter.h \
	daemon/run.c daemon/run.h \
	daemon/run-exec.c daemon/run-exec.h \
	daemon/pool.c daemon/pool.h \
	daemon/netns-pool.c daemon/netns-pool.h \
	daemon/output.c daemon/output.h \
	daemon/pty.c daemon/pty.h \
	daemon/ring.c daemon/ring.h \
	daemon/rm-rf.c daemon/rm-rf.h daemon/remove-async.c daemon/remove-async.h \
	daemon/state.c daemon/state.h \
	daemon/run-record.c daemon/run-record.h \
	daemon/disk-usage.c daemon/disk-usage.h \
	daemon/sweep.c daemon/sweep.h daemon/sweep-walk.c daemon/sweep-walk.h daemon/op-sweep.c \
	daemon/idle-exit.c daemon/idle-exit.h \
	daemon/copy-tree.c daemon/copy-tree.h \
	daemon/snapshot.c daemon/snapshot.h \
	daemon/snapshot-job.c daemon/snapshot-job.h
daemon_sandboxd_CFLAGS = $(AM_CFLAGS) $(SYSTEMD_CFLAGS) $(JSONC_CFLAGS) $(CGROUP_CFLAGS) $(SECCOMP_CFLAGS)
daemon_sandboxd_LDADD = lib/libsbxcommon.la $(SYSTEMD_LIBS) $(JSONC_LIBS) $(CGROUP_LIBS) $(SECCOMP_LIBS)

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

# The run helper: exec'd for every run (daemon/run-exec.h). Static where the toolchain allows
# (configure's HELPER_LDFLAGS), so that starting it maps no shared library.
libexec_PROGRAMS += daemon/sandboxd-run-helper
daemon_sandboxd_run_helper_SOURCES = \
	daemon/run-helper.c \
	daemon/run-exec.c daemon/run-exec.h \
	daemon/identity.c daemon/identity.h \
	daemon/sandbox-setup.c \
	daemon/rm-rf.c daemon/rm-rf.h \
	daemon/spawn.c daemon/spawn.h daemon/syscall-filter.h daemon/mount-compat.h
daemon_sandboxd_run_helper_LDFLAGS = $(AM_LDFLAGS) $(HELPER_LDFLAGS)
if HELPER_MUSL
# Built with musl (configure.ac says why): GNU make target variables for the helper and its
# objects (named through a variable, so that automake keeps its own link rule).
daemon_sandboxd_run_helper_CPPFLAGS = $(AM_CPPFLAGS) -DLIBEXECDIR=\"$(libexecdir)\" $(MUSL_HELPER_CPPFLAGS)
musl_helper_targets = daemon/sandboxd-run-helper$(EXEEXT) $(daemon_sandboxd_run_helper_OBJECTS)
$(musl_helper_targets): CC = $(MUSL_GCC)
else
daemon_sandboxd_run_helper_CPPFLAGS = $(AM_CPPFLAGS) -DLIBEXECDIR=\"$(libexecdir)\"
endif
daemon_sandboxd_CPPFLAGS = $(AM_CPPFLAGS) -DLIBEXECDIR=\"$(libexecdir)\"
daemon_sandboxd_LDFLAGS = $(AM_LDFLAGS) $(DAEMON_LDFLAGS)
