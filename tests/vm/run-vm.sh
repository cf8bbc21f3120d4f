#!/bin/bash
# run-vm.sh STAGE_DIR TEST_SCRIPT...
#
# Boots this machine's own root filesystem under qemu (TCG) with a real
# systemd as PID 1 (cgroup v2, all controllers), installs STAGE_DIR (a
# "make install DESTDIR=" tree) into it, runs each TEST_SCRIPT there as root
# and prints ONE merged TAP stream on stdout. See README.md next to this file.
#
# Exit status is 0 whenever valid TAP was printed: automake's tap-driver turns
# a non-zero exit into an ERROR; failures are "not ok" lines instead.
set -Eeuo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BOOT_TIMEOUT=${VM_BOOT_TIMEOUT:-600}
TEST_TIMEOUT=${VM_TEST_TIMEOUT:-900}
CACHE_DIR=${VM_CACHE_DIR:-${TMPDIR:-/tmp}/sandboxd-vm-cache}
MUST_WORK=${SANDBOXD_TEST_MUST_WORK:-0}
# Modules the initramfs needs; their dependencies are added in order.
MODULES=(virtio_pci 9pnet_virtio 9p overlay)
# Used when modprobe is not there: the order HOST.md measured.
MODULES_FALLBACK=(virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev
	virtio_pci 9pnet 9pnet_virtio netfs fscache 9p overlay)

WORK=""       # private temp dir: initramfs staging, console log, share/
QEMU_PID=""
TAIL_PID=""
TAP=()        # merged TAP lines, printed after the plan
NTESTS=0
FAILED=0
TAP_DONE=0    # set once a complete TAP stream went to stdout
ERR_AT=""     # line of the last failed command, for an internal error

# --- plumbing ---------------------------------------------------------------

cleanup() {
	if [ -n "$QEMU_PID" ] && kill -0 "$QEMU_PID" 2>/dev/null; then
		kill -TERM "$QEMU_PID" 2>/dev/null || true
		for _ in 1 2 3 4 5; do
			kill -0 "$QEMU_PID" 2>/dev/null || break
			sleep 1
		done
		kill -KILL "$QEMU_PID" 2>/dev/null || true
	fi
	if [ -n "$TAIL_PID" ]; then
		kill "$TAIL_PID" 2>/dev/null || true
	fi
	if [ -n "$WORK" ]; then
		if [ "${VM_KEEP:-0}" = 1 ]; then
			echo "run-vm: kept $WORK" >&2
		else
			rm -rf "$WORK"
		fi
	fi
}

# EXIT trap. Whatever went wrong, stdout must carry valid TAP: a bug here
# (set -e) or an interruption becomes one "not ok" line.
on_exit() {
	local rc=$?
	cleanup
	[ "$TAP_DONE" = 0 ] || return 0
	case $rc in
	130 | 143) printf '1..1\nnot ok 1 - vm: interrupted\n' ;;
	*)
		printf '1..1\nnot ok 1 - vm: run-vm.sh failed (status %s, line %s)\n' \
			"$rc" "${ERR_AT:-?}"
		exit 0
		;;
	esac
}

# Whole-run "cannot even try": a skip, or one failure when it must work.
unavailable() {
	if [ "$MUST_WORK" = 1 ]; then
		printf '1..1\nnot ok 1 - vm: %s\n' "$1"
	else
		printf '1..0 # SKIP %s\n' "$1"
	fi
	TAP_DONE=1
	exit 0
}

# add_result "ok"|"not ok" DESCRIPTION
add_result() {
	NTESTS=$((NTESTS + 1))
	TAP+=("$1 $NTESTS - $2")
	if [ "$1" = "not ok" ] && ! [[ ${2,,} =~ \#[[:space:]]*todo ]]; then
		FAILED=1
	fi
}

comment() { TAP+=("# $*"); }

# Append a file as TAP comments, cleaned of CRs and terminal escapes.
comment_file() {
	local title=$1 file=$2 lines=${3:-50} line
	[ -s "$file" ] || return 0
	comment "$title"
	while IFS= read -r line; do
		TAP+=("#   $line")
	done < <(tail -n "$lines" "$file" | tr -d '\r' |
		sed 's/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1b.//g; s/[[:cntrl:]]//g')
}

# --- preflight --------------------------------------------------------------

# Newest kernel in /boot whose modules are installed (or VM_KERNEL_VERSION).
find_kernel() {
	local k
	if [ -n "${VM_KERNEL_VERSION:-}" ]; then
		echo "$VM_KERNEL_VERSION"
		return
	fi
	for k in $(printf '%s\n' /boot/vmlinuz-* | sed -n 's|^/boot/vmlinuz-||p' | sort -rV); do
		if [ -d "/lib/modules/$k/kernel" ]; then
			echo "$k"
			return
		fi
	done
}

# A statically linked busybox: it is the initramfs' only program.
find_busybox() {
	local b
	for b in ${VM_BUSYBOX:-} /bin/busybox /usr/bin/busybox; do
		# ldd fails on a static executable.
		if [ -x "$b" ] && ! ldd "$b" >/dev/null 2>&1; then
			echo "$b"
			return
		fi
	done
}

preflight() {
	command -v qemu-system-x86_64 >/dev/null ||
		unavailable "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"
	KVER=$(find_kernel)
	[ -n "$KVER" ] ||
		unavailable "no kernel with modules in /boot (apt-get install linux-image-amd64)"
	KERNEL=/boot/vmlinuz-$KVER
	[ -r "$KERNEL" ] || unavailable "$KERNEL missing or not readable"
	BUSYBOX=$(find_busybox)
	[ -n "$BUSYBOX" ] ||
		unavailable "no static busybox (apt-get install busybox-static)"
}

# --- initramfs --------------------------------------------------------------

# Module files (under /lib/modules/$KVER), dependencies first, no duplicates.
module_files() {
	local m f
	if command -v modprobe >/dev/null; then
		for m in "${MODULES[@]}"; do
			modprobe --show-depends -S "$KVER" "$m" | awk '$1 == "insmod" { print $2 }'
		done | awk '!seen[$0]++'
		return
	fi
	for m in "${MODULES_FALLBACK[@]}"; do
		f=$(find "/lib/modules/$KVER/kernel" -name "$m.ko*" | head -n 1)
		[ -n "$f" ] && echo "$f"
	done
}

# Copy a module into DIR as plain NAME.ko (busybox insmod may not unpack it).
add_module() {
	local src=$1 dir=$2 name
	name=$(basename "$src")
	case $src in
	*.ko.xz) xz -dc "$src" >"$dir/${name%.xz}" ;;
	*.ko.zst) zstd -qdc "$src" >"$dir/${name%.zst}" ;;
	*.ko.gz) gzip -dc "$src" >"$dir/${name%.gz}" ;;
	*) cp "$src" "$dir/$name" ;;
	esac || return 1
	echo "${name%.ko*}.ko" >>"$dir/order"
}

# Prints the path of the initramfs, built once per kernel and init script.
# It runs as "img=$(initramfs) || ...", where set -e is off: every step that
# can fail says so itself, and no broken image may land in the cache.
initramfs() {
	local mods key img root f
	mods=$(module_files)
	[ -n "$mods" ] || return 1
	key=$(cat "$HERE/guest-init.sh" - <<<"$mods$BUSYBOX" | sha256sum | cut -c1-12)
	img=$CACHE_DIR/initramfs-$KVER-$key.cpio.gz
	if [ -s "$img" ]; then
		echo "$img"
		return
	fi

	root=$WORK/initramfs
	mkdir -p "$root/bin" "$root/modules" "$CACHE_DIR" || return 1
	cp "$BUSYBOX" "$root/bin/busybox" || return 1
	install -m 0755 "$HERE/guest-init.sh" "$root/init" || return 1
	while IFS= read -r f; do
		add_module "$f" "$root/modules" || return 1
	done <<<"$mods"

	# Build next to the final name and rename: parallel runs may share it.
	f=$(mktemp "$CACHE_DIR/.initramfs.XXXXXX") || return 1
	if ! (cd "$root" && find . | "$BUSYBOX" cpio -o -H newc 2>/dev/null) |
		gzip -1 >"$f" || ! mv -f "$f" "$img"; then
		rm -f "$f"
		return 1
	fi
	rm -rf "$root"
	# Images of older init scripts for this kernel: drop them after a day.
	find "$CACHE_DIR" -maxdepth 1 -name "initramfs-$KVER-*.cpio.gz" \
		! -name "${img##*/}" -mtime +0 -delete 2>/dev/null || true
	echo "$img"
}

# --- the VM -----------------------------------------------------------------

write_config() {
	local share=$1 t
	{
		printf 'STAGE_DIR=%q\n' "$STAGE_DIR"
		printf 'TEST_TIMEOUT=%q\n' "$TEST_TIMEOUT"
		printf 'MUST_WORK=%q\n' "$MUST_WORK"
		# The Debian packages for t-deb.sh, t-restart-deb.sh and t-restart-all.sh (host paths)
		printf 'DEB_DIR=%q\n' "${DEB_DIR:+$(absolute "$DEB_DIR")}"
		printf 'DEB_UPGRADE_DIR=%q\n' "${DEB_UPGRADE_DIR:+$(absolute "$DEB_UPGRADE_DIR")}"
		printf 'TESTS=('
		for t in "${TESTS[@]}"; do printf ' %q' "$t"; done
		printf ' )\n'
	} >"$share/config"
	cp "$HERE/guest-run.sh" "$share/guest-run.sh"
}

# systemd.unit must be here: a systemd that knows it is not in a container
# ignores "systemd.*" words in its own argv. show_status=error keeps the
# console quiet but still shows failed units, for the console tail of a
# hung boot. VM_APPEND adds words for debugging (e.g.
# "systemd.show_status=1 systemd.log_level=debug"); later words win.
kernel_cmdline() {
	echo "console=ttyS0 quiet panic=-1 systemd.show_status=error" \
		"systemd.unified_cgroup_hierarchy=1 systemd.unit=sandboxd-vmtest.target" \
		"${VM_APPEND:-}"
}

# If this script is SIGKILLed (no trap runs), qemu must die too: ask the
# kernel to signal it when its parent, this shell, goes away.
die_with_parent() {
	if setpriv --help 2>/dev/null | grep -q -- --pdeathsig; then
		echo setpriv --pdeathsig KILL --
	fi
}

start_qemu() {
	local img=$1 share=$2 log=$3
	: >"$log"
	# shellcheck disable=SC2046 # die_with_parent prints words or nothing
	$(die_with_parent) qemu-system-x86_64 \
		-accel tcg -smp 2 -m 2048 -nographic -no-reboot -nic none \
		-kernel "$KERNEL" -initrd "$img" \
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
		-virtfs "local,path=$share,mount_tag=vmout,security_model=none" \
		-append "$(kernel_cmdline)" \
		</dev/null >"$log" 2>&1 &
	QEMU_PID=$!
	if [ "${VM_CONSOLE:-0}" = 1 ]; then
		tail -n +1 -f --pid="$QEMU_PID" "$log" >&2 &
		TAIL_PID=$!
	fi
}

# Wait for qemu to exit. Until the guest reports that it booted, the limit is
# VM_BOOT_TIMEOUT; afterwards each test script adds its own timeout. Sets
# VM_KILLED to why qemu had to be killed (empty if it powered off).
wait_qemu() {
	local share=$1 limit done_at=""
	VM_KILLED=""
	BOOT_SECONDS=""
	while kill -0 "$QEMU_PID" 2>/dev/null; do
		limit=$BOOT_TIMEOUT
		if [ -e "$share/booted" ]; then
			: "${BOOT_SECONDS:=$((SECONDS - START))}"
			limit=$((BOOT_TIMEOUT + ${#TESTS[@]} * (TEST_TIMEOUT + 30)))
		fi
		if [ -e "$share/done" ]; then
			: "${done_at:=$SECONDS}"
			# Results are complete; do not wait forever for the power-off.
			if ((SECONDS - done_at > 60)); then
				VM_KILLED="the guest finished but did not power off"
				break
			fi
		fi
		if ((SECONDS - START > limit)); then
			VM_KILLED="no result after ${limit}s (boot hang?)"
			break
		fi
		sleep 1
	done
	if [ -n "$VM_KILLED" ]; then
		kill -KILL "$QEMU_PID" 2>/dev/null || true
	fi
	wait "$QEMU_PID" 2>/dev/null || true
	QEMU_PID=""
}

# --- TAP merging ------------------------------------------------------------

# Install results from the guest: renumber "ok - ..." lines, keep comments.
merge_install() {
	local file=$1 line
	[ -e "$file" ] || return 0
	while IFS= read -r line; do
		case $line in
		"ok - "*) add_result "ok" "${line#ok - }" ;;
		"not ok - "*) add_result "not ok" "${line#not ok - }" ;;
		*) TAP+=("$line") ;;
		esac
	done <"$file"
}

# Merge one script's TAP (t$i.out), then judge its exit status and plan.
merge_script() {
	local i=$1 base=$2 share=$3 line plan="" skip="" count=0 bailed=0 rc secs
	local failed_before=$FAILED
	local re_plan='^1\.\.([0-9]+)[[:space:]]*(#[[:space:]]*[Ss][Kk][Ii][Pp]([^[:alnum:]].*)?)?'
	local re_test='^(not )?ok([[:space:]]+[0-9]+)?[[:space:]]*(-[[:space:]]*)?(.*)$'
	FAILED=0

	if [ -e "$share/t$i.out" ]; then
		while IFS= read -r line || [ -n "$line" ]; do
			line=${line%$'\r'}
			if [ -z "$plan" ] && [[ $line =~ $re_plan ]]; then
				plan=${BASH_REMATCH[1]}
				skip=${BASH_REMATCH[3]#:}
				skip=${skip# }
			elif [[ $line =~ ^(not\ )?ok($|[[:space:]]) ]] && [[ $line =~ $re_test ]]; then
				count=$((count + 1))
				add_result "${BASH_REMATCH[1]}ok" "$base: ${BASH_REMATCH[4]}"
			elif [[ $line =~ ^Bail\ out! ]]; then
				add_result "not ok" "$base: $line"
				bailed=1
				break
			elif [[ $line =~ ^[[:space:]]*# ]]; then
				TAP+=("${line#"${line%%#*}"}")
			elif [ -n "$line" ]; then
				TAP+=("# $line")
			fi
		done <"$share/t$i.out"
	fi

	# "STATUS SECONDS". timeout(1) exits 124, or 137 when it had to SIGKILL;
	# 137 before the deadline is a SIGKILL from elsewhere (OOM killer...).
	read -r rc secs 2>/dev/null <"$share/t$i.rc" || rc=""
	if [ -z "$rc" ]; then
		add_result "not ok" "$base: did not run to the end (the VM stopped)"
	elif [ "$rc" = 124 ] || { [ "$rc" = 137 ] && [ "${secs:-0}" -ge "$TEST_TIMEOUT" ]; }; then
		add_result "not ok" "$base: timed out after ${TEST_TIMEOUT}s"
	else
		if [ "$rc" -gt 128 ]; then
			add_result "not ok" "$base: killed by signal $((rc - 128))"
		elif [ "$rc" != 0 ]; then
			add_result "not ok" "$base: exited with status $rc"
		fi
		if [ -z "$plan" ]; then
			add_result "not ok" "$base: printed no plan (1..N)"
		elif [ "$bailed" = 0 ] && [ "$plan" != "$count" ]; then
			add_result "not ok" "$base: planned $plan tests but ran $count"
		elif [ "$plan" = 0 ]; then
			add_result "ok" "$base # SKIP ${skip:-no tests}"
		fi
	fi

	if [ "$FAILED" = 1 ]; then
		comment_file "$base: stderr (last 30 lines):" "$share/t$i.err" 30
	fi
	FAILED=$((FAILED | failed_before))
}

# Build the whole stream from what the guest left in the share.
merge_results() {
	local share=$1 log=$2 i state show_failed=0
	if [ -e "$share/booted" ]; then
		state=$(cat "$share/booted")
		case $state in
		running) add_result "ok" "vm: systemd booted (state: $state)" ;;
		degraded)
			# Some unit of the host's own boot failed; tests may still work,
			# but show which one (below).
			add_result "ok" "vm: systemd booted (state: $state)"
			show_failed=1
			;;
		*) add_result "not ok" "vm: systemd did not finish booting (state: $state)" ;;
		esac
	else
		add_result "not ok" "vm: the guest never reached the test runner${VM_KILLED:+: $VM_KILLED}"
	fi
	merge_install "$share/install.tap"
	for i in "${!TESTS[@]}"; do
		merge_script "$i" "$(basename "${TESTS[$i]}")" "$share"
	done
	if [ -e "$share/booted" ] && [ ! -e "$share/done" ]; then
		add_result "not ok" "vm: the guest stopped before the tests finished${VM_KILLED:+: $VM_KILLED}"
	fi

	if [ "$FAILED" = 1 ] || [ "$show_failed" = 1 ]; then
		comment_file "guest: systemctl --failed" "$share/failed.txt"
	fi
	if [ "$FAILED" = 1 ]; then
		comment_file "guest: journal of sandboxd.service (last 50 lines)" "$share/journal.txt"
	fi
	if [ ! -e "$share/done" ] || [ -n "$VM_KILLED" ]; then
		[ -z "$VM_KILLED" ] || comment "vm: qemu killed: $VM_KILLED"
		comment_file "vm: serial console (last 40 lines)" "$log" 40
	fi
	comment_file "vm: guest uptime (s) at each step" "$share/timing"
	comment "vm: kernel $KVER, booted after ${BOOT_SECONDS:-?}s, total ${SECONDS}s wall"
}

print_tap() {
	echo "1..$NTESTS"
	printf '%s\n' "${TAP[@]}"
	TAP_DONE=1
}

# --- main -------------------------------------------------------------------

absolute() {
	case $1 in
	/*) printf '%s\n' "$1" ;;
	*) printf '%s/%s\n' "$PWD" "${1#./}" ;;
	esac
}

main() {
	local img share log t
	if [ $# -lt 1 ]; then
		printf '1..1\nnot ok 1 - vm: usage: run-vm.sh STAGE_DIR TEST_SCRIPT...\n'
		exit 0
	fi
	# The guest sees host paths as they are; relative ones would be
	# resolved against the guest runner's own directory.
	STAGE_DIR=$(absolute "$1")
	shift
	TESTS=()
	for t in "$@"; do
		TESTS+=("$(absolute "$t")")
	done

	preflight
	trap 'ERR_AT=$LINENO' ERR
	trap on_exit EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	START=$SECONDS
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/sandboxd-vm.XXXXXX")
	share=$WORK/share
	log=$WORK/console.log
	mkdir "$share"

	img=$(initramfs) || unavailable "cannot build the initramfs for kernel $KVER"
	write_config "$share"
	start_qemu "$img" "$share" "$log"
	wait_qemu "$share"
	merge_results "$share" "$log"
	print_tap
}

main "$@"
