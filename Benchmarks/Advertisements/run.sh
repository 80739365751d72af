#!/usr/bin/env bash
# The passive-device benchmark (issue 23: "200 advertisements/s from 50 sensors cost under 5 % of
# a core in the bridge"), all release builds: a local mosquitto (free loopback port),
# `gatt2mqtt simulate` with 50 passive advertisers (40 bthome, 5 atc, 5 ruuvi) each reported every
# 0.25 s while discovering (--advertising-interval; 50 × 4 = 200 advertisements/s) with a new
# reading every second (--advertise-interval), and `gatt2mqtt run` with those 50 devices
# (`profile: advertisement`). After a warm-up it reads the CPU time (utime + stime of
# /proc/PID/stat) of the bridge, the emulator and its dbus-daemon over a window, the bridge's
# RSS, and counts the states published (mosquitto_sub on <base>/+, retained ones left out).
# Then the same with `gatt2mqtt scan` as the discovering client instead of the bridge: the
# emulator's and dbus-daemon's cost alone. Every process is stopped by its pid.
#   Benchmarks/Advertisements/run.sh [WINDOW_SECONDS=30] [WARMUP_SECONDS=10]
#   BENCH_BRIDGE_BIN=/tmp/gatt2mqtt-before Benchmarks/Advertisements/run.sh  # another build of the bridge (A/B runs)
#   BENCH_ONLY=bridge Benchmarks/Advertisements/run.sh                      # skip the emulator-alone run
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
window=${1:-30}
warmup=${2:-10}
source "$root/Benchmarks/common.sh"
bench_init
"$root/scripts/build-release" >/dev/null
bin=$(swift build -c release --package-path "$root" --show-bin-path)
bridge_bin=${BENCH_BRIDGE_BIN:-$bin/gatt2mqtt}
bench_mosquitto "log_dest none"
tck=$(getconf CLK_TCK)

sim=()
yaml=""
for i in $(seq 0 49); do
  a=$(printf "C0:FF:EE:00:0A:%02X" "$i")
  if [ "$i" -lt 40 ]; then kind=bthome; elif [ "$i" -lt 45 ]; then kind=atc; else kind=ruuvi; fi
  sim+=(--device "$kind@$a")
  yaml+="  - {id: sensor$i, address: \"$a\", profile: advertisement, format: $kind}"$'\n'
done

# CPU ticks (utime + stime) of the pids given, summed; the processes must be alive.
ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $t; }
pct() { awk -v t="$1" -v hz="$tck" -v w="$window" 'BEGIN { printf "%.2f", 100 * t / hz / w }'; }

# One run: the emulator, then "$@" (the client that discovers) with its pid in $client; prints the figures.
run_once() {
  local label=$1
  bench_simulate "${sim[@]}" --advertising-interval 0.25 --advertise-interval 1
  local daemon
  daemon=$(ps --ppid "$simpid" -o pid= | tr -d ' ' | head -1)
  if [ "$label" = bridge ]; then
    bench_bridge_config "$work/bridge.yaml" "$work/state.sqlite" "$yaml"
    "$bridge_bin" run --config "$work/bridge.yaml" --log-level warning 2>"$work/bridge.err" & client=$!
  else
    "$bin/gatt2mqtt" scan --bus "$bus" --seconds $((warmup + window + 30)) >/dev/null 2>"$work/scan.err" & client=$!
  fi
  pids+=($client)
  sleep "$warmup"
  # The advertisements the emulator reports: Device1 PropertiesChanged signals over 5 s.
  local heard
  heard=$(timeout 5 dbus-monitor --address "$bus" "type='signal',member='PropertiesChanged',arg0='org.bluez.Device1'" 2>/dev/null | grep -c '^signal' || true)
  mosquitto_sub -h 127.0.0.1 -p "$port" -t 'gatt2mqtt/+' -R > "$work/states.$label" & local sub=$!; pids+=($sub)
  sleep 0.5
  local c0 s0 d0 c1 s1 d1
  c0=$(ticks "$client"); s0=$(ticks "$simpid"); d0=$(ticks ${daemon:-$simpid})
  sleep "$window"
  c1=$(ticks "$client"); s1=$(ticks "$simpid"); d1=$(ticks ${daemon:-$simpid})
  local rss
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$client/status")
  echo "$label: client $(pct $((c1 - c0))) % of a core, RSS $((rss / 1024)) MiB; emulator $(pct $((s1 - s0))) %; dbus-daemon $(pct $((d1 - d0))) %; states published $(wc -l < "$work/states.$label") in ${window} s; advertisements reported $((heard / 5))/s"
  if [ "$label" = bridge ] && [ -s "$work/bridge.err" ]; then echo "bridge stderr (last lines):"; tail -5 "$work/bridge.err"; fi
  # Stop this run's processes (newest first) before the next.
  for p in $sub $client $simpid; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  pids=("${pids[@]:0:1}")  # the broker stays
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $(date -u +%FT%TZ); 50 advertisers × 4/s, window ${window} s after ${warmup} s"
run_once bridge
[ "${BENCH_ONLY:-}" = bridge ] || run_once scan
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
