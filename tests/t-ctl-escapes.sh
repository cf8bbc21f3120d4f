#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Text from a sandbox or a client never drives the terminal of whoever reads sandboxctl's human
# output (THREATS ESC-04): argv of a session and of an interrupted run, a label,
# a key echoed in the daemon's error message, a path in sandboxctl's own error are printed with
# ESC, BEL, CR, DEL, C1 controls, bidi overrides and invalid UTF-8 as \xNN; --json keeps them
# exact.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

start_daemon || exit 0

# ESC ] 0 ; title BEL (the window title), ESC [ 2 J (clear), CR, C1 CSI (U+009B), DEL, U+202E.
EVIL_JSON='\u001b]0;pwned\u0007\u001b[2J\rX\u009b31m\u007f\u202eY'
EVIL=$(jq -rn "\"$EVIL_JSON\"")
EVIL_SHOWN='\x1b]0;pwned\x07\x1b[2J\x0dX\xc2\x9b31m\x7f\xe2\x80\xaeY'

# clean FILE: no byte a terminal acts on (C0 but newline, DEL, C1, bidi/line separators).
clean() {
	python3 - "$1" <<'EOF'
import sys
text = open(sys.argv[1], "rb").read().decode("utf-8", "surrogateescape")
bad = [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) <= 0x9f
       or ord(c) in (0x200e, 0x200f) or 0x2028 <= ord(c) <= 0x202e or 0x2066 <= ord(c) <= 0x2069
       or 0xdc80 <= ord(c) <= 0xdcff]
if bad:
    print("raw: %r" % bad)
    sys.exit(1)
EOF
}
# shows WHAT FILE DESC: FILE has no raw control bytes and shows WHAT (escaped) literally.
shows() {
	if clean "$2" && grep -qF -- "$1" "$2"; then
		ok "$3"
	else
		nok "$3"
		diag "$(od -c "$2" | head -n 20)"
	fi
}

r=$(rpc '{"op":"create","best_effort":true,"name":"esc"}')
is "$(jget "$r" .ok)" true "a sandbox"
r=$(rpc "{\"op\":\"pty.open\",\"sandbox\":\"esc\",\"argv\":[\"sh\",\"-c\",\"sleep 300\",\"$EVIL_JSON\"],\"pty\":false}")
like "$(jget "$r" .session)" '^pty-' "a session whose argv holds them (sh -c with them as its $0, so that it keeps running)"

ctl inspect esc >"$T/inspect" 2>&1
shows "sh -c sleep 300 $EVIL_SHOWN" "$T/inspect" "inspect: the session's argv is escaped"
ctl --json inspect esc >"$T/inspect.json"
is "$(jq -r '.sandbox.sessions[0].argv[3]' "$T/inspect.json")" "$EVIL" "inspect --json: the argv is exact"
is "$(jq -r '.sandbox.sessions[0].state' "$T/inspect.json")" running "the session is still running (so that the restart below cuts it short)"

# A label: the daemon refuses C0, DEL and C1 controls in it; a bidi override it keeps, and it
# is escaped in the table.
r=$(rpc '{"op":"snapshot","sandbox":"esc","label":"a\u009bb"}')
is "$(jget "$r" '"\(.error.code) \(.error.field)"')" "invalid_request label" "a label with a C1 control is refused"
r=$(rpc '{"op":"snapshot","sandbox":"esc","label":"left\u202eright"}')
is "$(jget "$r" .ok)" true "a label with a bidi override is taken"
ctl snapshots esc >"$T/snapshots" 2>&1
shows 'left\xe2\x80\xaeright' "$T/snapshots" "snapshots: the label is escaped"
is "$(ctl --json snapshots esc | jq -r '.snapshots[0].label')" "$(jq -rn '"left\u202eright"')" "snapshots --json: exact"

# Errors: the daemon's message echoes the key a client gave; sandboxctl's own names a path,
# here one that is not even UTF-8.
ctl inspect "$EVIL" >"$T/err" 2>&1
shows "no sandbox '$EVIL_SHOWN'" "$T/err" "an error message from the daemon is escaped"
ctl run --sandbox esc --stdin-file "/nonexistent/$(printf 'a\xff\x1b[2Jb')" -- true >"$T/err2" 2>&1
shows '/nonexistent/a\xff\x1b[2Jb' "$T/err2" "sandboxctl's own error: an invalid byte and ESC are escaped"

# The run a daemon's death cut short: its argv in inspect's interrupted runs.
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
start_daemon || exit 0
ctl inspect esc >"$T/inspect2" 2>&1
shows "sh -c sleep 300 $EVIL_SHOWN" "$T/inspect2" "inspect after a restart: the interrupted session's argv is escaped"
grep -q '^interrupted:' "$T/inspect2" || diag "$(cat "$T/inspect2")"
is "$(ctl --json inspect esc | jq -r '.sandbox.interrupted_runs[0].argv[3]')" "$EVIL" \
	"inspect --json: the interrupted argv is exact"
ctl destroy esc >/dev/null
stop_daemon
