# Shared by tests/system/t-quota.sh and t-quota-state.sh: a second instance of the installed
# sandboxd.service ($Q: the same sandboxing, its own config, state directory and socket), and
# the write-time enforcement scenario run against it. Sourced after lib.sh.
# Each result says when it came (seconds into the script): TCG is slow, the budget is 300 s.
eval "$(declare -f ok | sed '1s/^ok/_ok/')"
ok() { _ok "$1" "$2 (${SECONDS}s)"; }

Q=sandboxd-quota
QDIR=/run/$Q
STATE=/var/lib/$Q
export SANDBOXD_SOCKET=$QDIR/sock

frag=$(systemctl show -p FragmentPath --value sandboxd.service)
exe=$(sed -n 's/^ExecStart=//p' "$frag")
mkdir -p "$QDIR"
# The installed unit, hardening and all; only where it reads, keeps and listens differs.
sed -e "s|^ExecStart=.*|ExecStart=$exe --config $QDIR/sandboxd.conf --state-dir \${STATE} --listen $QDIR/sock|" \
	-e '/^Requires=/d' -e '/^After=/d' -e '/^Also=/d' -e '/^WantedBy=/d' \
	-e "s|^StateDirectory=.*|StateDirectory=$Q|" -e '/^RuntimeDirectory/d' \
	"$frag" >/run/systemd/system/$Q.service
systemctl daemon-reload

# qstart STATE_DIR CONF_LINES...: (re)starts the instance; waits for its socket.
qstart() {
	local st=$1
	shift
	systemctl stop $Q.service 2>/dev/null
	rm -f "$QDIR/sock"
	printf '%s\n' "sweep_interval = 0" "$@" >"$QDIR/sandboxd.conf"
	mkdir -p /run/systemd/system/$Q.service.d
	printf '[Service]\nEnvironment=STATE=%s\n' "$st" >/run/systemd/system/$Q.service.d/state.conf
	systemctl daemon-reload
	systemctl start $Q.service || return 1
	for _ in $(seq 100); do [ -S "$QDIR/sock" ] && return 0; sleep 0.1; done
	return 1
}
qjournal() { journalctl -u $Q.service --no-pager -o cat | tail -n 15 | sed 's/^/#   /'; }
# inns CMD...: in the unit's mount namespace, where its image is mounted.
inns() { nsenter -t "$(systemctl show -p MainPID --value $Q.service)" -m "$@"; }
# project_limit DIR ID: the project's block hard limit in bytes (quotactl_fd), in the unit's namespace.
project_limit() {
	inns python3 - "$1" "$2" <<'PY'
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
buf = ctypes.create_string_buffer(72)
if libc.syscall(443, fd, (0x800007 << 8) | 2, int(sys.argv[2]), buf) < 0:
    # ENOENT, ESRCH: the filesystem keeps nothing for the id: no limit
    print(0 if ctypes.get_errno() in (2, 3) else "error %d" % ctypes.get_errno())
else:
    print(struct.unpack("8QI", buf.raw[:68])[0] * 1024)
PY
}

# scenario LABEL FSTYPE: write-time enforcement on the running instance.
scenario() {
	local l=$1 fs=$2 r id a
	r=$(call '{"op":"hello"}')
	diag "$l: $(jq -c .capabilities.disk <<<"$r") at $(date +%T)"
	[ "$(jqr .capabilities.disk.enforced "$r")" = true ] && [[ $(jqr .capabilities.disk.how "$r") == "project quota on $fs at $STATE/sandboxes" ]]
	ok $? "$l: hello says disk limits are enforced, by a project quota on $fs"
	r=$(call '{"op":"create","name":"qa","limits":{"disk":"16M","memory":"128M"}}')
	[ "$(jqr .sandbox.enforced.disk "$r")" = true ]
	ok $? "$l: create with limits.disk 16M, no best_effort: enforced"
	[ "$(jqr .sandbox.enforced.disk "$r")" = true ] || { diag "reply: $(head -c 600 <<<"$r")"; qjournal; }
	id=$(jqr .sandbox.id "$r")
	call '{"op":"create","name":"qb","limits":{"disk":"16M","memory":"128M"}}' >/dev/null
	r=$(call '{"op":"run","sandbox":"qa","command":"head -c 32M /dev/zero > /work/big; echo rc=$?; stat -c %s /work/big"}')
	diag "$l: $(jq -c '[.stdout, .stderr, .error]' <<<"$r")"
	# XFS says ENOSPC for a project's hard limit, ext4 EDQUOT.
	[[ $(jqr .stderr "$r") =~ "Disk quota exceeded"|"No space left on device" ]] && [[ $(jqr .stdout "$r") =~ ^rc=1 ]]
	ok $? "$l: writing 32M fails inside (EDQUOT or ENOSPC) at $(jqr .stdout "$r" | sed -n 2p) bytes"
	r=$(call '{"op":"run","sandbox":"qb","command":"head -c 8M /dev/zero > /work/f && echo ok"}')
	[ "$(jqr .stdout "$r")" = ok ]
	ok $? "$l: another sandbox writes on"
	inns dd if=/dev/zero of="$STATE/sandboxes/host-file" bs=1M count=32 status=none && inns rm "$STATE/sandboxes/host-file"
	ok $? "$l: the host writes 32M on the same filesystem"
	a=$(inns jq -r .project_id "$STATE/sandboxes/$id/meta.json")
	b=$(project_limit "$STATE/sandboxes" "$a")
	[ "$b" -ge 16777216 ] 2>/dev/null && [ "$b" -le 18874368 ]
	ok $? "$l: project $a of the record has a 16M hard limit and the record's room ($b)"
	[ "$3" = restart ] || { call '{"op":"destroy","sandbox":"qa"}' >/dev/null; call '{"op":"destroy","sandbox":"qb"}' >/dev/null
		b=$(project_limit "$STATE/sandboxes" "$a"); [ "$b" = 0 ]; ok $? "$l: destroy cleared the project's limit ($b)"; return; }
	qstart "$STATE" "${CONF[@]}"
	ok $? "$l: the unit restarts"
	r=$(call '{"op":"run","sandbox":"qa","command":"rm -f /work/big; head -c 32M /dev/zero > /work/big; stat -c %s /work/big"}')
	e=$(jqr .sandbox.enforced.disk "$(call '{"op":"inspect","sandbox":"qa"}')")
	[ "$(jqr .stdout "$r")" -lt 20000000 ] 2>/dev/null && [ "$e" = true ]
	ok $? "$l: after the restart the limit holds ($(jqr .stdout "$r") bytes; enforced.disk $e)"
	call '{"op":"destroy","sandbox":"qa"}' >/dev/null
	call '{"op":"destroy","sandbox":"qb"}' >/dev/null
	b=$(project_limit "$STATE/sandboxes" "$a")
	[ "$b" = 0 ]
	ok $? "$l: destroy cleared the project's limit ($b)"
}

quota_unit_remove() {
	rm -rf /run/systemd/system/$Q.service /run/systemd/system/$Q.service.d
	systemctl daemon-reload
}
