## lib/: the protocol code both sides share, and libsandbox, the client library.
noinst_LTLIBRARIES += lib/libsbxcommon.la
lib_libsbxcommon_la_SOURCES = \
	lib/macro.h \
	lib/util.c lib/util.h \
	lib/json-check.c lib/json-check.h \
	lib/proto.c lib/proto.h \
	lib/fdpass.c lib/fdpass.h \
	lib/file-proto.c lib/file-proto.h
lib_libsbxcommon_la_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) -fPIC
lib_libsbxcommon_la_LIBADD = $(JSONC_LIBS)

lib_LTLIBRARIES += lib/libsandbox.la
lib_libsandbox_la_SOURCES = lib/client.c lib/client-file.c lib/client-image.c lib/client-internal.h lib/sandbox.h
lib_libsandbox_la_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
lib_libsandbox_la_LIBADD = lib/libsbxcommon.la $(JSONC_LIBS)
lib_libsandbox_la_LDFLAGS = $(AM_LDFLAGS) -version-info 0:0:0
include_HEADERS += lib/sandbox.h

pkgconfigdir = $(libdir)/pkgconfig
pkgconfig_DATA = lib/sandbox.pc
