#!/bin/bash
# The metrics endpoint under a real systemd, where memory and pids are enforced:
# sandboxd-metrics.socket (group sandboxd-metrics, mode 0660) starts the service on a scrape and
# reaches it named "metrics"; per-sandbox memory, peak and pids series carry numbers (on the host
# they have no samples); health's capacity reads the service's MemoryMax= and TasksMax=; the TCP
# drop-in docs/metrics.md gives works.
source "$(dirname "$0")/lib.sh"
export SANDBOXD_SOCKET=/run/sandboxd/sandboxd.sock
MSOCK=/run/sandboxd/metrics.sock
DROPIN=/run/systemd/system/sandboxd-metrics.socket.d

scrape_unix() { curl -sf --max-time 10 --unix-socket "$MSOCK" http://localhost/metrics; }

systemctl stop sandboxd.service
systemctl enable --now sandboxd-metrics.socket >/dev/null 2>&1
ok $? "sandboxd-metrics.socket is enabled and started"
[ "$(stat -c '%a %G' "$MSOCK" 2>/dev/null)" = "660 sandboxd-metrics" ]
ok $? "$MSOCK is mode 0660, group sandboxd-metrics (made by sysusers)"
! systemctl is-active --quiet sandboxd.service
ok $? "sandboxd.service is not running before the scrape"
body=$(scrape_unix)
ok $? "a scrape of the metrics socket is answered"
systemctl is-active --quiet sandboxd.service
ok $? "... by sandboxd.service, which the scrape started"
grep -q '^sandboxd_build_info{version="' <<<"$body"
ok $? "the answer is sandboxd's metrics"
[ "$(jqr .status "$(call '{"op":"health"}')")" = ok ]
ok $? "the control socket answers the same daemon"

systemctl set-property --runtime sandboxd.service MemoryMax=1G TasksMax=5000
h=$(call '{"op":"health"}')
diag "capacity: $(jq -c .capacity <<<"$h")"
[ "$(jqr '.capacity.memory.limit_bytes' "$h")" = 1073741824 ] && [ "$(jqr '.capacity.pids.limit' "$h")" = 5000 ]
ok $? "capacity's limits are the service's MemoryMax= and TasksMax="
[ "$(jqr '(.capacity.memory.usage_bytes > 0) and (.capacity.memory.left_bytes == 1073741824 - .capacity.memory.usage_bytes) and (.capacity.pids.usage >= 1)' "$h")" = true ]
ok $? "usage is the subtree's memory.current and pids.current, left = limit - usage"

id=$(sandboxctl create --memory 64M --pids 32 2>&1)
ok $? "create a sandbox with memory and pids limits"
r=$(call '{"op":"run","sandbox":"'"$id"'","argv":["python3","-c","b = bytes(1) * (8 << 20); b = b + b"]}')
[ "$(jqr .exit_code "$r")" = 0 ]
ok $? "a run in it touches 16 MiB"
h=$(call '{"op":"health"}')
[ "$(jqr '(.capacity.memory.granted_bytes >= 67108864) and (.capacity.memory.unreserved_bytes == ([.capacity.memory.limit_bytes - .capacity.memory.granted_bytes, 0] | max)) and (.capacity.pids.granted >= 32)' "$h")" = true ]
ok $? "capacity counts the sandbox's limits as granted (the pool's too: unreserved is 0 once they pass the limit)"
body=$(scrape_unix)
mem=$(sed -n "s/^sandboxd_sandbox_memory_bytes{sandbox=\"$id\"} //p" <<<"$body")
peak=$(sed -n "s/^sandboxd_sandbox_memory_peak_bytes{sandbox=\"$id\"} //p" <<<"$body")
pids=$(sed -n "s/^sandboxd_sandbox_pids{sandbox=\"$id\"} //p" <<<"$body")
diag "memory $mem, peak $peak, pids $pids"
[ "${mem:-0}" -gt 0 ] && [ "${pids:-0}" -ge 1 ]
ok $? "the sandbox's memory and pids series have numbers"
[ "${peak:-0}" -gt $((16 << 20)) ]
ok $? "its memory peak holds the run's 16 MiB"
sandboxctl destroy "$id" >/dev/null
ok $? "destroy it"

# The TCP drop-in of docs/metrics.md.
mkdir -p "$DROPIN"
printf '[Socket]\nListenStream=127.0.0.1:9464\n' >"$DROPIN/tcp.conf"
systemctl daemon-reload
systemctl stop sandboxd.service
systemctl restart sandboxd-metrics.socket
curl -sf --max-time 10 http://127.0.0.1:9464/metrics | grep -q '^sandboxd_runs_started_total '
ok $? "with ListenStream=127.0.0.1:9464 in a drop-in, a scrape over TCP is answered"
scrape_unix | grep -q '^sandboxd_runs_started_total '
ok $? "... and the Unix socket still is"
[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X POST http://127.0.0.1:9464/metrics)" = 405 ]
ok $? "POST over TCP: 405"

rm -rf "$DROPIN"
systemctl daemon-reload
systemctl set-property --runtime sandboxd.service MemoryMax=infinity TasksMax=infinity
systemctl stop sandboxd.service
systemctl disable --now sandboxd-metrics.socket >/dev/null 2>&1
done_testing
