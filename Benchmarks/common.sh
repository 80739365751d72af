# Shared by the benchmark drivers (Benchmarks/*/run.sh), sourced after `set -euo pipefail`:
# the release builds, the process list stopped by pid on exit, and the local broker.
#   source "$root/Benchmarks/common.sh"
#   bench_init                        # $work (removed on exit), $pids (stopped in reverse order)
#   bench_build PRODUCT               # release builds; sets $bin and $benchbin
#   bench_mosquitto [CONFIG LINES]    # a mosquitto on a free loopback port; sets $port
#   bench_simulate [SIMULATE ARGS]    # `gatt2mqtt simulate` (needs $bin); sets $bus and $simpid
#   bench_bridge_config FILE DB YAML  # a bridge config on $port and $bus with the devices' YAML

bench_init() {
  work=$(mktemp -d)
  pids=()
  bench_on_exit=()
  trap "exit 130" INT TERM
  trap bench_cleanup EXIT
}

# Stops every process of $pids by its pid, newest first, runs the driver's own exit steps
# ($bench_on_exit, e.g. keeping logs), and removes $work.
bench_cleanup() {
  for ((i=${#pids[@]}-1; i>=0; i--)); do kill "${pids[$i]}" 2>/dev/null || true; wait "${pids[$i]}" 2>/dev/null || true; done
  for step in "${bench_on_exit[@]}"; do "$step" || true; done
  rm -rf "$work"
}

bench_build() {
  "$root/scripts/build-release" >/dev/null  # the flags every release build uses (docs/benchmarks.md "Memory")
  swift build -c release --package-path "$root/Benchmarks" --product "$1" >/dev/null
  bin=$(swift build -c release --package-path "$root" --show-bin-path)
  benchbin=$(swift build -c release --package-path "$root/Benchmarks" --show-bin-path)
}

# Starts mosquitto on a free 127.0.0.1 port with anonymous access, no persistence and Nagle off,
# plus the lines given (one argument each), and waits (5 s at most) until it accepts connections.
bench_mosquitto() {
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  {
    echo "listener $port 127.0.0.1"
    echo "allow_anonymous true"
    echo "persistence false"
    echo "set_tcp_nodelay true"
    for line in "$@"; do echo "$line"; done
    [ "$(id -u)" = 0 ] && echo "user root"
  } > "$work/mosquitto.conf"
  mosquitto -c "$work/mosquitto.conf" >"$work/mosquitto.out" 2>&1 & pids+=($!)
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && return 0; sleep 0.1; done
  echo "the benchmark's mosquitto did not start: $(cat "$work/mosquitto.out")" >&2
  return 1
}

# Starts `gatt2mqtt simulate` with the arguments given (its own dbus-daemon and the emulated BlueZ)
# and waits (10 s at most) for the bus address it prints.
bench_simulate() {
  "$bin/gatt2mqtt" simulate "$@" > "$work/simulate.out" 2>"$work/simulate.err" & simpid=$!; pids+=($simpid)
  for _ in $(seq 100); do grep -q '^DBUS_SYSTEM_BUS_ADDRESS=' "$work/simulate.out" 2>/dev/null && break; sleep 0.1; done
  bus=$(sed -n 's/^DBUS_SYSTEM_BUS_ADDRESS=//p' "$work/simulate.out" | head -1)
  [ -n "$bus" ] || { echo "simulate printed no bus address" >&2; cat "$work/simulate.err" >&2; return 1; }
}

# Writes a bridge configuration to FILE: the benchmark's broker ($port) and bus ($bus), the store
# at DB, and the `devices:` list given as YAML lines.
bench_bridge_config() {
  cat > "$1" <<CONF
mqtt:
  url: mqtt://127.0.0.1:$port
  client_id: gatt2mqtt-bench
bluetooth:
  bus_address: "$bus"
database:
  path: $2
devices:
$3
CONF
}
