#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# sandboxd-oci under the real engines (issue #24; design/oci-runtime.md): podman 4.3 with conmon
# and containerd 1.6's ctr with the runc shim drive it as their runtime, and each container is a
# sandbox of a test daemon. `run --rm` mirrors the exit status, `run -d` + exec + stop + rm work,
# `run -it` gets a terminal that follows a resize (under tmux), `ctr run` returns the status and
# `ctr task kill`/`delete` behave as with runc, kill of a stopped container fails as runc's does
# ("container not running"; not with --all), podman stop/rm of an exited one work, a proxy killed
# with SIGKILL leaves no process behind, and every refusal is refused with the field named. podman
# runs with no default_ulimits or sysctl of ours and an Alpine-style /etc/group in the image
# (issue 30): its NOFILE 1048576 is lowered, sysctls of the container's namespaces set,
# additionalGids given, the capability sets and masked paths exactly as asked, a missing program
# is 127 (in run and in exec), a --timeout leaves no sandbox, and a relative root.path is the
# bundle's. Stock podman (no CONTAINERS_CONF) runs the runtime through the containers.conf.d
# drop-in the build ships.
#
# No engine may see this host's cgroup v1 hierarchies, so everything (engines and the daemon,
# which must see the engines' overlay mounts) runs in a private mount namespace whose
# /sys/fs/cgroup is the cgroup2 hierarchy alone, with a tmpfs on /run (crun/containerd/shim state, the
# shims' sockets) and on /var/lib/containers (podman's blob-info cache), and TMPDIR in the test's
# directory (conmon's and the shim's console sockets). Images come from a tarball the test builds
# (podman import): no registry. podman runs with --cgroups=disabled (crun-style --cgroup-manager
# disabled): this host has no cgroup2 memory or pids controller.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

OCI=$top_builddir/oci/sandboxd-oci
for tool in podman conmon ctr containerd containerd-shim-runc-v2 tmux nsenter unshare; do
        command -v "$tool" >/dev/null || skip_all "$tool is not installed (scripts/deps.sh installs it)"
done
[ -x "$OCI" ] || skip_all "no sandboxd-oci at $OCI (build the tree first)"
BUSYBOX=$(command -v busybox) || skip_all "busybox (static) is not installed"

# ---- the private mount namespace -----------------------------------------------------------
made_var_lib_containers=
[ -d /var/lib/containers ] || { mkdir /var/lib/containers && made_var_lib_containers=1; }
cat >"$T/holder.sh" <<EOF
#!/bin/sh
# The host's /sys/fs/cgroup (a tmpfs of v1 hierarchies) is detached here only (private
# propagation), so that neither the engines nor the daemon can find a v1 hierarchy at all.
umount -l /sys/fs/cgroup || exit 1
mount -t cgroup2 cgroup2 /sys/fs/cgroup || exit 1
mount -t tmpfs tmpfs /run || exit 1
mount -t tmpfs tmpfs /var/lib/containers || exit 1
exec sleep infinity
EOF
chmod +x "$T/holder.sh"
unshare -m --propagation private "$T/holder.sh" &
HOLDER=$!
wait_until 5 sh -c "[ \"\$(nsenter -t $HOLDER -m stat -f -c %T /sys/fs/cgroup 2>/dev/null)\" = cgroup2fs ]" ||
        { nok "the private mount namespace has cgroup2 at /sys/fs/cgroup"; exit 0; }
NS="nsenter -t $HOLDER -m --"
CG_INSIDE=/sys/fs/cgroup${CG#"$CG_MOUNT"}
mkdir -p "$T/tmp" "$T/ptmp"

oci_cleanup() {
        set +e
        [ -n "${HOLDER:-}" ] && kill -0 "$HOLDER" 2>/dev/null && pod rm -af -t 0 >/dev/null 2>&1
        [ -n "${CTRD_PID:-}" ] && kill "$CTRD_PID" 2>/dev/null && wait "$CTRD_PID" 2>/dev/null
        _daemon_end
        # Whatever is still in the namespace (a conmon or a shim of a test that failed half-way).
        local hns p
        hns=$(readlink "/proc/$HOLDER/ns/mnt" 2>/dev/null)
        for p in /proc/[0-9]*; do
                [ -n "$hns" ] && [ "${p#/proc/}" != "$HOLDER" ] && [ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$hns" ] &&
                        kill -KILL "${p#/proc/}" 2>/dev/null
        done
        [ -n "${HOLDER:-}" ] && kill "$HOLDER" 2>/dev/null && wait "$HOLDER" 2>/dev/null
        [ -n "$made_var_lib_containers" ] && rm -rf --one-file-system /var/lib/containers
        _cleanup
}
trap oci_cleanup EXIT

# The daemon in the namespace: its --cgroup-root as the namespace sees it.
cat >"$T/sandboxd-ns" <<EOF
#!/bin/bash
cg='$CG' inside='$CG_INSIDE'
args=()
for a in "\$@"; do
        case \$a in "\$cg"*) a=\$inside\${a#"\$cg"} ;; esac
        args+=("\$a")
done
exec $NS "$SANDBOXD" "\${args[@]}"
EOF
chmod +x "$T/sandboxd-ns"
REAL_SANDBOXD=$SANDBOXD
SANDBOXD=$T/sandboxd-ns
start_daemon || exit 0
SANDBOXD=$REAL_SANDBOXD

# The runtime as the engines call it: this test's daemon, limits best effort (no controllers).
cat >"$T/sandboxd-oci" <<EOF
#!/bin/sh
exec "$OCI" --socket "$SOCK" --best-effort "\$@"
EOF
chmod +x "$T/sandboxd-oci"

sandboxes() { rpc '{"op":"list"}' | jq '.sandboxes | length'; }

# ---- podman ----------------------------------------------------------------------------------
# CONTAINERS_CONF replaces the distribution's containers.conf: its [containers] defaults (Debian's
# default_sysctls, net.ipv4.ping_group_range) are carried over as it ships them.
{
        echo "[containers]"
        sed -n '/^\[containers\]/,/^\[/{/^default_sysctls *=/,/\]/p}' /usr/share/containers/containers.conf 2>/dev/null
} >"$T/containers.conf"
cat >>"$T/containers.conf" <<EOF
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime_supports_json = ["sandboxd-oci"]
runtime_supports_nocgroup = ["sandboxd-oci"]
[engine.runtimes]
sandboxd-oci = ["$T/sandboxd-oci"]
EOF
cat >"$T/storage.conf" <<EOF
[storage]
driver = "vfs"
graphroot = "$T/graph"
runroot = "$T/run"
EOF
pod() {
        $NS env TMPDIR="$T/tmp" CONTAINERS_CONF="$T/containers.conf" CONTAINERS_STORAGE_CONF="$T/storage.conf" \
                timeout 120 podman --root "$T/graph" --runroot "$T/run" --tmpdir "$T/ptmp" --runtime sandboxd-oci "$@"
}
prun() { pod run --pull=never --cgroups=disabled --network none "$@"; }

mkdir -p "$T/rootfs/bin" "$T/rootfs/etc" "$T/rootfs/tmp" "$T/rootfs/proc" "$T/rootfs/dev" "$T/rootfs/sys" "$T/rootfs/run"
cp "$BUSYBOX" "$T/rootfs/bin/busybox"
for c in sh echo sleep cat ls id stty head true kill env tty grep; do ln -s busybox "$T/rootfs/bin/$c"; done
mkdir -p "$T/rootfs/srv/dir" && echo secret >"$T/rootfs/srv/secret" && echo f >"$T/rootfs/srv/dir/f"
# Alpine's accounts: root is listed in bin, daemon, sys, adm, disk, wheel and floppy, and podman
# passes those as additionalGids of every container run as root.
echo 'root:x:0:0:root:/root:/bin/sh' >"$T/rootfs/etc/passwd"
cat >"$T/rootfs/etc/group" <<'EOF'
root:x:0:root
bin:x:1:root,bin,daemon
daemon:x:2:root,bin,daemon
sys:x:3:root,bin,adm
adm:x:4:root,adm,daemon
tty:x:5:
disk:x:6:root,adm
lp:x:7:lp
kmem:x:9:
wheel:x:10:root
floppy:x:11:root
EOF
tar -C "$T/rootfs" -cf "$T/img.tar" .
check "podman imports the test's rootfs tarball" pod import "$T/img.tar" localhost/sbx-oci-test

out=$(prun --rm localhost/sbx-oci-test sh -c 'echo remote-output; exit 7' 2>"$T/err"); rc=$?
is "$rc" 7 "podman run --rm IMG sh -c 'exit 7' exits 7"
is "$out" remote-output "its stdout is the engine's own pipe"
[ "$rc" = 7 ] || diag "$(cat "$T/err")"
is "$(ls "$T/run/overlay-containers" 2>/dev/null | wc -l)" 0 "--rm removed the container"

# Capabilities exactly as podman asks: none at all with --cap-drop=ALL (uid 0 included), its
# default set otherwise (bounding = effective = permitted), nothing added.
out=$(prun --rm --cap-drop=ALL localhost/sbx-oci-test grep ^Cap /proc/self/status 2>"$T/err")
is "$(printf '%s\n' "$out" | awk '{print $2}' | sort -u)" "0000000000000000" "--cap-drop=ALL: every capability set is empty, for root too"
[ -n "$out" ] || diag "$(cat "$T/err")"
out=$(prun --rm localhost/sbx-oci-test grep ^Cap /proc/self/status 2>/dev/null)
eff=$(printf '%s\n' "$out" | awk '$1 == "CapEff:" {print $2}')
bnd=$(printf '%s\n' "$out" | awk '$1 == "CapBnd:" {print $2}')
check "podman's default capabilities: CapEff = CapBnd ($eff), no CAP_SYS_ADMIN, not all of them" \
        sh -c "[ -n '$eff' ] && [ '$eff' = '$bnd' ] && [ \$(( 0x$eff & (1 << 21) )) = 0 ] && [ '$eff' != 0000000000000000 ]"
out=$(prun --rm --cap-drop=ALL --cap-add=CHOWN localhost/sbx-oci-test grep ^CapEff /proc/self/status 2>/dev/null)
is "$(echo $out)" "CapEff: 0000000000000001" "--cap-drop=ALL --cap-add=CHOWN: CAP_CHOWN alone"

# Masked paths, as podman's --security-opt mask= asks (beside its default list).
out=$(prun --rm --security-opt mask=/srv/secret:/srv/dir localhost/sbx-oci-test sh -c 'cat /srv/secret; echo "[$(ls /srv/dir)]"' 2>"$T/err")
is "$out" "[]" "--security-opt mask=: the file reads empty, the directory is empty"
[ "$out" = "[]" ] || diag "$(cat "$T/err")"
out=$(prun --rm localhost/sbx-oci-test sh -c 'cat /srv/secret; ls /srv/dir' 2>/dev/null)
is "$(echo $out)" "secret f" "... and without it they are there"

# An Alpine-style /etc/group: podman's additionalGids are the container's groups, not refused.
out=$(prun --rm localhost/sbx-oci-test grep ^Groups: /proc/self/status 2>"$T/err"); rc=$?
is "$(printf '%s' "$out" | tr -s ' \t' '\n' | grep -v Groups: | sort -nu | tr '\n' ' ')" "0 1 2 3 4 6 10 11 " \
        "root's groups of the image's /etc/group (bin, daemon, sys, adm, disk, wheel, floppy) are its supplementary groups (rc=$rc)"
[ "$rc" = 0 ] || diag "$(cat "$T/err")"
out=$(prun --rm --group-add 7 localhost/sbx-oci-test grep ^Groups: /proc/self/status 2>&1)
like "$out" "Groups:.*[[:space:]]7([[:space:]]|\$)" "--group-add 7 adds group 7"

# podman's own rlimits (NOFILE 1048576:1048576 for a rootful container), no default_ulimits of
# ours: lowered to the sandbox's open_files (4096 by default), not refused.
out=$(prun --rm localhost/sbx-oci-test sh -c 'ulimit -n; ulimit -Hn' 2>"$T/err"); rc=$?
is "$(echo $out)" "4096 4096" "podman's default NOFILE (1048576, where it sends one) is the sandbox's open_files (4096), not refused (rc=$rc)"
[ "$rc" = 0 ] || diag "$(cat "$T/err")"

# Sysctls of the container's namespaces: Debian's containers.conf default (ping_group_range, as
# podman sends it with no setting of ours) and an ipc one.
if grep -q 'ping_group_range' "$T/containers.conf"; then
        out=$(prun --rm localhost/sbx-oci-test cat /proc/sys/net/ipv4/ping_group_range 2>"$T/err")
        is "$(echo $out)" "$(sed -n 's/.*ping_group_range=\([0-9]*\) \([0-9]*\).*/\1 \2/p' "$T/containers.conf")" \
                "the distribution's default_sysctls (net.ipv4.ping_group_range) is set inside, as the container's gids"
        [ -n "$out" ] || diag "$(cat "$T/err")"
fi
host_msgmax=$(cat /proc/sys/kernel/msgmax)
out=$(prun --rm --sysctl kernel.msgmax=16384 --sysctl net.ipv4.ping_group_range="0 1" localhost/sbx-oci-test \
        sh -c 'cat /proc/sys/kernel/msgmax /proc/sys/net/ipv4/ping_group_range' 2>"$T/err"); rc=$?
is "$(echo $out)" "16384 0 1" "--sysctl kernel.msgmax and net.ipv4.ping_group_range are set inside, the gids as the container's (rc=$rc)"
[ "$rc" = 0 ] || diag "$(cat "$T/err")"
is "$(cat /proc/sys/kernel/msgmax)" "$host_msgmax" "the host's kernel.msgmax is untouched"
out=$(prun --rm --sysctl kernel.domainname=x localhost/sbx-oci-test true 2>&1); rc=$?
like "$out" "kernel.domainname" "refused: a sysctl of no namespace of the container's, naming it"

# The container's process is pid 1 of its pid namespace, as with runc: a signal it has no handler
# for is ignored, even its own.
out=$(prun --rm localhost/sbx-oci-test sh -c 'echo $$; kill -USR1 $$; echo alive' 2>/dev/null); rc=$?
is "$(echo $out) $rc" "1 alive 0" "the container's process is pid 1: \$\$ is 1, its own unhandled SIGUSR1 is ignored"
out=$(prun --rm localhost/sbx-oci-test sh -c 'trap "exit 7" USR1; kill -USR1 $$; sleep 5' 2>/dev/null); rc=$?
is "$rc" 7 "a signal pid 1 handles reaches it"

out=$(echo piped-in | prun --rm -i localhost/sbx-oci-test cat 2>/dev/null)
is "$out" piped-in "run -i: stdin is the engine's pipe"

# fds: --preserve-fds 1 gives fd 3 along; an fd the engine merely inherited (7) never arrives.
echo preserved >"$T/pfile"
out=$(prun --rm --preserve-fds 1 localhost/sbx-oci-test sh -c 'cat <&3; test -e /proc/self/fd/7 && echo leaked-7 || echo no-7' 3<"$T/pfile" 7<"$T/pfile" 2>"$T/err")
is "$out" "preserved
no-7" "--preserve-fds 1: fd 3 reaches the process; an inherited fd 7 does not"
[ "$out" = "preserved
no-7" ] || diag "$(cat "$T/err")"

# Its --ulimit is above the sandbox's open_files, whatever podman's own default (podman 4.3 sends
# its NOFILE 1048576 only when something gave it a list of ulimits: a fresh Debian root's sent none).
id=$(prun -d --ulimit nofile=1048576:1048576 localhost/sbx-oci-test sleep 300 2>"$T/err")
check "podman run -d starts a container" test -n "$id"
[ -n "$id" ] || diag "$(cat "$T/err")"
is "$(pod inspect -f '{{.State.Status}}' "$id" 2>/dev/null)" running "it is running"
# Written by the container's proxy when the daemon's "started" reaches it, which may come after
# podman has seen the container running. On failure: what the logs hold and what podman asked.
if wait_until 30 sh -c "grep -rqs 'RLIMIT_NOFILE is above what sandboxd allows, lowered to \[4096,4096\]' '$T/run' '$T/graph'"; then
        ok "the runtime's log (podman's oci-log) says RLIMIT_NOFILE was lowered"
else
        nok "the runtime's log (podman's oci-log) says RLIMIT_NOFILE was lowered"
        for f in $(find "$T/run" "$T/graph" -name oci-log 2>/dev/null); do diag "$f:" "$(tail -n 5 "$f")"; done
        for f in $(find "$T/run" "$T/graph" -name config.json -path '*userdata*' 2>/dev/null); do
                diag "$f: process.rlimits $(jq -c .process.rlimits "$f")"
        done
        diag "ulimit -n: $(ulimit -Sn) $(ulimit -Hn); the daemon's: $(grep 'open files' /proc/$DAEMON_PID/limits)"
fi
is "$(pod exec "$id" echo from-exec 2>"$T/err")" from-exec "podman exec runs in it"
pod exec "$id" sh -c 'exit 3' 2>/dev/null
is "$?" 3 "an exec's exit status is mirrored"
is "$(pod exec "$id" cat /etc/hostname 2>/dev/null)" "${id:0:12}" "the bind of /etc/hostname is podman's"
# A program that is not there: 127 as with runc, for a path and for a name looked up in PATH.
out=$(pod exec "$id" /no/such/program 2>&1); rc=$?
is "$rc" 127 "podman exec CTR /no/such/program exits 127"
like "$out" "[Nn]o such file or directory" "... saying so"
pod exec "$id" no-such-program >/dev/null 2>&1
is "$?" 127 "podman exec CTR no-such-program (looked up in PATH) exits 127"
is "$(pod exec "$id" echo still-there 2>/dev/null)" still-there "... and the container goes on"
state=$($NS "$OCI" --root /run/sandboxd-oci state "$id" 2>/dev/null | jq -r .status)
is "$state" running "sandboxd-oci state says running"
check "podman stop stops it" pod stop -t 2 "$id"
is "$(pod inspect -f '{{.State.Status}}' "$id" 2>/dev/null)" exited "it exited"
is "$(pod inspect -f '{{.State.ExitCode}}' "$id" 2>/dev/null)" 137 \
        "pid 1 ignored stop's SIGTERM (sleep has no handler): SIGKILL after the timeout, 137 as with runc"
check "podman rm removes it" pod rm "$id"
is "$(rpc '{"op":"list"}' | jq '.sandboxes | length')" 0 "sandboxd destroyed its sandbox"
# One that ended by itself: stop and rm still work (the runtime's kill says "not running").
id=$(prun -d localhost/sbx-oci-test true 2>/dev/null)
pexited() { [ "$(pod inspect -f '{{.State.Status}}' "$1" 2>/dev/null)" = exited ]; }
wait_until 20 pexited "$id"
is "$(pod inspect -f '{{.State.Status}}' "$id" 2>/dev/null)" exited "a container whose process ended is exited"
check "podman stop of it succeeds" pod stop -t 2 "$id"
check "podman rm of it succeeds" pod rm "$id"
is "$(sandboxes)" 0 "... and leaves no sandbox"

# A proxy killed with SIGKILL: the connection closes, sandboxd kills the run.
id=$(prun -d localhost/sbx-oci-test sleep 301 2>/dev/null)
proxy=$(pod inspect -f '{{.State.Pid}}' "$id" 2>/dev/null)
check "the container's pid is the proxy, running sandboxd-oci" grep -q sandboxd-oci "/proc/$proxy/cmdline"
wait_until 10 pgrep -f 'sleep 30[1]' >/dev/null
kill -KILL "$proxy"
wait_until 10 sh -c '! pgrep -f "sleep 30[1]" >/dev/null'
check "no process is left behind once the proxy is SIGKILLed" sh -c '! pgrep -f "sleep 30[1]"'
pod rm -f "$id" >/dev/null 2>&1

# A program that is not there fails create, in runc's words: podman says 127, as with runc.
out=$(prun --rm localhost/sbx-oci-test /no/such/command 2>&1); rc=$?
is "$rc" 127 "podman run IMG /no/such/command exits 127"
like "$out" "no such file or directory" "... saying so"
# One that is there and cannot run: 126, as with runc (podman's 030-run "basic tests").
out=$(prun --rm localhost/sbx-oci-test /etc 2>&1); rc=$?
is "$rc" 126 "podman run IMG /etc (a directory) exits 126"
like "$out" "is a directory" "... saying so"
out=$(prun --rm localhost/sbx-oci-test /etc/passwd 2>&1); rc=$?
is "$rc" 126 "podman run IMG /etc/passwd (no x bit) exits 126"
out=$(prun --rm localhost/sbx-oci-test no-such-command 2>&1); rc=$?
is "$rc" 127 "podman run IMG no-such-command (looked up in PATH) exits 127"
unlike "$out" "does not exist|Removing container" \
        "... with no noise from podman's cleanup (delete --force of a container that is gone exits 0, as with crun)"
is "$(sandboxes)" 0 "... and neither left a sandbox"

# podman run --timeout: conmon SIGKILLs the container's process group, which is the proxy's own
# (a session of its own, as crun's container has; in conmon's, conmon died with it and podman
# lost the exit status: 127 "no such exit code"); the sandbox goes with the proxy's connection.
out=$(prun --rm --timeout 3 localhost/sbx-oci-test sleep 60 2>&1); rc=$?
is "$rc" 255 "podman run --timeout 3 of a sleep 60 exits 255, as with crun (podman got conmon's exit file)"
unlike "$out" "no such exit code" "... and podman found the container's exit code"
for _ in $(seq 40); do [ "$(sandboxes)" = 0 ] && break; sleep 0.5; done
is "$(sandboxes)" 0 "podman run --timeout 3 of a sleep 60 leaves no sandbox behind"
# podman removes such a container by itself, with no delete: the next create sweeps its state.
pod rm -af >/dev/null 2>&1
prun --rm localhost/sbx-oci-test true >/dev/null 2>&1
is "$($NS ls /run/sandboxd-oci 2>/dev/null | wc -l)" 0 "... nor any state once the next container ran"

# podman build with a RUN step: buildah mounts the container's rootfs in a mount namespace of its
# own, which the daemon's does not show; the runtime sends the rootfs itself (root.tree_fd).
mkdir -p "$T/build"
printf 'FROM localhost/sbx-oci-test\nRUN echo built > /built\n' >"$T/build/Containerfile"
out=$(pod build --pull=never --network none --runtime "$T/sandboxd-oci" -t localhost/sbx-oci-built "$T/build" 2>&1); rc=$?
is "$rc" 0 "podman build of a Containerfile with a RUN step succeeds"
[ "$rc" = 0 ] || diag "$(printf '%s' "$out" | tail -n 5)"
is "$(prun --rm localhost/sbx-oci-built cat /built 2>&1)" built "podman run of the image it built shows what the RUN step wrote"
pod rmi -f localhost/sbx-oci-built >/dev/null 2>&1

# A terminal: podman run -it under tmux, its size followed.
tmux -L "sbx-oci-$$" new-session -d -x 100 -y 30 \
        "$NS env TMPDIR=$T/tmp CONTAINERS_CONF=$T/containers.conf CONTAINERS_STORAGE_CONF=$T/storage.conf podman --root $T/graph --runroot $T/run --tmpdir $T/ptmp --runtime sandboxd-oci run --rm -it --pull=never --cgroups=disabled --network none localhost/sbx-oci-test sh; sleep 30"
tm() { tmux -L "sbx-oci-$$" "$@" 2>/dev/null; }
pane_has() { tm capture-pane -p | grep -q "$1"; }
wait_until 20 pane_has '#' || diag "$(tm capture-pane -p)"
tm send-keys 'tty; stty size; echo MARK$((6*7))' Enter
wait_until 10 pane_has MARK42
check "run -it: the shell's stdin is a terminal of the sandbox's devpts" pane_has '^/dev/pts/'
check "it has the size of tmux's window (30 100)" pane_has '^30 100'
tm resize-window -x 120 -y 40
sleep 1
tm send-keys 'stty size; echo MARK$((7*7))' Enter
wait_until 10 pane_has MARK49
check "after a resize it has the new size (40 120)" pane_has '^40 120'
tm send-keys 'exit 4' Enter
tm kill-server 2>/dev/null

# ---- podman as it ships, with the drop-in that make install ships ----------------------------
# No CONTAINERS_CONF: the distribution's containers.conf, and /etc/containers/containers.conf.d
# (the one system drop-in directory podman reads) holding the build's drop-in alone, bound over
# it in the namespace with its runtime path made this build's. The runtime finds the daemon at
# its default socket (/run/sandboxd/sandboxd.sock: here a link to this test's) and accepts
# best-effort limits from --cgroups=disabled alone (runtime_supports_nocgroup). vfs storage is
# podman's --storage-driver flag, as docs/fleet.md shows it: no configuration file of ours at all.
DROPIN=$top_builddir/contrib/containers.conf.d/sandboxd-oci.conf
like "$(grep '^sandboxd-oci = ' "$DROPIN" 2>&1)" '^sandboxd-oci = \["/[^"]*/sandboxd-oci"\]$' \
        "the built drop-in names the runtime by one absolute path, in bindir"
cp -a /etc/containers "$T/etc-containers" 2>/dev/null || mkdir -p "$T/etc-containers"
rm -rf "$T/etc-containers/containers.conf.d"
mkdir "$T/etc-containers/containers.conf.d"
sed -E "s|^sandboxd-oci = \[\"/[^\"]*/sandboxd-oci\"\]\$|sandboxd-oci = [\"$OCI\"]|" "$DROPIN" \
        >"$T/etc-containers/containers.conf.d/sandboxd-oci.conf"
$NS sh -c "mount --bind '$T/etc-containers' /etc/containers && mkdir -p /run/sandboxd &&
        ln -sf '$SOCK' /run/sandboxd/sandboxd.sock"
stock() {
        $NS env TMPDIR="$T/tmp" timeout 120 podman --storage-driver vfs --root "$T/graph" --runroot "$T/run" \
                --tmpdir "$T/ptmp" "$@"
}
out=$(stock --runtime sandboxd-oci run --rm --pull=never --cgroups=disabled --network none localhost/sbx-oci-test \
        sh -c 'echo from-stock; exit 5' 2>"$T/err"); rc=$?
is "$rc $out" "5 from-stock" "stock podman, the shipped drop-in: --runtime sandboxd-oci --cgroups=disabled runs it (exit 5)"
[ "$rc" = 5 ] || diag "$(cat "$T/err")"
out=$(stock --runtime sandboxd-oci run --rm --pull=never --cgroups=disabled --network none --privileged \
        localhost/sbx-oci-test true 2>&1); rc=$?
like "$out" "refused" "... and a refusal shows the runtime's own error (rc=$rc)"
# Without --cgroups=disabled, podman asks for limits: a host that cannot enforce them refuses,
# and the refusal says what to do (by the reply's code, limit_unenforceable); one that can runs it.
out=$(stock --runtime sandboxd-oci run --rm --pull=never --network none localhost/sbx-oci-test \
        sh -c 'echo with-cgroups' 2>&1); rc=$?
if [ "$(rpc '{"op":"hello"}' | jq -r '[.capabilities.cgroup | .memory, .pids, .cpu] | all')" = true ]; then
        is "$rc $out" "0 with-cgroups" "stock podman without --cgroups=disabled runs where the host enforces every limit"
else
        like "$rc $out" '^[1-9].*limit_unenforceable.*podman: run --cgroups=disabled' \
                "stock podman without --cgroups=disabled, on a host that cannot enforce every limit: refused, and told of --cgroups=disabled"
fi
is "$(sandboxes)" 0 "... leaving no sandbox"
$NS sh -c 'umount /etc/containers; rm -f /run/sandboxd/sandboxd.sock'

# ---- refusals (each with the field named, before any sandbox is made) -------------------------
refused() {
        local desc=$1 needle=$2
        shift 2
        out=$(prun --rm "$@" localhost/sbx-oci-test true 2>&1)
        rc=$?
        if [ "$rc" != 0 ] && printf '%s' "$out" | grep -q -- "$needle"; then
                ok "refused: $desc"
        else
                nok "refused: $desc"
                diag "rc=$rc: $out"
        fi
}
refused "--privileged" "refused" --privileged
refused "--cap-add SYS_ADMIN" "CAP_SYS_ADMIN" --cap-add SYS_ADMIN
refused "--ipc host" "\"ipc\" namespace" --ipc host
refused "--device /dev/fuse" "devices" --device /dev/fuse
refused "an rshared bind" "propagation" -v "$T/tmp:/data:rshared"
refused "--tmpfs /data" "tmpfs" --tmpfs /data
out=$(prun --rm --memory 64m localhost/sbx-oci-test true 2>&1)
rc=$?
is "$rc" 0 "--memory 64m alone (podman's swap bound of twice that) is accepted, swap being sandboxd's own"
[ "$rc" = 0 ] || diag "$out"
out=$(pod run --rm --pull=never --cgroups=disabled --network host localhost/sbx-oci-test true 2>&1)
like "$out" '"network" namespace' "refused: --network host"
# A pod's way of sharing: the other container's /proc/<proxy pid>/ns/net, a host process.
id=$(prun -d localhost/sbx-oci-test sleep 302 2>/dev/null)
out=$(pod run --rm --pull=never --cgroups=disabled --network "container:$id" localhost/sbx-oci-test true 2>&1)
like "$out" "proxy" "refused: --network container:X (X's pid is our proxy: the host's network)"
pod rm -f "$id" >/dev/null 2>&1

# ---- the runtime called directly: refusals on --log as runc's JSON lines, state, delete ---------
mkdir -p "$T/bundle"
jq --arg root "$T/rootfs" '.root.path = $root | .mounts |= map(select(.type != "bind"))
        | .linux.namespaces |= map(select(.type != "pid"))' "$TESTS_DIR/oci/podman-run.json" >"$T/bundle/config.json"
rt() { $NS "$OCI" --socket "$SOCK" --best-effort --root /run/sbx-oci-direct --log "$T/direct.log" --log-format json "$@"; }
rt create --bundle "$T/bundle" --pid-file "$T/bundle/pid" direct1 2>/dev/null
is "$?" 1 "create of a config without a pid namespace fails"
last=$(tail -n 1 "$T/direct.log")
is "$(printf '%s' "$last" | jq -r .level)" error "the error is a runc JSON line on --log"
like "$(printf '%s' "$last" | jq -r .msg)" 'linux.namespaces: no "pid" namespace' "naming the field"
like "$(printf "%s" "$last" | jq -r .time)" "^20[0-9-]+T[0-9:.]+Z\$" "with a time"
check "nothing is recorded for it" sh -c "! $NS test -e /run/sbx-oci-direct/direct1"
rt delete direct1 2>/dev/null
is "$?" 1 "delete of a container that does not exist fails"
like "$(tail -n 1 "$T/direct.log" | jq -r .msg)" "does not exist" "saying it does not exist (what the engines look for)"
rt state direct1 >/dev/null 2>&1
is "$?" 1 "so does state"

# A relative root.path ("rootfs", as runtime-tools writes it) is the bundle's; one whose symlink
# leads out of the bundle is refused.
mkdir -p "$T/rel"
cp -a "$T/rootfs" "$T/rel/rootfs"
jq '.root.path = "rootfs" | .mounts |= map(select(.type != "bind")) | .process.args = ["sh", "-c", "cat /etc/group | head -n 1"]' \
        "$TESTS_DIR/oci/podman-run.json" >"$T/rel/config.json"
rt create --bundle "$T/rel" --pid-file "$T/rel/pid" rel1 >"$T/rel/out" 2>"$T/rel/err"
is "$?" 0 "create with root.path \"rootfs\" (relative to the bundle)"
[ -s "$T/rel/err" ] && diag "$(cat "$T/rel/err")"
rt start rel1 2>/dev/null
wait_until 20 sh -c "$NS $OCI --root /run/sbx-oci-direct state rel1 2>/dev/null | grep -q '\"stopped\"'"
is "$(cat "$T/rel/out")" "root:x:0:root" "its process ran in the bundle's rootfs"
# kill of a stopped container fails, as the spec asks and runc says; with --all it is no error.
rt kill rel1 KILL 2>"$T/rel/kill-err"
is "$?" 1 "kill of a stopped container fails"
like "$(tail -n 1 "$T/direct.log" | jq -r .msg)" "container not running" "saying \"container not running\" on --log (containerd's word for it)"
like "$(cat "$T/rel/kill-err")" "container not running" "... and on stderr"
rt kill --all rel1 KILL 2>/dev/null
is "$?" 0 "kill --all of a stopped container succeeds (runc's rule)"
rt delete --force rel1 2>/dev/null

# A rootfs mounted only in a private mount namespace of the runtime's caller (as buildah mounts
# one): the daemon's namespace shows an empty directory by that path; the runtime sends a
# detached copy of the mount (root.tree_fd), and the container sees the rootfs's files.
mkdir -p "$T/priv/rootfs" "$T/privsrc"
cp -a "$T/rootfs/." "$T/privsrc/"
echo from-private-mount >"$T/privsrc/srv/marker"
jq '.root.path = "rootfs" | .mounts |= map(select(.type != "bind")) | .process.args = ["cat", "/srv/marker"]' \
        "$TESTS_DIR/oci/podman-run.json" >"$T/priv/config.json"
cat >"$T/priv/run.sh" <<EOF
#!/bin/sh
mount --bind "$T/privsrc" "$T/priv/rootfs" || exit 3
"$OCI" --socket "$SOCK" --best-effort --root /run/sbx-oci-direct --log "$T/direct.log" --log-format json \\
        create --bundle "$T/priv" --pid-file "$T/priv/pid" priv1 >"$T/priv/out" 2>"$T/priv/err" || exit 1
exec "$OCI" --socket "$SOCK" --root /run/sbx-oci-direct start priv1
EOF
chmod +x "$T/priv/run.sh"
$NS unshare -m --propagation private "$T/priv/run.sh"
is "$?" 0 "create and start of a bundle whose rootfs is mounted in the caller's private mount namespace only"
[ -s "$T/priv/err" ] && diag "$(cat "$T/priv/err")"
is "$($NS ls -A "$T/priv/rootfs" | wc -l)" 0 "... which the daemon's namespace shows as an empty directory"
wait_until 20 sh -c "$NS $OCI --root /run/sbx-oci-direct state priv1 2>/dev/null | grep -q '\"stopped\"'"
is "$(cat "$T/priv/out")" from-private-mount "its process saw the rootfs's files (the tree the runtime sent)"
rt delete --force priv1 2>/dev/null

mkdir -p "$T/esc"
ln -s /etc "$T/esc/rootfs"
cp "$T/rel/config.json" "$T/esc/config.json"
rt create --bundle "$T/esc" --pid-file "$T/esc/pid" esc1 >/dev/null 2>&1
is "$?" 1 "create with a root.path whose symlink leads out of the bundle fails"
like "$(tail -n 1 "$T/direct.log" | jq -r .msg)" "root.path.*leads out of the bundle" "naming root.path"

# ---- containerd ------------------------------------------------------------------------------
mkdir -p "$T/ctrd"
cat >"$T/ctrd/config.toml" <<EOF
version = 2
root = "$T/ctrd/root"
state = "/run/ctrd-test"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$T/ctrd/sock"
EOF
$NS env TMPDIR="$T/tmp" containerd --config "$T/ctrd/config.toml" >"$T/ctrd/log" 2>&1 &
CTRD_PID=$!
c() { $NS env TMPDIR="$T/tmp" timeout 120 ctr --address "$T/ctrd/sock" "$@"; }
wait_until 20 c version >/dev/null 2>&1 || { nok "containerd answers"; diag "$(tail -5 "$T/ctrd/log")"; exit 0; }
pod save --format oci-archive -o "$T/img-oci.tar" localhost/sbx-oci-test >/dev/null 2>&1
check "ctr imports the image (saved by podman as an OCI archive)" c images import --snapshotter native --base-name localhost/sbx-oci-test "$T/img-oci.tar"
img=$(c images ls -q | grep sbx-oci-test | head -1)
out=$(c run --snapshotter native --runc-binary "$T/sandboxd-oci" --rm "$img" c1 sh -c 'echo hi; exit 6' 2>"$T/err"); rc=$?
is "$rc" 6 "ctr run --runc-binary sandboxd-oci returns the container's status (6)"
is "$out" hi "its output came through the shim's fds"
[ "$rc" = 6 ] || diag "$(cat "$T/err")"
c run -d --snapshotter native --runc-binary "$T/sandboxd-oci" "$img" c2 sh -c 'trap "exit 9" TERM; while :; do sleep 1; done' 2>"$T/err"
wait_until 10 sh -c "ctr --address $T/ctrd/sock task ls 2>/dev/null | grep -q 'c2.*RUNNING'" 2>/dev/null ||
        $NS true
is "$(c task ls | awk '$1 == "c2" {print $3}')" RUNNING "ctr run -d: the task is RUNNING"
pids=$(c task ps c2 2>/dev/null | tail -n +2 | wc -l)
check "ctr task ps lists its processes (sandboxd-oci ps)" test "$pids" -ge 1
check "ctr task kill sends TERM" c task kill c2
wait_until 10 sh -c "$NS ctr --address $T/ctrd/sock task ls 2>/dev/null | grep -q 'c2.*STOPPED'"
is "$(c task ls | awk '$1 == "c2" {print $3}')" STOPPED "then the task is STOPPED"
out=$(c task delete c2 2>&1)
like "$out" "exit code 9" "ctr task delete reports the TERM trap's exit status 9"
c containers rm c2 >/dev/null 2>&1
is "$(rpc '{"op":"list"}' | jq '.sandboxes | length')" 0 "no sandbox is left"
kill "$CTRD_PID"; wait "$CTRD_PID" 2>/dev/null; CTRD_PID=

pod rm -af >/dev/null 2>&1
stop_daemon
true
