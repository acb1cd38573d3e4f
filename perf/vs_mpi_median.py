#!/usr/bin/env python3
"""Medians of perf/vs_mpi.sh's alternating runs (docs/perf-json.md files).

usage: vs_mpi_median.py OUT N REPEATS

Reads OUT/{kolo,mpi}.nN.{1..REPEATS}.json, writes OUT/{kolo,mpi}.nN.median.json
(the first run's file with each row's time the median over the runs, algbw and
busbw recomputed from it), and prints per size: both medians, kolo's time over
Open MPI's, and kolo's busbw over Open MPI's.  Exits 1 when a run is missing,
unfinished, or reports a wrong element.
"""
import json
import statistics
import sys


def load(path):
    try:
        with open(path) as f:
            run = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"vs_mpi_median: {path}: {e} (a failed run leaves its file unfinished)")
    if run.get("wrong", 0) != 0:
        sys.exit(f"vs_mpi_median: {path}: {run['wrong']} wrong elements")
    return run


def median_run(runs):
    """The first run, each row's time_us the median over every run's row."""
    med = json.loads(json.dumps(runs[0]))
    for k, row in enumerate(med["results"]):
        times = [r["results"][k]["time_us"] for r in runs]
        t = statistics.median(times)
        scale = row["time_us"] / t if t > 0 else 1.0
        row["time_us"] = t
        row["algbw"] *= scale
        row["busbw"] *= scale
    med["avg_busbw"] = statistics.mean(r["busbw"] for r in med["results"]) if med["results"] else 0
    return med


def main():
    out, n, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    meds = {}
    for tool in ("kolo", "mpi"):
        runs = [load(f"{out}/{tool}.n{n}.{i}.json") for i in range(1, repeats + 1)]
        meds[tool] = median_run(runs)
        with open(f"{out}/{tool}.n{n}.median.json", "w") as f:
            json.dump(meds[tool], f, indent=1)
    print(f"# {n} processes, medians of {repeats} alternating runs (out of place)")
    print(f"{'bytes':>10} {'kolo_us':>10} {'mpi_us':>10} {'time k/m':>9} {'kolo_bus':>9} {'mpi_bus':>9} {'bus k/m':>8}")
    for k, m in zip(meds["kolo"]["results"], meds["mpi"]["results"]):
        if k["size"] != m["size"]:
            sys.exit("vs_mpi_median: the two tools' sizes differ")
        tr = k["time_us"] / m["time_us"] if m["time_us"] > 0 else float("nan")
        br = k["busbw"] / m["busbw"] if m["busbw"] > 0 else float("nan")
        print(f"{k['size']:>10} {k['time_us']:>10.2f} {m['time_us']:>10.2f} {tr:>9.2f} "
              f"{k['busbw']:>9.3f} {m['busbw']:>9.3f} {br:>8.2f}")


if __name__ == "__main__":
    main()
