## oci/: sandboxd-oci, an OCI runtime (runc's command line) for podman and containerd whose
## containers are sandboxes of sandboxd (docs/fleet.md, docs/man/sandboxd-oci.1).
bin_PROGRAMS += oci/sandboxd-oci
oci_sandboxd_oci_SOURCES = \
	oci/oci.h oci/main.c \
	oci/log.c \
	oci/client.c \
	oci/state.c \
	oci/config.c oci/config.h \
	oci/console.c \
	oci/proxy.c \
	oci/verb-create.c \
	oci/verb-exec.c \
	oci/verb-control.c
oci_sandboxd_oci_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
oci_sandboxd_oci_LDADD = lib/libsandbox.la lib/libsbxcommon.la $(JSONC_LIBS)
