#!/usr/bin/env bash
# tests/perf/perf_compare_median.sh PYTHON - perf/compare_median.py on three
# made-up rounds of two contenders whose ratio of medians (1.50) and
# per-round ratios (0.50, 2.00, 0.50) disagree: the summary must print both,
# the per-round median with its range, and write each contender's median run.
set -u
PY=${1:?usage: perf_compare_median.sh PYTHON}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /tmp/kolo-compare-median.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; sed 's/^/    /' "$WORK/summary.txt"; exit 1; }
"$PY" - "$WORK" << 'PY'
import json, sys
times = {"kolo": [100, 100, 300], "mpi": [50, 200, 150]}  # us at 8 B, per round
for name, ts in times.items():
    for i, t in enumerate(ts, 1):
        rows = [{"size": 8, "time_us": t, "busbw": 8 / t}, {"size": 64, "time_us": 2 * t, "busbw": 32 / t}]
        json.dump({"wrong": 0, "results": rows}, open(f"{sys.argv[1]}/{name}.{i}.json", "w"))
PY
"$PY" "$ROOT/perf/compare_median.py" "$WORK" 3 kolo mpi > "$WORK/summary.txt" 2>&1 || fail "compare_median.py failed"
grep -qE '^ +8 +100\.00 \(1\.00\) +150\.00 \(1\.50\)$' "$WORK/summary.txt" || fail "no ratio of medians 1.50 at 8 B"
grep -q "^# time / kolo's within each round, out of place: median \[lowest, highest\] of 3$" "$WORK/summary.txt" ||
  fail "no per-round table"
grep -qE '^ +8 +0\.50 \[0\.50, 2\.00\]$' "$WORK/summary.txt" || fail "8 B: per-round ratios not 0.50 [0.50, 2.00]"
grep -qE '^ +64 +0\.50 \[0\.50, 2\.00\]$' "$WORK/summary.txt" || fail "64 B: per-round ratios not 0.50 [0.50, 2.00]"
"$PY" -c 'import json, sys; r = json.load(open(sys.argv[1]))["results"]; sys.exit(r[0]["time_us"] != 150)' \
  "$WORK/mpi.median.json" || fail "mpi.median.json does not hold the median time"
echo "ok: compare_median.py prints the ratio of medians and the per-round ratios with their range"
