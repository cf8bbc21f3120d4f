#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# contrib/bash-completion/sandboxctl: sourced in this bash, driven through COMP_WORDS/COMP_CWORD
# like readline would, COMPREPLY checked. Needs no daemon: live sandboxes come from a stand-in
# program that prints what `sandboxctl list -q` and `sandboxctl --json list` would. Also checks
# that the options it offers are exactly those of each verb's --help. Prints TAP; exits 0.
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
SANDBOXCTL=$top_builddir/ctl/sandboxctl
[ -x "$SANDBOXCTL" ] || SANDBOXCTL=$top_srcdir/build/ctl/sandboxctl

n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; }
is() {
        if [ "$1" = "$2" ]; then ok "$3"; else nok "$3"; printf '# got:      %s\n# expected: %s\n' "$1" "$2"; fi
}

T=$(mktemp -d "${TMPDIR:-/tmp}/sbxt-completion.XXXXXX") || { echo "1..0 # SKIP mktemp failed"; exit 0; }
trap 'rm -rf "$T"; echo "1..$n"; exit 0' EXIT

# shellcheck source=../contrib/bash-completion/sandboxctl
. "$top_srcdir/contrib/bash-completion/sandboxctl"
is "$(complete -p sandboxctl 2>&1)" "complete -F _sandboxctl sandboxctl" "the file registers _sandboxctl for sandboxctl"

# comp WORD... : completes the last word (may be ""); prints COMPREPLY sorted, space-separated.
comp() {
        COMP_WORDS=("$@")
        COMP_CWORD=$(($# - 1))
        COMP_LINE="$*"
        COMP_POINT=${#COMP_LINE}
        _sandboxctl sandboxctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
        printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
}

is "$(comp sandboxctl r)" "reattach restore rm run" "sandboxctl r<TAB> -> reattach restore rm run"
is "$(comp sandboxctl run --ti)" "--timeout" "sandboxctl run --ti<TAB> -> --timeout"
is "$(comp sandboxctl '')" "attach call cat cp create destroy doctor exec health hello help image inspect kill list ls network port reattach restore rm run session sessions shell snapshot snapshot-delete snapshots status sweep top" "sandboxctl <TAB> -> every verb"
is "$(comp sandboxctl exec -i)" "-i" "sandboxctl exec -i<TAB> -> -i"
is "$(comp sandboxctl shell --be)" "--best-effort" "sandboxctl shell --be<TAB> -> --best-effort"
is "$(comp sandboxctl --v)" "--version" "sandboxctl --v<TAB> -> --version"
is "$(comp sandboxctl --socket /tmp/x.sock cr)" "create" "a --socket PATH before the verb is skipped"
is "$(comp sandboxctl --json h)" "health hello help" "sandboxctl --json h<TAB> -> health hello help"
is "$(comp sandboxctl create --be)" "--best-effort" "create --be<TAB> -> --best-effort"
is "$(comp sandboxctl run --cpu)" "--cpu-time --cpus" "run --cpu<TAB> -> --cpu-time --cpus"
is "$(comp sandboxctl list -)" "--help --json --quiet --socket -h -q" "list -<TAB> -> its options and the common ones"
is "$(comp sandboxctl kill -s T)" "TERM" "kill -s T<TAB> -> TERM"
is "$(comp sandboxctl kill --signal K)" "KILL" "kill --signal K<TAB> -> KILL"
is "$(comp sandboxctl reattach -)" "--help --json --socket --verbose -h -v" "reattach -<TAB> -> -v and the common options"
is "$(comp sandboxctl create --network '')" "none" "create --network <TAB> -> none"
is "$(comp sandboxctl run --workspace '')" "disk memory" "run --workspace <TAB> -> disk memory"
is "$(comp sandboxctl run --user '')" "root sandbox" "run --user <TAB> -> root sandbox"
is "$(comp sandboxctl help de)" "destroy" "help de<TAB> -> destroy"
is "$(comp sandboxctl top --sort '')" "cpu disk mem name pids" "top --sort <TAB> -> its keys"
is "$(comp sandboxctl top --o)" "--once" "top --o<TAB> -> --once"
is "$(comp sandboxctl top -n --x)" "" "the value of -n is not completed as an option"
is "$(comp sandboxctl do)" "doctor" "sandboxctl do<TAB> -> doctor"
is "$(comp sandboxctl doctor --st)" "--state-dir" "doctor --st<TAB> -> --state-dir"
is "$(comp sandboxctl help destroy '')" "" "help takes one verb"
is "$(comp sandboxctl run --timeout --x)" "" "the value of --timeout is not completed as an option"
is "$(comp sandboxctl run -- --ti)" "" "after -- in run, words are the command's, not options"

# ---- live sandboxes, from a stand-in program ---------------------------------------------
cat >"$T/fakectl" <<'FAKE'
#!/bin/sh
echo "$*" >>"${0%/*}/calls"
case "$*" in
*"--json list") printf '%s\n' '{"id":1,"ok":true,"sandboxes":[{"id":"sbx-0123456789ab","name":"build","state":"ready"},' \
        ' {"id":"sbx-ba9876543210", "name": "web.1", "state":"ready"},{"id":"sbx-aaaaaaaaaaaa","name":null}]}' ;;
*"list -q") printf '%s\n' sbx-0123456789ab sbx-ba9876543210 sbx-aaaaaaaaaaaa ;;
*"snapshots -q build") printf '%s\n' snap-000000000001 snap-000000000002 ;;
*) exit 1 ;;
esac
FAKE
chmod +x "$T/fakectl"
fake() { local w=("$@"); w[0]=$T/fakectl; comp "${w[@]}"; }
all="build sbx-0123456789ab sbx-aaaaaaaaaaaa sbx-ba9876543210 web.1"
is "$(fake sandboxctl inspect '')" "$all" "inspect <TAB> -> ids and names of the live sandboxes"
is "$(fake sandboxctl destroy sbx-b)" "sbx-ba9876543210" "destroy sbx-b<TAB> -> that id"
is "$(fake sandboxctl destroy build w)" "web.1" "destroy completes more than one sandbox"
is "$(fake sandboxctl inspect build '')" "" "inspect takes one sandbox"
is "$(fake sandboxctl run --sandbox b)" "build" "run --sandbox b<TAB> -> build"
is "$(fake sandboxctl run -s '')" "$all" "run -s <TAB> -> ids and names"
is "$(fake sandboxctl snapshot b)" "build" "snapshot b<TAB> -> build"
is "$(fake sandboxctl restore build snap-)" "snap-000000000001 snap-000000000002" "restore build snap-<TAB> -> its snapshots"
is "$(fake sandboxctl restore build snap-000000000001 '')" "" "restore takes one snapshot"
is "$(fake sandboxctl snapshot-delete build snap-000000000001 snap-)" "snap-000000000001 snap-000000000002" \
        "snapshot-delete completes more than one snapshot"
is "$(fake sandboxctl snapshots build --delete '')" "snap-000000000001 snap-000000000002" "snapshots build --delete <TAB>"
is "$(comp sandboxctl snapshot --la)" "--label" "snapshot --la<TAB> -> --label"
is "$(cd "$T" && fake sandboxctl cp b)" "build:" "cp b<TAB> -> build: (a sandbox's side of SRC)"
is "$(cd "$T" && fake sandboxctl cp ./x sbx-b)" "sbx-ba9876543210:" "cp SRC sbx-b<TAB> -> that id and a colon (DST)"
is "$(cd "$T" && touch bx && fake sandboxctl cp b)" "build: bx" "cp b<TAB> also offers local files (bx)"
is "$(fake sandboxctl cp ./x build:/work/y '')" "" "cp takes two paths"
is "$(fake sandboxctl cat w)" "web.1" "cat w<TAB> -> web.1"
is "$(fake sandboxctl ls build '')" "/work/" "ls build <TAB> -> /work/"
is "$(comp sandboxctl ls -)" "--help --json --long --recursive --socket -R -h -l" "ls -<TAB> -> its options and the common ones"
rm -f "$T/calls"
fake sandboxctl --socket /x/s.sock destroy '' >/dev/null
is "$(cat "$T/calls" 2>/dev/null | tr '\n' '|')" "--socket /x/s.sock list -q|--socket /x/s.sock --json list|" \
        "the sandboxes are asked for through the command line's --socket"

# ---- the options offered are the ones each verb's --help lists ---------------------------
help_options() {
        "$SANDBOXCTL" "$@" --help 2>/dev/null | grep -oE '(^|[ ,])--?[a-zA-Z][a-z-]*' | sed 's/^[ ,]//' |
                grep -vx -- '--' | sort -u | tr '\n' ' ' | sed 's/ $//'
}
if [ -x "$SANDBOXCTL" ]; then
        for verb in $_sandboxctl_verbs; do
                want=$(help_options "$verb")
                got=$(_sandboxctl_verb_options "$verb" | tr ' ' '\n' | grep . | sort -u | tr '\n' ' ' | sed 's/ $//')
                is "$got" "$want" "the options completed for $verb are those of 'sandboxctl $verb --help'"
        done
        want=$(help_options)
        is "$(comp sandboxctl - | tr ' ' '\n' | sort -u | tr '\n' ' ' | sed 's/ $//')" "$want" \
                "the options completed before the verb are those of 'sandboxctl --help'"
        is "$(comp sandboxctl '')" "$("$SANDBOXCTL" --help | awk '/^Verbs:/ { v = 1; next } v && /^  [a-z]/ { print $1 } v && /^$/ { exit }' | sort | tr '\n' ' ' | sed 's/ $//')" \
                "the verbs completed are those of 'sandboxctl --help'"
else
        ok "# SKIP no sandboxctl binary at $SANDBOXCTL: options not compared with --help"
fi

# As installed: bash-completion loads the file on demand from a completions directory the first
# time sandboxctl is completed, and it works beside bash-completion's own functions.
bash_completion=/usr/share/bash-completion/bash_completion
if [ -f "$bash_completion" ]; then
        mkdir -p "$T/user/completions" && cp "$top_srcdir/contrib/bash-completion/sandboxctl" "$T/user/completions/"
        got=$(BASH_COMPLETION_USER_DIR=$T/user bash --norc -c '. "$1" || exit 1
complete -p sandboxctl >/dev/null 2>&1 && { echo "registered before it was loaded"; exit 1; }
__load_completion sandboxctl || { echo "__load_completion sandboxctl failed"; exit 1; }
COMP_WORDS=(sandboxctl snapshot-d); COMP_CWORD=1; COMP_LINE="sandboxctl snapshot-d"; COMP_POINT=${#COMP_LINE}
_sandboxctl sandboxctl snapshot-d sandboxctl
echo "$(complete -p sandboxctl): ${COMPREPLY[*]}"' _ "$bash_completion" 2>&1)
        is "$got" "complete -F _sandboxctl sandboxctl: snapshot-delete" \
                "bash-completion loads it from its completions directory on demand, and it completes"
elif [ "${SANDBOXD_TEST_MUST_WORK:-0}" = 1 ]; then
        nok "bash-completion is installed (scripts/deps.sh installs it): loading on demand is not checked"
else
        ok "# SKIP bash-completion is not installed (scripts/deps.sh installs it): loading on demand is not checked"
fi
