## contrib/: bash completion for sandboxctl.
## configure asks pkg-config for bash-completion's completionsdir (relative to our prefix), else
## takes $(datadir)/bash-completion/completions; --with-bashcompletiondir=DIR overrides both.
dist_bashcompletion_DATA = contrib/bash-completion/sandboxctl

TESTS += tests/t-completion.sh
EXTRA_DIST += tests/t-completion.sh

## podman's drop-in that declares sandboxd-oci (docs/fleet.md).
containersconfddir = $(sysconfdir)/containers/containers.conf.d
dist_containersconfd_DATA = contrib/containers.conf.d/sandboxd-oci.conf
