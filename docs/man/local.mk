## docs/man/: manual pages, written in roff. `make install` puts them in $(mandir).
dist_man_MANS = \
	docs/man/sandboxd.8 \
	docs/man/sandboxctl.1 \
	docs/man/sandboxd.conf.5 \
	docs/man/sandboxd-protocol.7
