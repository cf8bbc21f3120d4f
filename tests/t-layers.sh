#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The daemon's layer rules (scripts/check-layers.py, docs/architecture.md "Module map"): the tree
# keeps every one of them, and the checker fails on each kind of wrong include, call or child code,
# put into a copy of the daemon's sources. Needs no daemon; prints TAP, exits 0.
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
CHECK=$top_srcdir/scripts/check-layers.py

n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; }
trap 'rm -rf "$tmp"; echo "1..$n"; exit 0' EXIT
tmp=$(mktemp -d)

if out=$(python3 "$CHECK" "$top_srcdir/daemon" 2>&1); then
        ok "daemon/ keeps every layer rule"
else
        nok "daemon/ keeps every layer rule"
        printf '%s\n' "$out" | sed 's/^/# /'
fi

# A copy of daemon/ and lib/ with one change, and what the checker must say of it.
breaks() { # description expected-output-pattern file line-or-s|edit| [file line-or-s|edit| ...]
        local what=$1 pattern=$2
        shift 2
        rm -rf "$tmp/t" && mkdir "$tmp/t" && cp -r "$top_srcdir/daemon" "$top_srcdir/lib" "$tmp/t/"
        while [ $# -ge 2 ]; do
                case $2 in
                s\|*) sed -i "$2" "$tmp/t/daemon/$1" ;;   # an edit of the file
                *) printf '%s\n' "$2" >> "$tmp/t/daemon/$1" ;;   # a line added to it
                esac
                shift 2
        done
        if out=$(python3 "$CHECK" "$tmp/t/daemon" 2>&1); then
                nok "$what: the checker fails (it passed)"
        elif printf '%s\n' "$out" | grep -q -- "$pattern"; then
                ok "$what: the checker fails and says so"
        else
                nok "$what: the checker fails and says so"
                printf '%s\n' "$out" | sed 's/^/# /'
        fi
}

breaks "host/ including a domain header" \
        'host/cgroup.c:.*includes sandbox.h from sandbox/, a layer above host/' \
        host/cgroup.c '#include "sandbox.h"'
breaks "the domain including the transport" \
        'sandbox/sandbox.c:.*includes connection.h from server/' \
        sandbox/sandbox.c '#include "connection.h"'
breaks "exec/ reaching json-c through a header" \
        'exec/.*reaches json-c/json.h through proto.h' \
        exec/spawn.h '#include "proto.h"'
breaks "exec/ including the log" \
        'exec/rm-rf.c:.*includes log.h from core/' \
        exec/rm-rf.c '#include "log.h"'
breaks "connection.c including ops.h" \
        'server/connection.c:.*the transport includes ops.h' \
        server/connection.c '#include "ops.h"'
breaks "sandbox.c including a member's header" \
        'sandbox/sandbox.c:.*includes run.h; members and observers register instead' \
        sandbox/sandbox.c '#include "run.h"'
breaks "a second wiring file" \
        'server/op-hello.c: includes .*pool.h, .*sweep.h; only lifecycle.c wires them together' \
        server/op-hello.c '#include "pool.h"' server/op-hello.c '#include "sweep.h"'
breaks "a file outside a family including its internal header" \
        'sandbox/run.c:.*includes sandbox-internal.h, which only sandbox.c and sandbox-\*.c of sandbox/ may' \
        sandbox/run.c '#include "sandbox-internal.h"'
breaks "the domain running a child job's function of its own file" \
        'sandbox/egress.c: its child job runs t_child() of sandbox/egress.c; code a child runs lives in a \*-child.c file' \
        sandbox/egress.c 'static int t_child(void *a, int fd) { return 0; }' \
        sandbox/egress.c 'void t_start(sd_event *e) { ChildJob *j; (void) child_job_start(e, &(ChildJobSpec) { .fn = t_child }, &j); }'
breaks "the domain ending a process" \
        'sandbox/run.c:[0-9]*: calls _exit(); code a child runs lives in a \*-child.c file' \
        sandbox/run.c 'void t_die(void) { _exit(1); }'
breaks "a circle within one layer" \
        'circle of 2 modules: host/cgroup host/copy-tree' \
        host/cgroup.c '#include "copy-tree.h"' host/copy-tree.c '#include "cgroup.h"'

breaks "host/ calling back into the domain" 'call cycle of 2 files: host/cgroup sandbox/sandbox' \
        host/cgroup.c 'void t_cycle(void) { sandbox_gone_error(0, 0); }'
breaks "a file that calls its family's functions without being of the family" \
        'call cycle of 2 files: sandbox/session sandbox/session-keep' \
        sandbox/session-keep.c 's|#include "session-internal.h"|#include "session.h"|'
