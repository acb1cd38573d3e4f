#!/usr/bin/env python3
"""ab_summary.py FILE: ab.sh's lines as a table: per offset and size, each build's median
time (us) and the median over rounds of new / base within a round."""
import collections
import statistics
import sys

runs = collections.defaultdict(list)
sizes = []
for line in open(sys.argv[1]):
    r, build, off, size, t = line.split()
    runs[(build, off, size)].append(float(t))
    if size not in sizes:
        sizes.append(size)
print("offset size base new new/base")
for off in ("off0", "off16"):
    for s in sizes:
        b, n = runs[("base", off, s)], runs[("new", off, s)]
        ratio = statistics.median(x / y for x, y in zip(n, b))
        print(f"{off[3:]} {s} {statistics.median(b):.1f} {statistics.median(n):.1f} {ratio:.2f}")
