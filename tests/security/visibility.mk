## What a sandbox can see of the host (THREATS.md ESC-03, -05, -06, -07, -17): /proc masks, a
## fresh /sys with the sandbox's own cgroup2, other sandboxes, the control socket, propagation;
## t-root: the root itself (/usr, /etc, root_binds, none of the host's other mounts).
## Root only, like the other host integration tests; needs systemd-socket-activate.
VISIBILITY_TESTS = tests/security/t-visibility.sh tests/security/t-root.sh
TESTS += $(VISIBILITY_TESTS)
EXTRA_DIST += $(VISIBILITY_TESTS)

## t-v1.sh checks afterwards that nothing touched the cgroup v1 hierarchies.
tests/t-v1.log: tests/security/t-visibility.log tests/security/t-escape.log tests/security/t-root.log

## Round 3 (issue 31): images (a non-root admin's import read as that admin, built-in
## decompressors only, every header counted, usage counts per caller, owner-only images) and
## the daemon (one daemon per cgroup subtree, the init's command line). Root only.
ROUND3_TESTS = tests/security/t-images-sec.sh tests/security/t-daemon-sec.sh
TESTS += $(ROUND3_TESTS)
EXTRA_DIST += $(ROUND3_TESTS)
tests/t-v1.log: tests/security/t-images-sec.log tests/security/t-daemon-sec.log
