# Shared by the benchmark drivers (Benchmarks/*/run.sh), sourced after `set -euo pipefail`:
# the release builds, the process list stopped by pid on exit, and the local broker.
#   source "$root/Benchmarks/common.sh"
#   bench_init                        # $work (removed on exit), $pids (stopped in reverse order)
#   bench_build PRODUCT               # release builds; sets $bin and $benchbin
#   bench_mosquitto [CONFIG LINES]    # a mosquitto on a free loopback port; sets $port

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
