## contrib/: bash completion for sandboxctl.
## configure asks pkg-config for bash-completion's completionsdir (relative to our prefix), else
## takes $(datadir)/bash-completion/completions; --with-bashcompletiondir=DIR overrides both.
dist_bashcompletion_DATA = contrib/bash-completion/sandboxctl

TESTS += tests/t-completion.sh
EXTRA_DIST += tests/t-completion.sh

## podman's drop-in that declares sandboxd-oci, naming it by $(bindir) (docs/fleet.md).
## containersconfddir: configure's --with-containersconfddir, /etc/containers/containers.conf.d
## by default, the one system drop-in directory podman reads whatever our prefix.
containersconfd_DATA = contrib/containers.conf.d/sandboxd-oci.conf
EXTRA_DIST += contrib/containers.conf.d/sandboxd-oci.conf.in
CLEANFILES += contrib/containers.conf.d/sandboxd-oci.conf

contrib/containers.conf.d/sandboxd-oci.conf: contrib/containers.conf.d/sandboxd-oci.conf.in Makefile
	$(AM_V_GEN)$(MKDIR_P) contrib/containers.conf.d && sed -e 's|@bindir[@]|$(bindir)|g' $< > $@
