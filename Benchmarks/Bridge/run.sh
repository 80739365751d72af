#!/usr/bin/env bash
# The bridge benchmark: command → device → telemetry through the real pieces, all release builds:
# a local mosquitto (free loopback port), `gatt2mqtt simulate` (private dbus-daemon + emulated
# BlueZ; 8 simulated GoPros, Rokid glasses and a heart-rate sensor = 10 devices, each answering
# at once), `gatt2mqtt run`, and `bridge-bench` as the hub. Every process is stopped by its pid.
#   Benchmarks/Bridge/run.sh [COMMANDS=5000] [IDLE_SECONDS=30]
#   BENCH_PROFILE=rokid Benchmarks/Bridge/run.sh   # the glasses' brightness instead of a GoPro setting
#   BENCH_BRIDGE_BIN=/tmp/gatt2mqtt-before Benchmarks/Bridge/run.sh  # another build of the bridge (A/B runs; the rest as built)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
commands=${1:-5000}
idle=${2:-30}
profile=${BENCH_PROFILE:-gopro}
source "$root/Benchmarks/common.sh"
bench_init
bench_build bridge-bench
bench_mosquitto "max_queued_messages 0" "log_dest none"

sim=()
devices=""
yaml=""
for i in 0 1 2 3 4 5 6 7; do
  sim+=(--device "gopro@C0:FF:EE:00:01:0$i")
  devices+="camera$i,"
  yaml+="  - {id: camera$i, address: \"C0:FF:EE:00:01:0$i\", profile: gopro}"$'\n'
done
sim+=(--device "rokid@C0:FF:EE:00:02:00" --device "hr@C0:FF:EE:00:03:00")
yaml+="  - {id: glasses0, address: \"C0:FF:EE:00:02:00\", profile: rokid}"$'\n'
yaml+="  - id: sensor0
    address: \"C0:FF:EE:00:03:00\"
    profile: custom
    characteristics:
      - {uuid: 2A37, codec: layout, layout: \"builtin:heart_rate_measurement\", direction: notify, topic: heart_rate}
      - {uuid: 2A19, codec: layout, layout: \"builtin:battery_level\", direction: [read, notify], topic: battery}
"
if [ "$profile" = rokid ]; then devices="glasses0,${devices}sensor0"; else devices="${devices}glasses0,sensor0"; fi

"$bin/gatt2mqtt" simulate "${sim[@]}" > "$work/simulate.out" 2>"$work/simulate.err" & pids+=($!)
for _ in $(seq 100); do grep -q '^DBUS_SYSTEM_BUS_ADDRESS=' "$work/simulate.out" 2>/dev/null && break; sleep 0.1; done
bus=$(sed -n 's/^DBUS_SYSTEM_BUS_ADDRESS=//p' "$work/simulate.out" | head -1)
[ -n "$bus" ] || { echo "simulate printed no bus address" >&2; cat "$work/simulate.err" >&2; exit 1; }

cat > "$work/bridge.yaml" <<CONF
mqtt:
  url: mqtt://127.0.0.1:$port
  client_id: gatt2mqtt-bench
bluetooth:
  bus_address: "$bus"
database:
  path: $work/state.sqlite
devices:
$yaml
CONF
# BENCH_BRIDGE_ENV: extra environment for the bridge only (scripts/gen-order preloads its profiler).
env ${BENCH_BRIDGE_ENV:-} "${BENCH_BRIDGE_BIN:-$bin/gatt2mqtt}" run --config "$work/bridge.yaml" --log-level warning 2>"$work/bridge.err" & bridge=$!; pids+=($bridge)

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $(date -u +%FT%TZ)"
BENCH_PROFILE=$profile "$benchbin/bridge-bench" "$port" "$bridge" "$commands" "$devices" "$idle" & pids+=($!)
status=0
wait $! || status=$?
if [ -s "$work/bridge.err" ]; then echo "bridge stderr (last lines):"; tail -5 "$work/bridge.err"; fi
exit $status
