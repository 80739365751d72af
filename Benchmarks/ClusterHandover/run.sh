#!/usr/bin/env bash
# The cluster handover benchmark (issue 14's figures, docs/scale-out.md "Figures"): COUNT forced
# handovers of one kind on a two-node cluster, commands sent all along, and what became of each.
# All release builds: a local mosquitto (free loopback port), two `gatt2mqtt simulate` (each its
# own dbus-daemon + emulated BlueZ with the same heart-rate sensor: hosts a and b), and
# `handover-bench` as the hub, which starts the two `gatt2mqtt run` nodes (cluster mode, the
# configurations written here), kills, stops or continues them, and kills them at the end. Every
# process is stopped by its pid.
#   Benchmarks/ClusterHandover/run.sh killed|paused|rssi [COUNT=100]
#   BENCH_LOGS=DIR ...       # keep the report, the hub's timeline and the bridges' and broker's logs
#   BENCH_LOG_LEVEL=debug ...  # the bridges' log level (default info)
#   BENCH_BRIDGE_BIN=/tmp/gatt2mqtt-before ...  # another build of the bridge (A/B runs; the rest as built)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
kind=${1:-}
count=${2:-100}
case "$kind" in
  killed|paused|rssi) ;;
  *) echo "usage: $0 killed|paused|rssi [COUNT=100]" >&2; exit 2 ;;
esac
source "$root/Benchmarks/common.sh"
bench_init
keep_logs() {
  # The bridges handover-bench started, should it have been stopped before it could kill them.
  for f in "$work"/*.pid; do [ -e "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true; done
  if [ -n "${BENCH_LOGS:-}" ]; then
    mkdir -p "$BENCH_LOGS"
    for f in a.log b.log mosquitto.log; do [ -e "$work/$f" ] && cp "$work/$f" "$BENCH_LOGS/$kind-${f%.log}.log"; done
  fi
}
bench_on_exit+=(keep_logs)
bench_build handover-bench
bridge=${BENCH_BRIDGE_BIN:-$bin/gatt2mqtt}
bench_mosquitto "max_queued_messages 20000" "log_dest file $work/mosquitto.log" \
  "log_type error" "log_type warning" "log_type notice" "log_type information"

# Both hosts see the sensor at −60 dBm with a hysteresis of 30 dB (only the owner's death moves it);
# for rssi, a at −50 and b at −90 with 6 dB (handover-bench changes them).
sensor=C0:FF:EE:00:00:01
if [ "$kind" = rssi ]; then rssi_a=-50; rssi_b=-90; hysteresis=6; else rssi_a=-60; rssi_b=-60; hysteresis=30; fi
for node in a b; do
  [ "$node" = a ] && dbm=$rssi_a || dbm=$rssi_b
  "$bin/gatt2mqtt" simulate --address "$sensor" --seconds 3600 --heart-rate-interval 0.2 --advertising-interval 0.2 \
    --rssi "$sensor=$dbm" > "$work/$node.simulate.out" 2>"$work/$node.simulate.err" & pids+=($!)
  for _ in $(seq 100); do grep -q '^DBUS_SYSTEM_BUS_ADDRESS=' "$work/$node.simulate.out" 2>/dev/null && break; sleep 0.1; done
  bus=$(sed -n 's/^DBUS_SYSTEM_BUS_ADDRESS=//p' "$work/$node.simulate.out" | head -1)
  [ -n "$bus" ] || { echo "simulate ($node) printed no bus address" >&2; cat "$work/$node.simulate.err" >&2; exit 1; }
  echo "$bus" > "$work/$node.bus"
  # Short cluster timings; keepalive 5 s is libmosquitto's least: a silent (SIGSTOPped) node's
  # Will comes ~7.5 s later, a killed one's at once.
  cat > "$work/$node.yaml" <<CONF
node_id: $node
cluster:
  enabled: true
  hysteresis: $hysteresis
  handover_after: 1s
  seen_interval: 200ms
  lost_after: 2s
  claim_settle: 300ms
  drain_timeout: 1s
mqtt:
  url: mqtt://127.0.0.1:$port
  keepalive: 5s
  client_id: gatt2mqtt-$node
bluetooth:
  bus_address: "$bus"
database:
  path: $work/$node.sqlite
devices:
  - id: heart
    address: $sensor
    profile: custom
    characteristics:
      - {uuid: 2A39, codec: raw, direction: write, topic: control}
CONF
done

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $(date -u +%FT%TZ)"
"$benchbin/handover-bench" "$kind" "$count" "$port" "$bridge" "$work" & pids+=($!)
status=0
wait $! || status=$?
exit $status
