#!/bin/bash
# Self-test for tests/vm: did run-vm.sh install the stage made by
# make-fake-stage.sh? (user, tmpfiles, PATH, socket activation, and / left
# alone by the copy).
set -u
n=0
check() { # check DESCRIPTION COMMAND...
	local desc=$1 out
	shift
	n=$((n + 1))
	if out=$("$@" 2>&1); then
		echo "ok $n - $desc"
	else
		echo "not ok $n - $desc"
		printf '%s\n' "$out" | sed 's/^/#   /'
	fi
}

root_untouched() { [ "$(stat -c '%a %U' / /usr /usr/local | sort -u)" = "755 root" ] || stat -c '%n %a %U' / /usr /usr/local; }
files_root_owned() { [ "$(stat -c %U /usr/local/sbin/sandboxd)" = root ]; }
user_created() { getent passwd sandboxd; }
tmpfiles_applied() { [ "$(stat -c '%a %U' /var/lib/sandboxd)" = "750 sandboxd" ]; }
ctl_in_path() { [ "$(command -v sandboxctl)" = /usr/local/bin/sandboxctl ]; }
socket_active() { systemctl is-active sandboxd.socket && systemctl is-enabled sandboxd.socket; }
activation() {
	python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect("/run/sandboxd/sandboxd.sock")'
	for _ in $(seq 50); do
		journalctl -u sandboxd.service -o cat | grep 'LISTEN_FDS=1 as sandboxd' && return 0
		sleep 0.2
	done
	systemctl status --no-pager sandboxd.service
	false
}

echo "1..7"
check "/, /usr, /usr/local still 0755 root" root_untouched
check "installed files are owned by root" files_root_owned
check "systemd-sysusers created user sandboxd" user_created
check "systemd-tmpfiles created /var/lib/sandboxd" tmpfiles_applied
check "sandboxctl is found in PATH" ctl_in_path
check "sandboxd.socket enabled and active" socket_active
check "a connection activates sandboxd.service" activation
