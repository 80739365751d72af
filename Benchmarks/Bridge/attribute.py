#!/usr/bin/env python3
"""What each of the project's functions costs per command, with the runtime work it asks for: its
own instructions plus the inclusive cost of the calls it makes into the Swift runtime, the
standard library, libc, Foundation and Dispatch (retains, releases, allocations, copies, generic
code). Calls into the project's other functions are left to those functions, calls into libdbus,
SQLite and libmosquitto to the libraries (the floor makes them too), and calls that come back
into the project's code (task switches, Dispatch, GRDB's closures, reabstraction thunks) are not
counted at all, so a function is not charged with its callers' callees. Two callgrind profiles of
one build, as per-command.py takes them:

    INSTRUCTIONS_KEEP=/tmp/cg Benchmarks/Bridge/instructions.sh
    Benchmarks/Bridge/attribute.py /tmp/cg/bridge-200.cg /tmp/cg/bridge-1000.cg 3280 [TOP]

prints the calls per command into the runtime's allocation, reference counting and task
switching (the issue's "a small fixed number" of allocations is read here), the total per module,
then the TOP functions (40 unless told)."""
import collections
import re
import sys

OURS = set("BridgeCore BridgeRuntime BridgeStore BinaryCoding DBus Mosquitto Reactor BlueZ BlueZPort GoProCodec "
           "DeviceProfiles PacketSocket CapsCodec GattLayout BridgeConfig Frontend AdvertisementCodec".split())
LIBRARIES = ("libdbus", "libsqlite", "libmosquitto")
COUNTED = ("malloc", "swift_allocObject", "swift_retain", "swift_release", "swift_bridgeObjectRetain",
           "swift_bridgeObjectRelease", "swift_beginAccess", "swift_task_switch", "swift_continuation_resume")
REENTRY = ("task_switch", "job_run", "runJob", "dispatch_", "withTaskCancellationHandler", "continuation",
           "ProcessOutOfLineJob", "objectdestroy", "swift_task_", "TaskGroup", "assumeIsolated")


def module(name):
    m = re.match(r"\$s(\d+)", name or "")
    if not m:
        return None
    start = len(m.group(0))
    return name[start:start + int(m.group(1))]


def comes_back(name):
    name = name or ""
    return (name.startswith(("$sI", "$sScT", "$sScG", "$ss27withTaskCancellation")) or module(name) in ("GRDB", "Dispatch")
            or any(x in name for x in REENTRY) or re.search(r"TR(TA)?$", name) is not None)  # reabstraction thunks


def load(path):
    """Per function: (own cost, cost of the counted calls)."""
    names, objects = {}, {}
    own, calls, counts = collections.Counter(), collections.Counter(), collections.Counter()
    fn = ob = cob = cfn = None
    pending = False
    ncalls = 0

    def name(text, table):
        m = re.match(r"\((\d+)\)(?: (.*))?", text)
        if not m:
            return text
        if m.group(2):
            table[m.group(1)] = m.group(2)
        return table.get(m.group(1), m.group(1))

    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("ob="):
            ob = name(line[3:], objects)
        elif line.startswith("fn="):
            fn, cob = name(line[3:], names), None
        elif line.startswith("cob="):
            cob = name(line[4:], objects)
        elif line.startswith("cfn="):
            cfn = name(line[4:], names)
        elif line.startswith("calls="):
            pending = True
            ncalls = int(line[6:].split()[0])
        elif line and (line[0].isdigit() or line[0] in "+-*"):
            parts = line.split()
            if len(parts) < 2:
                continue
            cost = int(parts[1])
            if pending:
                pending = False
                callee = (cfn or "").split("'")[0]  # callgrind marks recursion levels with 'N
                if callee in COUNTED and (fn or "").split("'")[0] != callee:
                    counts[callee] += ncalls
                target = cob or ob or ""
                if not any(lib in target for lib in LIBRARIES) and module(cfn) not in OURS and not comes_back(cfn):
                    calls[fn] += cost
                cob = None
            else:
                own[fn] += cost
    return own, calls, counts


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    (a_own, a_calls, a_counts), (b_own, b_calls, b_counts) = load(sys.argv[1]), load(sys.argv[2])
    commands = float(sys.argv[3])
    top = int(sys.argv[4]) if len(sys.argv) == 5 else 40
    print("calls per command: " + ", ".join(f"{c} {(b_counts[c] - a_counts[c]) / commands:.1f}" for c in COUNTED) + "\n")
    per_function, per_module = collections.Counter(), collections.Counter()
    for f in set(a_own) | set(b_own) | set(a_calls) | set(b_calls):
        if module(f) not in OURS:
            continue
        cost = ((b_own[f] - a_own[f]) + (b_calls[f] - a_calls[f])) / commands
        per_function[f] = cost
        per_module[module(f)] += cost
    for m, cost in per_module.most_common():
        print(f"{cost / 1000:7.1f}k  {m}")
    print(f"{sum(per_module.values()) / 1000:7.1f}k  total\n")
    for f, cost in per_function.most_common(top):
        print(f"{cost / 1000:7.2f}k  {f[:170]}")


if __name__ == "__main__":
    main()
