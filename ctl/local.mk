## ctl/: sandboxctl, the command-line client. One file per group of verbs, dispatched from the
## table in sandboxctl.c.
bin_PROGRAMS += ctl/sandboxctl
ctl_sandboxctl_SOURCES = \
	ctl/sandboxctl.c ctl/sandboxctl.h \
	ctl/common.c \
	ctl/format.c \
	ctl/verb-daemon.c \
	ctl/verb-call.c \
	ctl/verb-create.c \
	ctl/verb-file.c \
	ctl/verb-pty.c \
	ctl/verb-session.c \
	ctl/verb-port.c \
	ctl/verb-image.c \
	ctl/verb-run.c \
	ctl/verb-sandbox.c \
	ctl/verb-snapshot.c \
	ctl/verb-sweep.c \
	ctl/verb-top.c \
	ctl/verb-doctor.c ctl/doctor-checks.c ctl/doctor.h
ctl_sandboxctl_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
ctl_sandboxctl_LDADD = lib/libsandbox.la lib/libsbxcommon.la $(JSONC_LIBS)

## sandboxctl cp, cat, ls end to end against a stand-in for the daemon's file operations
## (no root, no daemon).
TESTS += tests/t-ctl-files.sh
EXTRA_DIST += tests/t-ctl-files.sh tests/fake-files-daemon.py
