#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The socket a hand-started daemon makes (--listen) is what sandboxd.socket makes: mode 0660 and
# group socket_group (default sandboxd, the unit's SocketGroup=), so that the group's members may
# connect and nobody else may; where the group does not exist the log says why. The groups are
# this test's own (made and removed here); the host's sandboxd group is only looked at.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

command -v setpriv >/dev/null || skip_all "setpriv (util-linux) is not installed"
command -v groupadd >/dev/null || skip_all "groupadd (passwd) is not installed"
id nobody >/dev/null 2>&1 || skip_all "no user nobody to connect as"

GROUP=sbxt-listen-$$
NOGROUP=sbxt-listen-none-$$
groupadd "$GROUP" || skip_all "groupadd $GROUP failed"
trap 'groupdel "$GROUP" 2>/dev/null; _cleanup' EXIT
GID=$(getent group "$GROUP" | cut -d: -f3)
NOBODY=$(id -u nobody)

# as UID GROUPS CMD...: CMD as UID with only the supplementary GROUPS (none when empty).
as() {
        local uid=$1 groups=$2
        shift 2
        if [ -n "$groups" ]; then
                setpriv --reuid="$uid" --regid="$uid" --groups="$groups" "$@"
        else
                setpriv --reuid="$uid" --regid="$uid" --clear-groups "$@"
        fi
}

# connect_as UID GROUPS: "ok" when a hello is answered, else the connect error's name. The
# script is given inline: the checkout may be where UID cannot read (under /root, say).
connect_as() {
        as "$1" "$2" /usr/bin/python3 -c '
import errno, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno)); sys.exit(0)
s.sendall(b"{\"id\":1,\"op\":\"hello\"}\n")
print("ok" if b"\"ok\":true" in s.makefile("rb").readline() else "no reply")' "$SOCK" 2>&1
}

# ---- a group that exists ------------------------------------------------------------------
printf 'socket_group = %s\n' "$GROUP" >"$T/group.conf"
start_daemon --config "$T/group.conf" || exit 0
is "$(stat -c '%a %U:%G' "$SOCK")" "660 root:$GROUP" "--listen makes the socket mode 0660, root:socket_group"
is "$(connect_as "$NOBODY" "$GID")" ok "a member of the group connects and is answered"
is "$(connect_as "$NOBODY" "")" EACCES "someone outside the group may not connect (EACCES)"
# ctl_as UID GROUPS ARGS...: "STATUS: stderr" of sandboxctl as UID on $SOCK.
ctl_as() {
        local out rc uid=$1 groups=$2
        shift 2
        out=$(cd "$OTHER_DIR" && as "$uid" "$groups" "$OTHER_SANDBOXCTL" --socket "$SOCK" "$@" 2>&1 >/dev/null)
        rc=$?
        printf '%s: %s' "$rc" "$out"
}
# The build's sandboxctl, copied where that uid may read it (tests/lib.sh).
CTL_OK=$(other_user_files && as "$NOBODY" "" test -x "$OTHER_SANDBOXCTL" && echo yes)
if [ -n "$CTL_OK" ]; then
        is "$(ctl_as "$NOBODY" "$GID" hello)" "0: " "sandboxctl as a member of the group: hello works, no advice to join"
        like "$(ctl_as "$NOBODY" "" hello)" \
                "^1: sandboxctl: permission denied on $SOCK: only root and members of group '$GROUP' may use sandboxd; add yourself \\(sudo usermod -aG $GROUP" \
                "sandboxctl outside the group: told to join the socket's own group"
        usermod -aG "$GROUP" nobody
        like "$(ctl_as "$NOBODY" "" hello)" \
                "^1: sandboxctl: permission denied on $SOCK: you are in group '$GROUP', but this login session is not yet: log in again" \
                "listed in the group but not in it yet: told to log in again, not to join"
else
        nok "uid $NOBODY can run a copy of the build's sandboxctl (tests/lib.sh other_user_files)"
fi
stop_daemon

# ---- a group that does not exist ----------------------------------------------------------
printf 'socket_group = %s\n' "$NOGROUP" >"$T/nogroup.conf"
: >"$T/daemon.log"
start_daemon --config "$T/nogroup.conf" || exit 0
is "$(stat -c '%a %u:%g' "$SOCK")" "660 0:0" "without the group: mode 0660, root's group, never wider"
like "$(cat "$T/daemon.log")" "$SOCK: group '$NOGROUP' does not exist, so the socket keeps the daemon's group \\(gid 0" \
        "the log says why the socket has no group, and whose it is"
is "$(connect_as "$NOBODY" "$GID")" EACCES "then a member of another group may not connect"
if [ -n "$CTL_OK" ]; then
        like "$(ctl_as "$NOBODY" "$GID" hello)" \
                "^1: sandboxctl: permission denied on $SOCK \\(mode 0660, uid 0, gid 0\\): no group of users may use it, only root" \
                "sandboxctl on a socket of root's group: says that only root may use it, not to join a group"
fi
stop_daemon

# ---- the default: sandboxd ----------------------------------------------------------------
: >"$T/daemon.log"
start_daemon || exit 0

# A second daemon given the same --listen path (the quickstart's "start it again" pasted once too
# often) must leave the first one's socket alone: it says so and exits, and the first still answers.
ino=$(stat -c %i "$SOCK")
mkdir -p "$T/state2" "$CG-second"
out=$(timeout 30 "$SANDBOXD" --listen "$SOCK" --state-dir "$T/state2" --cgroup-root "$CG-second" 2>&1); rc=$?
rmdir "$CG-second" 2>/dev/null
like "$rc $out" "^1 .*cannot listen on $SOCK: something already listens there \\(another sandboxd" \
        "a second daemon on a socket the first listens on exits 1 and says why"
is "$(stat -c %i "$SOCK")" "$ino" "... leaving the first daemon's socket in place"
is "$(jget "$(rpc '{"op":"health"}')" .ok)" true "... and the first daemon still answers on it"
# ... and one given another socket and subtree but the same state directory (the default one,
# when only --listen and --cgroup-root are given) would restore the first's sandboxes as its own.
mkdir -p "$CG-second"
out=$(timeout 30 "$SANDBOXD" --listen "$T/sock2" --state-dir "$T/state" --cgroup-root "$CG-second" 2>&1); rc=$?
find "$CG-second" -depth -type d -exec rmdir {} + 2>/dev/null
like "$rc $out" "^1 .*another sandboxd uses the state directory $T/state" \
        "a second daemon on the first's state directory exits 1 and says why"
check "... leaving no socket of its own behind" test ! -e "$T/sock2"
is "$(jget "$(rpc '{"op":"health"}')" .ok)" true "... and the first daemon still answers"

if getent group sandboxd >/dev/null; then
        is "$(stat -c '%a %G' "$SOCK")" "660 sandboxd" "by default the socket's group is sandboxd (mode 0660)"
else
        is "$(stat -c '%a %u:%g' "$SOCK")" "660 0:0" "by default, without a sandboxd group here: mode 0660, root's group"
        like "$(cat "$T/daemon.log")" "group 'sandboxd' does not exist" "the log names the default group, sandboxd"
fi
stop_daemon
