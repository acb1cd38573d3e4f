#!/usr/bin/env python3
"""medians.py FILE NAME... - FILE's lines "NAME SIZE TIME": the median time
per size and NAME (in the order given), and with --ratios each NAME's median
over the first NAME's."""
import collections
import statistics
import sys

args = [a for a in sys.argv[1:] if a != "--ratios"]
ratios = "--ratios" in sys.argv
times = collections.defaultdict(list)
for line in open(args[0]):
    name, size, t = line.split()
    times[(name, int(size))].append(float(t))
names = args[1:]
print("size", *names, *([f"{n}/{names[0]}" for n in names[1:]] if ratios else []), sep="\t")
for size in sorted({s for _, s in times}):
    m = [statistics.median(times[(n, size)]) for n in names]
    print(size, *[f"{x:.0f}" for x in m], *([f"{x / m[0]:.2f}" for x in m[1:]] if ratios else []), sep="\t")
