## units/: systemd units, sysusers.d and tmpfiles.d snippets.
systemdsystemunit_DATA = units/sandboxd.socket units/sandboxd.service units/sandboxd-metrics.socket units/sandboxd.slice
sysusers_DATA = units/sysusers.d/sandboxd.conf
tmpfiles_DATA = units/tmpfiles.d/sandboxd.conf
EXTRA_DIST += $(sysusers_DATA) $(tmpfiles_DATA) units/sandboxd.slice units/sandboxd-metrics.socket.in
CLEANFILES += units/sandboxd.socket units/sandboxd.service units/sandboxd-metrics.socket

units/%: units/%.in Makefile
	$(AM_V_GEN)$(MKDIR_P) units && sed -e 's|@sbindir[@]|$(sbindir)|g' \
		-e 's|@localstatedir[@]|$(localstatedir)|g' -e 's|@sysconfdir[@]|$(sysconfdir)|g' $< > $@
