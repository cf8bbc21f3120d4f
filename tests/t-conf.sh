#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# sandboxd.conf: every key of the daemon's table is documented (docs/sandboxd.conf.md,
# sandboxd.conf(5)) and in the installed example; the example is valid as shipped and with every
# line uncommented; a bad file stops sandboxd at start, before it listens or makes a cgroup, with
# "sandboxd: FILE:LINE: ..." naming the key; a good one is applied.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

EXAMPLE=$top_srcdir/daemon/sandboxd.conf
keys=$(sed -n 's/^ *KEY("\([a-z_]*\)".*/\1/p' "$top_srcdir/daemon/core/conf.c")
n_keys=$(printf '%s\n' "$keys" | wc -l)
check "the daemon's key table is read from daemon/core/conf.c ($n_keys keys)" [ "$n_keys" -ge 30 ]
for k in $keys; do
        missing=
        grep -q "\`$k\`" "$top_srcdir/docs/sandboxd.conf.md" || missing="$missing docs/sandboxd.conf.md"
        grep -q "^\\.BI $k \" = \"" "$top_srcdir/docs/man/sandboxd.conf.5" || missing="$missing sandboxd.conf.5"
        grep -q "^#$k = " "$EXAMPLE" || missing="$missing daemon/sandboxd.conf"
        is "$missing" "" "key $k is documented and in the example"
done
is "$(sed -n 's/^#\([a-z_]*\) = .*/\1/p' "$EXAMPLE" | sort | tr '\n' ' ')" "$(printf '%s\n' $keys | sort | tr '\n' ' ')" \
        "the example holds exactly the daemon's keys"

# check_config FILE: sandboxd --check-config, output in $out, status in $rc.
check_config() {
        out=$("$SANDBOXD" --config "$1" --check-config 2>&1)
        rc=$?
}
check_config "$EXAMPLE"
is "$rc" 0 "the example as shipped is valid"
sed 's/^#\([a-z_]* = \)/\1/' "$EXAMPLE" >"$T/uncommented.conf"
check_config "$T/uncommented.conf"
is "$rc" 0 "the example with every key uncommented is valid"
[ "$rc" = 0 ] || diag "$out"
if id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
        cp "$EXAMPLE" "$T/readable.conf" && chmod 0755 "$T" && chmod 0644 "$T/readable.conf"
        out=$(as_other nobody --regid=nogroup --clear-groups -- "$OTHER_SANDBOXD" --config "$T/readable.conf" --check-config 2>&1)
        is "$?" 0 "--check-config needs no root"
fi

# start_bad NAME LINES...: starts sandboxd for real on a config of LINES; it must refuse.
start_bad() {
        local name=$1
        shift
        printf '%s\n' "$@" >"$T/$name.conf"
        out=$(timeout -k 5 30 "$SANDBOXD" --config "$T/$name.conf" --listen "$T/$name.sock" --state-dir "$T/state-$name" \
                --cgroup-root "$CG" 2>&1)
        rc=$?
        is "$rc" 1 "$name: sandboxd exits 1"
        check "$name: it never listened" [ ! -e "$T/$name.sock" ]
        check "$name: it made no cgroup" [ ! -e "$CG" ]
}

pad=("# the limits" "" "max_memory = 8G" "default_memory = 256M" "" "# pids" "max_pids = 4096" "" "# cpus"
        "max_cpus = 1" "")
start_bad typo "${pad[@]}" "memroy_max = 1G"
is "$out" "sandboxd: $T/typo.conf:12: unknown key 'memroy_max' (did you mean 'max_memory'?)" \
        "typo: the message names the file, the line, the key and the likely one"
start_bad unknown "frobnicate = yes"
is "$out" "sandboxd: $T/unknown.conf:1: unknown key 'frobnicate' (see sandboxd.conf(5))" "unknown: no guess when nothing is close"
start_bad value "max_pids = 4096" "default_timeout = soon"
is "$out" "sandboxd: $T/value.conf:2: bad value 'soon' for key 'default_timeout' (expected a duration such as 30s, 500ms, 2m, 1h)" \
        "value: a bad value names the key, the line and what is expected"
start_bad size "max_memory = 12Q"
like "$out" "^sandboxd: $T/size.conf:1: bad value '12Q' for key 'max_memory' \\(expected a size" "size: a bad size is refused"
start_bad small "max_connections = 0"
is "$out" "sandboxd: $T/small.conf:1: max_connections = 0 is too small (at least 1)" "small: zero connections is refused"
start_bad twice "max_pids = 100" "" "max_pids = 200"
is "$out" "sandboxd: $T/twice.conf:3: key 'max_pids' is set again (first at line 1)" "twice: a key set twice is refused"
start_bad noeq "max_pids 100"
is "$out" "sandboxd: $T/noeq.conf:1: expected 'key = value', got 'max_pids 100'" "noeq: a line without '=' is refused"
start_bad pair "max_memory = 512M" "default_memory = 1G"
is "$out" "sandboxd: $T/pair.conf:2: default_memory (1G) exceeds max_memory (512M, line 1)" \
        "pair: a default above its maximum names both lines"
start_bad path "state_dir = relative/dir"
like "$out" "^sandboxd: $T/path.conf:1: bad value 'relative/dir' for key 'state_dir' \\(expected an absolute path\\)" \
        "path: a relative path is refused"
start_bad range "egress_range = 203.0.113.0/24"
like "$out" "bad value '203.0.113.0/24' for key 'egress_range' \\(expected a private IPv4 prefix" \
        "range: a public egress_range is refused"
start_bad range30 "egress_range = 10.1.2.0/30"
like "$out" "bad value '10.1.2.0/30' for key 'egress_range'" "range30: an egress_range too small for a /30 each is refused"
start_bad deny "egress_deny = 10.0.0.0/8 169.254.0.1/16"
like "$out" "bad value '10.0.0.0/8 169.254.0.1/16' for key 'egress_deny'" "deny: a prefix with host bits is refused"
start_bad dns "egress_dns = 10.0.0.0/8"
like "$out" "bad value '10.0.0.0/8' for key 'egress_dns' \\(expected an IPv4 address" "dns: a prefix is not an address"
for v in "py:0" "py:257" "py:x" "../etc" "py py" "py:3:4"; do
	start_bad pool-images "pool_images = $v"
	like "$out" "bad value '$v' for key 'pool_images' \\(expected image names" "pool-images: '$v' is refused"
done
start_bad pool-create "pool_create = 300"
like "$out" "pool_create must be at most 256" "pool-create: more than 256 is refused"
out=$("$SANDBOXD" --config "$T/does-not-exist.conf" --listen "$T/x.sock" --cgroup-root "$CG" 2>&1)
is "$?" 1 "a --config file that does not exist stops sandboxd"
is "$out" "sandboxd: $T/does-not-exist.conf: No such file or directory" "and names it"

# ---- a good file is applied ----------------------------------------------------------------
printf '%s\n' "# tighter than the defaults" "max_pids = 64" "max_memory = 128M" >"$T/good.conf"
start_daemon --config "$T/good.conf" || exit 0
r=$(rpc '{"id":1,"op":"create","best_effort":true}')
is "$(jget "$r" '.sandbox.limits.pids')" 64 "a default above a max the file lowered follows it down (pids)"
is "$(jget "$r" '.sandbox.limits.memory')" 134217728 "and memory"
r=$(rpc '{"id":2,"op":"create","best_effort":true,"limits":{"pids":65}}')
is "$(jget "$r" '.error.code + " " + .error.field')" "invalid_request limits.pids" "a limit above max_pids from the file is refused"
ctl destroy "$(jget "$(rpc '{"id":3,"op":"list"}')" '.sandboxes[0].id')" >/dev/null
stop_daemon
