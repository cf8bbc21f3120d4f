## units/: systemd units, sysusers.d and tmpfiles.d snippets.
systemdsystemunit_DATA = units/sandboxd.socket units/sandboxd.service
sysusers_DATA = units/sysusers.d/sandboxd.conf
tmpfiles_DATA = units/tmpfiles.d/sandboxd.conf
EXTRA_DIST += $(sysusers_DATA) $(tmpfiles_DATA)
CLEANFILES += units/sandboxd.socket units/sandboxd.service

units/%: units/%.in Makefile
	$(AM_V_GEN)$(MKDIR_P) units && sed -e 's|@sbindir[@]|$(sbindir)|g' \
		-e 's|@localstatedir[@]|$(localstatedir)|g' -e 's|@sysconfdir[@]|$(sysconfdir)|g' $< > $@
