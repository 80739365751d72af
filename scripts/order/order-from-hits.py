# Turns the functions the bridge entered into the lld symbol order (scripts/gen-order).
#   order-from-hits.py FUNCTIONS HITS LINK_MAP OUT
import collections
import sys
names = collections.defaultdict(list)
for line in open(sys.argv[1]):
    offset, name = line.split()
    names[int(offset, 16)].append(name)
seen, order = set(), []
for line in open(sys.argv[2]):
    offset = int(line, 16)
    if offset not in seen:
        seen.add(offset)
        order.extend(names[offset])
# The link map: which input section of .text holds each symbol name. lld orders whole input
# sections, and matches local symbols by name in every object: a name that also occurs inside
# an unsplit `(.text)` section of a library (no function sections) would drag that section in.
sections_of = collections.defaultdict(set)
whole = set()
size = {}
in_text, section = False, None
for line in open(sys.argv[3]):
    parts = line.split(None, 4)
    if len(parts) < 5:
        continue
    field = parts[4].rstrip("\n")
    if field == ".text":
        in_text = True
        continue
    if in_text and field.startswith("."):
        break
    if not in_text:
        continue
    if ":(" in field and not field.startswith("        "):
        section = field.strip()
        size[section] = int(parts[2], 16)
        if section.endswith(":(.text)"):
            whole.add(section)
    elif section:
        sections_of[field.strip()].add(section)
wanted = set(order)
hot_whole = {s for n in wanted if len(sections_of[n]) == 1 for s in sections_of[n] if s in whole}
# A name that would drag unsplit library code along is kept when that code is small: at most one
# 64 KiB fault-around window in all (what leaving the function among cold code costs).
kept, dragged = [], set()
for n in dict.fromkeys(order):
    new = {s for s in sections_of[n] if s in whole and s not in hot_whole and s not in dragged}
    if sum(size[s] for s in new) <= 65536:
        kept.append(n)
        dragged |= new
open(sys.argv[4], "w").write("".join(n + "\n" for n in kept))
print(f"gen-order: {len(seen)} functions entered, {len(kept)} symbols ordered "
      f"({len(wanted) - len(kept)} names left out: they also name large unsplit library code)")
