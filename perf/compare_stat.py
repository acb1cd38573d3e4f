#!/usr/bin/env python3
"""compare_stat.py DIR NAME... - what the whole machine's CPUs did during each
contender's runs (perf/compare.sh STAT=1): the median over its rounds of the
CPU seconds spent in user code, in the kernel (system calls), in softirq
(the network stack's receive side, between namespaces the veth's too) and
idle, and of the context switches, each from DIR/NAME.I.stat ("user nice
system idle iowait irq softirq ctxt", the differences of /proc/stat's
counters over one run, in USER_HZ ticks).  A run is the contender's whole
launch, init included: compare runs of one size."""
import glob
import os
import statistics
import sys

HZ = os.sysconf("SC_CLK_TCK")
KINDS = ("user", "system", "softirq", "idle")


def rounds(path_glob):
    """Per run: seconds by kind (user counts nice too; system, irq) and switches."""
    out = []
    for path in sorted(glob.glob(path_glob)):
        with open(path) as f:
            v = [int(x) for x in f.read().split()]
        if len(v) != 8:
            sys.exit(f"compare_stat: {path}: expected 8 numbers, found {len(v)}")
        user, nice, system, idle, iowait, irq, softirq, ctxt = v
        out.append({"user": (user + nice) / HZ, "system": (system + irq) / HZ, "softirq": softirq / HZ,
                    "idle": (idle + iowait) / HZ, "ctxt": ctxt})
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: compare_stat.py DIR NAME...")
    folder, names = sys.argv[1], sys.argv[2:]
    table = {}
    for name in names:
        runs = rounds(os.path.join(folder, f"{name}.*.stat"))
        if runs:
            table[name] = {k: statistics.median(r[k] for r in runs) for k in KINDS + ("ctxt",)}
            table[name]["n"] = len(runs)
    if not table:
        sys.exit(f"compare_stat: no .stat files in {folder}")
    print("# the machine's CPUs during each run (seconds; medians over rounds; context switches)")
    print("%-10s %6s %9s %9s %9s %9s %12s" % ("name", "rounds", *KINDS, "switches"))
    for name, m in table.items():
        print("%-10s %6d %9.2f %9.2f %9.2f %9.2f %12d" % (name, m["n"], *(m[k] for k in KINDS), m["ctxt"]))


if __name__ == "__main__":
    main()
