#!/usr/bin/env bash
# tests/perf/perf_p2p.sh KOLO_PERF PYTHON [model] - kolo-perf p2p prints full
# matrices: 3 host ranks (forked processes over shared memory), bandwidth
# and latency, every pair a positive figure; and the GPUs: on kolo's CUDA
# model ("model") a full matrix of its devices labelled as model figures,
# else "none found" where this machine has no GPU, or the GPUs' matrices.
set -u
BIN=${1:?usage: perf_p2p.sh path/to/kolo-perf python3 [model]}
PY=${2:?usage: perf_p2p.sh path/to/kolo-perf python3 [model]}
MODE=${3:-host}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/kolo-perf-p2p.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; sed 's/^/    /' "$WORK/out.txt" | tail -30; exit 1; }

if [ "$MODE" = model ]; then
  "$BIN" p2p --only gpu -b 1M -n 2 -w 1 --lat-iters 20 > "$WORK/out.txt" 2>&1 || fail "kolo-perf p2p --only gpu"
  n=$(grep -c "^ *GPU[0-9]" "$WORK/out.txt")
  n=$((n / 2))
  [ "$n" -ge 2 ] || fail "fewer than 2 model GPUs in the matrix"
  grep -q "MODEL FIGURES" "$WORK/out.txt" || fail "the model's figures are not labelled as such"
  "$PY" "$HERE/check_matrix.py" "$WORK/out.txt" GPU "$n" 2 || fail "the GPU matrices"
  echo "ok: kolo-perf p2p on the CUDA model: $n x $n GPU matrices, labelled model figures"
  exit 0
fi

"$BIN" p2p -P 3 -b 256K -n 3 -w 1 --lat-iters 50 > "$WORK/out.txt" 2>&1 || fail "kolo-perf p2p -P 3"
"$PY" "$HERE/check_matrix.py" "$WORK/out.txt" rank 3 2 || fail "the host matrices"
grep -q "3 ranks (3 processes x 1 threads, forked), host memory, shared-memory pipes" "$WORK/out.txt" ||
  fail "the header does not say 3 forked processes over shared memory"
if grep -q "^# GPUs: none found" "$WORK/out.txt"; then
  gpus="none found"
else
  n=$(($(grep -c "^ *GPU[0-9]" "$WORK/out.txt") / 2))
  "$PY" "$HERE/check_matrix.py" "$WORK/out.txt" GPU "$n" 2 || fail "the GPU matrices"
  gpus="$n x $n"
fi
"$BIN" p2p -P 1 --only host > "$WORK/out.txt" 2>&1 && fail "one host rank was taken"
grep -q "needs 2 ranks or more" "$WORK/out.txt" || fail "one host rank: no sentence"
echo "ok: kolo-perf p2p: 3 x 3 host matrices over shared memory; GPUs: $gpus"
