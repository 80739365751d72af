#!/usr/bin/env bash
# Instructions per command, the floor and the bridge, counted by callgrind (docs/benchmarks.md,
# "Instructions per command"). Unlike time, a count of instructions does not move with the
# machine's load: it compares two builds, or the bridge and its floor, on a busy day.
#
# Runs Benchmarks/Bridge/run.sh twice (SMALL and LARGE commands, one round, no idle window) with
# both sides under `valgrind --tool=callgrind`; what a run costs besides its commands (start-up,
# connects, shut-down) is the same in both, so (instructions of LARGE - of SMALL) / (commands of
# LARGE - of SMALL) is what one command costs, in user space (the kernel is not counted). The
# commands of a run: COMMANDS round trips after min(200, COMMANDS/10) to warm up, then COMMANDS
# each sustained at 1 in flight, 8 in flight on one device and 8 over 8 devices.
#   Benchmarks/Bridge/instructions.sh [SMALL=200] [LARGE=1000]
#   BENCH_BRIDGE_BIN=/tmp/gatt2mqtt-before Benchmarks/Bridge/instructions.sh   # another build
#   INSTRUCTIONS_KEEP=DIR …   # keeps the callgrind files (floor-N.cg, bridge-N.cg): per function and
#                             # command with Benchmarks/Bridge/per-command.py
# Valgrind 3.19 (Debian 12) cannot read the DWARF 5 the Swift toolchain writes: the bridge runs
# from a copy without its debug sections (`objcopy --strip-debug`; the symbols stay).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
small=${1:-200}
large=${2:-1000}
command -v valgrind >/dev/null || { echo "instructions.sh: needs valgrind (apt install valgrind)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
bin=${BENCH_BRIDGE_BIN:-}
if [ -z "$bin" ]; then
  "$root/scripts/build-release" >/dev/null
  bin="$root/.build/release/gatt2mqtt"
fi
objcopy --strip-debug "$bin" "$out/gatt2mqtt"

commands() { echo $(( $1 + ($1 / 10 < 200 ? $1 / 10 : 200) + 3 * $1 )); }
# The instructions callgrind counted in the one file matching $1.
collected() { sed -n 's/^summary: //p' $1 | head -1; }

for n in "$small" "$large"; do
  BENCH_BRIDGE_BIN="$out/gatt2mqtt" \
    BENCH_FLOOR_ENV="valgrind --tool=callgrind --callgrind-out-file=$out/floor-$n.cg" \
    BENCH_BRIDGE_ENV="valgrind --tool=callgrind --callgrind-out-file=$out/bridge-$n.cg" \
    "$here/run.sh" "$n" 0 1 > "$out/run-$n.log" 2>&1 || { tail -30 "$out/run-$n.log" >&2; exit 1; }
  grep -q "commands not ok (all rounds, summed) *0.00 *0.00" "$out/run-$n.log" \
    || { echo "instructions.sh: commands failed in the run of $n" >&2; tail -30 "$out/run-$n.log" >&2; exit 1; }
done

if [ -n "${INSTRUCTIONS_KEEP:-}" ]; then mkdir -p "$INSTRUCTIONS_KEEP" && cp "$out"/*.cg "$INSTRUCTIONS_KEEP"/; fi
d=$(( $(commands "$large") - $(commands "$small") ))
floor=$(( ($(collected "$out/floor-$large.cg") - $(collected "$out/floor-$small.cg")) / d ))
bridge=$(( ($(collected "$out/bridge-$large.cg") - $(collected "$out/bridge-$small.cg")) / d ))
printf '%-44s %10s %10s %12s\n' "instructions per command (user space)" floor bridge bridge/floor
printf '%-44s %10d %10d %12s\n' "$small and $large commands, $d apart" "$floor" "$bridge" "$(awk -v b="$bridge" -v f="$floor" 'BEGIN { printf "%.2f", b / f }')"
