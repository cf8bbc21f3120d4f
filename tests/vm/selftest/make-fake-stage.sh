#!/bin/bash
# make-fake-stage.sh DIR
# Fills DIR like "make install DESTDIR=DIR" would, with a stand-in daemon,
# so the install path of run-vm.sh (copy, sysusers, tmpfiles, socket) can be
# tested before the real sandboxd exists. Checked by install-check.sh.
set -euo pipefail
d=${1:?usage: make-fake-stage.sh DIR}

mkdir -p "$d/usr/local/sbin" "$d/usr/local/bin" "$d/lib/systemd/system" \
	"$d/usr/lib/sysusers.d" "$d/usr/lib/tmpfiles.d"

cat >"$d/usr/local/sbin/sandboxd" <<'EOS'
#!/bin/sh
# Stand-in: proves socket activation reached it, then idles.
echo "fake sandboxd: started with LISTEN_FDS=${LISTEN_FDS:-unset} as $(id -un)"
exec sleep infinity
EOS
cat >"$d/usr/local/bin/sandboxctl" <<'EOS'
#!/bin/sh
echo "fake sandboxctl"
EOS
chmod 0755 "$d/usr/local/sbin/sandboxd" "$d/usr/local/bin/sandboxctl"

cat >"$d/lib/systemd/system/sandboxd.socket" <<'EOS'
[Unit]
Description=fake sandboxd socket (tests/vm self-test)

[Socket]
ListenStream=/run/sandboxd/sandboxd.sock
SocketMode=0660

[Install]
WantedBy=sockets.target
EOS
cat >"$d/lib/systemd/system/sandboxd.service" <<'EOS'
[Unit]
Description=fake sandboxd (tests/vm self-test)
Requires=sandboxd.socket

[Service]
ExecStart=/usr/local/sbin/sandboxd
User=sandboxd
EOS
echo 'u sandboxd - "fake sandboxd" /nonexistent' >"$d/usr/lib/sysusers.d/sandboxd.conf"
echo 'd /var/lib/sandboxd 0750 sandboxd sandboxd -' >"$d/usr/lib/tmpfiles.d/sandboxd.conf"
