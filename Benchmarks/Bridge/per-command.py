#!/usr/bin/env python3
"""What each function costs per command: two callgrind profiles of the same build, one run with
more commands than the other, subtracted function by function (start-up and shut-down cancel
out). Inclusive cost (a function with its callees) by default, --self for a function alone.

    INSTRUCTIONS_KEEP=/tmp/cg Benchmarks/Bridge/instructions.sh 200 1000
    Benchmarks/Bridge/per-command.py /tmp/cg/bridge-200.cg /tmp/cg/bridge-1000.cg 3280 | head -60

COMMANDS is the difference of the two runs' commands (instructions.sh prints it). A recursive
function's levels are summed, so its inclusive figure may count a call twice."""
import re
import subprocess
import sys


def costs(path, inclusive):
    out = subprocess.run(["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}", "--threshold=100", path],
                         capture_output=True, text=True, check=True).stdout
    table = {}
    for line in out.splitlines():
        m = re.match(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+(\S.*)$", line)
        if not m or "PROGRAM TOTALS" in line:
            continue
        name = re.sub(r"'\d+$", "", re.sub(r" \[.*\]$", "", m.group(2)))
        table[name] = table.get(name, 0) + int(m.group(1).replace(",", ""))
    return table


def main():
    args = [a for a in sys.argv[1:] if a != "--self"]
    if len(args) != 3:
        sys.exit(__doc__)
    small, large, commands = args[0], args[1], int(args[2])
    inclusive = "--self" not in sys.argv
    a, b = costs(small, inclusive), costs(large, inclusive)
    rows = sorted(((b.get(k, 0) - a.get(k, 0)) / commands, k) for k in set(a) | set(b))
    for per, name in reversed(rows):
        if abs(per) >= 300:
            print(f"{per / 1000:9.1f}k  {name[:200]}")


if __name__ == "__main__":
    main()
