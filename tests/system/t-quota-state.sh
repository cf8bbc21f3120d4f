#!/bin/bash
# Disk limits on a state directory an administrator prepared (storage = state), under a real
# systemd (quota-lib.sh's second instance of the installed unit): on an ext4 made with
# -O project,quota and mounted prjquota, a write past limits.disk gets EDQUOT while another
# sandbox and the host write on, destroy clears it; on the VM's own filesystem (no quotas) a
# default_disk makes no create fail and an asked-for limits.disk is limit_unenforceable.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/quota-lib.sh"

# ---- ext4 -O project,quota, prepared by the administrator -----------------------------------
STATE=/var/lib/$Q-ext4
mkdir -p "$STATE/sandboxes"
truncate -s 512M /var/tmp/$Q-ext4.img
mkfs.ext4 -q -I 256 -O project,quota /var/tmp/$Q-ext4.img && mount -o loop,prjquota /var/tmp/$Q-ext4.img "$STATE/sandboxes"
ok $? "an ext4 made with -O project,quota, mounted prjquota on $STATE/sandboxes"
# 32768 inodes in 512M: below the default min_free_files, which would refuse every create.
CONF=("min_free_files = 1000")
qstart "$STATE" "${CONF[@]}"
ok $? "the unit starts on it with storage = state"
scenario ext4 ext4 no-restart
systemctl stop $Q.service
umount "$STATE/sandboxes"

# ---- no quotas, a default_disk: creates go on, the sweep keeps it -----------------------------
STATE=/var/lib/$Q-plain
CONF=("default_disk = 64M")
qstart "$STATE" "${CONF[@]}"
r=$(call '{"op":"hello"}')
[ "$(jqr .capabilities.disk.enforced "$r")" = false ]
ok $? "on the VM's own filesystem ($(stat -f -c %T /var/lib)): disk limits not enforced ($(jqr .capabilities.disk.how "$r"))"
r=$(call '{"op":"create","name":"qd"}')
[ "$(jqr '.ok, .sandbox.limits.disk, .sandbox.enforced.disk' "$r" | tr '\n' ' ')" = "true 67108864 false " ]
ok $? "default_disk there: a create without best_effort is made, its disk limit the sweep's"
r=$(call '{"op":"create","name":"qe","limits":{"disk":"32M"}}')
[ "$(jqr '.error.code + " " + .error.field' "$r")" = "limit_unenforceable limits.disk" ]
ok $? "asking for limits.disk there: limit_unenforceable, field limits.disk"
call '{"op":"destroy","sandbox":"qd"}' >/dev/null
systemctl stop $Q.service
quota_unit_remove
done_testing
