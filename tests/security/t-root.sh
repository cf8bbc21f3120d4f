#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# What a sandbox sees of the host's tree (issue 17 case 6, docs/security.md "What a sandbox
# sees"): /usr, /etc and the merged-/usr links, each bound without the mounts below it, the
# sandbox's own /proc, /dev, /tmp, /run, /work, /sys and /var (with /var/tmp), and the
# configured root_binds, read-only; nothing of /home, /root, /var/lib, /srv, /opt, /mnt, /media,
# /boot; no procfs or sysfs the host mounted anywhere; bad root_binds refused at start.
# The host-side mounts are made in the daemon's own mount namespace (unshare --mount
# --propagation private, set up by a wrapper that then execs sandboxd): the host's own mount
# table is never touched, and the directories they cover are only hidden from the daemon.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

command -v unshare >/dev/null || skip_all "unshare is not installed"
for d in /usr/local /srv /opt; do
        [ -d "$d" ] || skip_all "no $d on this host"
done
ETCDIR=$(find /etc -mindepth 1 -maxdepth 1 -type d ! -name '.*' ! -name sandboxd | sort | head -n1)
[ -n "$ETCDIR" ] || skip_all "no directory in /etc"
# A directory of /usr's own filesystem that nothing here runs from, for a mount made later.
LATEDIR=
for d in /usr/src /usr/games /usr/include; do
        [ -d "$d" ] && [ "$(stat -c %d "$d")" = "$(stat -c %d /usr)" ] && { LATEDIR=$d; break; }
done
SANDBOXD_BIN=$SANDBOXD
export ETCDIR LATEDIR SANDBOXD_BIN

cat >"$T/ns-setup.sh" <<'EOF'
#!/bin/sh
# In the daemon's private mount namespace: a tmpfs below /usr with a procfs below that, a procfs
# on a directory of /etc and on /srv, a sysfs on /media, and on /opt a tmpfs holding the
# root_binds entry sbxt-tools (with a procfs and a tmpfs below it) and a directory beside it.
# Everything is made shared again within this namespace (new peer groups of its own: nothing
# reaches the host), so that a mount made later would propagate into a copy that is not private.
set -e
mount --make-rshared /
mount -t tmpfs -o size=1m sbxt-root-usr /usr/local
echo usr-marker >/usr/local/sbxt-marker
mkdir /usr/local/proc-below
mount -t proc proc /usr/local/proc-below
mount -t proc proc "$ETCDIR"
mount -t proc proc /srv
[ ! -d /media ] || mount -t sysfs sysfs /media
mount -t tmpfs -o size=1m sbxt-root-opt /opt
mkdir -p /opt/sbxt-tools/proc /opt/sbxt-tools/sub /opt/other
printf '#!/bin/sh\necho tool-ran\n' >/opt/sbxt-tools/tool
chmod 0755 /opt/sbxt-tools/tool
echo other >/opt/other/file
ln -s /usr /opt/link
mount -t proc proc /opt/sbxt-tools/proc
mount -t tmpfs -o size=1m sbxt-root-sub /opt/sbxt-tools/sub
echo sub-marker >/opt/sbxt-tools/sub/marker
exec "$SANDBOXD_BIN" "$@"
EOF
printf '#!/bin/sh\nexec unshare --mount --propagation private "%s" "$@"\n' "$T/ns-setup.sh" >"$T/sandboxd-ns"
chmod 0755 "$T/ns-setup.sh" "$T/sandboxd-ns"
SANDBOXD=$T/sandboxd-ns

# ---- root_binds checked at start --------------------------------------------------------------
# check_conf VALUE: sandboxd --check-config on a file with root_binds = VALUE (in such a
# namespace); prints its status and its message.
check_conf() {
        printf 'root_binds = %s\n' "$1" >"$T/check.conf"
        "$SANDBOXD" --check-config --config "$T/check.conf" >"$T/check.out" 2>&1
        echo "$? $(tr '\n' ' ' <"$T/check.out")"
}
like "$(check_conf /opt/sbxt-tools)" "^0 .*valid" "root_binds = /opt/sbxt-tools: the configuration is valid"
like "$(check_conf '/opt/sbxt-tools /opt/other')" "^0 " "root_binds with two directories is valid"
while IFS='|' read -r value why; do
        like "$(check_conf "$value")" "^[1-9][0-9]* .*root_binds.*$why" "root_binds = $value is refused at start ($why)"
done <<EOF
opt/sbxt-tools|expected absolute paths
/opt/../etc|expected absolute paths
/opt/sbxt-tools/|expected absolute paths
//opt/sbxt-tools|expected absolute paths
/opt/./sbxt-tools|expected absolute paths
/nonexistent-sbxt|No such file or directory
/etc/passwd|not a directory
/opt/link|symbolic link
/opt/link/share|symbolic link
/srv|kernel interface
/opt/sbxt-tools/proc|kernel interface
/tmp|sandbox's own
/tmp/x|sandbox's own
/var/tmp/x|sandbox's own
/proc/sys|sandbox's own
/work|sandbox's own
/usr|bound already
/etc|bound already
/var|below it
/|sandbox's own
/opt/sbxt-tools /opt/sbxt-tools|given twice
$(seq -f '/opt/d%g' 1 17 | tr '\n' ' ')|at most 16
EOF
printf 'root_binds = /nonexistent-sbxt\n' >"$T/bad.conf"
mkdir -p "$T/bad-state"
timeout 20 "$SANDBOXD" --config "$T/bad.conf" --listen "$T/bad.sock" --state-dir "$T/bad-state" --cgroup-root "$CG" \
        --pool-size 0 >"$T/bad.out" 2>&1
rc=$?
check "sandboxd itself refuses to start with a root_binds entry that does not exist (status $rc)" \
        [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "root_binds: /nonexistent-sbxt" "$T/bad.out"
[ -S "$T/bad.sock" ] && nok "... and never listened" || ok "... and never listened"

# ---- What a sandbox sees ------------------------------------------------------------------------
printf 'root_binds = /opt/sbxt-tools\n' >"$T/root.conf"
start_daemon --config "$T/root.conf" || exit 0
HOST_USR_LOCAL=$(ls -A /usr/local | tr '\n' ' ')
HOST_ETCDIR=$(ls -A "$ETCDIR" | tr '\n' ' ')
export HOST_USR_LOCAL HOST_ETCDIR

run_py "root" 180 <<'PYEOF'
import os, re, subprocess
from client import Conn, check, is_
c = Conn(os.environ["SOCK"], 60)
etcdir = os.environ["ETCDIR"]
sb = c.call({"op": "create", "best_effort": True, "name": "root"})["sandbox"]

def sh(cmd, user=None, throwaway=False):
    req = {"op": "run", "command": cmd}
    if throwaway:
        req["best_effort"] = True
    else:
        req["sandbox"] = sb["id"]
    if user:
        req["user"] = user
    r = c.call(req, 60)
    if r.get("ok") is not True:
        print("# run failed: %r" % r)
    return r.get("exit_code"), r.get("stdout") or "", r.get("stderr") or ""

base = [n for n in ("bin", "sbin", "lib", "lib32", "lib64", "libx32") if os.path.lexists("/" + n)]
expected_root = sorted(base + ["dev", "etc", "home", "opt", "proc", "root", "run", "sys", "tmp", "usr", "var", "work"])
for user, throwaway in ((None, False), ("root", False), (None, True)):
    who = "%s%s" % (user or "sandbox", ", throwaway" if throwaway else "")
    code, out, err = sh("ls -A /; echo --; ls -A /var /home /root /opt; echo --; "
                        "ls -d /srv /mnt /media /boot /var/lib /var/cache /var/log 2>&1 | grep -c 'No such file'", user, throwaway)
    parts = out.split("--\n")
    is_(parts[0].split(), expected_root, "%s: / holds /usr, /etc, the merged-/usr links, the sandbox's own "
        "directories and the root_binds entry's parent, nothing else of the host" % who)
    is_(parts[1:2], ["/home:\n\n/opt:\nsbxt-tools\n\n/root:\n\n/var:\nrun\ntmp\n"],
        "%s: /home and /root are empty, /var holds only run and tmp, /opt only the root_binds entry" % who)
    is_(parts[2:3], ["7\n"], "%s: no /srv, /mnt, /media, /boot, /var/lib, /var/cache, /var/log" % who)
    code, out, err = sh("cat /usr/local/sbxt-marker; ls -A /usr/local | tr '\\n' ' '", user, throwaway)
    is_((out, "sbxt-marker" in err or "No such file" in err), (os.environ["HOST_USR_LOCAL"], True),
        "%s: a tmpfs the host mounted on /usr/local is not visible: the directory below it is" % who)
    code, out, err = sh("ls -A %s | tr '\\n' ' '; cat %s/1/cmdline /usr/local/proc-below/1/cmdline "
                        "/srv/1/cmdline /opt/sbxt-tools/proc/1/cmdline 2>/dev/null | wc -c" % (etcdir, etcdir), user, throwaway)
    is_(out, os.environ["HOST_ETCDIR"] + "0\n",
        "%s: procfs mounted by the host on %s, below /usr/local, on /srv and below a root_binds entry: none "
        "visible, host pid 1's command line unreadable" % (who, etcdir))
    code, out, err = sh("cat /proc/self/mountinfo", user, throwaway)
    bad = []
    for line in out.splitlines():
        f = line.split()
        sep = f.index("-")
        point, fstype, source = f[4], f[sep + 1], f[sep + 2]
        if (fstype == "proc" and not re.match(r"/proc(/|$)", point)) or (fstype == "sysfs" and point != "/sys") \
                or (source.startswith("sbxt-root") and point != "/opt/sbxt-tools") or point.startswith(("/srv", "/media", "/mnt", "/home", "/boot")):
            bad.append(line)
    is_(bad, [], "%s: the mount table inside has procfs only at /proc, sysfs only at /sys, none of the host's "
        "test mounts but the root_binds entry" % who)
    code, out, err = sh("/opt/sbxt-tools/tool; ls -A /opt/sbxt-tools/proc /opt/sbxt-tools/sub | grep -vc ':$\\|^$'; "
                        "(echo x > /opt/sbxt-tools/x) 2>&1; ls /opt/other 2>&1 | grep -c 'No such'", user, throwaway)
    lines = out.splitlines()
    check(lines[:2] == ["tool-ran", "0"] and "Read-only file system" in out and lines[-1:] == ["1"],
          "%s: the root_binds entry is visible and runs, read-only, without the procfs and tmpfs below it, "
          "and nothing beside it" % who, out, err)
    code, out, err = sh("echo t > /var/tmp/sbxt-t && cat /tmp/sbxt-t", user, throwaway)
    is_(out, "t\n", "%s: /var/tmp is writable, and is the sandbox's /tmp" % who)
code, out, err = sh("cat /proc/self/mountinfo")
e = [l.split() for l in out.splitlines() if l.split()[4] in ("/usr", "/etc", "/opt/sbxt-tools")]
check(len(e) == 3 and all("ro" in l[5].split(",") and "nosuid" in l[5].split(",") and "nodev" in l[5].split(",") for l in e),
      "/usr, /etc and the root_binds entry are single read-only, nosuid, nodev mounts", e)
late = os.environ["LATEDIR"]
if late:
    subprocess.run(["nsenter", "-t", os.environ["DAEMON_PID"], "-m", "sh", "-c",
                    "mount -t tmpfs -o size=1m sbxt-root-late %s && echo late > %s/sbxt-late" % (late, late)], check=True)
    try:
        for user in (None, "root"):
            code, out, err = sh("cat %s/sbxt-late 2>&1; grep -c sbxt-root-late /proc/self/mountinfo" % late, user)
            check("No such file" in out and out.endswith("\n0\n"),
                  "%s: a mount the host makes on %s after the sandbox started does not propagate into it"
                  % (user or "sandbox", late), out, err)
    finally:
        subprocess.run(["nsenter", "-t", os.environ["DAEMON_PID"], "-m", "umount", late])
c.call({"op": "destroy", "sandbox": sb["id"]}, 60)
c.close()
PYEOF

stop_daemon
