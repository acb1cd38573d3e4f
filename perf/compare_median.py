#!/usr/bin/env python3
"""Medians of perf/compare.sh's alternating runs (docs/perf-json.md files).

usage: compare_median.py DIR REPEATS NAME...

Reads DIR/NAME.{1..REPEATS}.json, writes DIR/NAME.median.json (the first
run's file with each row's time the median over every run and cycle of its
size and placement, algbw and busbw scaled with it), and prints per
placement and size each NAME's median time with its ratio to the first
NAME's, then each one's median busbw (kolo-memcpy-bw: its memcpy GB/s),
then each other NAME's time over the first NAME's within each round (the
two ran minutes apart at most): the median of those ratios and the lowest
and highest.  On a noisy machine the ratio of medians can say one thing
while the rounds split both ways; the per-round range shows it.
Exits 1 when a run is missing, unfinished, or reports a wrong element.
"""
import json
import statistics
import sys


def load(path):
    try:
        with open(path) as f:
            run = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"compare_median: {path}: {e} (a failed run leaves its file unfinished)")
    wrong = run.get("wrong", 0) + sum(r.get("wrong", 0) for r in run["results"])
    if wrong:
        sys.exit(f"compare_median: {path}: {wrong} wrong elements")
    return run


def key(row):
    return row["size"], row.get("in_place", False)


def medians(runs, field):
    """{(size, in_place): median of field over every run's rows}."""
    vals = {}
    for r in (r for run in runs for r in run["results"] if field in r):
        vals.setdefault(key(r), []).append(r[field])
    return {k: statistics.median(v) for k, v in vals.items()}


def round_times(runs):
    """[{(size, in_place): median time over the run's cycles}] per run."""
    return [medians([run], "time_us") for run in runs]


def paired_ratios(rounds, names, keys):
    """{name: {key: (median, lowest, highest) of name's time / names[0]'s per round}}."""
    out = {}
    for n in names[1:]:
        out[n] = {}
        for k in keys:
            rs = [a[k] / b[k] for a, b in zip(rounds[n], rounds[names[0]]) if k in a and b.get(k, 0) > 0]
            if rs:
                out[n][k] = (statistics.median(rs), min(rs), max(rs))
    return out


def ratio_table(names, pairs, keys):
    print("# " + f"{'size (B)':>10}" + "".join(f"  {n:>18}" for n in names[1:]))
    for k in keys:
        cells = (pairs[n].get(k) for n in names[1:])
        print(f"  {k[0]:>10}" + "".join(f"  {c[0]:4.2f} [{c[1]:4.2f}, {c[2]:4.2f}]".rjust(20) if c else f"  {'-':>18}"
                                        for c in cells))


def median_run(runs, times):
    med = json.loads(json.dumps(runs[0]))
    med["results"] = [r for r in med["results"] if r.get("cycle", 0) == 0]
    for row in med["results"]:
        t = times[key(row)]
        scale = row["time_us"] / t if t > 0 else 1.0
        row["time_us"] = t
        for f in ("algbw", "busbw"):
            if f in row:
                row[f] *= scale
    if "avg_busbw" in med and med["results"]:
        med["avg_busbw"] = statistics.mean(r.get("busbw", 0) for r in med["results"])
    return med


def table(names, cells, fmt, ratio, keys):
    print("# " + f"{'size (B)':>10}" + "".join(f"  {n:>18}" for n in names))
    for k in keys:
        base = cells[names[0]].get(k, float("nan"))
        vals = (cells[n].get(k, float("nan")) for n in names)
        print(f"  {k[0]:>10}" + "".join(f"  {v:>11{fmt}} ({v / base:4.2f})" if ratio and base > 0 else f"  {v:>18{fmt}}"
                                        for v in vals))


def main():
    d, repeats, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    times, bws, rounds = {}, {}, {}
    for n in names:
        runs = [load(f"{d}/{n}.{i}.json") for i in range(1, repeats + 1)]
        times[n] = medians(runs, "time_us")
        rounds[n] = round_times(runs)
        bws[n] = medians(runs, "busbw") or medians(runs, "memcpy_gbs")
        with open(f"{d}/{n}.median.json", "w") as f:
            json.dump(median_run(runs, times[n]), f, indent=1)
    keys = sorted(times[names[0]])
    for in_place in sorted({k[1] for k in keys}):
        place = "in place" if in_place else "out of place"
        ks = [k for k in keys if k[1] == in_place]
        print(f"# median time (us) of {repeats} alternating runs, {place}; (x) = time / {names[0]}'s")
        table(names, times, ".2f", True, ks)
        print(f"# median busbw (GB/s), {place}")
        table(names, bws, ".3f", False, ks)
        if len(names) > 1:
            print(f"# time / {names[0]}'s within each round, {place}: median [lowest, highest] of {repeats}")
            ratio_table(names, paired_ratios(rounds, names, ks), ks)


if __name__ == "__main__":
    main()
