#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# sandboxctl cp, cat, ls without sandboxd (its file operations are not built yet): the SRC/DST
# forms and their errors, then every shape of docker cp end to end against
# tests/fake-files-daemon.py, a stand-in that maps a sandbox's paths onto a directory and checks
# that each fd arrives with the line that claims it. What the real daemon does inside a sandbox
# (resolution, the helper, limits) is not tested here: docs/design/files.md, section 8.
# Needs python3 and tar; no root. Prints TAP, exits 0.
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
SANDBOXCTL=$top_builddir/ctl/sandboxctl
[ -x "$SANDBOXCTL" ] || SANDBOXCTL=$top_srcdir/build/ctl/sandboxctl

n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; fi; }

T=$(mktemp -d "${TMPDIR:-/tmp}/sbxt-ctl-files.XXXXXX") || { echo "1..0 # SKIP mktemp failed"; exit 0; }
FAKE=
cleanup() {
        [ -n "$FAKE" ] && kill "$FAKE" 2>/dev/null && wait "$FAKE" 2>/dev/null
        rm -rf "$T"
        echo "1..$n"
        exit 0
}
trap cleanup EXIT
command -v python3 >/dev/null && command -v tar >/dev/null || { echo "# SKIP python3 or tar missing"; exit 0; }

# fails DESCRIPTION WANT-IN-STDERR ARGS...: sandboxctl exits 1 with that message, before any
# connection (the socket does not exist: a form accepted would say so instead).
fails() {
        local d=$1 want=$2 out rc
        shift 2
        out=$("$SANDBOXCTL" --socket "$T/none.sock" "$@" 2>&1 </dev/null); rc=$?
        if [ "$rc" = 1 ] && [[ $out == *"$want"* ]]; then ok "$d"; else nok "$d"; printf '# rc %s: %s\n' "$rc" "$out"; fi
}
# accepted DESCRIPTION ARGS...: the form parses; the run stops at the missing socket.
accepted() {
        local d=$1 out
        shift
        out=$("$SANDBOXCTL" --socket "$T/none.sock" "$@" 2>&1 </dev/null)
        if [[ $out == *"no sandboxd socket at $T/none.sock"* ]]; then ok "$d"; else nok "$d"; printf '# %s\n' "$out"; fi
}

fails "cp with both sides local" "both paths are local" cp a b
fails "cp with - on both sides" "'-' on both sides" cp - -
fails "cp between two sandboxes" "both paths are in sandboxes" cp sb1:/x sb2:/y
fails "cp SBX: without a path" "the path in the sandbox is missing" cp sb: .
fails "cp with a sandbox part that cannot be a name" "is not a sandbox id or name" cp 'a b:/x' .
fails "cp with an empty SRC" "an empty path" cp '' sb:/x
fails "cp with one argument" "missing argument" cp sb:/x
fails "cp with three arguments" "unexpected argument" cp sb:/x . extra
fails "cp with an unknown option" "unrecognized option" cp --bogus sb:/x .
accepted "cp SBX:PATH to a local path" cp sb:/work/out .
accepted "cp a local path to SBX:PATH (relative to /work)" cp ./x sb:out
accepted "cp a local name with a colon written ./a:b" cp ./a:b sb:/work/
accepted "cp an absolute local path with a colon" cp /tmp/a:b sb:/work/
accepted "cp - SBX:DIR (a tar stream in)" cp - sb-1.x_y:/work
accepted "cp SBX:PATH - (a tar stream out)" cp sb:/work -
accepted "cp with UID/NAME" cp 1000/build:/work/x .
accepted "cp -L and -q" cp -L -q sb:/work/link .
fails "cat without a path" "missing argument" cat sb
fails "cat with a bad --offset" "invalid size" cat --offset 1Q sb /x
fails "cat --json" "does not apply" cat --json sb /x
accepted "cat SANDBOX PATH PATH" cat sb /a /b
fails "ls without a sandbox" "missing argument" ls
fails "ls with two paths" "unexpected argument" ls sb /a /b
accepted "ls -l -R SANDBOX PATH" ls -l -R sb /work

# ---- End to end against the stand-in ------------------------------------------------------
R=$T/root          # the stand-in's view of the sandbox: $R/work is /work
mkdir -p "$R/work" "$T/host"
python3 "$top_srcdir/tests/fake-files-daemon.py" "$T/sock" "$R" "$T/log" 2>"$T/fake.err" &
FAKE=$!
for _ in $(seq 50); do [ -S "$T/sock" ] && break; sleep 0.1; done
check "the stand-in daemon listens" test -S "$T/sock"
ctl() { "$SANDBOXCTL" --socket "$T/sock" "$@"; }
last_request() { tail -n 1 "$T/log"; }

# A file in: every byte value, 3 MiB, mode kept.
head -c 3145728 /dev/urandom >"$T/host/blob"
chmod 0640 "$T/host/blob"
check "cp FILE SBX:/work/blob exits 0" ctl cp "$T/host/blob" sb:/work/blob
check "... the bytes arrived unchanged" cmp -s "$T/host/blob" "$R/work/blob"
check "... with the mode 0640" test "$(stat -c %a "$R/work/blob")" = 640
req=$(last_request)
check "... as file.write with the fd on its own line (fds 1, fd 0, size)" \
        python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(not (r["op"]=="file.write" and r["fds"]==1 and r["fd"]==0 and r["size"]==3145728 and "data" not in r))' "$req"

# Into an existing directory: DIR/basename.
mkdir -p "$R/work/dir"
check "cp FILE SBX:/work/dir (a directory) lands as /work/dir/blob" \
        sh -c 'ctl() { "$0" --socket "$1" "$@"; }; "$0" --socket "$1" cp "$2" sb:/work/dir && cmp -s "$2" "$3"' \
        "$SANDBOXCTL" "$T/sock" "$T/host/blob" "$R/work/dir/blob"
check "cp FILE SBX:/work/missing/ (trailing /, not a directory) fails" \
        sh -c '! "$0" --socket "$1" cp "$2" sb:/work/missing/ 2>/dev/null' "$SANDBOXCTL" "$T/sock" "$T/host/blob"

# A tree in: new name (contents), existing directory (the directory itself), "/." (contents).
mkdir -p "$T/host/src/sub/deep"
echo one >"$T/host/src/a.txt"
printf 'caf\xc3\xa9\n' >"$T/host/src/sub/é.txt"
ln -s a.txt "$T/host/src/link"
ln -s /etc/passwd "$T/host/src/abs-link"
echo deep >"$T/host/src/sub/deep/d"
check "cp DIR SBX:/work/newtree exits 0" ctl cp "$T/host/src" sb:/work/newtree
check "... the new directory holds the tree's contents (diff -r)" diff -r --no-dereference "$T/host/src" "$R/work/newtree"
check "... symlinks are links, not copies of their targets" test "$(readlink "$R/work/newtree/abs-link")" = /etc/passwd
check "... sent as file.put with the pipe's fd" \
        python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(not (r["op"]=="file.put" and r["fds"]==1 and r["path"]=="/work/newtree"))' "$(last_request)"
check "cp DIR SBX:/work/dir (exists) puts the directory into it" ctl cp "$T/host/src" sb:/work/dir
check "... as /work/dir/src" diff -r --no-dereference "$T/host/src" "$R/work/dir/src"
mkdir -p "$R/work/flat"
check "cp DIR/. SBX:/work/flat copies the contents" ctl cp "$T/host/src/." sb:/work/flat
check "... /work/flat/a.txt, not /work/flat/src" sh -c 'test -f "$0/a.txt" && ! test -e "$0/src"' "$R/work/flat"

# Out: a file to a new name, a file into a directory, a tree to a new name and into a directory.
check "cp SBX:/work/blob FILE exits 0" ctl cp sb:/work/blob "$T/host/back"
check "... same bytes" cmp -s "$T/host/blob" "$T/host/back"
check "... mode 0640" test "$(stat -c %a "$T/host/back")" = 640
ln -s blob "$R/work/bloblink"
check "cp -L SBX:SYMLINK FILE copies the file the link names (read through it, in the sandbox)" \
        sh -c '"$0" --socket "$1" cp -L sb:/work/bloblink "$2" && cmp -s "$3" "$2"' "$SANDBOXCTL" "$T/sock" "$T/host/via-link" "$T/host/blob"
out=$(timeout 20 "$SANDBOXCTL" --socket "$T/sock" cp sb:/work/bloblink "$T/host/new-link" 2>&1 </dev/null)
check "cp SBX:SYMLINK NEW (no -L) fails, names -L and leaves nothing ($out)" \
        sh -c '[ "$0" = 1 ] && [ ! -e "$2" ] && [ ! -L "$2" ] && case $1 in *"is a symlink"*"-L"*) ;; *) exit 1;; esac' \
        "$(timeout 20 "$SANDBOXCTL" --socket "$T/sock" cp sb:/work/bloblink "$T/host/new-link" >/dev/null 2>&1 </dev/null; echo $?)" \
        "$out" "$T/host/new-link"
: >"$R/work/unreadable"
check "cp SBX:FILE NEW that the sandbox refuses to read fails and leaves no empty NEW behind" \
        sh -c '! "$0" --socket "$1" cp sb:/work/unreadable "$2" 2>/dev/null && test ! -e "$2"' "$SANDBOXCTL" "$T/sock" "$T/host/unreadable"
check "... sent as file.read with the file's fd" \
        python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(not (r["op"]=="file.read" and r["fds"]==1))' "$(last_request)"
mkdir -p "$T/host/outdir"
check "cp SBX:/work/blob DIR lands as DIR/blob" sh -c '"$0" --socket "$1" cp sb:/work/blob "$2" && cmp -s "$3" "$2/blob"' \
        "$SANDBOXCTL" "$T/sock" "$T/host/outdir" "$T/host/blob"
check "cp SBX:/work/newtree NEWDIR makes NEWDIR with the tree's contents" ctl cp sb:/work/newtree "$T/host/tree-copy"
check "... diff -r against the original" diff -r --no-dereference "$T/host/src" "$T/host/tree-copy"
check "cp SBX:/work/newtree DIR puts it in as DIR/newtree" ctl cp sb:/work/newtree "$T/host/outdir"
check "... diff -r" diff -r --no-dereference "$T/host/src" "$T/host/outdir/newtree"
check "cp SBX:/work/nothing . fails with the daemon's not_found" \
        sh -c '"$0" --socket "$1" cp sb:/work/nothing "$2" 2>&1 | grep -q "no such file"' "$SANDBOXCTL" "$T/sock" "$T/host"

# Streams: tar on stdout and stdin.
check "cp SBX:/work/newtree - writes a tar stream that lists the tree" \
        sh -c '"$0" --socket "$1" cp sb:/work/newtree - | tar -t | grep -qx "newtree/sub/deep/d"' "$SANDBOXCTL" "$T/sock"
if command -v script >/dev/null; then
        check "cp SBX:PATH - to a terminal is refused" \
                sh -c 'script -qec "$0 --socket $1 cp sb:/work/newtree -" /dev/null | grep -q "refusing to write a tar stream to a terminal"' \
                "$SANDBOXCTL" "$T/sock"
        # stderr a terminal: the progress events of the write are drawn as a bar, then cleared.
        script -qec "$SANDBOXCTL --socket $T/sock cp $T/host/blob sb:/work/blob2" /dev/null >"$T/tty.out"
        check "on a terminal, cp draws a progress bar from the daemon's progress events" grep -q '\[#*\.*\] 100%' "$T/tty.out"
        check "... and clears it at the end" grep -q "$(printf '\r\033\\[K')" "$T/tty.out"
        script -qec "$SANDBOXCTL --socket $T/sock cp -q $T/host/blob sb:/work/blob3" /dev/null >"$T/tty-q.out"
        check "... not with -q" sh -c '! grep -q "100%" "$0"' "$T/tty-q.out"
else
        ok "# SKIP script(1) is not installed: the terminal cases (bar, refusal) are not checked"
fi
mkdir -p "$R/work/fromstdin"
check "tar -c | cp - SBX:/work/fromstdin" \
        sh -c 'tar -c -C "$2" . | "$0" --socket "$1" cp - sb:/work/fromstdin' "$SANDBOXCTL" "$T/sock" "$T/host/src"
check "... unpacked there" diff -r --no-dereference "$T/host/src" "$R/work/fromstdin"
check "printf | cp - SBX:/work/one.txt (not a directory): stdin is that file's content" \
        sh -c 'printf "from stdin\n" | "$0" --socket "$1" cp - sb:/work/one.txt' "$SANDBOXCTL" "$T/sock"
check "... written from the pipe's fd" \
        sh -c 'test "$(cat "$0")" = "from stdin" && python3 -c "import json,sys; r=json.loads(sys.argv[1]); sys.exit(not (r[\"op\"]==\"file.write\" and r[\"fds\"]==1 and r[\"path\"]==\"/work/one.txt\"))" "$1"' \
        "$R/work/one.txt" "$(last_request)"

# cat and ls.
check "cat to a pipe: the bytes, through the passed fd" sh -c '"$0" --socket "$1" cat sb /work/blob | cmp -s - "$2"' \
        "$SANDBOXCTL" "$T/sock" "$T/host/blob"
check "ls /work/newtree lists the names, one a line" \
        sh -c 'test "$("$0" --socket "$1" ls sb /work/newtree | tr "\n" " ")" = "a.txt abs-link link sub "' "$SANDBOXCTL" "$T/sock"
check "ls -l shows types, modes and link targets" \
        sh -c '"$0" --socket "$1" ls -l sb /work/newtree | grep -q "^l.* link -> a.txt$"' "$SANDBOXCTL" "$T/sock"

# Out, whatever the stream says: no setuid, setgid or sticky bit on the host (GNU tar as root
# would keep them; the stand-in's tar -c sends them).
mkdir -p "$R/work/modes/gdir" "$R/work/modes/tdir"
printf 'tool' >"$R/work/modes/tool" && chmod 4755 "$R/work/modes/tool" && chmod 2775 "$R/work/modes/gdir" &&
        chmod 1777 "$R/work/modes/tdir" && printf 'g' >"$R/work/modes/gdir/sg" && chmod 2755 "$R/work/modes/gdir/sg"
check "cp SBX:TREE with setuid, setgid and sticky modes out exits 0" ctl cp sb:/work/modes "$T/host/modes-out"
check "... nothing on the host has a setuid, setgid or sticky bit" \
        sh -c 'test -f "$0/tool" && test -z "$(find "$0" -perm /7000)"' "$T/host/modes-out"
check "... the rest of the mode kept (tool 0755)" test "$(stat -c %a "$T/host/modes-out/tool")" = 755
mkdir -m 0700 "$T/host/modes-into"
check "cp SBX:TREE/. into an existing directory: its mode stays the host's" \
        sh -c '"$0" --socket "$1" cp sb:/work/modes/tdir/. "$2" && test "$(stat -c %a "$2")" = 700' \
        "$SANDBOXCTL" "$T/sock" "$T/host/modes-into"
cp "$T/host/blob" "$T/host/was-suid" && chmod 4755 "$T/host/was-suid"
check "cp SBX:FILE over an existing setuid file exits 0" ctl cp sb:/work/blob "$T/host/was-suid"
check "... the file keeps no setuid bit" test "$(stat -c %a "$T/host/was-suid")" = 755

# Out, never through a link on the host: a symlink an earlier copy out left (one to a directory,
# one to a file) is not followed as DST, at DST, or on the way to DST; a tree over it replaces it.
mkdir -p "$T/host/victim" "$T/host/o9"
ln -s "$T/host/victim" "$R/work/dlink" && ln -s "$T/host/victim/f" "$R/work/flink"
check "cp SBX:SYMLINK DIR/ leaves a symlink on the host (an earlier copy out)" \
        sh -c '"$0" --socket "$1" cp sb:/work/dlink "$2/" && "$0" --socket "$1" cp sb:/work/flink "$2/" && test -L "$2/dlink" && test -L "$2/flink"' \
        "$SANDBOXCTL" "$T/sock" "$T/host/o9"
refused9() {
        local d=$1 out
        shift
        out=$(timeout 20 "$SANDBOXCTL" --socket "$T/sock" cp "$@" 2>&1 </dev/null)
        if [ $? = 1 ] && [[ $out == *symlink* ]]; then ok "$d"; else nok "$d"; printf '# %s\n' "$out"; fi
}
refused9 "cp SBX:FILE onto a symlink to a directory: refused" sb:/work/blob "$T/host/o9/dlink"
refused9 "cp SBX:FILE into a symlink to a directory (DST/): refused" sb:/work/blob "$T/host/o9/dlink/"
refused9 "cp SBX:FILE to a new name beneath a symlink: refused" sb:/work/blob "$T/host/o9/dlink/new"
refused9 "cp SBX:FILE onto a symlink to a file: refused" sb:/work/blob "$T/host/o9/flink"
refused9 "cp SBX:TREE into a symlink to a directory: refused" sb:/work/newtree "$T/host/o9/dlink"
refused9 "cp SBX:TREE to a new name beneath a symlink: refused" sb:/work/newtree "$T/host/o9/dlink/t"
check "... nothing was written where the links point" sh -c 'test -z "$(ls -A "$0")"' "$T/host/victim"
mkfifo "$T/host/o9/fifo"
check "cp SBX:FILE onto a FIFO: refused, without blocking" \
        sh -c '! timeout 20 "$0" --socket "$1" cp sb:/work/blob "$2" 2>/dev/null && test -p "$2"' \
        "$SANDBOXCTL" "$T/sock" "$T/host/o9/fifo"
mkdir -p "$T/host/o9b/tree" "$R/work/tree/dlink" && echo planted >"$R/work/tree/dlink/passwd"
ln -s "$T/host/victim" "$T/host/o9b/tree/dlink" && echo new >"$R/work/tree/g" && ln -s "$T/host/victim/g" "$T/host/o9b/tree/g"
check "cp SBX:TREE DIR where DIR/TREE/dlink and DIR/TREE/g are symlinks, a directory and a file in the tree" \
        ctl cp sb:/work/tree "$T/host/o9b"
check "... the links were replaced by the directory and the file, nothing written through them" \
        sh -c 'test ! -L "$0/tree/dlink" && test -f "$0/tree/dlink/passwd" && test ! -L "$0/tree/g" && test -z "$(ls -A "$1")"' \
        "$T/host/o9b" "$T/host/victim"

check "the stand-in saw no fd left unclaimed, no malformed line" sh -c '! grep -q . "$0"' "$T/fake.err"
[ -s "$T/fake.err" ] && sed 's/^/# /' "$T/fake.err"
