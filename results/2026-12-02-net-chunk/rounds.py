import sys, statistics as st
from collections import defaultdict
f, base, *names = sys.argv[1:]
t = defaultdict(list)
for line in open(f):
    p = line.split()
    if len(p) == 3: t[(p[0], int(p[1]))].append(float(p[2]))
sizes = sorted({s for (_, s) in t})
print("size", base, *[f"{n}/{base} med [lo,hi] wins" for n in names], sep="\t")
for s in sizes:
    b = t[(base, s)]
    row = [str(s), f"{st.median(b):.0f}"]
    for n in names:
        r = [x / y for x, y in zip(t[(n, s)], b)]
        row.append(f"{st.median(st.median(r) for _ in [0]):.2f} [{min(r):.2f},{max(r):.2f}] {sum(x<1 for x in r)}/{len(r)}")
    print(*row, sep="\t")
