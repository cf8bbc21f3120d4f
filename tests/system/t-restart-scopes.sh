#!/bin/bash
# One transient scope per sandbox under a real systemd 252 (issue 22, docs/design/restarts.md
# section 2): each sandbox is sandboxd-<id>.scope in sandboxd.slice, outside the service's cgroup,
# so that `systemctl restart sandboxd` and a SIGKILL of the daemon (systemd restarts it:
# Restart=on-failure) leave its processes running (t-restart-deb.sh: a `dpkg -i` too): a background HTTP server started by a run answers after
# each, with the same pid inside and the same init. systemctl and systemd-cgls show the sandbox by
# name, and a destroy takes the scope away (t-restart-loop.sh: a snapshot restore keeps the scope,
# a scope without a record is stopped, a loop of restarts under load leaks nothing). Only this
# test's sandboxes are made and destroyed.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/restart-lib.sh"

check "the daemon answers" wait_up
sandbox_with_server "scopes-$$"

old=$(mainpid)
systemctl restart sandboxd.service
check "systemctl restart sandboxd: the daemon is back" wait_up "$old"
survived "systemctl restart"

old=$(mainpid)
kill -9 "$old"
check "kill -9 of the daemon: systemd restarts it (Restart=on-failure)" wait_up "$old"
survived "kill -9"

call "{\"op\":\"destroy\",\"sandbox\":\"$id\"}" >/dev/null
# systemd removes the scope's cgroup a moment after the unit went inactive: both, within 10 s.
for _ in $(seq 50); do ! systemctl is-active --quiet "$unit" && [ ! -d "$slice/$unit" ] && break; sleep 0.2; done
! systemctl is-active --quiet "$unit" && [ ! -d "$slice/$unit" ]
ok $? "destroyed, the sandbox's scope is gone ($(systemctl is-active "$unit" 2>&1)) and so is its cgroup"
done_testing
