#!/bin/bash
# Self-test for tests/vm: is the guest what the system tests expect?
# (systemd as PID 1, cgroup v2 with memory/pids/cpu, delegation works.)
# Usage: tests/vm/run-vm.sh "$(mktemp -d)" "$PWD/tests/vm/selftest/guest-basics.sh"
set -u
n=0
check() { # check DESCRIPTION COMMAND...
	local desc=$1
	shift
	n=$((n + 1))
	if out=$("$@" 2>&1); then
		echo "ok $n - $desc"
	else
		echo "not ok $n - $desc"
		printf '%s\n' "$out" | sed 's/^/#   /'
	fi
}

pid1_is_systemd() { [[ $(readlink /proc/1/exe) == */systemd ]] || { readlink /proc/1/exe; false; }; }
cgroup2_root() { [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ] || { stat -f -c %T /sys/fs/cgroup; false; }; }
controllers() {
	local c ctl
	ctl=$(cat /sys/fs/cgroup/cgroup.controllers) || return 1
	echo "cgroup.controllers: $ctl"
	for c in memory pids cpu; do
		[[ " $ctl " == *" $c "* ]] || return 1
	done
}
system_running() {
	local s
	s=$(timeout 120 systemctl is-system-running --wait)
	echo "state: $s"
	systemctl --failed --no-pager --plain
	[ "$s" = running ]
}
delegated_unit() {
	# Delegate=yes + MemoryMax: the unit's cgroup must end up with memory.max
	# set and the controllers delegated (visible from inside the unit).
	# shellcheck disable=SC2016 # expanded by the inner sh
	systemd-run --quiet --wait --pipe -p Delegate=yes -p MemoryMax=64M \
		sh -c 'cg=/sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup);
		       echo "cgroup $cg: memory.max=$(cat $cg/memory.max)";
		       echo "controllers: $(cat $cg/cgroup.controllers)";
		       test "$(cat $cg/memory.max)" = 67108864 &&
		       grep -qw memory $cg/cgroup.controllers &&
		       grep -qw pids $cg/cgroup.controllers'
}
real_vm() {
	local v
	v=$(systemd-detect-virt)
	echo "systemd-detect-virt: $v, container: $(systemd-detect-virt --container)"
	[ "$v" = qemu ] || [ "$v" = kvm ]
}
path_has_local() { [[ :$PATH: == *:/usr/local/bin:* && :$PATH: == *:/usr/local/sbin:* ]] || { echo "PATH=$PATH"; false; }; }
fresh_tmp() { [ "$(stat -f -c %T /tmp)" = tmpfs ]; }
results_export_writable() { [ -w /vmout ] && touch /vmout/selftest-probe && rm /vmout/selftest-probe; }

echo "1..9"
check "PID 1 is systemd" pid1_is_systemd
check "systemd sees a VM, not a container" real_vm
check "/sys/fs/cgroup is cgroup2 (unified)" cgroup2_root
check "cgroup.controllers has memory, pids, cpu" controllers
check "systemctl is-system-running --wait: running" system_running
check "transient unit with Delegate=yes, MemoryMax=64M" delegated_unit
check "PATH has /usr/local/bin and /usr/local/sbin" path_has_local
check "/tmp is a fresh tmpfs" fresh_tmp
check "/vmout is writable" results_export_writable
echo "# SANDBOXD_TEST_MUST_WORK=${SANDBOXD_TEST_MUST_WORK:-<unset>} kernel=$(uname -r) systemd=$(systemctl --version | head -n1)"
