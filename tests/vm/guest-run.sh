#!/bin/bash
# Guest side of run-vm.sh: runs inside the VM as root, under systemd
# (sandboxd-vmtest.service, written by guest-init.sh). run-vm.sh copies this
# file into the shared directory, seen here as /vmout.
#
# In:  /vmout/config      STAGE_DIR, TESTS (array), TEST_TIMEOUT, MUST_WORK, DEB_DIR,
#                         DEB_UPGRADE_DIR
# Out: /vmout/booted      written once systemd finished booting (its state)
#      /vmout/install.tap "ok - install: ..." lines, renumbered by the host
#      /vmout/t<i>.out/.err/.rc   stdout, stderr, "STATUS SECONDS" of TESTS[i]
#      /vmout/failed.txt, journal.txt   diagnostics for the host to show
#      /vmout/done        the last file: everything above is complete
#
# Nothing here may hang forever or stop early: every step is bounded, and the
# host turns missing files into "not ok" lines.
set -uo pipefail

OUT=/vmout
# shellcheck source=/dev/null
. "$OUT/config"

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 TERM=dumb
export SANDBOXD_TEST_MUST_WORK="$MUST_WORK"
export SANDBOXD_TEST_VM=1

# Progress on the serial console (VM_CONSOLE=1 on the host shows it), with
# the guest's uptime, and a copy for the host's timing comment.
log() {
	local up _
	read -r up _ </proc/uptime
	echo "vm-run: [$up] $*" >/dev/console 2>/dev/null || true
	echo "$up $*" >>"$OUT/timing"
}

# A host path as seen in the guest. The guest mounts a fresh tmpfs on /tmp
# (and has its own /run, /dev, ...), which hides host files there; the
# untouched host root is always at /vmhost.
guest_path() {
	if [ -e "$1" ]; then
		printf '%s\n' "$1"
	else
		printf '%s\n' "/vmhost$1"
	fi
}

tap() { printf '%s\n' "$*" >>"$OUT/install.tap"; }

# Run one install step; on failure attach its output as TAP comments.
step() {
	local desc=$1 out
	shift
	log "install: $desc"
	if out=$("$@" 2>&1); then
		tap "ok - install: $desc"
	else
		tap "not ok - install: $desc (exit $?: $*)"
		printf '%s\n' "$out" | tail -n 20 | sed 's/^/#   /' >>"$OUT/install.tap"
	fi
}

wait_for_boot() {
	local state
	state=$(timeout 180 systemctl is-system-running --wait 2>/dev/null)
	printf '%s\n' "${state:-unknown}" >"$OUT/booted"
	log "boot finished: ${state:-unknown}"
}

# Paths of the files under some */$1/*.conf in the stage, as installed.
staged_confs() {
	(cd "$STAGE" && find . -path "*/$1/*.conf" \( -type f -o -type l \)) |
		sed 's|^\.||' | sort
}

# Copy the staged tree onto the (overlay) root.
# Not "cp -a STAGE/. /": that would also copy the stage's own directory
# metadata onto /, /usr, ... (a mktemp -d stage is mode 0700 and owned by the
# builder). tar --no-overwrite-dir leaves existing directories alone,
# --no-same-owner installs everything as root, as "make install" would, and
# --keep-directory-symlink keeps merged-/usr links: a staged lib/systemd/...
# must not replace the /lib -> usr/lib symlink with a directory (which breaks
# the dynamic loader and with it every program, shutdown included).
# shellcheck disable=SC2317 # called through step()
copy_stage() {
	tar -C "$STAGE" -cf - . |
		tar -C / -xf - --no-overwrite-dir --no-same-owner --keep-directory-symlink
}

install_stage() {
	STAGE=$(guest_path "$STAGE_DIR")
	if [ ! -d "$STAGE" ]; then
		tap "not ok - install: STAGE_DIR $STAGE_DIR is not a directory in the guest"
		return
	fi
	if [ -z "$(find "$STAGE" -mindepth 1 ! -type d -print -quit)" ]; then
		# Nothing to install: the scripts install what they test (the deb VM, make check-vm-deb).
		tap "ok - install: nothing staged (STAGE_DIR is empty)"
		return
	fi

	step "copy STAGE_DIR onto /" copy_stage
	# ldconfig reads every library of the host over 9p (10-30 s under TCG):
	# only when the stage brings shared libraries.
	if [ -n "$(find "$STAGE" \( -name '*.so' -o -name '*.so.*' \) -print -quit)" ]; then
		step "ldconfig" ldconfig
	else
		tap "ok - install: ldconfig # SKIP no shared library staged"
	fi

	local confs
	mapfile -t confs < <(staged_confs sysusers.d)
	if [ ${#confs[@]} -gt 0 ]; then
		step "systemd-sysusers" systemd-sysusers "${confs[@]}"
	else
		tap "ok - install: systemd-sysusers # SKIP no sysusers.d file staged"
	fi
	mapfile -t confs < <(staged_confs tmpfiles.d)
	if [ ${#confs[@]} -gt 0 ]; then
		step "systemd-tmpfiles --create" systemd-tmpfiles --create "${confs[@]}"
	else
		tap "ok - install: systemd-tmpfiles # SKIP no tmpfiles.d file staged"
	fi

	step "systemctl daemon-reload" systemctl daemon-reload
	# --no-reload: enable would reload the manager a second time (~7 s), and
	# the reload above already made the new units known.
	step "sandboxd.socket enabled" systemctl --no-reload enable --now sandboxd.socket
	step "sandboxd.socket active" systemctl is-active sandboxd.socket
}

# Run TESTS[$1] with a timeout, in a fresh scratch directory.
run_test() {
	local i=$1 script dir rc start=$SECONDS
	script=$(guest_path "${TESTS[$i]}")
	dir=$(mktemp -d "/tmp/vmtest.$i.XXXXXX")
	log "running ${TESTS[$i]}"
	# timeout runs the script in its own process group and signals all of it.
	(cd "$dir" && timeout -k 10 "$TEST_TIMEOUT" "$script") \
		</dev/null >"$OUT/t$i.out" 2>"$OUT/t$i.err"
	rc=$?
	echo "$rc $((SECONDS - start))" >"$OUT/t$i.rc"
	log "${TESTS[$i]##*/} exited with status $rc"
}

collect_diagnostics() {
	systemctl --failed --no-pager --plain >"$OUT/failed.txt" 2>&1
	journalctl --no-pager -o short-monotonic -n 50 \
		-u sandboxd.service >"$OUT/journal.txt" 2>&1
}

main() {
	# For tests that want to look at the stage itself (already installed).
	SANDBOXD_STAGE_DIR=$(guest_path "$STAGE_DIR")
	export SANDBOXD_STAGE_DIR
	# The packages the deb tests install, as the host named them (unset: none given).
	if [ -n "${DEB_DIR:-}" ]; then DEB_DIR=$(guest_path "$DEB_DIR"); export DEB_DIR; else unset DEB_DIR; fi
	if [ -n "${DEB_UPGRADE_DIR:-}" ]; then DEB_UPGRADE_DIR=$(guest_path "$DEB_UPGRADE_DIR"); export DEB_UPGRADE_DIR; else unset DEB_UPGRADE_DIR; fi
	wait_for_boot
	: >"$OUT/install.tap"
	install_stage
	local i
	for i in "${!TESTS[@]}"; do
		run_test "$i"
	done
	collect_diagnostics
	# Builtins only from here: even if the install broke the system, the
	# host must learn that the run is over.
	: >"$OUT/done"
	sync
	log "done, powering off"
}

main "$@"
exit 0
