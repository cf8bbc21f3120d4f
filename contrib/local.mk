## contrib/: bash completion for sandboxctl.
## It goes to $(datadir)/bash-completion/completions, where bash-completion looks by default for
## a prefix of /usr. To follow the installed bash-completion instead, pass its directory:
##   make install bashcompletiondir="$(pkg-config --variable=completionsdir bash-completion)"
bashcompletiondir = $(datadir)/bash-completion/completions
dist_bashcompletion_DATA = contrib/bash-completion/sandboxctl

TESTS += tests/t-completion.sh
EXTRA_DIST += tests/t-completion.sh
