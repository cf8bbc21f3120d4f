## docs/man/: manual pages, written in roff. `make install` puts them in $(mandir).
dist_man_MANS = \
	docs/man/sandboxd.8 \
	docs/man/sandboxctl.1 \
	docs/man/sandboxd.conf.5 \
	docs/man/sandboxd-protocol.7 \
	docs/man/sandboxd-oci.1

## Every verb, daemon option and operation has its place in the pages, and they render cleanly.
TESTS += tests/t-docs.sh tests/t-quickstart.sh
EXTRA_DIST += tests/t-docs.sh tests/t-quickstart.sh
