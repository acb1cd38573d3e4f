#!/usr/bin/env bash
# tests/perf/perf_nccl_line.sh KOLO_PERF PYTHON - nccl-tests' typical command
# line, as its README gives it, runs under kolo-perf and means what it means
# to nccl-tests: 1 rank (-g 1, one process), 8 B .. 128 MiB doubling (25
# sizes), 20 timed and 5 warm-up calls, every result checked.
set -u
BIN=${1:?usage: perf_nccl_line.sh path/to/kolo-perf python3}
PY=${2:?usage: perf_nccl_line.sh path/to/kolo-perf python3}
WORK=$(mktemp -d /tmp/kolo-perf-nccl.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; sed 's/^/    /' "$WORK/out.txt" | tail -20; exit 1; }

"$BIN" all_reduce -b 8 -e 128M -f 2 -g 1 -c 1 -n 20 -w 5 -J "$WORK/run.json" > "$WORK/out.txt" 2>&1 ||
  fail "kolo-perf all_reduce -b 8 -e 128M -f 2 -g 1 -c 1 -n 20 -w 5 failed"
grep -q "^# minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1" "$WORK/out.txt" ||
  fail "the header does not say nccl-tests' meaning"
"$PY" - "$WORK/run.json" <<'PYEOF' || fail "the JSON does not say nccl-tests' meaning"
import json, sys
d = json.load(open(sys.argv[1]))
c = d["config"]
want = {"nranks": 1, "ngpus": 1, "nthreads": 1, "minbytes": 8, "maxbytes": 128 << 20, "stepfactor": 2,
        "check": 1, "iters": 20, "warmup_iters": 5, "agg_iters": 1, "collective": "all_reduce", "type": "float"}
bad = {k: (c[k], v) for k, v in want.items() if c[k] != v}
assert not bad, f"config (got, want): {bad}"
sizes = sorted({r["size"] for r in d["results"]})
assert sizes == [8 << i for i in range(25)], f"sizes {sizes}"
assert len(d["results"]) == 50 and d["wrong"] == 0, "results"
PYEOF
echo "ok: nccl-tests' line ran: 1 rank, 25 sizes 8 B .. 128 MiB, 20 + 5 calls, checked"
