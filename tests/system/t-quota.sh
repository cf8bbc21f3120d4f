#!/bin/bash
# Disk limits the kernel enforces, under a real systemd: a second instance of the installed
# sandboxd.service (quota-lib.sh) with storage = image:1G makes and loop-mounts its XFS image
# inside the unit's mount namespace; a sandbox writing past limits.disk gets ENOSPC (XFS's word
# for a project's limit) while another sandbox and the host write on; a restart of the unit
# mounts it again and keeps the limit; destroy clears it. t-quota-state.sh does the same on an
# ext4 with project quotas, and a host without. Its sandboxes live in that instance only: the
# main sandboxd and a user's sandboxes are never touched.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/quota-lib.sh"

# ---- storage = image under the unit's sandboxing ---------------------------------------------
CONF=("storage = image:1G")
qstart "$STATE" "${CONF[@]}"
ok $? "the unit starts with storage = image:1G"
journalctl -u $Q.service --no-pager -o cat | grep storage: | sed 's/^/# /'
[ "$(inns stat -f -c %T "$STATE/sandboxes")" = xfs ] && [ -f "$STATE/storage.img" ]
ok $? "it made $STATE/storage.img and mounted it (xfs) in its namespace"
[ "$(jqr '.capabilities.disk | .storage + " " + (.reflink|tostring)' "$(call '{"op":"hello"}')")" = "image true" ]
ok $? "hello: storage image, reflinks"
# Another state directory, another slice: a child of sandboxd.slice that the main daemon's walk
# for stale scopes never enters (it stopped every scope of the main daemon's before).
main_scopes=$(ls /sys/fs/cgroup/sandboxd.slice | grep -c '^sandboxd-sbx-.*\.scope$')
qslice=$(jqr .capabilities.slice "$(call '{"op":"hello"}')")
[[ $qslice =~ ^sandboxd-[0-9a-f]{8}\.slice$ ]]
ok $? "hello: the instance's own slice ($qslice)"
qid=$(jqr .sandbox.id "$(call '{"op":"create"}')")
[ -d "/sys/fs/cgroup/sandboxd.slice/$qslice/sandboxd-$qid.scope/sandbox" ]
ok $? "its sandbox's scope is in that slice, below sandboxd.slice"
call "{\"op\":\"destroy\",\"sandbox\":\"$qid\"}" >/dev/null
qstart "$STATE" "${CONF[@]}"
[ "$(ls /sys/fs/cgroup/sandboxd.slice | grep -c '^sandboxd-sbx-.*\.scope$')" -ge "$main_scopes" ]
ok $? "its restart left the main daemon's $main_scopes scope(s) alone"
scenario image xfs restart
systemctl stop $Q.service
quota_unit_remove
done_testing
