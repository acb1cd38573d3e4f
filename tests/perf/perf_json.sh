#!/usr/bin/env bash
# tests/perf/perf_json.sh KOLO_PERF PYTHON - kolo-perf --json keeps its
# documented schema (docs/perf-json.md): files from ranks as threads and
# as processes, with the flags that add rows and fields, pass
# check_json.py, whose self-test shows it refuses broken copies.
set -u
BIN=${1:?usage: perf_json.sh path/to/kolo-perf python3}
PY=${2:?usage: perf_json.sh path/to/kolo-perf python3}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/kolo-perf-json.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; for f in "$WORK"/*.txt; do [ -f "$f" ] && sed 's/^/    /' "$f" | tail -15; done; exit 1; }

# 4 ranks as threads (-t 2 -g 2), 4 sizes x 2 placements x 2 cycles = 16 results.
"$BIN" all_reduce -t 2 -g 2 -b 8 -e 4K -f 8 -n 2 -w 1 -m 2 -N 2 -c 2 -a 1 --json "$WORK/threads.json" \
  --label "run A" --ceiling 3.5 > "$WORK/threads.txt" 2>&1 || fail "kolo-perf (threads) failed"
"$PY" "$HERE/check_json.py" "$WORK/threads.json" --rows 16 --expect 'label=run A' --expect nranks=4 \
  --expect nthreads=2 --expect ngpus=2 --expect agg_iters=2 --expect run_cycles=2 --expect check=2 \
  --expect average=1 || fail "the threads' file"
"$PY" - "$WORK/threads.json" <<'PYEOF' || fail "the ceiling"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ceiling"]["busbw"] == 3.5, d.get("ceiling")
assert [r["cycle"] for r in d["results"]] == [0] * 8 + [1] * 8, "cycles"
PYEOF
"$PY" "$HERE/check_json.py" --self-test "$WORK/threads.json" || fail "the checker's self-test"

# 3 forked processes, out of place only, -z 3, no label, no ceiling: 3 results.
"$BIN" reduce_scatter -P 3 -b 96 -e 6K -f 8 -n 2 -w 1 -z 3 --inplace 0 --json "$WORK/procs.json" \
  > "$WORK/procs.txt" 2>&1 || fail "kolo-perf (processes) failed"
"$PY" "$HERE/check_json.py" "$WORK/procs.json" --rows 3 --expect label=None --expect launch=forked \
  --expect procs=3 --expect blocking=3 --expect placement=out || fail "the processes' file"
grep -q '"ceiling"' "$WORK/procs.json" && fail "a ceiling without --ceiling"

# A failed run leaves no valid JSON behind (docs/perf-json.md): -r beyond the ranks.
"$BIN" broadcast -t 2 -r 5 -b 8 -e 8 --json "$WORK/bad.json" > "$WORK/bad.txt" 2>&1 && fail "-r 5 of 2 ranks ran"
if [ -s "$WORK/bad.json" ] && "$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' "$WORK/bad.json" 2>/dev/null; then
  fail "a failed run wrote valid JSON"
fi
echo "ok: kolo-perf --json: schema 1 from threads and processes; broken copies refused"
