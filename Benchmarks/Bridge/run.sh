#!/usr/bin/env bash
# The bridge benchmark: command → device → answer through the real pieces, all release builds:
# a local mosquitto (free loopback port), `gatt2mqtt simulate` (private dbus-daemon + emulated
# BlueZ, each device answering at once), the bridge, and `bridge-bench` as the hub (MQTT only).
# Every process is stopped by its pid.
#
# Default: the bridge against its floor (issue 24). `Benchmarks/Floor/floor_bridge.c` does the
# same work in plain C (docs/benchmarks.md, "Against the floor"): `set_shutter` off to 8 GoPros that
# only answer (`simulate --no-gopro-pushes`), the command's outbox row stored `sent` before the
# write, `WriteValue`, the answer on the AcquireNotify socket, the row deleted, the QoS 1
# response. ROUNDS rounds on the same broker and emulator, each running the floor and
# `gatt2mqtt run` in turn (the order alternates from round to round), each from a fresh copy of
# its binary and a fresh database; their start-up is not measured. Prints each round's figures
# and, for each figure, the median of the floor, of the bridge, and their ratio.
#   Benchmarks/Bridge/run.sh [COMMANDS=5000] [IDLE_SECONDS=10] [ROUNDS=3]
#   BENCH_BRIDGE_BIN=/tmp/gatt2mqtt-before Benchmarks/Bridge/run.sh   # another build of the bridge
#   BENCH_BRIDGE_ENV="GATT2MQTT_X=1" …                                 # extra environment for the bridge only
#   BENCH_FLOOR_ENV=…, BENCH_BRIDGE_ENV=…   # may name a wrapper too: "valgrind --tool=callgrind --callgrind-out-file=F"
#                                           (instructions per command: Benchmarks/Bridge/instructions.sh)
#   BENCH_MALLOC_PROBE=1 …               # also malloc calls per command (first: perf probe -x /lib/x86_64-linux-gnu/libc.so.6 --add malloc)
#   BENCH_COPY=0 …                       # the bridge binary run where it is (scripts/gen-order's profiler wants its path)
#
# BENCH_PROFILE=gopro|rokid: the bridge alone with 10 devices (8 GoPros that push, the glasses, a
# heart-rate sensor notifying every second), a GoPro setting (or the glasses' brightness) whose
# answer changes the state; the figures of the sections before issue 24:
#   BENCH_PROFILE=gopro Benchmarks/Bridge/run.sh [COMMANDS=5000] [IDLE_SECONDS=30]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
profile=${BENCH_PROFILE:-shutter}
commands=${1:-5000}
if [ "$profile" = shutter ]; then idle=${2:-10}; else idle=${2:-30}; fi
rounds=${3:-3}
source "$root/Benchmarks/common.sh"
bench_init
bench_build bridge-bench
bridge_bin=${BENCH_BRIDGE_BIN:-$bin/gatt2mqtt}
bench_mosquitto "max_queued_messages 0" "log_dest none"

# The bridge alone, 10 devices (BENCH_PROFILE=gopro|rokid).
bridge_alone() {
  local sim=() devices="" yaml="" i
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
  bench_simulate "${sim[@]}"
  bench_bridge_config "$work/bridge.yaml" "$work/state.sqlite" "$yaml"
  # BENCH_BRIDGE_ENV: extra environment for the bridge only (scripts/gen-order preloads its profiler).
  env ${BENCH_BRIDGE_ENV:-} "$bridge_bin" run --config "$work/bridge.yaml" --log-level warning 2>"$work/bridge.err" & bridge=$!; pids+=($bridge)
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $(date -u +%FT%TZ)"
  BENCH_PROFILE=$profile "$benchbin/bridge-bench" "$port" "$bridge" "$commands" "$devices" "$idle" & pids+=($!)
  local status=0
  wait $! || status=$?
  if [ -s "$work/bridge.err" ]; then echo "bridge stderr (last lines):"; tail -5 "$work/bridge.err"; fi
  return $status
}
if [ "$profile" != shutter ]; then bridge_alone; exit; fi

# The floor against the bridge.
cc -O2 -o "$work/floor_bridge" "$root/Benchmarks/Floor/floor_bridge.c" $(pkg-config --cflags --libs dbus-1) -lmosquitto -lsqlite3
ids="" addresses="" yaml="" sim=()
for i in 0 1 2 3 4 5 6 7; do
  a="C0:FF:EE:00:01:0$i"
  sim+=(--device "gopro@$a")
  ids+="${ids:+,}camera$i"
  addresses+="${addresses:+,}$a"
  yaml+="  - {id: camera$i, address: \"$a\", profile: gopro}"$'\n'
done
# Cameras that never sleep (the floor sends no keep-alive) and push nothing; no battery drain.
bench_simulate "${sim[@]}" --no-gopro-pushes --gopro-sleep-after 0 --gopro-battery-drain 0

# One side of a round: a fresh copy of its binary, started once the last side's retained
# availability is cleared, measured by bridge-bench, stopped by its pid. Writes $work/SIDE-ROUND.txt.
measure() {
  local side=$1 round=$2 pid status=0 i
  for i in 0 1 2 3 4 5 6 7; do mosquitto_pub -h 127.0.0.1 -p "$port" -r -n -t "gatt2mqtt/camera$i/availability"; done
  if [ "$side" = floor ]; then
    cp "$work/floor_bridge" "$work/floor-$round"
    DBUS_SYSTEM_BUS_ADDRESS=$bus env ${BENCH_FLOOR_ENV:-} "$work/floor-$round" -H 127.0.0.1 -p "$port" -n "$ids" -a "$addresses" \
      -d "$work/floor-$round.sqlite" -s 0 > "$work/floor-$round.out" 2>"$work/floor-$round.err" & pid=$!
  else
    local exe=$bridge_bin
    if [ "${BENCH_COPY:-1}" = 1 ]; then exe=$work/bridge-$round; cp "$bridge_bin" "$exe"; fi
    bench_bridge_config "$work/bridge-$round.yaml" "$work/bridge-$round.sqlite" "$yaml"
    env ${BENCH_BRIDGE_ENV:-} "$exe" run --config "$work/bridge-$round.yaml" --log-level warning \
      2>"$work/bridge-$round.err" & pid=$!
  fi
  pids+=($pid)
  BENCH_PROFILE=shutter "$benchbin/bridge-bench" "$port" "$pid" "$commands" "$ids" "$idle" > "$work/$side-$round.txt" || status=$?
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  # The next side starts once the emulator has every camera disconnected (a connect right after
  # the last side's Disconnect could otherwise be dropped by it), 10 s at most.
  for _ in $(seq 100); do
    local connected=0
    for i in 0 1 2 3 4 5 6 7; do
      dbus-send --bus="$bus" --print-reply --dest=org.bluez "/org/bluez/hci0/dev_C0_FF_EE_00_01_0$i" \
        org.freedesktop.DBus.Properties.Get string:org.bluez.Device1 string:Connected 2>/dev/null | grep -q "boolean true" && connected=1
    done
    [ $connected = 0 ] && break
    sleep 0.1
  done
  echo "--- round $round, $side (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  grep -v '^RESULT' "$work/$side-$round.txt" | sed 's/^/  /'
  if [ "$side" = floor ]; then sed 's/^floor_bridge: /  floor counters: /' "$work/floor-$round.err" | tail -1; fi
  if [ "$side" = bridge ] && [ -s "$work/bridge-$round.err" ]; then echo "  bridge stderr (last lines):"; tail -5 "$work/bridge-$round.err"; fi
  # A command that did not end `ok` is shown above and counted in the summary; the round's
  # figures still count. A hub that could not run at all ends the benchmark.
  if [ $status != 0 ] && ! grep -q '^RESULT' "$work/$side-$round.txt"; then return $status; fi
}

echo "the floor against the bridge: $commands commands per phase, $rounds rounds, idle ${idle} s; $(nproc) cores; $(date -u +%FT%TZ)"
for round in $(seq "$rounds"); do
  if [ $((round % 2)) = 1 ]; then order="floor bridge"; else order="bridge floor"; fi
  for side in $order; do measure "$side" "$round"; done
done

# Each figure: the median over the rounds, floor and bridge, and bridge/floor.
{ for f in "$work"/floor-*.txt; do grep '^RESULT' "$f" | sed 's/^RESULT/floor/'; done
  for f in "$work"/bridge-*.txt; do grep '^RESULT' "$f" | sed 's/^RESULT/bridge/'; done; } | python3 -c '
import statistics, sys
rows = {"floor": [], "bridge": []}
for line in sys.stdin:
    side, *fields = line.split()
    rows[side].append(dict((k, float(v)) for k, v in (f.split("=") for f in fields)))
names = [
    ("cpu1", "CPU per command, round trips, 1 in flight (µs)"),
    ("cpu1s", "CPU per command, sustained, 1 in flight (µs)"),
    ("cpu8", "CPU per command, 8 in flight over 8 devices (µs)"),
    ("p50", "round trip to ok, p50 (µs)"),
    ("p99", "round trip to ok, p99 (µs)"),
    ("rate1", "commands/s, sustained, 1 in flight"),
    ("rate8", "commands/s, 8 in flight over 8 devices"),
    ("syscalls1", "system calls per command (round trips)"),
    ("sleeps1", "sleeps per command (round trips)"),
    ("mallocs1", "malloc calls per command (round trips; BENCH_MALLOC_PROBE=1)"),
    ("hwm", "peak RSS (MiB, run + idle)"),
    ("anon", "anonymous RSS after the run (MiB)"),
    ("file", "file-backed RSS after the run (MiB)"),
    ("idlecpu", "idle CPU, 8 devices connected (% of a core)"),
    ("failures", "commands not ok (all rounds, summed)"),
]
print("median of %d rounds            floor     bridge   bridge/floor" % len(rows["bridge"]))
for key, label in names:
    f = [r[key] for r in rows["floor"] if key in r]
    b = [r[key] for r in rows["bridge"] if key in r]
    if not f or not b: continue
    mf, mb = (sum(f), sum(b)) if key == "failures" else (statistics.median(f), statistics.median(b))
    ratio = "%.2f" % (mb / mf) if mf else "-"
    print("%-50s %9.2f  %9.2f  %6s" % (label, mf, mb, ratio))
'
